"""Failures, refreshes and changed queries of the example SDP project: selective, and the failure-free tables.

Every run here is compared with ``sdp_reference`` — the same updates run by
falkirk without failures — as multisets of rows per table, and what each run
executed is compared with what falkirk's solver said it would.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
from sdp_support import UPDATES, clone, multiset, tables, write_update

from falkirk.spark import RecoveryError, StepError
from falkirk.spark.pipeline.plan.planner import epoch_of
from falkirk.spark.sdp import load

pytestmark = pytest.mark.spark


def _last_update_failing(sdp_reference: Any, where: Path, flow: str, spark: Any) -> tuple[Any, Any]:
    """The example's updates with a failure injected into ``flow``'s step during the last one."""
    clone(sdp_reference.first, where)
    write_update(where, UPDATES - 1)
    project = load(where, spark)
    return project, project.run(fail=[flow])


@pytest.mark.parametrize("flow", ["user_totals", "orders"])
def test_a_failed_flow_recovers_alone(spark: Any, sdp_reference: dict, tmp_path: Path, flow: str) -> None:
    """A flow failing mid-step in an update (its data written, not yet published) is redone with only what the
    solver's plan rolls back — at most the unlogged view that feeds it, recomputed from the streaming table's log;
    nothing upstream re-reads its files —, the update completes, and the tables are the failure-free run's."""
    project, update = _last_update_failing(sdp_reference, tmp_path / "p", flow, spark)
    last = UPDATES - 1
    assert update.recoveries == 1
    rec = next(r for r in update.result.journal.recoveries if not r.restart)
    assert rec.failed == (flow,)
    rolled = {n for n, f in rec.plan.frontiers.items() if epoch_of(f) < rec.done_at_failure[n]}
    assert rolled <= {"clean_orders"}
    runs = collections.Counter(update.executed)  # completed executions (the failed attempt is not one)
    assert (flow, last) in runs and runs[("orders", last)] == 1
    assert {s for (s, _), n in runs.items() if n > 1} == rolled
    assert project.updates() == UPDATES
    assert tables(project) == sdp_reference


def test_refresh_redoes_the_solvers_closure_only(spark: Any, sdp_reference: dict, tmp_path: Path) -> None:
    """--refresh X redoes X's latest update and exactly what the dry run's solver plan names; --full-refresh of a
    materialized view recomputes it from whole tables; of a streaming table (on a root without garbage
    collection), from its first update. Each leaves the failure-free tables and runs no new update."""
    where = clone(sdp_reference.last, tmp_path / "p")
    project = load(where, spark, gc=False)
    last = UPDATES - 1
    plan = project.plan(refresh=["user_totals"])
    assert not plan.new and set(plan.redo) == {"clean_orders", "user_totals", "big_orders"}
    assert "refreshed: held to epoch" in plan.text
    update = project.run(refresh=["user_totals"])
    assert set(update.executed) == {(n, e) for n, (lo, hi) in plan.redo.items() for e in range(lo, hi + 1)}
    assert (update.epoch, update.new, project.updates()) == (last, False, UPDATES)
    assert tables(project) == sdp_reference

    project = load(where, spark, gc=False)
    update = project.run(full_refresh=["user_totals"])
    assert set(update.executed) == {("clean_orders", last), ("user_totals", last), ("big_orders", last)}
    assert project.rebuilds().at("user_totals", last)
    assert tables(project) == sdp_reference

    project = load(where, spark, gc=False)
    update = project.run(full_refresh=["orders"])
    assert {s for s, _ in update.executed} >= {"orders", "user_totals", "export"}
    assert {e for _, e in update.executed} == set(range(UPDATES))
    assert tables(project) == sdp_reference


def test_a_changed_query_takes_effect_as_in_sdp(spark: Any, sdp_reference: Any, tmp_path: Path) -> None:
    """A changed view and materialized view apply to the whole table from the next update (the incremental
    materialized view is recomputed from whole tables once), as spark-pipelines' full recompute would; the
    streaming table keeps its rows."""
    from pyspark.sql import functions as F

    where = clone(sdp_reference.last, tmp_path / "p")
    code = where / "transformations" / "orders.py"
    text = code.read_text()
    text = text.replace('"amount > 0 AND user IS NOT NULL"', '"amount > 100 AND user IS NOT NULL"')
    text = text.replace('F.max("ts").alias("last_ts"))', 'F.max("ts").alias("last_ts"), F.min("amount").alias("least"))')
    code.write_text(text)
    write_update(where, UPDATES)
    project = load(where, spark)
    # orders reads the files under its (moved) project directory: a changed constant, kept as SDP keeps a stream's
    assert project.changed() == ["orders", "clean_orders", "user_totals", "big_orders"]
    update = project.run()
    assert update.epoch == UPDATES and project.rebuilds().at("user_totals", UPDATES)
    orders = project.table("orders")
    assert orders.count() == 300 * (UPDATES + 1)
    clean = orders.where("amount > 100 AND user IS NOT NULL").withColumn("item", F.lower(F.trim("item")))
    totals = clean.groupBy("user").agg(F.count("*").alias("orders"), F.sum("amount").alias("spent"),
                                       F.max("ts").alias("last_ts"), F.min("amount").alias("least"))
    assert multiset(project.table("user_totals")) == multiset(totals)
    big = (clean.join(totals, "user").where(F.col("amount") * F.col("orders") >= 2 * F.col("spent"))
           .select("order_id", "user", "item", "amount"))
    assert multiset(project.table("big_orders")) == multiset(big)


def test_an_interrupted_update_resumes(spark: Any, sdp_reference: Any, tmp_path: Path) -> None:
    """An update whose run died (here: an error in a query that only data shows, fixed before the next run) is
    finished by the next run, which runs only the steps that had not completed it; on a root with garbage
    collection a streaming table's full refresh is refused, naming why, and changes nothing."""
    where = clone(sdp_reference.first, tmp_path / "p")
    code = where / "transformations" / "orders.py"
    good = code.read_text()
    code.write_text(good.replace('.select("order_id", "user", "item", "amount"))',
                                 '.select("order_id", "user", F.col("item").cast("int").alias("item"), "amount"))'))
    write_update(where, UPDATES - 1)
    with pytest.raises(StepError, match="CAST_INVALID_INPUT"):
        load(where, spark).run()
    code.write_text(good)
    project = load(where, spark)
    assert project.updates() == UPDATES - 1
    update = project.run()
    last = UPDATES - 1
    assert ("orders", last) not in update.executed and ("big_orders", last) in update.executed
    assert tables(project) == sdp_reference
    with pytest.raises(RecoveryError, match="--full-refresh orders: rebuilding a streaming table from its first "
                                            "update needs its input log"):
        load(where, spark).run(full_refresh=["orders"])
