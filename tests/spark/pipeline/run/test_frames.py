"""An output whose first use is a write is computed, cached and counted by that write (no count job before it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from spark_support import flagship

from falkirk.spark import Storage
from falkirk.spark.pipeline.run import frames as frames_module
from falkirk.spark.pipeline.run.frames import Frames

pytestmark = pytest.mark.spark


def _frame_cached_partitions(spark: Any, df: Any) -> int:
    """The cached partitions of ``df``'s own in-memory relation (what other tests leave cached does not count)."""
    found = spark._jsparkSession.sharedState().cacheManager().lookupCachedData(df._jdf)
    assert found.isDefined(), "the frame is not persisted"
    rdd = found.get().cachedRepresentation().cacheBuilder().cachedColumnBuffers().id()
    return sum(i.numCachedPartitions() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo() if i.id() == rdd)


def test_the_write_fills_the_cache_and_counts_the_rows(spark: Any, tmp_path: Path) -> None:
    """The observed write's job counts the rows and fills the persisted frame's cache; a frame counted before is
    left to :meth:`Frames.materialise`."""
    from pyspark.sql import functions as F

    frames = Frames()
    df = spark.range(0, 1234, numPartitions=3).withColumn("k", F.col("id") % 7)
    spark.sparkContext.setJobGroup("test-observing", "observing")
    try:
        persisted, observed, rows = frames.observing(df)  # type: ignore[misc]
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("test-observing") == []  # no job yet
    assert _frame_cached_partitions(spark, persisted) == 0
    observed.write.parquet(str(tmp_path / "out"))
    assert _frame_cached_partitions(spark, persisted) == 3  # filled by the write
    assert rows() == 1234 == spark.read.parquet(str(tmp_path / "out")).count()
    assert frames.materialise(persisted) == (persisted, 1234)  # remembered: not counted again
    assert frames.observing(persisted) is None
    persisted.unpersist()


