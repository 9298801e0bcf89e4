"""A committed output epoch is final: no recovery rewrites it, even when the steps feeding it are not deterministic.

The pipeline: events → Ephemeral ``noisy`` (adds ``F.rand()`` with no seed: every execution draws anew) →
``Lazy(every=3)`` ``counts`` (per key: rows so far, and a running sum of the noise) → output ``windows``, and
output ``raw`` straight from ``noisy``. Failures: an exception inside ``counts`` (it restores its checkpoint and
re-executes epochs ``windows`` had committed), a new driver on the root (the same, with nothing in memory), and a
driver killed with SIGKILL in the middle of ``counts``. Throughout, a reader lists the outputs every few
milliseconds, as a Spark job or a BI tool would: once an epoch's manifest exists, its partition's files never
change, and at the end every committed epoch's bytes are those first committed. The deterministic columns equal a
failure-free run's; only a damaged epoch is written again.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Lazy, Pipeline

pytestmark = [pytest.mark.spark]

HERE = Path(__file__).resolve().parent
KEYS = 4


def events(epoch: int) -> list[dict[str, Any]]:
    return [{"key": k, "v": epoch * 10 + k + i} for k in range(KEYS) for i in range(3)]


def noisy(events: Any) -> Any:
    from pyspark.sql import functions as F

    return events.select("key", "v").withColumn("noise", F.rand())  # no seed: not deterministic


def counts(noisy: Any, *, state: Any) -> Any:
    from pyspark.sql import functions as F

    now = noisy.groupBy("key").agg(F.count("*").alias("n"), F.sum("noise").alias("noise"))
    both = now if state is None else state.unionByName(now)
    new = both.groupBy("key").agg(F.sum("n").alias("n"), F.sum("noise").alias("noise"))
    return new, new


def build(root: Path | str, spark: Any, **options: Any) -> Pipeline:
    pipe = Pipeline(root, spark, fsync=False, **options)
    pipe.input("events", "key BIGINT, v BIGINT", partitions=2, source=events)
    pipe.step(noisy, regime=Ephemeral())
    pipe.step(counts, regime=Lazy(every=3))
    pipe.output("windows", inputs=["counts"])
    pipe.output("raw", inputs=["noisy"])
    return pipe


def _partition(root: Path, output: str, epoch: int) -> dict[str, str]:
    where = root / "output" / output / f"epoch={epoch}"
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(where.iterdir()) if p.is_file()}


def _committed(root: Path, output: str) -> list[int]:
    where = root / "manifests" / output / "output"
    return sorted(int(p.stem) for p in where.glob("*.json")) if where.exists() else []


class Reader(threading.Thread):
    """Lists the outputs over and over; remembers each committed partition as first seen, and any change."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.first: dict[tuple[str, int], dict[str, str]] = {}
        self.changes: list[str] = []
        self.looks = 0
        self.stop = threading.Event()

    def look(self) -> None:
        for output in ("windows", "raw"):
            for e in _committed(self.root, output):
                try:
                    now = _partition(self.root, output, e)
                except OSError as exc:  # a partition vanishing under a committed manifest is a change too
                    now = {"<unreadable>": str(exc)}
                seen = self.first.setdefault((output, e), now)
                if now != seen:
                    self.changes.append(f"{output}@{e}: {sorted(seen)} -> {sorted(now)}")
        self.looks += 1

    def run(self) -> None:
        while not self.stop.is_set():
            self.look()
            time.sleep(0.01)


def _deterministic(spark: Any, root: Path | str, output: str, columns: list[str]) -> Counter[tuple[Any, ...]]:
    rows = spark.read.parquet(f"{root}/output/{output}").select("epoch", *columns).collect()
    return Counter(tuple(r) for r in rows)


def test_committed_outputs_stay_as_first_committed_across_failures(spark: Any, tmp_path: Path) -> None:
    """An in-step failure, a restart and a SIGKILL mid-step: counts re-executes committed epochs each time, and
    no committed partition of windows or raw ever changes; the deterministic columns equal a failure-free run."""
    root = tmp_path / "root"
    reader = Reader(root)
    reader.start()
    try:
        first = build(root, spark).run(8, fail="counts@7:mid")  # checkpoint at 5: 6 re-executed, committed
        (rec,) = first.journal.recoveries
        assert rec.discarded.get("windows") == [6], rec.discarded
        redone = {(x.step, x.epoch) for x in first.journal.executions if x.redo}
        assert ("counts", 6) in redone and ("windows", 6) in redone

        second = build(root, spark).run(10)  # a new driver: counts restores 5, re-executes 6 and 7
        (restart,) = second.journal.recoveries
        assert restart.restart and restart.discarded.get("windows") == [6, 7], restart.discarded

        script = tmp_path / "driver.py"
        script.write_text(
            "import sys\n"
            f"sys.path[:0] = [{str(HERE)!r}, {str(HERE.parents[1])!r}]\n"
            "from test_final_outputs import build\n"
            "from falkirk.spark.pipeline.run.session import local_session\n"
            "spark = local_session('local[2]', 'falkirk-final', {'spark.ui.enabled': 'false', "
            "'spark.sql.shuffle.partitions': '2'})\n"
            "build(sys.argv[1], spark).run(13, fail='counts@12:kill-mid')\n")
        killed = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True,
                                timeout=900, check=False, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        assert _committed(root, "windows")[-1] == 11

        third = build(root, spark).run(13)  # counts restores 11 (every 3: 2, 5, 8, 11), nothing committed redone
        assert third.done["windows"] == 12
    finally:
        reader.stop.set()
        reader.join()
    reader.look()
    assert reader.looks > 10 and not reader.changes, reader.changes
    for output in ("windows", "raw"):
        assert _committed(root, output) == list(range(13))
        for e in range(13):  # every committed epoch's bytes are those first seen
            assert _partition(root, output, e) == reader.first[(output, e)], (output, e)
    fresh = tmp_path / "fresh"
    build(fresh, spark, durable=False).run(13)
    assert _deterministic(spark, root, "windows", ["key", "n"]) == _deterministic(spark, fresh, "windows", ["key", "n"])
    assert _deterministic(spark, root, "raw", ["key", "v"]) == _deterministic(spark, fresh, "raw", ["key", "v"])


