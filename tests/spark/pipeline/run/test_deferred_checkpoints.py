"""A sequential run writes a step's state checkpoint at the end of its epoch, after the epoch's outputs committed.

The checkpoint is not on the path from an epoch's input to its output (response latency, issue 53): the step
computes and materialises its new state, its consumers run and the outputs commit, then the checkpoint is
written and becomes the step's frontier. Until then the step's frontier is its checkpoint before, as in the
epochs between checkpoints, so a failure in that window rolls back no less far than the plan says and loses
nothing. Checked here against a failure-free run, as multisets: failures before and after the write, a write
that fails (the step's failure at that epoch: it restores the checkpoint before and redoes the epochs after it),
and a redo of an epoch whose end has passed (its checkpoint is written at once). A step checkpointed every epoch
(Eager, ``Lazy(every=1)``) and every step of a concurrent run still write inside the step.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Eager, Ephemeral, Lazy, Pipeline
from falkirk.spark.pipeline.run import incremental

pytestmark = [pytest.mark.spark]

KEYS = 5
EPOCHS = 8


def events(epoch: int) -> list[dict[str, Any]]:
    return [{"key": (epoch + i) % KEYS, "v": epoch * 100 + i} for i in range(7)]


def parsed(events: Any) -> Any:
    return events.select("key", "v")


def counts(parsed: Any, *, state: Any) -> Any:
    """Per key, rows and sum so far (the state); the output is the keys this epoch changed, with their totals."""
    from pyspark.sql import functions as F

    now = parsed.groupBy("key").agg(F.count("*").alias("m"), F.sum("v").alias("w"))
    if state is None:
        new = now.select("key", F.col("m").alias("n"), F.col("w").alias("s"))
        return new, new
    both = state.join(now, "key", "full_outer")
    total = [
        (F.coalesce("n", F.lit(0)) + F.coalesce("m", F.lit(0))).alias("n"),
        (F.coalesce("s", F.lit(0)) + F.coalesce("w", F.lit(0))).alias("s"),
    ]
    return both.where(F.col("m").isNotNull()).select("key", *total), both.select("key", *total)


def build(root: Path, spark: Any, regime: Any = None, **options: Any) -> Pipeline:
    pipe = Pipeline(root, spark, fsync=False, **options)
    pipe.input("events", "key BIGINT, v BIGINT", partitions=2, source=events)
    pipe.step(parsed, regime=Ephemeral())
    pipe.step(counts, inputs=["parsed"], regime=regime or Lazy(every=2, key="key"))
    pipe.output("updated", inputs=["counts"])
    return pipe


def rows(spark: Any, root: Path) -> Counter[tuple[Any, ...]]:
    df = spark.read.parquet(str(root / "output" / "updated"))
    return Counter((r["epoch"], r["key"], r["n"], r["s"]) for r in df.collect())


def manifest(root: Path, node: str, kind: str, epoch: int) -> Path:
    return root / "manifests" / node / kind / f"{epoch:08d}.json"


def committed_at(root: Path, epoch: int) -> float:
    return float(json.loads(manifest(root, "updated", "output", epoch).read_text())["extra"]["committed_at"])


def published(root: Path, epoch: int) -> float:
    """When ``counts``' checkpoint of ``epoch`` was published (its manifest's modification time)."""
    return manifest(root, "counts", "checkpoint", epoch).stat().st_mtime


@pytest.fixture(scope="module")
def failure_free(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("deferred") / "reference"
    result = build(root, spark, gc=False).run(EPOCHS)
    return root, result


def test_a_checkpoint_is_published_after_its_epochs_output_committed(spark: Any, failure_free: Any) -> None:
    root, result = failure_free
    checkpointed = [e for e in range(EPOCHS) if Lazy(every=2).checkpoints_at(e)]
    assert checkpointed == [1, 3, 5, 7]
    for e in checkpointed:
        assert published(root, e) > committed_at(root, e), e
    # each execution journalled once, in memory and under the root; the deferred write's time is in its record
    runs = Counter((x.step, x.epoch) for x in result.journal.executions)
    assert set(runs.values()) == {1} and len(runs) == 4 * EPOCHS
    for x in result.journal.executions:
        doc = json.loads((root / "journal" / x.step / f"{x.epoch:08d}.json").read_text())
        assert doc["seconds"] == pytest.approx(x.seconds, abs=1e-5), (x.step, x.epoch)
        assert doc["cpu"] == (None if x.cpu is None else pytest.approx(x.cpu, abs=1e-5))
    # the output is what a per-epoch count of the events gives
    expected: Counter[tuple[Any, ...]] = Counter()
    n: dict[int, int] = {}
    s: dict[int, int] = {}
    for e in range(EPOCHS):
        for row in events(e):
            n[row["key"]] = n.get(row["key"], 0) + 1
            s[row["key"]] = s.get(row["key"], 0) + row["v"]
        expected.update((e, k, n[k], s[k]) for k in {row["key"] for row in events(e)})
    assert rows(spark, root) == expected


@pytest.mark.parametrize(
    ("fail", "newest"),
    [
        ("updated@3:before", 1),  # the output of a checkpoint epoch fails before the checkpoint is written
        ("updated@3:mid", 1),
        ("counts@3:mid", 1),
        ("counts@4:before", 3),  # after it was written: counts restores it
        ("parsed@5:before", 3),
        ("counts@5:after", 5),  # between epochs: the end of epoch 5 wrote it
    ],
)
def test_failures_around_a_deferred_checkpoint_lose_nothing(
    spark: Any, tmp_path: Path, failure_free: Any, fail: str, newest: int
) -> None:
    reference, _ = failure_free
    root = tmp_path / "root"
    result = build(root, spark).run(EPOCHS, fail=[fail])
    assert [f"{i.step}@{i.epoch}:{i.where}" for i in result.fired] == [fail]
    [recovery] = result.journal.recoveries
    assert max(recovery.available_at_failure["counts"]) == newest
    assert rows(spark, root) == rows(spark, reference)
    assert manifest(root, "counts", "checkpoint", EPOCHS - 1).exists()  # the run's last, written at its end


def test_a_write_that_fails_is_the_steps_failure_and_its_redo_writes_at_once(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write of counts@3 fails once: counts failed at epoch 3. It restores its epoch-1 checkpoint and
    redoes 2 and 3; epoch 3's end has passed, so its checkpoint is written as the redo completes, before
    epoch 4 starts (waiting for the next end would drop it: counts@4 starts with nothing left to write)."""
    reference, _ = failure_free
    write, attempts = incremental.StateCheckpoints.write, []

    def flaky(self: Any, state: Any, previous: Any, epoch: int, rows: int | None) -> Any:
        attempts.append(epoch)
        if self.name == "counts" and epoch == 3 and attempts.count(3) == 1:
            raise OSError("disk full (injected)")
        return write(self, state, previous, epoch, rows)

    monkeypatch.setattr(incremental.StateCheckpoints, "write", flaky)
    root = tmp_path / "root"
    result = build(root, spark, gc=False).run(EPOCHS)
    [recovery] = result.journal.recoveries
    assert recovery.failed == ("counts",)
    assert "disk full (injected)" in recovery.cause and "writing its state checkpoint" in recovery.cause
    assert max(recovery.available_at_failure["counts"]) == 1
    assert attempts == [1, 3, 3, 5, 7]
    assert committed_at(root, 3) < published(root, 3) < committed_at(root, 4)
    assert rows(spark, root) == rows(spark, reference)


@pytest.mark.parametrize(
    "regime", [Lazy(every=1, key="key"), Eager(key="key")], ids=["lazy-every-1", "eager"]
)
def test_a_step_checkpointed_every_epoch_publishes_before_its_consumers_run(
    spark: Any, tmp_path: Path, regime: Any
) -> None:
    """A step checkpointed every epoch is so that a step that is not deterministic never computes a committed
    epoch again: its checkpoint is written inside the step, before the output commits."""
    root = tmp_path / "root"
    build(root, spark, regime, gc=False).run(4)
    for e in range(4):
        assert published(root, e) < committed_at(root, e), e


def test_a_concurrent_run_writes_checkpoints_inside_the_step(
    spark: Any, tmp_path: Path, failure_free: Any
) -> None:
    """With ``concurrency > 1`` nothing is deferred (steps of later epochs may run before an epoch ends)."""
    reference, _ = failure_free
    root = tmp_path / "root"
    build(root, spark, concurrency=2, gc=False).run(EPOCHS)
    assert rows(spark, root) == rows(spark, reference)
    for e in (1, 3, 5, 7):
        assert published(root, e) < committed_at(root, e), e
