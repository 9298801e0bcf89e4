"""The lineage of a state falkirk's ``detach`` made, against what Spark runs (no fetch failure: the block
manager still sees every block, unlike in ``test_lineage_spark.py``, which runs last)."""

from __future__ import annotations

from typing import Any

import pytest

from falkirk.errors import SolverError
from falkirk.spark.lineage.graph import LineageError, lineage, static_plans
from falkirk.spark.lineage.listener import JobRecorder
from falkirk.spark.lineage.rerun import what_must_rerun

pytestmark = pytest.mark.spark


def test_a_detached_state_is_a_checkpoint_not_the_plan_its_cache_forgot(spark: Any) -> None:
    """A DataFrame falkirk's ``detach`` made (its column batches locally checkpointed, its cache given an empty
    plan in place of the one it was made from) is a checkpoint: the lineage ends there, available while its
    blocks are, and lost it cannot be recomputed (SolverError), as Spark cannot: not a cache whose loss the
    empty plan would 'recompute'. Not yet materialised, it is refused with a clear error."""
    from pyspark.sql import functions as F

    from falkirk.spark.pipeline.run.session import detach, free

    with static_plans(spark):
        source = spark.range(0, 100, 1, 2).withColumn("k", F.col("id") % 4).groupBy("k").count()
        state = detach(source)
        df = state.groupBy((F.col("count") % 2).alias("p")).count()
        lin = lineage(df)
        later = detach(source, eager=False)
        with pytest.raises(LineageError, match="Materialize it first"):
            lineage(later.groupBy("k").count())
    try:
        kinds = {name: u.kind for name, u in lin.units.items()}
        (ck,) = [name for name, kind in kinds.items() if kind == "checkpoint"]
        assert "cache" not in kinds.values() and lin.units[ck].inputs == ()
        assert lin.available(ck)
        with JobRecorder(spark) as rec:
            df.collect()
        job = rec.last
        assert lin.stage_dag() == job.dag()
        assert what_must_rerun(lin).stages == job.ran()
        with pytest.raises(SolverError, match=ck):
            what_must_rerun(lin, [f"rdd_{lin.units[ck].ident}_0"])
    finally:
        free(state)
        free(later)