def test_only_a_damaged_committed_epoch_is_written_again(spark: Any, tmp_path: Path) -> None:
    """A committed partition altered outside falkirk: the next driver writes that epoch again (and names it),
    keeps every other committed epoch byte for byte, and the result equals a failure-free run (deterministic
    columns)."""
    root = tmp_path / "root"
    build(root, spark).run(6)
    before = {e: _partition(root, "windows", e) for e in range(6)}
    victim = next(p for p in sorted((root / "output" / "windows" / "epoch=3").iterdir()) if p.suffix == ".parquet")
    victim.write_bytes(victim.read_bytes()[:-8] + b"damaged!")
    result = build(root, spark).run(7)
    (rec,) = result.journal.recoveries
    assert any("output/windows/epoch=3" in p for p in rec.problems), rec.problems
    assert 3 not in rec.discarded.get("windows", []), rec.discarded
    for e in (0, 1, 2, 4, 5):
        assert _partition(root, "windows", e) == before[e], e
    fresh = tmp_path / "fresh"
    build(fresh, spark, durable=False).run(7)
    assert _deterministic(spark, root, "windows", ["key", "n"]) == _deterministic(spark, fresh, "windows", ["key", "n"])


def test_a_restart_checks_the_epochs_it_can_write_again_and_a_bounded_sample_of_older_ones(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart's check of the committed output epochs does not grow with the run's history: the epochs from an
    output's oldest restore point on are all checked (a damaged one is written again), the older ones — which
    nothing can recompute — only up to ``Rollback.SCRUB`` drawn at random (here none), and the run says so; a
    damaged old epoch left unchecked is named by ``pipe.verify()``, and by the next restart that draws it, which
    stops naming the file and changes nothing under the root."""
    from spark_support import root_listing

    from falkirk.spark import RecoveryError
    from falkirk.spark.pipeline.run.recovery import Rollback

    root = tmp_path / "root"
    build(root, spark).run(12)
    before = {e: _partition(root, "windows", e) for e in range(12)}
    old_victim = next(p for p in sorted((root / "output/windows/epoch=0").iterdir()) if p.suffix == ".parquet")
    old_victim.write_bytes(old_victim.read_bytes()[:-8] + b"damaged!")
    recent = 11
    victim = next(p for p in sorted((root / f"output/windows/epoch={recent}").iterdir()) if p.suffix == ".parquet")
    victim.write_bytes(victim.read_bytes()[:-8] + b"damaged!")

    monkeypatch.setattr(Rollback, "SCRUB", 0)
    result = build(root, spark).run(13)
    (rec,) = result.journal.recoveries
    kept = rec.available_at_failure["windows"]
    assert kept and 0 < kept[0] <= recent, kept  # epoch 0 is older than every restore point the restart kept
    older = kept[0]
    assert rec.sampled["windows"] == older, rec.sampled
    assert any(f"output/windows/epoch={recent}" in p for p in rec.problems), rec.problems
    assert not any("output/windows/epoch=0" in p for p in rec.problems), rec.problems
    assert any(
        n.startswith(f"windows: checked its {12 - older} committed epochs from {older} and 0 of the {older} older")
        for n in result.journal.notes
    ), result.journal.notes
    assert _partition(root, "windows", recent) != {}  # written again: intact (verify below finds only epoch 0)
    for e in range(1, 12):
        if e != recent:
            assert _partition(root, "windows", e) == before[e], e
    problems = build(root, spark).verify()
    assert len(problems) == 1 and problems[0].startswith(str(old_victim.relative_to(root))), problems

    monkeypatch.setattr(Rollback, "SCRUB", 1000)  # every older epoch drawn: the damage is met and named
    listing = root_listing(root)
    with pytest.raises(RecoveryError, match="output/windows/epoch=0"):
        build(root, spark).run(14)
    assert root_listing(root) == listing
