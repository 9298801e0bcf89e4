"""The pipelined schedule: concurrent epoch executions, a bounded window, failures drained before the plan."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from falkirk.errors import ValidationError
from falkirk.sim import (
    Batch,
    Commit,
    Eager,
    Ephemeral,
    Failure,
    Halve,
    HistoryLog,
    Lazy,
    Link,
    Map,
    Never,
    Node,
    Output,
    Policy,
    RunningTotal,
    SimGraph,
    Simulation,
    Source,
    Sum,
    check_run,
    reference_run,
)
from falkirk.sim.cases import Case, RandomChooser, build_case, check_case
from falkirk.sim.progress import Stamps
from falkirk.sim.schedule import last_epoch
from falkirk.testing.sim_strategies import assert_recovers, sim_cases


def _traced(graph: SimGraph, **options: Any) -> tuple[Simulation, list[str]]:
    """Run ``graph``; the trace also lists every execution started and finished."""
    sim = Simulation(graph, schedule="pipelined", trace=True, **options)
    orig = sim.execute

    def spy(action: tuple[Any, ...]) -> None:
        if action[0] in ("start", "finish"):
            sim.note(f"{action[0]} {action[1]} {action[2]}")
        orig(action)

    sim.execute = spy  # type: ignore[method-assign]
    return sim, sim.run().trace


# -- the switch --------------------------------------------------------------------------
def _chain(out: Commit | None = None) -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("m", Map(add=1), Lazy()), Node("out", Output(), out or Commit())],
        [Link("a", "src", "m"), Link("b", "m", "out")],
        inputs={"src": [[1], [2], [3]]},
    )


def test_sequential_is_the_default_and_options_are_checked() -> None:
    """Without a schedule the simulator runs one event per step; bad options are ValidationErrors."""
    assert Simulation(_chain()).pipeline is None
    assert Simulation(_chain(), schedule="pipelined", window=2).pipeline is not None
    with pytest.raises(ValidationError, match="schedule='parallel'"):
        Simulation(_chain(), schedule="parallel")
    with pytest.raises(ValidationError, match="window=0"):
        Simulation(_chain(), schedule="pipelined", window=0)


def test_a_cycle_through_two_processors_is_rejected() -> None:
    """An epoch per execution cannot run a loop through two processors; a processor's own feedback edge is fine."""
    g = SimGraph(
        [Node("src", Source(), Ephemeral()), Node("body", Halve(), Eager(), "loop"),
         Node("x", Map(), Eager(), "loop"), Node("after", Map(), Eager()), Node("out", Output(), Commit())],
        [Link("e0", "src", "body", "enter"), Link("e1", "body", "x", port="loop"), Link("e2", "x", "body", "feedback"),
         Link("e3", "body", "after", "leave"), Link("e4", "after", "out")],
        inputs={"src": [[4]]},
    )
    with pytest.raises(ValidationError, match="'body' and 'x' are on one cycle"):
        Simulation(g, schedule="pipelined")
    assert Simulation(g).run().output == reference_run(g).output


def test_epochs_run_in_order_one_execution_per_processor() -> None:
    """Executions: per processor one at a time, epochs increasing; different processors overlap."""
    sim, trace = _traced(_chain(), seed=3, window=3)
    running: dict[str, int] = {}
    done: dict[str, int] = {}
    overlap = False
    for line in trace:
        kind, name, epoch = line.split("] ")[1].split()
        if kind == "start":
            assert name not in running and int(epoch) > done.get(name, -1)
            overlap = overlap or bool(running)
            running[name] = int(epoch)
        else:
            done[name] = running.pop(name)
    assert overlap and done == {"src": 2, "m": 2, "out": 2}


def test_the_sequential_schedule_already_interleaves_epochs() -> None:
    """The default schedule already runs processors at different epochs and lets kept processors go on.

    It picks one event of any processor per step, so a source gets epochs
    ahead of its receivers (without bound), and after a plan the processors
    it keeps run later epochs while a rolled-back one catches up. What it
    does not do is plan after a drain: see the pipelined tests below.
    """
    g = _branches()
    ahead = overtaking = 0
    for seed in range(5):
        sim = Simulation(g, seed=seed, failures=[Failure(12, {"a"})])
        orig = sim.execute

        def spy(action: tuple[Any, ...], sim: Simulation = sim, orig: Any = orig) -> None:
            nonlocal ahead, overtaking
            a_done = min(last_epoch(sim.settled["a"]), g.epochs)
            ahead = max(ahead, (sim.procs["src"].next_read or 0) - 1 - int(a_done))
            if sim.rollbacks and action[:2] == ("msg", "b"):
                overtaking += sim.procs["b"].queues[action[2]][action[3]].time > a_done + 1
            orig(action)

        sim.execute = spy  # type: ignore[method-assign]
        assert sim.run().output == reference_run(g).output
    assert ahead >= 3 and overtaking > 0


