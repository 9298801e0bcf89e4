"""Lineage graphs and what_must_rerun against what Spark itself runs, on real jobs.

Every test builds the lineage before the job, runs the job under a
``JobRecorder`` and compares: the stage DAG Spark reports at job start, the
stages it submits (first run, then after shuffle files or cached blocks were
deleted) and the cached blocks it rewrites.

Order matters once per session: in local mode, the first fetch failure
unregisters the driver's block manager for good (Spark cannot re-register it
without a CoarseGrainedScheduler endpoint), after which the scheduler sees no
cached block. The cache test therefore comes first in this module.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import add
from typing import Any

import pytest
from lineage_shapes import SHAPES, cached

from falkirk.errors import SolverError
from falkirk.spark.lineage.graph import Lineage, LineageError, lineage, static_plans
from falkirk.spark.lineage.listener import JobRecorder, RecordedJob
from falkirk.spark.lineage.rerun import lose_outputs, what_must_rerun

# fetch_failure: this module runs after every other Spark test (tests/conftest.py says why)
pytestmark = [pytest.mark.spark, pytest.mark.fetch_failure]


def run(spark: Any, action: Callable[[], Any]) -> tuple[Any, RecordedJob, JobRecorder]:
    """Run ``action`` under a recorder; return its result, the last job and the recorder."""
    with JobRecorder(spark) as rec:
        out = action()
    return out, rec.last, rec


def spark_name(processor: str) -> str:
    """``shuffle-3`` → ``shuffle_3``: how Spark names the data of a processor."""
    return processor.replace("-", "_")


def result_inputs(lin: Lineage) -> list[str]:
    """The shuffles the result stage reads."""
    return [i for i in lin.units["result"].inputs if lin.units[i].kind == "shuffle"]


def test_cache_firewall_and_lost_block_match_spark(spark: Any, sc: Any) -> None:
    """Cached+reused: first run, a lost cached block, a lost shuffle behind the cache, then a fetch failure."""
    base, first, second = cached(sc)
    cache = f"cache-rdd{base.id()}"
    lin = lineage(first)
    if not lin.availability.block_manager_registered:
        pytest.skip("an earlier fetch failure in this session unregistered the block manager")
    expected, job, rec = run(spark, lambda: sorted(first.collect()))
    assert lin.stage_dag() == job.dag()
    answer = what_must_rerun(lin)
    assert answer.stages == job.ran() and answer.firewalls == {cache}
    assert rec.blocks == {f"rdd_{base.id()}_0", f"rdd_{base.id()}_1"}

    lose_outputs(spark, [f"rdd_{base.id()}_0"])  # the second job's map stage recomputes partition 0 only
    lin = lineage(second)
    answer = what_must_rerun(lin, [f"rdd_{base.id()}_0"])
    _, job, rec = run(spark, second.collect)
    assert answer.stages == job.ran() and not job.fetch_failed()
    assert answer.firewalls == {cache} and rec.blocks == {f"rdd_{base.id()}_0"}

    (upstream,) = lin.units[cache].inputs
    third = base.map(lambda kv: (kv[0] % 4, kv[1])).reduceByKey(max)
    lose_outputs(spark, [spark_name(upstream)])  # behind the cache: nobody needs it
    lin = lineage(third)
    answer = what_must_rerun(lin, [spark_name(upstream)])
    _, job, rec = run(spark, third.collect)
    assert answer.stages == job.ran() and upstream not in job.ran()
    assert answer.firewalls == frozenset() and rec.blocks == frozenset()

    lin = lineage(first)
    lost = [spark_name(s) for s in result_inputs(lin)]
    lose_outputs(spark, lost)
    answer = what_must_rerun(lin, lost)
    again, job, _ = run(spark, lambda: sorted(first.collect()))
    assert again == expected
    assert answer.fetch_failure and job.fetch_failed()
    assert answer.stages == job.ran() and upstream in job.ran()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shape_matches_spark(spark: Any, sc: Any, shape: str) -> None:
    """Stage DAG, first run, an unread lost shuffle and a fetch failure agree with Spark's stages."""
    final = SHAPES[shape](sc)
    lin = lineage(final)
    expected, job, _ = run(spark, lambda: sorted(final.collect()))
    assert lin.stage_dag() == job.dag()
    assert what_must_rerun(lin).stages == job.ran() == set(lin.stage_dag())

    lin = lineage(final)
    read = result_inputs(lin)
    unread = sorted(n for n, u in lin.units.items() if u.kind == "shuffle" and n not in read)
    if unread:
        lose_outputs(spark, [spark_name(unread[0])])
        answer = what_must_rerun(lin, [spark_name(unread[0])])
        _, job, _ = run(spark, final.collect)
        assert answer.stages == job.ran() == {"result"} and not job.fetch_failed()

    lin = lineage(final)
    lost = [spark_name(s) for s in read]
    lose_outputs(spark, lost)
    answer = what_must_rerun(lin, lost)
    precise = what_must_rerun(lin, lost, fetch_failure="map-output")
    again, job, _ = run(spark, lambda: sorted(final.collect()))
    assert again == expected
    assert answer.fetch_failure == job.fetch_failed() is True
    assert answer.stages == job.ran()
    assert precise.stages <= job.ran()


