"""Concurrent runs (``Pipeline(concurrency=N)``) recover exactly like sequential ones, and keep going meanwhile.

* The flagship with three executions at a time, every kind of injected failure at every step (before, mid-step,
  between epochs) in one run: output identical to the failure-free reference, every plan satisfies C1–C4, and
  executions really overlapped.
* Seeded random failure schedules at several concurrencies and windows: identical output each time.
* Two branches from a logged input, the slow one failing: while it catches up from its checkpoint, the fast
  branch's output goes on committing new epochs (it does not wait for the recovery).
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, assert_identical, flagship

from falkirk.solver import check_consistent
from falkirk.spark import Ephemeral, Injection, Lazy, Pipeline, PipelineError

pytestmark = [pytest.mark.spark]

STEPS = ["events", "queries", "parse_batch", "heavy", "parse_graph", "cc", "answer", "stats", "responses"]


def _consistent(result: Any) -> None:
    for rec in result.journal.recoveries:
        plan = rec.plan
        violations = check_consistent(plan.dataflow, plan.frontiers, failed=plan.failed,
                                      notification_frontiers=plan.notification_frontiers)
        assert violations == [], rec.cause


def _overlaps(result: Any) -> int:
    """How many pairs of executions ran at the same time."""
    spans = sorted((x.started, x.started + x.seconds) for x in result.journal.executions if x.started is not None)
    return sum(1 for i, (_, end) in enumerate(spans) for start, _ in spans[i + 1:] if start < end)


def test_concurrency_is_checked_where_declared(tmp_path: Path) -> None:
    """concurrency and window are integers >= 1, refused naming the argument."""
    for bad in ({"concurrency": 0}, {"concurrency": 1.5}, {"window": 0}, {"concurrency": True}):
        with pytest.raises(PipelineError, match=f"{next(iter(bad))}="):
            Pipeline(tmp_path, None, **bad)


def test_every_failure_kind_at_every_step_recovers_identically_concurrently(
    spark: Any, reference: Path, tmp_path: Path,
) -> None:
    """36 failures before each (step, epoch), one mid-step failure of each step and two between epochs, with three
    executions at a time: identical output, consistent plans, overlapping executions."""
    fails = [Injection(s, e, "before") for e in range(EPOCHS) for s in STEPS]
    fails += [Injection(s, 1 + i % 3, "mid") for i, s in enumerate(STEPS)]
    fails += [Injection("heavy", 1, "after"), Injection("cc", 2, "after")]
    result = flagship(tmp_path, spark, concurrency=3).run(EPOCHS, fail=fails)
    assert {str(i) for i in result.fired} == {str(i) for i in fails}
    assert all(r.finished is not None for r in result.journal.recoveries)
    _consistent(result)
    assert_identical(spark, tmp_path, reference)
    assert _overlaps(result) > 0


@pytest.mark.parametrize(("seed", "concurrency", "window"), [(1, 2, 1), (2, 3, 2), (3, 4, 3)])
def test_random_failure_schedules_recover_identically_concurrently(
    spark: Any, reference: Path, tmp_path: Path, seed: int, concurrency: int, window: int,
) -> None:
    """A seeded schedule of failures (any step, epoch and point) at each concurrency: identical output."""
    rnd = random.Random(seed)
    fails = sorted({Injection(rnd.choice(STEPS), rnd.randrange(EPOCHS), rnd.choice(["before", "mid", "after"]))
                    for _ in range(8)}, key=str)
    result = flagship(tmp_path, spark, concurrency=concurrency, window=window).run(EPOCHS, fail=fails)
    _consistent(result)
    assert_identical(spark, tmp_path, reference)


# -- the fast branch keeps going while the slow one recovers ------------------------------------------------------------
EVENTS = 12


def events(epoch: int) -> list[dict[str, Any]]:
    return [{"k": k, "v": epoch * 100 + k} for k in range(6)]


def fast(events: Any) -> Any:
    return events.select("k", "v")


def slow(events: Any, *, state: Any) -> Any:
    from pyspark.sql import functions as F

    time.sleep(0.4)  # a heavy step: every epoch costs it time
    now = events.groupBy("k").agg(F.sum("v").alias("v"))
    both = now if state is None else state.unionByName(now)
    new = both.groupBy("k").agg(F.sum("v").alias("v"))
    return new, new


def branches(root: Path, spark: Any, **options: Any) -> Pipeline:
    pipe = Pipeline(root, spark, fsync=False, **options)
    pipe.input("events", "k BIGINT, v BIGINT", source=events)
    pipe.step(fast, regime=Ephemeral())
    pipe.step(slow, regime=Lazy(every=4))
    pipe.output("quick", inputs=["fast"])
    pipe.output("totals", inputs=["slow"])
    return pipe


def test_the_fast_branch_commits_new_epochs_while_the_slow_one_recovers(spark: Any, tmp_path: Path) -> None:
    """slow fails at epoch 6 and restores its checkpoint at 3; while it redoes 4 and 5, quick commits epochs after
    6 — with concurrency; sequentially, quick waits. Both runs' outputs equal the failure-free run's."""
    from falkirk.spark import compare_runs

    def committed_during_recovery(result: Any) -> list[int]:
        (rec,) = result.journal.recoveries
        redo = [x for x in result.journal.executions if x.step == "slow" and x.redo]
        catch_up_end = max(x.started + x.seconds for x in redo)
        quick = [x for x in result.journal.executions if x.step == "quick" and not x.redo and x.epoch > 6]
        return [x.epoch for x in quick if x.started + x.seconds < catch_up_end]

    concurrent = branches(tmp_path / "concurrent", spark, concurrency=3, window=3)
    c = concurrent.run(EVENTS, fail="slow@6:mid")
    sequential = branches(tmp_path / "sequential", spark)
    s = sequential.run(EVENTS, fail="slow@6:mid")
    assert committed_during_recovery(c), "quick waited for slow's recovery"
    assert not committed_during_recovery(s)
    fresh = tmp_path / "fresh"
    branches(fresh, spark, durable=False).run(EVENTS)
    for pipe in (concurrent, sequential):
        cmp = compare_runs(spark, pipe, pipe.location, fresh)
        assert cmp.identical and cmp.rows_compared > 0, [d.describe() for d in cmp.differences]
    assert set(c.latency) == {"quick", "totals"} and len(c.latency["quick"].epochs) == EVENTS
