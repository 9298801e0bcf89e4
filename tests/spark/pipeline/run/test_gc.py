"""Garbage collection keeps falkirk's own storage bounded over a longer run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import flagship

from falkirk.spark import Storage
from falkirk.spark.pipeline.store.rootfs import Root

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LONG = 8


def falkirk_bytes(root: Path) -> int:
    """Bytes under ``root`` that falkirk keeps for recovery (not the external outputs: responses, stats DB)."""
    fs = Root(root)
    outputs = fs.size("output") + sum(p.stat().st_size for p in root.glob("stats.sqlite*"))
    return fs.size() - outputs


def test_gc_keeps_the_root_bounded(spark: Any, tmp_path: Path) -> None:
    """Over 8 epochs the recovery data (checkpoints, logs, input, manifests) stops growing after a few epochs,
    keeping what the default retention (two checkpoints per step) needs."""
    sizes: dict[int, int] = {}

    def measure(line: str) -> None:
        if line.startswith("epoch"):
            sizes[int(line.split()[1])] = falkirk_bytes(tmp_path)

    result = flagship(tmp_path, spark).run(LONG, progress=measure)
    print("falkirk bytes per epoch:", sizes)
    assert sorted(sizes) == list(range(LONG))
    early, late = max(sizes[e] for e in range(3, 5)), max(sizes[e] for e in range(5, LONG))
    assert late <= 1.25 * early, sizes
    storage = Storage(tmp_path)
    # cc_every=2, retain=2 (the default): the checkpoint at the watermark and the one before it
    assert storage.epochs("cc", "checkpoint") == [LONG - 3, LONG - 1]
    assert len(storage.epochs("heavy", "log")) <= 4
    part = tmp_path / "input" / "events" / "part-0"
    assert len(list(part.glob("*.json"))) <= 5 and len(list(part.glob("*.parquet"))) <= 5  # segments: manifest + data
    assert result.done == {n: LONG - 1 for n in result.done}