def _dataframe(spark: Any) -> Any:
    from pyspark.sql import functions as F

    left = spark.range(0, 300, 1, 2).withColumn("k", F.col("id") % 7).groupBy("k").agg(F.sum("id").alias("s"))
    right = spark.range(0, 200, 1, 2).withColumn("k", F.col("id") % 5).groupBy("k").count()
    return left.join(right, "k").groupBy((F.col("s") % 3).alias("m")).count()


@pytest.fixture
def sql_conf(spark: Any) -> Any:
    """Set SQL options for one test (``sql_conf(key, value)``); the old values come back after it."""
    saved: dict[str, Any] = {}

    def set_option(key: str, value: str) -> None:
        saved.setdefault(key, spark.conf.get(key, None))
        spark.conf.set(key, value)

    yield set_option
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


@pytest.fixture
def no_broadcast(sql_conf: Any) -> Any:
    """Sort-merge joins only, so that a join is a shuffle."""
    sql_conf("spark.sql.autoBroadcastJoinThreshold", "-1")


def test_dataframe_exchanges_match_spark(spark: Any, no_broadcast: Any) -> None:
    """A DataFrame's Exchange nodes are its shuffle stages: DAG, first run and a fetch failure agree."""
    with static_plans(spark):
        df = _dataframe(spark)
        lin = lineage(df)
    expected, job, _ = run(spark, lambda: sorted(df.collect()))
    assert lin.stage_dag() == job.dag() and len(lin.shuffles) == 3
    assert what_must_rerun(lin).stages == job.ran()
    lin = lineage(df)
    lost = [spark_name(s) for s in result_inputs(lin)]
    lose_outputs(spark, lost)
    answer = what_must_rerun(lin, lost)
    again, job, _ = run(spark, lambda: sorted(df.collect()))
    assert again == expected and answer.stages == job.ran()


def test_dataframe_cache_is_a_firewall(spark: Any, no_broadcast: Any) -> None:
    """A persisted DataFrame is read through InMemoryTableScan: a cache processor between stages."""
    from pyspark.sql import functions as F

    with static_plans(spark):
        cached_df = spark.range(0, 100, 1, 2).withColumn("k", F.col("id") % 4).groupBy("k").count().persist()
        df = cached_df.groupBy((F.col("count") % 2).alias("p")).count()
        lin = lineage(df)
    try:
        _, job, _ = run(spark, df.collect)
        assert [u.kind for u in lin.units.values()] == ["shuffle", "cache", "shuffle", "result"]
        assert lin.stage_dag() == job.dag()
        answer = what_must_rerun(lin)
        assert answer.stages == job.ran() and len(answer.firewalls) == 1
    finally:
        cached_df.unpersist()


def test_dataframe_broadcast_is_a_firewall(spark: Any, sql_conf: Any) -> None:
    """A broadcast join's small side is a firewall processor; Spark's job DAG leaves it out."""
    from pyspark.sql import functions as F

    sql_conf("spark.sql.autoBroadcastJoinThreshold", str(10 * 1024 * 1024))
    with static_plans(spark):
        small = spark.range(0, 20, 1, 1).withColumn("k", F.col("id") % 5)
        big = spark.range(0, 300, 1, 2).withColumn("k", F.col("id") % 7).groupBy("k").agg(F.sum("id").alias("s"))
        df = big.join(F.broadcast(small), "k").groupBy("s").count()
        lin = lineage(df)  # builds the broadcast (one small job), as Spark does before the query's job
    _, job, _ = run(spark, df.collect)
    assert sorted(u.kind for u in lin.units.values()) == ["broadcast", "result", "shuffle", "shuffle"]
    assert lin.stage_dag() == job.dag()
    assert what_must_rerun(lin).stages == job.ran()


def test_adaptive_plans_are_described_once_final(spark: Any, no_broadcast: Any, sql_conf: Any) -> None:
    """Under adaptive execution lineage() refuses a plan until it ran; then it matches a re-run."""
    sql_conf("spark.sql.adaptive.enabled", "true")
    df = _dataframe(spark)
    with pytest.raises(LineageError, match="adaptive"):
        lineage(df)
    df.collect()
    lin = lineage(df)
    _, job, _ = run(spark, df.collect)
    assert lin.stage_dag() == job.dag()
    assert what_must_rerun(lin).stages == job.ran() == {"result"}


def test_lost_reliable_checkpoint_aborts_both(spark: Any, sc: Any, tmp_path: Any) -> None:
    """A needed checkpoint that was deleted: falkirk raises SolverError and Spark aborts the job."""
    sc.setCheckpointDir(str(tmp_path))
    base = sc.parallelize(range(100), 2).map(lambda x: (x % 5, x)).reduceByKey(add)
    base.checkpoint()
    final = base.map(lambda kv: (kv[0] % 2, kv[1])).reduceByKey(add)
    final.collect()
    lin = lineage(final)
    assert lin.units[f"checkpoint-rdd{base.id()}"].inputs == ()
    assert what_must_rerun(lin).stages == {"result"}
    lost = [f"checkpoint_{base.id()}"] + [spark_name(s) for s in result_inputs(lin)]
    lose_outputs(spark, lost, lin=lin)
    with pytest.raises(SolverError, match=f"checkpoint-rdd{base.id()}"):
        what_must_rerun(lin, lost)
    with pytest.raises(Exception, match="FileNotFound|does not exist|aborted"):
        final.collect()