def test_without_the_observation_the_rows_are_counted(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no action delivered the observation, ``rows()`` counts the persisted frame instead."""
    monkeypatch.setattr(frames_module, "OBSERVED_WAIT", 0.05)
    persisted, _observed, rows = Frames().observing(spark.range(0, 77, numPartitions=2))  # type: ignore[misc]
    assert rows() == 77
    persisted.unpersist()


def test_logged_and_output_steps_record_the_rows_they_wrote(spark: Any, tmp_path: Path) -> None:
    """In the flagship, ``heavy`` (logged) and ``responses`` (an output) are counted by their writes: the rows in
    their manifests and execution records are the rows of the data written."""
    result = flagship(tmp_path, spark).run(2)
    storage = Storage(tmp_path)
    for step, kind in (("heavy", "log"), ("responses", "output")):
        for epoch in range(2):
            m = storage.get(step, kind, epoch)
            (execution,) = [x for x in result.journal.executions if x.step == step and x.epoch == epoch]
            data = spark.read.parquet(str(tmp_path / m.location)).count()
            assert m.rows == execution.rows == data > 0, (step, epoch)


def test_a_fused_frame_is_cached_and_counted_by_its_first_consumers_job(spark: Any) -> None:
    """:meth:`Frames.fused`: persisted with no job; the first consumer's job fills the cache and Spark counts the
    rows on the way — even where that consumer's query reads none of them (an inner join with an empty side);
    the second consumer reads the cache; unpersisting the frame handed out frees it."""
    from pyspark.sql import functions as F

    df = spark.range(0, 1234, numPartitions=3).withColumn("k", F.col("id") % 7).where("k != 3")
    expected = sum(1 for i in range(1234) if i % 7 != 3)
    persisted, rows = Frames().fused(df)  # type: ignore[misc]
    assert _frame_cached_partitions(spark, persisted) == 0 and rows(False) is None  # no job yet
    empty = spark.range(0).withColumnRenamed("id", "k")
    assert persisted.join(F.broadcast(empty), "k").count() == 0  # the first consumer
    assert _frame_cached_partitions(spark, persisted) == 3 and rows(False) == expected
    assert persisted.agg(F.count("*")).collect()[0][0] == expected  # the second, from the cache
    rdd = spark._jsparkSession.sharedState().cacheManager().lookupCachedData(persisted._jdf).get()
    rdd = rdd.cachedRepresentation().cacheBuilder().cachedColumnBuffers().id()
    persisted.unpersist(blocking=True)
    assert not any(i.id() == rdd for i in spark.sparkContext._jsc.sc().getRDDStorageInfo())


def test_a_fused_frame_not_wholly_cached_is_counted(spark: Any) -> None:
    """Where the consumer's job left a partition uncomputed (a ``limit``), ``rows(False)`` does not know the rows
    and ``rows(True)`` counts them (a job)."""
    persisted, rows = Frames().fused(spark.range(0, 400, numPartitions=4))  # type: ignore[misc]
    assert len(persisted.limit(1).collect()) == 1
    assert rows(False) is None and rows(True) == 400
    persisted.unpersist()


def test_the_flagships_unlogged_steps_run_inside_their_consumers_jobs(spark: Any, tmp_path: Path) -> None:
    """``parse_batch`` (read by ``heavy``), ``parse_graph`` (read by the stateful ``cc``, which checkpoints its
    state) and ``answer`` (read by ``stats`` and ``responses``) run no job of their own; their execution records
    still have their rows, counted here from the input log and the output, and ``heavy``'s log is what the same
    query gives unfused."""
    from pyspark.sql import functions as F

    from falkirk.spark.pipeline.tools.flagship import heavy, parse_batch

    pipe = flagship(tmp_path, spark)
    result = pipe.run(2)
    storage = Storage(tmp_path)
    for epoch in range(2):
        ex = {x.step: x for x in result.journal.executions if x.epoch == epoch}
        events = pipe.inputs["events"].log.read(spark, epoch)
        for step in ("parse_batch", "parse_graph", "answer"):
            assert ex[step].jobs == 0 and ex[step].fresh is False, ex[step]
        assert ex["parse_batch"].rows == events.where(F.col("kind") != "link").count() > 0
        assert ex["parse_graph"].rows == events.where(F.col("kind") == "link").count() > 0
        responses = spark.read.parquet(str(tmp_path / storage.get("responses", "output", epoch).location))
        assert ex["answer"].rows == responses.count() == ex["responses"].rows > 0
        logged = spark.read.parquet(str(tmp_path / storage.get("heavy", "log", epoch).location))
        expected = heavy(parse_batch(events))
        assert sorted(logged.collect()) == sorted(expected.select(*logged.columns).collect())


def test_a_retried_task_does_not_undercount_a_fused_step(spark: Any, tmp_path: Path) -> None:
    """The output's task fails once (injected) in the job that fills the fused ``p``'s cache, and Spark retries it:
    ``p``'s rows are still the rows written (a failed attempt's accumulator updates are dropped, so after a retry
    falkirk counts them with a job instead of trusting the cache's statistics)."""
    from falkirk.spark import Ephemeral, Pipeline

    pipe = Pipeline(tmp_path, spark, fsync=False)
    pipe.input("src", "k BIGINT", partitions=2, source=lambda e: [{"k": i} for i in range(50 + e)])
    pipe.step(lambda src: src.where("k % 3 != 0"), name="p", inputs=["src"], regime=Ephemeral())
    pipe.output("out", inputs=["p"])
    result = pipe.run(2, fail="out@1:task")
    assert [str(i) for i in result.fired] == ["out@1:task"]
    for epoch in range(2):
        (ex,) = [x for x in result.journal.executions if x.step == "p" and x.epoch == epoch]
        written = spark.read.parquet(str(tmp_path / "output" / "out" / f"epoch={epoch}")).count()
        assert ex.jobs == 0 and ex.rows == written == sum(1 for k in range(50 + epoch) if k % 3), ex


def test_in_a_chain_of_unlogged_steps_every_other_one_keeps_its_job() -> None:
    """``a -> b -> c -> out``: ``c`` is computed by the output's job; ``b``, whose consumer runs no job, keeps its
    own, and computes ``a``; a logged step is listed with ``logged=True`` where it would be fused unlogged."""
    import attrs

    from falkirk.spark import Batch, Ephemeral, Pipeline
    from falkirk.spark.pipeline.run.fusion import fusions

    pipe = Pipeline("memory://falkirk-test/chain")
    pipe.input("src", "k BIGINT", source=lambda e: [{"k": 1}])
    pipe.step(lambda src: src, name="a", inputs=["src"], regime=Ephemeral())
    pipe.step(lambda a: a, name="b", inputs=["a"], regime=Ephemeral())
    pipe.step(lambda b: b, name="c", inputs=["b"], regime=Ephemeral())
    pipe.output("out", inputs=["c"])
    assert fusions(pipe) == fusions(pipe, logged=True) == ["a", "c"]
    pipe.steps["c"] = attrs.evolve(pipe.steps["c"], regime=Batch())  # c logged: b's consumer runs a job again
    assert fusions(pipe) == ["b"] and fusions(pipe, logged=True) == ["b", "c"]


def test_a_fused_step_reads_its_inputs_from_memory_not_from_their_lineage(spark: Any, tmp_path: Path) -> None:
    """``noisy`` (logged, a nondeterministic UDF) → ``p`` (fused: computed by the output's job) → ``out``: the output
    holds the rows ``noisy`` logged. ``p`` took ``noisy``'s output before the output's job ran; unpersisted then,
    that job would have computed ``noisy`` again from its lineage, with other values than its log's."""
    import random

    from pyspark.sql import functions as F

    from falkirk.spark import Ephemeral, Pipeline

    noise = F.udf(lambda k: k * 1000 + random.randrange(1000), "bigint").asNondeterministic()
    pipe = Pipeline(tmp_path, spark, fsync=False, gc=False)  # the logs kept, to compare
    pipe.input("src", "k BIGINT", partitions=2, source=lambda e: [{"k": i} for i in range(40)])
    pipe.step(lambda src: src.select("k", noise("k").alias("v")), name="noisy", inputs=["src"],
              regime=Ephemeral(log=True))
    pipe.step(lambda noisy: noisy.where("k % 2 = 0"), name="p", inputs=["noisy"], regime=Ephemeral())
    pipe.output("out", inputs=["p"])
    result = pipe.run(3)
    storage = Storage(tmp_path)
    for epoch in range(3):
        (ex,) = [x for x in result.journal.executions if x.step == "p" and x.epoch == epoch]
        assert ex.jobs == 0, ex
        logged = spark.read.parquet(str(tmp_path / storage.get("noisy", "log", epoch).location))
        written = spark.read.parquet(str(tmp_path / storage.get("out", "output", epoch).location))
        assert sorted(written.select("k", "v").collect()) == sorted(logged.where("k % 2 = 0").collect())
        assert ex.rows == written.count() == 20


def test_a_step_read_by_several_is_computed_by_the_first_consumers_job(spark: Any, tmp_path: Path) -> None:
    """``p`` read by two outputs runs no job of its own: the first output's job computes and caches it, the second
    reads the cache; both hold its rows, and its record counts them."""
    from falkirk.spark import Ephemeral, Pipeline

    pipe = Pipeline(tmp_path, spark, fsync=False)
    pipe.input("src", "k BIGINT", partitions=2, source=lambda e: [{"k": i} for i in range(30 + e)])
    pipe.step(lambda src: src.where("k % 3 != 0"), name="p", inputs=["src"], regime=Ephemeral())
    pipe.output("first", inputs=["p"])
    pipe.output("second", inputs=["p"])
    result = pipe.run(2)
    storage = Storage(tmp_path)
    for epoch in range(2):
        ex = {x.step: x for x in result.journal.executions if x.epoch == epoch}
        want = sorted((k,) for k in range(30 + epoch) if k % 3)
        for out in ("first", "second"):
            rows = spark.read.parquet(str(tmp_path / storage.get(out, "output", epoch).location)).select("k").collect()
            assert sorted(tuple(r) for r in rows) == want
        assert ex["p"].jobs == 0 and ex["p"].rows == len(want), ex["p"]


def _clicks(epoch: int) -> list[dict[str, Any]]:
    """The ``clicks`` input of the cache tests: 40 records per epoch."""
    return [{"user": f"u{i % 5}", "n": i * (epoch + 1)} for i in range(40)]


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("small", [False, True])
def test_an_input_is_persisted_only_when_it_asks(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: bool, small: bool
) -> None:
    """An input's epoch frame is read from the log by each job that uses it (no cache to fill), unless it was
    declared with ``cache=True``; a small epoch, read on the driver, is held there and never cached; the output
    is the same either way."""
    from collections import Counter

    from falkirk.spark import Pipeline, PipelineError
    from falkirk.spark.pipeline.store import inputread

    if not small:  # 40 records an epoch: read by Spark's reader only below this bound
        monkeypatch.setattr(inputread, "DRIVER_MAX_ROWS", 39)

    seen: list[bool] = []

    def doubled(clicks: Any) -> Any:
        seen.append(clicks.is_cached)
        return clicks.selectExpr("user", "n * 2 AS n")

    pipe = Pipeline(tmp_path / "root", spark, fsync=False)
    pipe.input("clicks", "user STRING, n BIGINT", source=_clicks, cache=cache)
    pipe.step(doubled)
    pipe.output("out", inputs=["doubled"])
    pipe.run(3)
    assert seen == [cache and not small] * 3
    for e in range(3):
        got = Counter(map(tuple, spark.read.parquet(str(tmp_path / "root" / "output" / "out" / f"epoch={e}")).collect()))
        assert got == Counter((r["user"], r["n"] * 2) for r in _clicks(e))
    with pytest.raises(PipelineError, match="input 'other': cache must be True or False"):
        pipe.input("other", "x BIGINT", cache=1)  # type: ignore[arg-type]


def test_an_injected_task_failure_in_an_uncached_input_fires_once(spark: Any, tmp_path: Path) -> None:
    """``clicks@1:task`` in an input read by two consumers' jobs (not cached): Spark sees one failed attempt in
    the whole run, not one per job that reads the epoch, and the outputs are the failure-free run's."""
    from collections import Counter

    from falkirk.spark import Pipeline
    from falkirk.spark.pipeline.run.session import all_failed_tasks

    pipe = Pipeline(tmp_path / "root", spark, fsync=False)
    pipe.input("clicks", "user STRING, n BIGINT", partitions=2, source=_clicks)
    pipe.step(lambda clicks: clicks.selectExpr("user", "n * 2 AS n"), name="doubled", inputs=["clicks"])
    pipe.step(lambda clicks: clicks.selectExpr("user", "n + 1 AS n"), name="shifted", inputs=["clicks"])
    pipe.output("out_doubled", inputs=["doubled"])
    pipe.output("out_shifted", inputs=["shifted"])
    before = all_failed_tasks(spark)
    result = pipe.run(3, fail="clicks@1:task")
    after = all_failed_tasks(spark)
    assert [str(i) for i in result.fired] == ["clicks@1:task"]
    assert before is not None and after is not None and after - before == 1
    for out, f in (("out_doubled", lambda n: n * 2), ("out_shifted", lambda n: n + 1)):
        for e in range(3):
            rows = spark.read.parquet(str(tmp_path / "root" / "output" / out / f"epoch={e}")).collect()
            assert Counter(map(tuple, rows)) == Counter((r["user"], f(r["n"])) for r in _clicks(e))


def test_an_injected_task_failure_fires_where_the_rows_are_not_only_in_partition_0(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``moved@1:task`` on a step whose rows are all in its second partition (the first is empty): one task
    attempt fails — the first with a row, not partition 0's, which sees none — Spark retries it, the outputs are
    the failure-free run's, and the run leaves no marker of it in this machine's temporary directory."""
    import tempfile
    from collections import Counter

    from pyspark.sql import functions as F

    from falkirk.spark import Pipeline
    from falkirk.spark.pipeline.run.session import all_failed_tasks

    # a key hash-partitioned into partition 1 of 2 (computed, not assumed)
    placed = spark.range(16).repartition(2, "id").select("id", F.spark_partition_id().alias("p")).collect()
    key = min(r["id"] for r in placed if r["p"] == 1)

    def moved(clicks: Any) -> Any:
        return clicks.selectExpr("user", "n", f"{key} AS k").repartition(2, "k")

    pipe = Pipeline(tmp_path / "root", spark, fsync=False)
    pipe.input("clicks", "user STRING, n BIGINT", source=_clicks)
    pipe.step(moved)
    pipe.output("out", inputs=["moved"])
    where = (
        moved(spark.createDataFrame(_clicks(1), "user STRING, n BIGINT"))
        .groupBy(F.spark_partition_id().alias("p")).count().collect()
    )
    assert {r["p"]: r["count"] for r in where} == {1: 40}  # partition 0 has no row
    mine = tmp_path / "tmp"  # the driver's temporary directory, where a local master's tasks leave their markers
    mine.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(mine))
    before = all_failed_tasks(spark)
    result = pipe.run(3, fail="moved@1:task")
    after = all_failed_tasks(spark)
    assert [str(i) for i in result.fired] == ["moved@1:task"]
    assert before is not None and after is not None and after - before == 1
    assert os.listdir(mine) == []  # the run removed its marker
    for e in range(3):
        rows = spark.read.parquet(str(tmp_path / "root" / "output" / "out" / f"epoch={e}")).collect()
        assert Counter((r["user"], r["n"], r["k"]) for r in rows) == Counter((r["user"], r["n"], key) for r in _clicks(e))


def test_marked_blocks_are_freed_once_unheld_unpinned_and_their_epoch_settled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A local checkpoint released as a step's state has its blocks freed at the first flush where nothing pins
    or holds it and that step and every node downstream of it completed its ``read_until`` epoch (``None``: the
    latest any node completed when it was marked). A rollback keeps the marks it had satisfied satisfied, and
    later marks wait for the lower progress reported after it. One released as no state is only unpersisted;
    the run's final flush frees every marked frame, released or not."""
    freed: list[str] = []
    unpersisted: list[str] = []
    monkeypatch.setattr(frames_module, "free", lambda df: freed.append(df.name))

    class Fake:
        def __init__(self, name: str) -> None:
            self.name = name

        def unpersist(self, blocking: bool = False) -> None:
            unpersisted.append(self.name)

    frames = Frames()
    state, out, held, plain, handed, other, taken, redone = (
        Fake(n) for n in ("state", "out", "held", "plain", "handed", "other", "taken", "redone")
    )
    frames.progress({"a": 2, "b": 2}, latest=4)
    frames.release(state, state_of="a", read_until=3)  # read by epoch 3's executions
    frames.pin(out)
    frames.release(out, state_of="a", read_until=-1)  # queued: its consumers take it first
    frames.hold([held])
    frames.release(held, state_of="a")  # read until epoch 4, the latest completed; a deferred state reads it
    frames.hold([taken])
    frames.release(taken, state_of="a", read_until=3)
    frames.release(plain)
    frames.free_when_released(handed, "a", read_until=0)  # its producer releases it later
    frames.release(other, state_of="b", read_until=3)
    frames.flush()
    assert freed == [] and unpersisted == ["plain"]
    frames.progress({"a": 3, "b": 2}, latest=4)  # step a's branch completed epoch 3, b's did not
    frames.unpin(out)
    frames.flush()
    assert freed == ["state", "out"]
    # a rollback takes a's branch back to epoch 1: "taken" (epoch 3, read by what its consumers took) stays
    # satisfied; "redone", let go of while epoch 2 is redone, waits for the branch to complete epoch 2 again
    frames.rolled_back()
    frames.progress({"a": 1, "b": 2}, latest=4)
    frames.release(redone, state_of="a", read_until=2)
    frames.unhold([held, taken])
    frames.flush()
    assert freed == ["state", "out", "taken"]
    frames.progress({"a": 2, "b": 2}, latest=4)
    frames.flush()
    assert freed == ["state", "out", "taken", "redone"]  # "held": epoch 4 not completed below a yet
    frames.progress({"a": 4, "b": 3}, latest=4)
    frames.flush()
    assert freed == ["state", "out", "taken", "redone", "held", "other"]
    frames.flush(final=True)  # "plain" was never marked; "handed" never released
    assert freed == ["state", "out", "taken", "redone", "held", "other", "handed"]
    assert unpersisted == ["plain", "state", "out", "taken", "redone", "held", "other"]
