"""Injected failures in the flagship recover to output identical to a failure-free run.

Every (step, epoch) boundary of a 4-epoch run gets a failure; to keep the
suite fast they are injected in one run per kind (each fires once, the run
recovers and goes on to the next), and the final responses and database are
compared row for row with the reference run (a duplicated or missing row
fails the comparison). Set ``FALKIRK_EXHAUSTIVE=1`` to also run every
boundary in a run of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, assert_identical, flagship

from falkirk.solver import check_consistent
from falkirk.spark import Injection
from falkirk.spark.pipeline.plan.planner import epoch_of

pytestmark = pytest.mark.spark

STEPS = ["events", "queries", "parse_batch", "heavy", "parse_graph", "cc", "answer", "stats", "responses"]


def _consistent(result: Any) -> None:
    for rec in result.journal.recoveries:
        plan = rec.plan
        violations = check_consistent(plan.dataflow, plan.frontiers, failed=plan.failed,
                                      notification_frontiers=plan.notification_frontiers)
        assert violations == [], rec.cause


def test_failure_before_every_step_at_every_epoch(spark: Any, reference: Path, tmp_path: Path) -> None:
    """A failure at each of the 36 (step, epoch) boundaries, one after another, recovers to identical output."""
    fails = [Injection(s, e, "before") for e in range(EPOCHS) for s in STEPS]
    result = flagship(tmp_path, spark).run(EPOCHS, fail=fails)
    assert {str(i) for i in result.fired} == {str(i) for i in fails}
    assert len(result.journal.recoveries) == len(fails)
    assert all(r.finished is not None for r in result.journal.recoveries)
    _consistent(result)
    _cc_plan_keeps_the_batch_side(result)
    assert_identical(spark, tmp_path, reference)


def _cc_plan_keeps_the_batch_side(result: Any) -> None:
    """cc failing at epoch 3 restores its checkpoint at 1; heavy and the inputs keep ⊤, heavy redoes nothing."""
    (rec,) = [r for r in result.journal.recoveries if r.cause.startswith("step cc failed at epoch 3")]
    plan = rec.plan
    assert plan.actions == {
        "events": "keep", "queries": "keep", "parse_batch": "keep", "heavy": "keep", "parse_graph": "rollback",
        "cc": "restore", "answer": "rollback", "stats": "rollback", "responses": "rollback",
    }
    assert {n: epoch_of(f) for n, f in plan.frontiers.items() if not f.is_top} == {
        "parse_graph": 1, "cc": 1, "answer": 1, "stats": 1, "responses": 1}
    assert set(rec.replayed) == {"events->parse_graph", "queries->answer", "heavy->answer"}
    redone = {(x.step, x.epoch) for x in result.journal.executions if x.recovery == rec.index}
    assert redone == {("parse_graph", 2), ("parse_graph", 3), ("cc", 2), ("answer", 2), ("stats", 2), ("responses", 2)}


def test_failure_mid_step_of_every_step(spark: Any, reference: Path, tmp_path: Path) -> None:
    """A failure after each step wrote its data but before its manifest recovers to identical output.

    The same run also has a task failure Spark retries on its own (no falkirk
    recovery) and a failed Spark job (falkirk recovers the step).
    """
    mids = [Injection(s, 1 + i % 3, "mid") for i, s in enumerate(STEPS)]  # cc (index 5) at its checkpoint epoch 3
    fails = [*mids, Injection("cc", 0, "task"), Injection("heavy", 2, "job")]
    result = flagship(tmp_path, spark).run(EPOCHS, fail=fails)
    assert {str(i) for i in result.fired} == {str(i) for i in fails}
    causes = [r.cause for r in result.journal.recoveries]
    assert len(causes) == len(mids) + 1, causes
    assert any("heavy" in c and "epoch 2" in c and "injected failure" not in c for c in causes)
    # the task failure at cc@0 was Spark's alone: no recovery names it (the "Spark retried" note is not asserted:
    # since cc's state is materialised by its first consumer's job, the retried attempt is not in cc's job group)
    assert not any("cc" in r.failed and "epoch 0" in r.cause for r in result.journal.recoveries), causes
    _consistent(result)
    assert_identical(spark, tmp_path, reference)


@pytest.mark.skipif(not os.environ.get("FALKIRK_EXHAUSTIVE"), reason="set FALKIRK_EXHAUSTIVE=1 (about 45 runs)")
@pytest.mark.parametrize("where", ["before", "mid"])
@pytest.mark.parametrize("epoch", range(EPOCHS))
@pytest.mark.parametrize("step", STEPS)
def test_each_boundary_in_its_own_run(spark: Any, reference: Path, tmp_path: Path, step: str, epoch: int, where: str) -> None:
    """One failure at one (step, epoch, point) recovers to identical output."""
    result = flagship(tmp_path, spark).run(EPOCHS, fail=Injection(step, epoch, where))
    assert len(result.journal.recoveries) == 1
    _consistent(result)
    assert_identical(spark, tmp_path, reference)
