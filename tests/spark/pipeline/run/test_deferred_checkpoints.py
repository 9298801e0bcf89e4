"""A sequential run writes a step's state checkpoint at the end of its epoch, after the epoch's outputs committed.

The checkpoint is not on the path from an epoch's input to its output (response latency, issue 53): the step
computes and materialises its new state, its consumers run and the outputs commit, then the checkpoint is
written and becomes the step's frontier. Until then the step's frontier is its checkpoint before, as in the
epochs between checkpoints, so a failure in that window rolls back no less far than the plan says and loses
nothing. Checked here against a failure-free run, as multisets: failures before and after the write, a write
that fails (the step's failure at that epoch: it restores the checkpoint before and redoes the epochs after it),
and a redo of an epoch whose end has passed (its checkpoint is written at once). Between checkpoints the new
state is made (materialised, its lineage cut) at the end of its epoch too, the epoch's inputs kept persisted
until then; a state that cannot be made is the step's failure, and two that fail at the same epoch's end are
recovered from together. A step checkpointed every epoch (Eager, ``Lazy(every=1)``) and every step of a
concurrent run still write inside the step.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Eager, Ephemeral, Lazy, Pipeline, StepError
from falkirk.spark.pipeline.run import incremental, runners
from falkirk.spark.pipeline.run.session import materialised

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


def counts_made(parsed: Any, *, state: Any) -> Any:
    """``counts`` with its output a function of its new state (the state keeps each key's count this epoch, m):
    the state is made by the output's job, its checkpoint still written after the output committed."""
    from pyspark.sql import functions as F

    now = parsed.groupBy("key").agg(F.count("*").alias("m"), F.sum("v").alias("w"))
    if state is None:
        new = now.select("key", F.col("m").alias("n"), F.col("w").alias("s"), "m")
    else:
        both = state.drop("m").join(now, "key", "full_outer")
        new = both.select(
            "key",
            (F.coalesce("n", F.lit(0)) + F.coalesce("m", F.lit(0))).alias("n"),
            (F.coalesce("s", F.lit(0)) + F.coalesce("w", F.lit(0))).alias("s"),
            "m",
        )
    return (lambda made: made.where(F.col("m").isNotNull()).select("key", "n", "s")), new


def build(root: Path, spark: Any, regime: Any = None, *, step: Any = counts, **options: Any) -> Pipeline:
    pipe = Pipeline(root, spark, fsync=False, **options)
    pipe.input("events", "key BIGINT, v BIGINT", partitions=2, source=events)
    pipe.step(parsed, regime=Ephemeral())
    pipe.step(step, inputs=["parsed"], regime=regime or Lazy(every=2, key="key"), name="counts")
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
        ("updated@4:mid", 3),  # counts' epoch-4 state, not a checkpoint, is not materialised yet
        ("counts@6:before", 5),  # its epoch-5 state was made from its lineage at the end of epoch 5
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


@pytest.mark.parametrize(
    ("fail", "newest"),
    [
        (None, None),
        ("updated@3:mid", 1),  # the output of a checkpoint epoch fails: counts' state made, its checkpoint not
        ("counts@3:mid", 1),
        ("counts@4:before", 3),
        ("updated@4:mid", 3),
        ("counts@5:after", 5),
    ],
)
def test_a_state_made_by_its_output_is_checkpointed_after_the_output_committed(
    spark: Any, tmp_path: Path, failure_free: Any, fail: str | None, newest: int | None
) -> None:
    """The output a function of the state (which makes the state first, on the epoch's path): the checkpoint of a
    checkpoint epoch is still published after that epoch's output committed, and failures on either side of the
    write give the failure-free run's output."""
    reference, _ = failure_free
    root = tmp_path / "root"
    result = build(root, spark, step=counts_made, gc=False).run(EPOCHS, fail=[fail] if fail else [])
    assert rows(spark, root) == rows(spark, reference)
    if fail is None:
        assert not result.journal.recoveries
        for e in (1, 3, 5, 7):
            assert published(root, e) > committed_at(root, e), e
    else:
        [recovery] = result.journal.recoveries
        assert max(recovery.available_at_failure["counts"]) == newest
    assert manifest(root, "counts", "checkpoint", EPOCHS - 1).exists()


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


def test_between_checkpoints_the_new_state_is_made_after_the_output_committed(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At every epoch the step's new state is still its lineage when the output commits, and is cut from it
    (materialised in executor memory) at the end of the epoch; the epoch's inputs stay persisted until then
    (unpersisted, the state's job would compute them again from the input's log)."""
    reference, _ = failure_free
    write, seen = runners.StepRunner.write_deferred, []

    def watched(self: Any) -> None:
        deferred = self.deferred
        if deferred is not None:
            seen.append((deferred.epoch, time.time(), materialised(self.state), deferred.checkpoint))
            assert [df.is_cached for df in deferred.inputs] == [True], deferred.epoch
        write(self)
        if deferred is not None:
            assert materialised(self.state) and self.deferred is None, deferred.epoch
            assert not any(id(df) in self.ctx.frames._holds for df in deferred.inputs), deferred.epoch

    monkeypatch.setattr(runners.StepRunner, "write_deferred", watched)
    root = tmp_path / "root"
    build(root, spark, gc=False).run(EPOCHS)
    assert [(e, made, checkpoint) for e, _, made, checkpoint in seen] == [
        (e, False, e % 2 == 1) for e in range(1, EPOCHS)  # epoch 0's state is its output: made by its count
    ]
    for e, at, _, _ in seen:
        assert at > committed_at(root, e), e
    assert rows(spark, root) == rows(spark, reference)


def totals(counts: Any, *, state: Any) -> Any:
    """A second stateful step, over counts' output: per key, how many epochs changed it."""
    from pyspark.sql import functions as F

    now = counts.select("key", F.lit(1).alias("c"))
    if state is None:
        return now, now
    both = state.join(now.withColumnRenamed("c", "d"), "key", "full_outer")
    total = (F.coalesce("c", F.lit(0)) + F.coalesce("d", F.lit(0))).alias("c")
    return both.where(F.col("d").isNotNull()).select("key", total), both.select("key", total)


def build_two(root: Path, spark: Any, **options: Any) -> Pipeline:
    pipe = build(root, spark, **options)
    pipe.step(totals, inputs=["counts"], regime=Lazy(every=2, key="key"))
    pipe.output("changed", inputs=["totals"])
    return pipe


def failing_to_make(monkeypatch: pytest.MonkeyPatch, fail: set[tuple[str, int]]) -> list[tuple[str, int]]:
    """Make the new states of ``fail`` (step, epoch) fail once each, where they are made at the end of their
    epoch; returns the states made, in order."""
    write, detach, made, making = runners.StepRunner.write_deferred, runners.detach, [], []

    def watched(self: Any) -> None:
        if self.deferred is not None and self.deferred.state is self.state:
            making.append((self.name, self.deferred.epoch))
            made.append(making[-1])
        try:
            write(self)
        finally:
            making.clear()

    def flaky(df: Any, **kw: Any) -> Any:
        if making and making[0] in fail and made.count(making[0]) == 1:
            raise OSError(f"executor lost (injected at {making[0][0]}@{making[0][1]})")
        return detach(df, **kw)

    monkeypatch.setattr(runners.StepRunner, "write_deferred", watched)
    monkeypatch.setattr(runners, "detach", flaky)
    return made


def test_a_state_that_cannot_be_made_is_the_steps_failure(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Making counts' epoch-2 state (not a checkpoint epoch) fails once: counts failed at epoch 2. It restores
    its epoch-1 checkpoint and redoes epoch 2, whose state is made as the redo completes."""
    reference, _ = failure_free
    made = failing_to_make(monkeypatch, {("counts", 2)})
    root = tmp_path / "root"
    result = build(root, spark, gc=False).run(EPOCHS)
    [recovery] = result.journal.recoveries
    assert recovery.failed == ("counts",)
    assert "executor lost (injected at counts@2)" in recovery.cause
    assert "materialising its new state" in recovery.cause
    assert max(recovery.available_at_failure["counts"]) == 1
    assert [e for _, e in made] == [1, 2, 2, 3, 4, 5, 6, 7]
    assert rows(spark, root) == rows(spark, reference)


def test_states_that_fail_at_the_same_epoch_end_are_recovered_together(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """counts' and totals' epoch-3 states (a checkpoint epoch of both) both fail at the end of epoch 3: one
    recovery rolls both back (neither is left with a state that was never made, nor a checkpoint that was
    never written), and both outputs equal the failure-free run's."""
    reference = tmp_path / "reference"
    build_two(reference, spark, gc=False).run(EPOCHS)
    made = failing_to_make(monkeypatch, {("counts", 3), ("totals", 3)})
    root = tmp_path / "root"
    result = build_two(root, spark, gc=False).run(EPOCHS)
    [recovery] = result.journal.recoveries
    assert set(recovery.failed) == {"counts", "totals"}
    assert made.count(("counts", 3)) == made.count(("totals", 3)) == 2
    for e in range(EPOCHS):
        for step in ("counts", "totals"):
            assert manifest(root, step, "checkpoint", e).exists() == (e % 2 == 1), (step, e)
    assert rows(spark, root) == rows(spark, reference)
    changed = [spark.read.parquet(str(r / "output" / "changed")).collect() for r in (reference, root)]
    assert Counter(tuple(r) for r in changed[1]) == Counter(tuple(r) for r in changed[0])


def test_an_epoch_whose_end_failed_ends_again(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """counts' epoch-3 state fails at the end of epoch 3; once the redo completed epoch 3 again, its end comes
    again: the failure injected after epoch 3 (between epochs) still fires, and its recovery loses nothing."""
    reference, _ = failure_free
    failing_to_make(monkeypatch, {("counts", 3)})
    root = tmp_path / "root"
    result = build(root, spark, gc=False).run(EPOCHS, fail=["updated@3:after"])
    assert [f"{i.step}@{i.epoch}:{i.where}" for i in result.fired] == ["updated@3:after"]
    assert [r.failed for r in result.journal.recoveries] == [("counts",), ("updated",)]
    assert rows(spark, root) == rows(spark, reference)


def test_falkirk_off_makes_the_state_at_the_end_of_the_epoch_alike(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With falkirk off (``durable=False``) the state is made at the same point, nothing is checkpointed, and
    the output is the same: the overhead benchmarks compare the same jobs on the same path."""
    reference, _ = failure_free
    made = failing_to_make(monkeypatch, set())
    root = tmp_path / "root"
    build(root, spark, durable=False).run(EPOCHS)
    assert [e for _, e in made] == list(range(1, EPOCHS))
    assert not (root / "manifests" / "counts").exists()
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


def test_a_made_states_checkpoint_is_one_job_that_counts_its_rows(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state made by its output's job is not counted again for its checkpoint: the write is the checkpoint's one
    job and counts the rows it writes; the manifest's rows are the state's."""
    reference, _ = failure_free
    sc, write, seen = spark.sparkContext, runners.StepRunner.write_deferred, []

    def watched(self: Any) -> None:
        deferred = self.deferred
        write(self)
        if deferred is not None:
            sc._jsc.sc().listenerBus().waitUntilEmpty()  # the status tracker hears of jobs on the listener bus
            group = sc.getLocalProperty("spark.jobGroup.id")
            jobs = sc.statusTracker().getJobIdsForGroup(group)
            seen.append((deferred.epoch, [sc.statusTracker().getJobInfo(j).stageIds for j in jobs], self.state.count()))

    monkeypatch.setattr(runners.StepRunner, "write_deferred", watched)
    root = tmp_path / "root"
    build(root, spark, step=counts_made, gc=False).run(EPOCHS)
    assert rows(spark, root) == rows(spark, reference)
    # between checkpoints the output's job made the state: nothing is left to the end of the epoch
    assert {e: len(jobs) for e, jobs, _ in seen} == {e: e % 2 for e in range(EPOCHS)}, seen
    for e, _, n in seen:  # the state's rows, and the rows written
        if e % 2 == 0:
            continue
        m = json.loads(manifest(root, "counts", "checkpoint", e).read_text())
        assert m["rows"] == n == spark.read.parquet(str(root / m["location"])).count() > 0, e


def _jobs_per_execution(spark: Any, monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, int], int]:
    """Per (step, epoch), the Spark jobs its execution ran (its job group's, read as the execution returns)."""
    sc, execute, jobs = spark.sparkContext, runners.StepRunner.execute, {}

    def watched(self: Any, epoch: int, inputs: Any) -> Any:
        out = execute(self, epoch, inputs)
        sc._jsc.sc().listenerBus().waitUntilEmpty()
        jobs[(self.name, epoch)] = len(sc.statusTracker().getJobIdsForGroup(sc.getLocalProperty("spark.jobGroup.id")))
        return out

    monkeypatch.setattr(runners.StepRunner, "execute", watched)
    return jobs


def test_a_stateful_steps_output_is_computed_by_its_consumers_job(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``counts`` returns its output as a function of its new state: in a sequential run its output is computed by
    the output's write, which makes the state as it reads it — fewer jobs per epoch than with a job of its own
    computing (and counting) that output first; ``parsed`` (unlogged, read by it) runs no job either way. Every
    output epoch equals the failure-free run's, and each execution is journalled with the rows the output's job
    counted."""
    from falkirk.spark.pipeline.run import executor
    from falkirk.spark.pipeline.run.fusion import fusions

    reference, _ = failure_free
    pipe = build(tmp_path / "fused", spark, step=counts_made, gc=False)
    assert fusions(pipe, stateful=True) == ["parsed", "counts"] and fusions(pipe) == ["parsed"]
    jobs = _jobs_per_execution(spark, monkeypatch)
    result = pipe.run(EPOCHS)
    assert rows(spark, tmp_path / "fused") == rows(spark, reference)
    fused = dict(jobs)
    jobs.clear()
    # the same pipeline with the stateful step not fused: its execution computes its output in a job of its own
    monkeypatch.setattr(executor, "fusions", lambda p, **k: fusions(p, **{**k, "stateful": False}))
    alone = build(tmp_path / "alone", spark, step=counts_made, gc=False).run(EPOCHS)
    assert rows(spark, tmp_path / "alone") == rows(spark, reference)
    for e in range(EPOCHS):
        assert fused[("parsed", e)] == jobs[("parsed", e)] == 0, (e, sorted(fused.items()))
        assert fused[("updated", e)] == jobs[("updated", e)] == 1, (e, sorted(fused.items()))
        # its own jobs are the shuffles adaptive execution runs as the state is planned (detached); the output's
        # job of its own, and the map stages it plans again, are gone
        assert fused[("counts", e)] < jobs[("counts", e)], (e, sorted(fused.items()), sorted(jobs.items()))
    got = {(x.step, x.epoch): x.rows for x in result.journal.executions}
    assert got == {(x.step, x.epoch): x.rows for x in alone.journal.executions} and min(got.values()) > 0, got


def test_a_concurrent_run_does_not_fuse_a_stateful_step(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its states are made inside their executions (a later epoch's may run before an epoch ends)."""
    reference, _ = failure_free
    root = tmp_path / "root"
    jobs = _jobs_per_execution(spark, monkeypatch)
    build(root, spark, step=counts_made, concurrency=2, gc=False).run(EPOCHS)
    assert rows(spark, root) == rows(spark, reference)
    assert all(jobs[("counts", e)] >= 1 for e in range(EPOCHS)), jobs


def test_a_failure_inside_a_fused_chain_is_the_step_that_failed(spark: Any, tmp_path: Path) -> None:
    """``parsed``'s UDF raises inside a job that computes ``counts``' state or output, and ``parsed`` with it: the
    StepError names ``parsed``, not ``counts`` or the output."""
    from pyspark.sql import functions as F

    def udf_body(v):  # type: ignore[no-untyped-def]  # no hints: PySpark would infer a pandas UDF
        raise ValueError(f"bad value {v}")

    def bad(events: Any) -> Any:
        return events.select("key", F.udf(udf_body, "bigint")("v").alias("v"))

    pipe = Pipeline(tmp_path / "root", spark, fsync=False)
    pipe.input("events", "key BIGINT, v BIGINT", partitions=2, source=events)
    pipe.step(bad, regime=Ephemeral(), name="parsed")
    pipe.step(counts_made, inputs=["parsed"], regime=Lazy(every=2, key="key"), name="counts")
    pipe.output("updated", inputs=["counts"])
    with pytest.raises(StepError) as info:
        pipe.run(2)
    err = info.value
    # Spark runs a shuffle's map stages as the state is planned (adaptive execution), in counts' job group
    assert err.step == "parsed" and "bad value" in err.cause and "job)" in err.cause, err


def test_a_small_made_states_checkpoint_is_written_from_the_driver(
    spark: Any, tmp_path: Path, failure_free: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``counts``' state, made by its output's job and a few rows in Spark's cache, is collected and written from the
    driver (one job, no file committer: ``store/collected.py``): its checkpoints' files are pyarrow's, and hold the
    rows Spark's own write of them holds (collection off); the outputs equal the failure-free run's; a failure
    after such a checkpoint restores it and loses nothing."""
    import pyarrow.parquet as pq

    reference, _ = failure_free
    on, off = tmp_path / "on", tmp_path / "off"
    build(on, spark, step=counts_made, gc=False).run(EPOCHS)
    with monkeypatch.context() as m:
        m.setattr(incremental, "COLLECT_MAX_BYTES", -1)
        build(off, spark, step=counts_made, gc=False).run(EPOCHS)
    assert rows(spark, on) == rows(spark, off) == rows(spark, reference)

    def written(root: Path, e: int) -> tuple[int, set[bool], Counter[tuple[Any, ...]]]:
        doc = json.loads(manifest(root, "counts", "checkpoint", e).read_text())
        files = [root / doc["location"] / name for name, _, _ in doc["files"]]
        by_arrow = {"parquet-cpp" in pq.read_metadata(f).created_by for f in files}
        data = spark.read.parquet(str(root / doc["location"])).select("key", "n", "s", "m")
        return doc["rows"], by_arrow, Counter(tuple(r) for r in data.collect())

    for e in (1, 3, 5, 7):
        n_on, arrow_on, data_on = written(on, e)
        n_off, arrow_off, data_off = written(off, e)
        assert (arrow_on, arrow_off) == ({True}, {False}), e
        assert n_on == n_off == sum(data_on.values()) > 0 and data_on == data_off, e
    root = tmp_path / "failed"
    result = build(root, spark, step=counts_made, gc=False).run(EPOCHS, fail=["counts@4:before"])
    [recovery] = result.journal.recoveries
    assert max(recovery.available_at_failure["counts"]) == 3
    assert rows(spark, root) == rows(spark, reference)


def test_a_state_an_in_place_retry_took_up_is_still_collected(
    spark: Any, tmp_path: Path, failure_free: Any
) -> None:
    """``counts`` checkpointed every epoch (``Eager``), its job failed at epoch 3: the retry in place takes up the
    state the failed job's tasks made (their blocks cached; Spark's cache then does not count itself loaded),
    and that state's checkpoint is still collected and written from the driver, as every other epoch's is, not
    by Spark's writer; the outputs equal the failure-free run's."""
    import pyarrow.parquet as pq

    reference, _ = failure_free
    root = tmp_path / "retried"
    result = build(root, spark, Eager(key="key"), step=counts_made, gc=False).run(EPOCHS, fail=["counts@3:job"])
    assert [str(i) for i in result.fired] == ["counts@3:job"]
    [recovery] = result.journal.recoveries
    assert recovery.in_place == ("counts", 3)
    assert rows(spark, root) == rows(spark, reference)
    for e in range(EPOCHS):
        doc = json.loads(manifest(root, "counts", "checkpoint", e).read_text())
        files = [root / doc["location"] / name for name, _, _ in doc["files"]]
        assert files and {"parquet-cpp" in pq.read_metadata(f).created_by for f in files} == {True}, e
