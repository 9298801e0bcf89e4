"""Key-group arithmetic of keyed state: ranges, owners and the rescale plan (no Spark), Spark's hash in Python."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.spark.pipeline.store.keyed import (
    _salt_values,
    key_group_range,
    plan_rescale,
    spark_hash,
    subtask_of,
)

sizes = st.integers(1, 64).flatmap(lambda k: st.tuples(st.just(k), st.integers(1, k), st.integers(1, k)))


@given(sizes)
def test_ranges_partition_the_key_groups(case: tuple[int, int, int]) -> None:
    """The ranges of n partitions are contiguous, cover every key group once, and agree with subtask_of."""
    groups, n, _ = case
    ranges = [key_group_range(i, n, groups) for i in range(n)]
    assert ranges[0][0] == 0 and ranges[-1][1] == groups - 1
    assert all(ranges[i][1] + 1 == ranges[i + 1][0] for i in range(n - 1))
    assert max(hi - lo for lo, hi in ranges) - min(hi - lo for lo, hi in ranges) <= 1
    for i, (lo, hi) in enumerate(ranges):
        assert all(subtask_of(g, n, groups) == i for g in range(lo, hi + 1))


@given(sizes)
def test_rescale_plan_reads_exactly_the_overlapping_partitions(case: tuple[int, int, int]) -> None:
    """New partition j reads old partition i iff some key group is owned by i before and by j after."""
    groups, old, new = case
    plan = plan_rescale(old, new, groups)
    needed = {(subtask_of(g, new, groups), subtask_of(g, old, groups)) for g in range(groups)}
    assert {(j, i) for j, olds in plan.items() for i in olds} == needed


@pytest.mark.spark
def test_spark_hash_in_python_equals_sparks_and_salts_partition_exactly(spark: Any) -> None:
    """``spark_hash`` (the salts' source, so that restoring keyed state runs no job of its own) equals Spark's
    ``hash()`` on BIGINTs, extremes included, and each salt hash-partitions to its own partition."""
    from pyspark.sql import functions as F

    values = [0, 1, -1, -7, 2**31, -(2**31) - 1, 2**40 + 3, -(2**63), 2**63 - 1, *range(2, 300, 7)]
    rows = spark.createDataFrame([(v,) for v in values], "v BIGINT").select("v", F.hash("v").alias("h")).collect()
    assert [(r.v, spark_hash(r.v)) for r in rows] == [(r.v, r.h) for r in rows]
    for n in (1, 2, 3, 5, 8):
        salts = spark.createDataFrame([(v,) for v in _salt_values(n)], "v BIGINT").repartition(n, "v")
        assert sorted(
            (r.p, r.v) for r in salts.select("v", F.spark_partition_id().alias("p")).collect()) == [
            (j, v) for j, v in enumerate(_salt_values(n))]


@pytest.mark.spark
@pytest.mark.parametrize("partitions", [1, 2, 7])
def test_a_checkpoint_is_written_by_key_group_without_a_shuffle(spark: Any, tmp_path: Any, partitions: int) -> None:
    """``tagged`` (what a keyed checkpoint is written from) moves no row: no exchange in its plan, at most
    ``parallelism`` tasks. Written with ``partitionBy``, each ``_subtask=i`` directory holds exactly the rows of
    the key groups partition ``i`` owns (each row's group computed here by an expression of the test's own),
    every row once."""
    from pyspark.sql import functions as F

    from falkirk.spark.pipeline.store import keyed

    n, groups = 3, 16
    df = spark.range(0, 2000).select(F.col("id").alias("k"), (F.col("id") % 7).alias("v"))
    df = df.repartition(partitions, "v")  # rows spread by something other than the key
    out = keyed.tagged(df, "k", n, groups)
    def exchanges(frame: Any) -> int:
        return str(frame._jdf.queryExecution().executedPlan().toString()).count("Exchange")

    assert exchanges(out) == exchanges(df) == 1  # the test's own repartition, nothing more
    assert out.rdd.getNumPartitions() == min(partitions, n)
    out.write.partitionBy(keyed.SUBTASK).parquet(str(tmp_path / "ck"))
    back = spark.read.parquet(str(tmp_path / "ck"))
    assert keyed.KG not in back.columns  # the key group is not written: a reader computes it from the key
    rows = back.select("k", "v", keyed.SUBTASK, F.pmod(F.xxhash64("k"), F.lit(groups)).alias("g")).collect()
    assert sorted((r.k, r.v) for r in rows) == [(i, i % 7) for i in range(2000)]
    assert all(r[keyed.SUBTASK] == subtask_of(r.g, n, groups) for r in rows)
    files = [p for p in (tmp_path / "ck").rglob("part-*")]
    assert {p.parent.name for p in files} == {f"_subtask={i}" for i in range(n)}
    assert len(files) <= min(partitions, n) * n
