"""Keyed state restored into a different number of partitions (issue 8, Flink-style rescaling on Spark).

A small pipeline keeps running totals per user (a keyed :class:`Lazy` step
checkpointed every second epoch). It runs at 3 partitions, is restarted at
2 (scale down) with a failure that forces a second restore of a checkpoint
written at 3, and restarted again at 5 (scale up). Its output must equal a
failure-free run's, row for row, and every restored state must hold each key
in the partition that owns the key's group.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark]

EVENTS = "user BIGINT, amount BIGINT"
GROUPS = 8


def _source(epoch: int) -> list[dict[str, int]]:
    rnd = random.Random(1000 + epoch)
    return [{"user": rnd.randrange(60), "amount": rnd.randrange(1, 100)} for _ in range(150)]


def keyed_pipeline(root: Path, spark: Any, partitions: int, **options: Any) -> Any:
    """Events -> running totals per user (keyed, Lazy every 2) -> output of the whole table each epoch."""
    from pyspark.sql import functions as F

    from falkirk.spark import Lazy, Pipeline
    from falkirk.spark.pipeline.run.session import SMALL_DATA

    pipe = Pipeline(root, spark, spark_conf=SMALL_DATA, **options)
    pipe.input("events", EVENTS, partitions=2, key="user", source=_source)

    def totals(events: Any, *, state: Any) -> Any:
        per = events.groupBy("user").agg(F.sum("amount").alias("total"), F.count("*").alias("n"))
        if state is not None:
            per = state.unionByName(per).groupBy("user").agg(F.sum("total").alias("total"), F.sum("n").alias("n"))
        return per, per

    pipe.step(totals, regime=Lazy(every=2, key="user", partitions=partitions, max_parallelism=GROUPS))
    pipe.output("out", inputs=["totals"])
    return pipe


def _identical(spark: Any, root: Path, reference: Path, epochs: int) -> None:
    from falkirk.spark.pipeline.tools.verify import compare_runs

    cmp = compare_runs(spark, keyed_pipeline(root, spark, 2), root, reference)
    assert not cmp.differences, [d.describe() for d in cmp.differences]
    assert cmp.rows_compared >= epochs * 50


def test_keyed_state_survives_scaling_down_and_up(spark: Any, tmp_path: Path) -> None:
    """3 → 2 partitions (restart, then a failure restoring a 3-partition checkpoint) → 5: identical output."""
    reference = tmp_path / "reference"
    keyed_pipeline(reference, spark, 3, durable=False).run(5)
    root = tmp_path / "run"

    first = keyed_pipeline(root, spark, 3).run(2)
    assert first.journal.recoveries == []

    down = keyed_pipeline(root, spark, 2).run(4, fail="totals@3:mid")
    restart, failure = down.journal.recoveries
    assert restart.restart and restart.rescaled == {"totals": (3, 2)}
    assert restart.plan.actions["totals"] == "restore"
    assert failure.rescaled == {"totals": (3, 2)}  # the checkpoint at 3 never got its manifest: back to 1

    up = keyed_pipeline(root, spark, 5).run(5)
    (again,) = up.journal.recoveries
    assert again.rescaled == {"totals": (2, 5)}  # the checkpoint at 3 was rewritten at 2 partitions
    _identical(spark, root, reference, 5)


def test_keyed_checkpoint_layout_and_restored_partitions(spark: Any, tmp_path: Path) -> None:
    """Each checkpoint directory holds exactly its key groups; a restore puts every key in its owner partition."""
    from pyspark.sql import functions as F

    from falkirk.spark.errors import CorruptDataError
    from falkirk.spark.pipeline.store import keyed
    from falkirk.spark.pipeline.store.storage import Storage

    root = tmp_path / "run"
    keyed_pipeline(root, spark, 3).run(2)
    storage = Storage(root)
    (epoch,) = storage.epochs("totals", "checkpoint")
    m = storage.get("totals", "checkpoint", epoch)
    assert m.extra["keyed"] == {"key": "user", "max_parallelism": GROUPS, "parallelism": 3}
    assert sorted({f.name.split("/")[0] for f in m.files}) == [f"_subtask={i}" for i in range(3)]
    frame = storage.read_frame(spark, m)
    for i in range(3):
        lo, hi = keyed.key_group_range(i, 3, GROUPS)
        here = frame.where(F.col(keyed.SUBTASK) == i)
        groups = {r[0] for r in here.select(F.pmod(F.xxhash64("user"), F.lit(GROUPS))).distinct().collect()}
        assert groups and groups <= set(range(lo, hi + 1))
    assert keyed.KG not in frame.columns  # not written: computed from the key
    # a checkpoint written before the key group left the files carries it as a column: restored the same
    old_format = frame.withColumn(keyed.KG, keyed.key_group("user", GROUPS))
    for n in (1, 2, 5, GROUPS):
        for rows in (frame, old_format):
            restored = keyed.restore(rows, "user", n, GROUPS)
            assert restored.rdd.getNumPartitions() == n
            assert keyed.check_layout(restored, "user", n, GROUPS) == []
            assert sorted(restored.collect()) == sorted(frame.drop(keyed.SUBTASK).collect())

    # at the checkpoint's own partitions it is read as written: one task per directory, no shuffle
    as_written = storage.read_partitioned(spark, m, keyed.SUBTASK, 3).drop(keyed.KG)
    assert "Exchange" not in str(as_written._jdf.queryExecution().executedPlan().toString())
    assert as_written.rdd.getNumPartitions() == 3
    assert keyed.check_layout(as_written, "user", 3, GROUPS) == []
    assert sorted(as_written.collect()) == sorted(frame.drop(keyed.KG, keyed.SUBTASK).collect())
    with pytest.raises(CorruptDataError, match=r"_subtask=2/.*outside the 2 directories"):
        storage.read_partitioned(spark, m, keyed.SUBTASK, 2)
    # a subtask that owns no keys has no directory: its partition is empty, and the others stay in place
    import attrs

    gap = attrs.evolve(m, files=tuple(f for f in m.files if not f.name.startswith(f"{keyed.SUBTASK}=1/")))
    holes = storage.read_partitioned(spark, gap, keyed.SUBTASK, 3, verify=False).drop(keyed.KG)
    assert holes.rdd.getNumPartitions() == 3
    assert keyed.check_layout(holes, "user", 3, GROUPS) == []
    sizes = holes.rdd.glom().map(len).collect()
    assert sizes[1] == 0 and sizes[0] > 0 and sizes[2] > 0, sizes
    kept = frame.where(F.col(keyed.SUBTASK) != 1).drop(keyed.KG, keyed.SUBTASK)
    assert sorted(holes.collect()) == sorted(kept.collect())


def test_a_restore_at_the_same_partitions_reads_the_checkpoint_as_written(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A restart and a failure at unchanged partitions restore through ``read_partitioned`` (no shuffle), and
    the step holds that read as its state (no copy in executor memory: an executor's loss takes none of it); a
    change of partitions goes through the shuffle, whose result is detached; the output is the failure-free
    run's either way."""
    from falkirk.spark.pipeline.run.runners import StepRunner
    from falkirk.spark.pipeline.run.session import materialised, missing_blocks
    from falkirk.spark.pipeline.store.storage import Storage

    reference = tmp_path / "reference"
    keyed_pipeline(reference, spark, 3, durable=False).run(5)
    read: list[int] = []
    original = Storage.read_partitioned

    def spy(self: Any, spark: Any, m: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(m.epoch)
        return original(self, spark, m, *args, **kwargs)

    # per restore: held as read (no copy in memory: no blocks, no cache, no shuffle in its plan), and what an
    # executor's loss would take of it
    held: list[tuple[bool, list[int] | None]] = []
    restored = StepRunner._restored

    def holding(self: Any, frame: Any) -> Any:
        state = restored(self, frame)
        plan = str(state._jdf.queryExecution().executedPlan().toString())
        as_read = "_falkirk_blocks" not in vars(state) and "InMemoryTableScan" not in plan and "Exchange" not in plan
        held.append((as_read, missing_blocks(state, wait=0.0)))
        return state

    monkeypatch.setattr(Storage, "read_partitioned", spy)
    monkeypatch.setattr(StepRunner, "_restored", holding)
    # the step's state at each epoch's end: one the step made since, detached and made (never the files read)
    made: list[bool] = []

    def looking(pipe: Any) -> Any:
        def look(line: str) -> None:
            if line.startswith("epoch"):
                state = pipe._executor.state.runners["totals"].state
                made.append(state is not None and "_falkirk_blocks" in vars(state) and materialised(state))

        return look

    root = tmp_path / "run"
    keyed_pipeline(root, spark, 3).run(2)
    pipe = keyed_pipeline(root, spark, 3)
    result = pipe.run(5, fail="totals@4:mid", progress=looking(pipe))
    assert [r.plan.actions["totals"] for r in result.journal.recoveries] == ["restore", "restore"]
    assert len(read) == 2
    assert held == [(True, []), (True, [])]
    assert made == [True, True, True]  # epochs 2-4: after the restart's restore, and after the failure's
    _identical(spark, root, reference, 5)
    pipe = keyed_pipeline(root, spark, 2)
    (restart,) = pipe.run(6, progress=looking(pipe)).journal.recoveries
    assert restart.rescaled == {"totals": (3, 2)} and restart.plan.actions["totals"] == "restore"
    assert len(read) == 2  # rescaled: redistributed, not read as written
    assert len(held) == 3 and held[2][0] is False  # the shuffle's result is detached
    assert made == [True] * 4  # epoch 5, after the restore of epoch 3's checkpoint and epoch 4 recomputed


def test_changing_the_key_groups_is_refused(spark: Any, tmp_path: Path) -> None:
    """Restoring with a different number of key groups is a clear error naming the step, not wrong state."""
    from falkirk.spark import Lazy, Pipeline
    from falkirk.spark.errors import PipelineError

    root = tmp_path / "run"
    keyed_pipeline(root, spark, 2).run(2)
    pipe = Pipeline(root, spark)
    pipe.input("events", EVENTS, partitions=2, key="user", source=_source)
    pipe.step(lambda events, state: (events, events), name="totals",
              regime=Lazy(every=2, key="user", partitions=2, max_parallelism=GROUPS * 2))
    pipe.output("out", inputs=["totals"])
    with pytest.raises(PipelineError, match="step 'totals' was .*max_parallelism.*8.*now.*16"):
        pipe.run(3)
