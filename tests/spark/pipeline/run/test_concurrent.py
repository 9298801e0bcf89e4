"""Concurrent runs (``Pipeline(concurrency=N)``) recover exactly like sequential ones, and keep going meanwhile.

* The flagship with three executions at a time, every kind of injected failure at every step (before, mid-step,
  between epochs) in one run: output identical to the failure-free reference, every plan satisfies C1–C4, and
  executions really overlapped.
* Seeded random failure schedules at several concurrencies and windows: identical output each time.
* Two branches from a logged input, the slow one failing: while it catches up from its checkpoint, the fast
  branch's output goes on committing new epochs (it does not wait for the recovery).
* A failure retried in place, or rolled back by a plan that touches no step in flight, is recovered from without
  waiting for the executions in flight: an input waiting for its data is released by the failed step's next
  execution.
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


def _named(result: Any) -> None:
    """Every injected failure that fired is named in a recovery's cause, also where one recovery merged several
    (executions that failed at the same time)."""
    causes = [r.cause for r in result.journal.recoveries]
    for i in result.fired:
        if i.where == "after":
            assert any(f"{i.step}" in c and f"after epoch {i.epoch}: injected failure (after)" in c
                       for c in causes), (str(i), causes)
        else:
            assert any(f"step {i.step} failed at epoch {i.epoch}: injected failure ({i.where})" in c
                       for c in causes), (str(i), causes)


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
    _named(result)
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
    _named(result)
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


def _waiting_input_pipeline(
    root: Path, spark: Any, *, fail: bool, retry_in_place: bool = True
) -> tuple[Any, dict[str, Any]]:
    """``src → p → out``, three executions at a time. With ``fail``: ``p`` raises a ``ConnectionError`` at epoch 1
    once ``src``'s epoch 2 has begun, and ``src``'s epoch 2 waits for its data — released by ``p``'s next execution
    of epoch 1 (or, after 30 s, by itself)."""
    import threading

    seen: dict[str, Any] = {"src2": threading.Event(), "retried": threading.Event(), "overlapped": None,
                            "timed_out": False, "calls": []}

    def source(epoch: int) -> list[dict[str, int]]:
        if fail and epoch == 2:
            seen["src2"].set()
            seen["timed_out"] = not seen["retried"].wait(30)
        return [{"k": i, "e": epoch} for i in range(20)]

    def p(src: Any, *, epoch: int) -> Any:
        seen["calls"].append(epoch)
        if fail and epoch == 1:
            if seen["calls"].count(1) == 1:
                seen["overlapped"] = seen["src2"].wait(30)
                raise ConnectionError("connection reset by peer (p, epoch 1)")
            seen["retried"].set()
        return src.where("k % 3 != 0")

    pipe = Pipeline(root, spark, fsync=False, concurrency=3, retry_in_place=retry_in_place)
    pipe.input("src", "k BIGINT, e BIGINT", partitions=2, source=source)
    pipe.step(p, inputs=["src"], regime=Ephemeral())
    pipe.output("out", inputs=["p"])
    return pipe, seen


def test_a_concurrent_run_retries_in_place_without_waiting_for_the_executions_in_flight(
    spark: Any, tmp_path: Path
) -> None:
    """A retry in place rolls nothing back, so a concurrent run does not wait for its other executions first: here
    the input's next epoch, waiting for its data, is released by ``p``'s retry, not by its own time-out (before,
    the run waited for it). The output equals the failure-free run's, row for row."""
    pipe, seen = _waiting_input_pipeline(tmp_path / "run", spark, fail=True)
    result = pipe.run(4)
    assert seen["overlapped"] is True  # src@2 was in flight when p@1 failed
    assert seen["timed_out"] is False  # ... and p@1 ran again before it ended
    assert seen["calls"].count(1) == 2
    (rec,) = result.journal.recoveries
    assert rec.in_place == ("p", 1) and rec.failed == ()
    assert not [x for x in result.journal.executions if x.recovery == rec.index]  # nothing computed again
    _same_as_failure_free(spark, tmp_path)


def _same_as_failure_free(spark: Any, tmp_path: Path) -> None:
    """The output under ``tmp_path / "run"`` equals the failure-free run's, row for row (made here)."""
    ref, _ = _waiting_input_pipeline(tmp_path / "reference", spark, fail=False)
    ref.run(4)

    def rows(root: Path) -> list[Any]:
        return sorted(spark.read.parquet(str(root / "output" / "out")).collect())

    assert rows(tmp_path / "run") == rows(tmp_path / "reference")
    assert len(rows(tmp_path / "run")) == 4 * 13


def test_a_concurrent_rollback_that_touches_nothing_in_flight_does_not_wait_for_it(
    spark: Any, tmp_path: Path
) -> None:
    """With ``retry_in_place=False`` p's failure is rolled back; its plan touches only p and the output (the input
    logs, so it keeps ⊤), not the input's epoch in flight, so the recovery does not wait for it either: the
    input is released by p's next execution. The output equals the failure-free run's, row for row."""
    pipe, seen = _waiting_input_pipeline(tmp_path / "run", spark, fail=True, retry_in_place=False)
    result = pipe.run(4)
    assert seen["overlapped"] is True and seen["timed_out"] is False
    (rec,) = result.journal.recoveries
    assert rec.in_place is None and rec.failed == ("p",), rec.cause
    assert rec.plan.frontiers["src"].is_top and not rec.plan.frontiers["p"].is_top
    _consistent(result)
    _same_as_failure_free(spark, tmp_path)
