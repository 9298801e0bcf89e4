"""``detach``: a copy cut from its lineage and from its plan's size estimate (a local checkpoint of its own).

A state joined with each epoch's changes and detached again every epoch must keep the rows a pure-Python fold
computes (multisets), stay at Spark's default size estimate however many joins made it (the estimate of a join is
the product of its sides': carried over, it grows with every join — a plain local checkpoint in its place is the
check's negative control), and be one local checkpoint — its blocks found by ``missing_blocks``, its
materialisation seen by ``materialised``.
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
    state = looped(spark, lambda df: S.detach(df, eager=False))
    assert Counter(tuple(r) for r in state.collect()) == folded(EPOCHS)
    # Spark's default estimate, where it knows nothing of the plan's size
    default = int(spark._jsparkSession.sessionState().conf().defaultSizeInBytes())
    assert estimate(state) == default
    # the control: a plain local checkpoint carries the joins' estimate (else the check above proves nothing)
    plain = looped(spark, lambda df: df.localCheckpoint(eager=False))
    assert Counter(tuple(r) for r in plain.collect()) == folded(EPOCHS) and estimate(plain) != default
    # one local checkpoint, materialised by the count: its blocks are where the application says
    assert S.materialised(state)
    assert S.missing_blocks(state) == []


def test_detach_is_a_local_checkpoint_made_by_its_first_use(spark: Any) -> None:
    """Lazy: not materialised until its first use, which materialises it; the plan is a bare local checkpoint, the
    join under it gone (what ``materialised`` and ``missing_blocks`` read)."""
    from pyspark.sql import functions as F

    left = spark.range(100).select(F.col("id").alias("k"), (F.col("id") * 2).alias("a"))
    right = spark.range(50, 150).select(F.col("id").alias("k"), (F.col("id") * 3).alias("b"))
    joined = left.join(right, "k", "full_outer")
    cut = S.detach(joined, eager=False)
    plan = cut._jdf.queryExecution().analyzed()
    assert plan.getClass().getName().endswith(".LogicalRDD")
    assert not S.materialised(cut)
    assert Counter(tuple(r) for r in cut.collect()) == Counter(tuple(r) for r in joined.collect())
    assert S.materialised(cut) and S.missing_blocks(cut) == []
    eager = S.detach(joined)
    assert S.materialised(eager) and eager.count() == 150