# -- the window ----------------------------------------------------------------------------
@settings(max_examples=30)
@given(st.integers(0, 1000), st.integers(1, 3), st.booleans())
def test_window_bounds_the_lag_only_where_the_sender_does_not_log(seed: int, window: int, logged: bool) -> None:
    """A receiver lags a sender that does not log by at most the window; behind a logging one, by more."""
    g = SimGraph(
        [Node("src", Source(), Batch() if logged else Ephemeral()), Node("m", Map(), Lazy()),
         Node("out", Output(), Commit())],
        [Link("a", "src", "m"), Link("b", "m", "out")],
        inputs={"src": [[e] for e in range(8)]},
    )
    r = Simulation(g, seed=seed, schedule="pipelined", window=window).run()
    assert r.output == reference_run(g).output
    assert r.scheduled["max lag, not logged"] <= window
    if logged:
        assert r.scheduled["max lag, logged"] >= 1


def test_logging_senders_run_ahead_beyond_the_window() -> None:
    """Over a few seeds, a logging source gets more than the window ahead of its receiver, and a non-logging one never."""
    lags = {}
    for logged in (False, True):
        g = SimGraph(
            [Node("src", Source(), Batch() if logged else Ephemeral()), Node("m", Map(), Lazy()),
             Node("out", Output(), Commit())],
            [Link("a", "src", "m"), Link("b", "m", "out")],
            inputs={"src": [[e] for e in range(8)]},
        )
        runs = [Simulation(g, seed=s, schedule="pipelined", window=1).run().scheduled for s in range(10)]
        lags[logged] = max(r["max lag, logged" if logged else "max lag, not logged"] for r in runs)
    assert lags == {False: 1, True: lags[True]} and lags[True] > 1


# -- failures ------------------------------------------------------------------------------
def test_failure_detected_while_an_execution_is_in_flight() -> None:
    """src → m → out, window 2: m fails while src runs epoch 1; src finishes it, then one plan.

    m had epoch 0 queued when it failed. Until the plan, that lost work
    still blocks epoch 0 downstream, so ``out`` cannot commit it empty;
    the plan restarts ``m`` (no checkpoint yet), ``src`` re-reads, and
    the output is the failure-free one.
    """
    sim, trace = _traced(_chain(Commit(final=True)), seed=0, window=2, failures=[Failure(3, {"m"})])
    assert trace[:5] == [
        "[step 0] start src 0",
        "[step 1] finish src 0",
        "[step 2] start src 1",
        "[step 3] finish src 1",  # in flight when the failure was detected: it finishes
        "[step 3] fail ['m'] -> src: rollback empty, m: restart empty, out: keep top",
    ]
    assert sim.outputs["out"].acknowledged == {0: (2,), 1: (3,), 2: (4,)}
    assert sim.pipeline is not None and sim.pipeline.stats["drained"] == 1


