"""A step whose Spark job failed and that lost nothing runs the epoch again in place: nothing rolled back.

The step has not failed in SPEC §3's sense — its state in memory is the one
it began the epoch with, what it took off its queues is queued again — so the
plan for "nothing failed" (every frontier ``⊤``) is the recovery, and only the
failed epoch runs again. A second failure at the same epoch, a failure after
the step published something, or ``retry_in_place=False`` is recovered from
by the rollback plan. Every run's output equals the failure-free run's, row
for row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, assert_identical, flagship

from falkirk.solver import check_consistent
from falkirk.spark import Injection, PipelineError
from falkirk.spark.pipeline.declare.definition import Definition
from falkirk.spark.pipeline.plan.planner import epoch_of
from falkirk.spark.pipeline.run.executor import MAX_ATTEMPTS
from falkirk.spark.pipeline.store.storage import Storage

pytestmark = pytest.mark.spark

#: the flagship's steps that run a Spark job of their own (the others are computed inside their consumer's)
OWN_JOB = [("heavy", 1), ("cc", 2), ("responses", 3)]


def _consistent(result: Any) -> None:
    for rec in result.journal.recoveries:
        plan = rec.plan
        assert check_consistent(plan.dataflow, plan.frontiers, failed=plan.failed,
                                notification_frontiers=plan.notification_frontiers) == [], rec.cause


def _redone(result: Any, rec: Any) -> set[tuple[str, int]]:
    return {(x.step, x.epoch) for x in result.journal.executions if x.recovery == rec.index}


def test_a_failed_job_is_retried_in_place_and_nothing_is_computed_again(
    spark: Any, reference: Path, tmp_path: Path
) -> None:
    """A failed job in each step with a job of its own: each recovery keeps every frontier at ⊤, executes nothing
    a step had completed, and the step's next execution of the epoch is its first completed one."""
    fails = [Injection(s, e, "job") for s, e in OWN_JOB]
    result = flagship(tmp_path, spark).run(EPOCHS, fail=fails)
    assert {str(i) for i in result.fired} == {str(i) for i in fails}
    recs = result.journal.recoveries
    assert [r.in_place for r in recs] == OWN_JOB
    for rec in recs:
        assert rec.failed == () and all(f.is_top for f in rec.plan.frontiers.values()), rec.cause
        assert rec.plan.actions == {n: "keep" for n in rec.plan.frontiers}
        assert _redone(result, rec) == set()
        assert rec.finished is not None and rec.caught_up is not None
    for step, epoch in OWN_JOB:  # one completed execution of the failed epoch, no redo
        runs = [x for x in result.journal.executions if (x.step, x.epoch) == (step, epoch)]
        assert len(runs) == 1 and not runs[0].redo, runs
    _consistent(result)
    assert_identical(spark, tmp_path, reference)


def test_later_failures_at_the_same_epoch_roll_back(spark: Any, reference: Path, tmp_path: Path) -> None:
    """cc's job fails four times at epoch 2: retried in place, then restored from its checkpoint as for any failure,
    three times (the retry in place is not one of the MAX_ATTEMPTS recoveries)."""
    fails = [Injection("cc", 2, "job")] * (1 + MAX_ATTEMPTS)
    result = flagship(tmp_path, spark).run(EPOCHS, fail=fails)
    assert len(result.fired) == 1 + MAX_ATTEMPTS
    first, *later = result.journal.recoveries
    assert first.in_place == ("cc", 2) and len(later) == MAX_ATTEMPTS
    for rec in later:
        assert rec.in_place is None and "cc" in rec.failed and epoch_of(rec.plan.frontiers["cc"]) < 2
    _consistent(result)
    assert_identical(spark, tmp_path, reference)


def test_retry_in_place_can_be_turned_off(spark: Any, reference: Path, tmp_path: Path) -> None:
    """``retry_in_place=False``: the first failed job is recovered from by the rollback plan."""
    result = flagship(tmp_path, spark, retry_in_place=False).run(EPOCHS, fail=[Injection("cc", 2, "job")])
    (rec,) = result.journal.recoveries
    assert rec.in_place is None and "cc" in rec.failed and not rec.plan.frontiers["cc"].is_top
    assert _redone(result, rec)  # the rolled-back epochs ran again
    assert_identical(spark, tmp_path, reference)


def test_injected_losses_are_not_retried_in_place(spark: Any, reference: Path, tmp_path: Path) -> None:
    """``before`` and ``mid`` model a step that lost its memory: rolled back, never retried in place."""
    fails = [Injection("cc", 1, "before"), Injection("heavy", 2, "mid")]
    result = flagship(tmp_path, spark).run(EPOCHS, fail=fails)
    assert [r.in_place for r in result.journal.recoveries] == [None, None]
    assert all(r.failed for r in result.journal.recoveries)
    assert_identical(spark, tmp_path, reference)


def test_a_failure_after_publishing_is_rolled_back(
    spark: Any, reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An output whose manifest could not be published (a transient storage error) may have published it: its
    execution cannot run again as if it never had, so the step rolls back."""
    put, raised = Storage.put, []

    def flaky(self: Storage, m: Any, *args: Any, **kwargs: Any) -> Any:
        if (m.step, m.kind, m.epoch) == ("responses", "output", 2) and not raised:
            raised.append(m)
            raise RuntimeError("Connection reset by peer (publishing)")
        return put(self, m, *args, **kwargs)

    monkeypatch.setattr(Storage, "put", flaky)
    result = flagship(tmp_path, spark).run(EPOCHS)
    assert raised
    (rec,) = result.journal.recoveries
    assert rec.in_place is None and "responses" in rec.failed, rec.cause
    assert "Connection reset" in rec.cause
    assert_identical(spark, tmp_path, reference)


def test_a_failed_job_is_retried_in_place_in_a_concurrent_run(
    spark: Any, reference: Path, tmp_path: Path
) -> None:
    """Three executions at a time: the failed jobs are retried in place too, the output identical."""
    fails = [Injection(s, e, "job") for s, e in OWN_JOB]
    result = flagship(tmp_path, spark, concurrency=3).run(EPOCHS, fail=fails)
    assert {str(i) for i in result.fired} == {str(i) for i in fails}
    assert sorted(r.in_place for r in result.journal.recoveries) == sorted(OWN_JOB)
    assert all(_redone(result, r) == set() for r in result.journal.recoveries)
    _consistent(result)
    assert_identical(spark, tmp_path, reference)


def test_retry_in_place_is_checked_where_declared(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="retry_in_place="):
        Definition(tmp_path, None, retry_in_place="yes")  # type: ignore[arg-type]

