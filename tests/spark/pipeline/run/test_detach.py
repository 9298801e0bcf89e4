"""``detach``: a copy cut from its lineage and from its plan's size estimate (a local checkpoint of its own).

A state joined with each epoch's changes and detached again every epoch must keep the rows a pure-Python fold
computes (multisets), and carry no size estimate of the joins that made it — Spark's default before it is cached,
the cache's own size after (the estimate of a join is the product of its sides': carried over, it grows with every
join — a plain local checkpoint in its place is the check's negative control) — and be held in Spark's columnar
cache whose batches are one local checkpoint: its blocks found by ``missing_blocks``, its materialisation seen by
``materialised``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from falkirk.spark.pipeline.run import session as S

pytestmark = [pytest.mark.spark]

KEYS, EPOCHS = 40, 12


def changes(epoch: int) -> list[tuple[int, int]]:
    return [((epoch * 7 + i * 3) % KEYS, epoch * 10 + i) for i in range(9)]


def folded(epochs: int) -> Counter[tuple[int, int]]:
    """The state after ``epochs`` epochs, by a pure-Python fold: each change adds its value to its key's total."""
    totals: dict[int, int] = {}
    for e in range(epochs):
        for k, v in changes(e):
            totals[k] = totals.get(k, 0) + v
    return Counter(totals.items())


def looped(spark: Any, cut: Any) -> Any:
    """The state after ``EPOCHS`` epochs, each a full outer join of the state with the epoch's changes, cut by
    ``cut`` every epoch."""
    from pyspark.sql import functions as F

    state = None
    for e in range(EPOCHS):
        upd = spark.createDataFrame(changes(e), "k BIGINT, v BIGINT").groupBy("k").agg(F.sum("v").alias("n"))
        if state is None:
            new = upd.withColumnRenamed("n", "total")
        else:
            both = state.join(upd, "k", "full_outer")
            new = both.select("k", (F.coalesce("total", F.lit(0)) + F.coalesce("n", F.lit(0))).alias("total"))
        state = cut(new)
        state.count()
    return state


def estimate(df: Any) -> int:
    return int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())


def test_a_state_detached_every_epoch_keeps_its_rows_and_no_estimate(spark: Any) -> None:
    from pyspark.sql import functions as F

    state = looped(spark, lambda df: S.detach(df, eager=False))
    assert Counter(tuple(r) for r in state.collect()) == folded(EPOCHS)
    # cached: the cache's own size, as Spark measured it while caching
    relation = state._jdf.queryExecution().withCachedData()
    assert relation.getClass().getName().endswith(".InMemoryRelation")
    loaded = relation.cacheBuilder().loadedMaterializedStats()  # (rows, bytes) once every batch is cached
    assert loaded.isDefined() and int(str(loaded.get()._1())) == len(folded(EPOCHS))
    assert estimate(state) == int(str(loaded.get()._2()))
    # not cached yet: Spark's default estimate, where it knows nothing of the plan's size
    default = int(spark._jsparkSession.sessionState().conf().defaultSizeInBytes())
    upd = spark.createDataFrame(changes(EPOCHS), "k BIGINT, n BIGINT")
    joined = state.join(upd, "k", "full_outer").select("k", (F.coalesce("total", F.lit(0)) + F.coalesce("n", F.lit(0))))
    assert estimate(S.detach(joined, eager=False)) == default
    # the control: a plain local checkpoint carries the joins' estimate (else the check above proves nothing)
    plain = looped(spark, lambda df: df.localCheckpoint(eager=False))
    assert Counter(tuple(r) for r in plain.collect()) == folded(EPOCHS) and estimate(plain) != default
    # one local checkpoint, materialised by the count: its blocks are where the application says
    assert S.materialised(state)
    assert S.missing_blocks(state) == []


def test_detach_is_a_local_checkpoint_made_by_its_first_use(spark: Any) -> None:
    """Lazy: not materialised until its first use, which materialises it; the plan is a bare local checkpoint, the
    join under it gone (what ``materialised`` and ``missing_blocks`` read); its blocks are the columnar cache's."""
    from pyspark.sql import functions as F

    left = spark.range(100).select(F.col("id").alias("k"), (F.col("id") * 2).alias("a"))
    right = spark.range(50, 150).select(F.col("id").alias("k"), (F.col("id") * 3).alias("b"))
    joined = left.join(right, "k", "full_outer")
    cut = S.detach(joined, eager=False)
    plan = cut._jdf.queryExecution().analyzed()
    assert plan.getClass().getName().endswith(".InMemoryRelation")
    assert not S.materialised(cut)
    assert Counter(tuple(r) for r in cut.collect()) == Counter(tuple(r) for r in joined.collect())
    assert S.materialised(cut) and S.missing_blocks(cut) == []
    blocks = plan.cacheBuilder().cachedColumnBuffers()
    assert blocks.isLocallyCheckpointed() and blocks.isCheckpointed()
    assert not cut.is_cached  # not in Spark's cache manager: unpersist() leaves it, the JVM's collection frees it
    # freed: its blocks gone, and a read fails (its lineage is cut) instead of computing it again
    cut.unpersist()
    assert S.missing_blocks(cut, wait=0.0) == []
    S.free(cut)
    assert S.missing_blocks(cut, wait=5.0) == list(range(blocks.getNumPartitions()))
    with pytest.raises(Exception, match="(?i)checkpoint"):
        cut.collect()
    eager = S.detach(joined)
    assert S.materialised(eager) and eager.count() == 150


def test_a_query_over_a_state_detached_again_and_again_does_not_carry_the_earlier_epochs_plans(spark: Any) -> None:
    """What Spark's SQL listener records of a query over a state (its plan graph, kept per query) is the same
    after 3 and after 9 epochs: the state's cache does not lead back to the plans of the epochs before it (a
    regression: the cache of rows that kept the plan they came from made that graph, and memory, grow with every
    epoch)."""
    jvm = spark.sparkContext._jvm

    def nodes(info: Any) -> int:
        n, it = 1, info.children().iterator()
        while it.hasNext():
            n += nodes(it.next())
        return n

    def graph_after(epochs: int) -> tuple[int, Counter[tuple[int, int]]]:
        from pyspark.sql import functions as F

        state = None
        for e in range(epochs):
            upd = spark.createDataFrame(changes(e), "k BIGINT, n BIGINT")
            new = upd.withColumnRenamed("n", "total") if state is None else state.join(upd, "k", "full_outer").select(
                "k", (F.coalesce("total", F.lit(0)) + F.coalesce("n", F.lit(0))).alias("total"))
            state = S.detach(new)
        query = state.groupBy("k").agg(F.sum("total").alias("total"))
        plan = query._jdf.queryExecution().executedPlan()
        return nodes(jvm.org.apache.spark.sql.execution.SparkPlanInfo.fromSparkPlan(plan)), Counter(
            tuple(r) for r in query.collect())

    (few, rows3), (many, rows9) = graph_after(3), graph_after(9)
    assert rows3 == folded(3) and rows9 == folded(9)
    assert few == many