@pytest.mark.parametrize("final", [True, False])
def test_lost_work_must_block_completeness_during_the_drain(final: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the failed processor's pointstamps, ``out`` commits epoch 0 empty during the drain.

    A plain output is then rolled back and rewrites epoch 0, so the bug is
    masked; a final output keeps the empty epoch and discards the re-sent
    record. Committed-is-final relies on commits being taken only at times
    that are really complete.
    """
    orig = Simulation.stamps

    def forgetful(self: Simulation) -> dict[str, Stamps]:
        saved, self.failing = self.failing, {n: Stamps() for n in self.failing}
        try:
            return orig(self)
        finally:
            self.failing = saved

    monkeypatch.setattr(Simulation, "stamps", forgetful)
    verdict = check_run(_chain(Commit(final=final)), [Failure(3, {"m"})], seed=0, schedule="pipelined", window=2)
    if final:
        assert not verdict.ok and "out at time 0: got [], expected [2]" in verdict.problem
    else:
        assert verdict.ok


def _branches() -> SimGraph:
    """src (logs everything) feeds two independent sums, each with its output."""
    return SimGraph(
        [Node("src", Source(), Batch()), Node("a", Sum(), Lazy(every=3)), Node("b", Sum(), Lazy()),
         Node("out_a", Output(), Commit(final=True)), Node("out_b", Output(), Commit())],
        [Link("e1", "src", "a"), Link("e2", "src", "b"), Link("e3", "a", "out_a"), Link("e4", "b", "out_b")],
        inputs={"src": [[e, e + 1] for e in range(8)]},
    )


def test_processors_the_plan_keeps_go_on_while_the_others_catch_up() -> None:
    """a fails; src (it logs) and the b branch keep ⊤ and start new epochs before a has caught up."""
    g = _branches()
    ref = reference_run(g)
    overtook = 0
    for seed in range(6):
        r = Simulation(g, seed=seed, schedule="pipelined", window=1, failures=[Failure(12, {"a"})], trace=True).run()
        assert r.output == ref.output, seed
        assert "src: keep top" in r.trace[0] and "b: keep top" in r.trace[0] and "out_b: keep top" in r.trace[0]
        overtook += r.scheduled["overtook"]
    assert overtook > 0


def test_a_plan_that_touches_nothing_in_flight_is_applied_at_once() -> None:
    """a fails while src or the b branch has an execution in flight: the plan rolls back only a (src logs), so it
    is applied at once, the executions in flight finishing after it; the output is the failure-free one. A plan
    that touches a processor in flight waits for it (the chain: m's failure rolls src back)."""
    g = _branches()
    ref = reference_run(g)
    apart = 0
    for seed in range(10):
        for step in (5, 9, 12):
            r = Simulation(g, seed=seed, schedule="pipelined", window=1, failures=[Failure(step, {"a"})]).run()
            assert r.output == ref.output, (seed, step)
            apart += r.scheduled["apart"]
    assert apart > 0
    sim, _ = _traced(_chain(Commit(final=True)), seed=0, window=2, failures=[Failure(3, {"m"})])
    assert sim.pipeline is not None and sim.pipeline.stats["apart"] == 0 and sim.pipeline.stats["drained"] == 1


def test_generated_pipelined_runs_cover_the_executor() -> None:
    """Random pipelined cases recover, and among them: failures detected with work in flight, failures
    joining a drain, kept processors overtaking rolled-back ones, plans applied with work in flight (apart),
    binding windows, logged edges lagging more."""
    seen = {"drained": 0, "joined": 0, "overtook": 0, "apart": 0, "window reached": 0, "beyond window, logged": 0}
    for i in range(60):
        case = build_case(RandomChooser(30_000 + i), max_failures=4, max_step=30, schedule="pipelined")
        verdict = check_case(case)
        assert verdict.ok and verdict.result is not None, f"{verdict.problem}\n{case.describe()}"
        s = verdict.result.scheduled
        assert s["max lag, not logged"] <= case.window
        for key in ("drained", "joined", "overtook", "apart"):
            seen[key] += s[key] > 0
        seen["window reached"] += s["max lag, not logged"] == case.window
        seen["beyond window, logged"] += s["max lag, logged"] > case.window
    assert all(seen.values()), seen


@settings(max_examples=max(20, settings.default.max_examples // 2))
@given(sim_cases(schedule="pipelined", max_failures=4, max_step=30))
def test_every_generated_case_recovers_under_the_pipelined_schedule(case: Case) -> None:
    """Any graph, policy mix, window and failures: the pipelined run's output is the failure-free one, and
    no final output changes what it committed (the oracle checks both)."""
    verdict = check_case(case)
    assert verdict.ok, f"{verdict.problem}\n{case.describe()}"


# -- every policy --------------------------------------------------------------------------
POLICIES: list[Policy] = [
    Ephemeral(), Batch(), Lazy(every=2), Lazy(logs="*"), Eager(), HistoryLog(every=2), Never(), Never(logs="*"),
]


def _policy_graph(policy: Policy) -> SimGraph:
    """src → m (Map) → t (RunningTotal) → out (final); src, m → s (Sum) → out2: ``policy`` wherever it fits."""
    stateless = policy.stateless
    return SimGraph(
        [Node("src", Source(), policy if stateless else Ephemeral()), Node("m", Map(mul=2), policy),
         Node("t", RunningTotal(), Lazy(every=2) if stateless else policy),
         Node("s", Sum(), Eager(logs="*") if stateless else policy),
         Node("out", Output(), Commit(final=True)), Node("out2", Output(), Commit(every=2))],
        [Link("a", "src", "m"), Link("b", "m", "t"), Link("c", "src", "s"), Link("d", "m", "s"),
         Link("e", "t", "out"), Link("f", "s", "out2")],
        inputs={"src": [[1, 2], [3], [4, 5]]},
    )


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.describe())
def test_every_policy_recovers_under_the_pipelined_schedule(policy: Policy) -> None:
    """For each policy: any failures, seed and window 1..3 under the pipelined schedule give the failure-free output."""
    assert_recovers(
        _policy_graph, [policy], schedule="pipelined", max_failures=3, max_step=40,
        settings=settings(max_examples=max(8, settings.default.max_examples // 12)),
    )
