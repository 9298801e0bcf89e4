"""The monitor's metadata (ROOT/meta.sqlite) agrees with the storage and stays bounded over a long run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import flagship

from falkirk.solver.monitor import Monitor
from falkirk.spark import Storage

pytestmark = [pytest.mark.spark]


def _stored(root: Path) -> dict[str, int]:
    monitor = Monitor.open(root / "meta.sqlite")
    try:
        return {n: len(monitor.checkpoints(n)) for n in ("cc", "stats", "heavy", "parse_batch")}
    finally:
        monitor.close()


def test_metadata_matches_storage_and_stays_bounded(spark: Any, tmp_path: Path) -> None:
    """After each epoch's garbage collection the database lists what is on disk (cc: its retained checkpoints),
    and its size does not grow with the number of epochs."""
    sizes: dict[int, int] = {}

    def measure(line: str) -> None:
        if line.startswith("epoch"):
            sizes[int(line.split()[1])] = sum(p.stat().st_size for p in tmp_path.glob("meta.sqlite*"))

    flagship(tmp_path, spark, cc_every=1).run(5, progress=measure)
    storage = Storage(tmp_path)
    on_disk = len(storage.epochs("cc", "checkpoint"))
    stored = _stored(tmp_path)
    print("meta.sqlite bytes per epoch:", sizes, "stored checkpoints:", stored)
    assert stored["cc"] == on_disk == 2  # retain=2 with a checkpoint every epoch
    assert stored["heavy"] <= 2 and stored["parse_batch"] <= 2
    assert max(sizes[e] for e in (3, 4)) <= max(sizes[e] for e in (1, 2)) * 1.5, sizes
