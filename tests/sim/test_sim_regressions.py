"""Named regression tests: bugs users hit in peer systems, replayed in the simulator.

Each scenario is run for every failure step of a short run (exhaustively, not
by sampling), and the test also checks that the interesting situation really
happened for some step, so a scenario cannot silently stop testing anything.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from falkirk.sim import (
    Batch,
    Buffer,
    Chooser,
    Commit,
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
    ProtocolViolation,
    Salt,
    SimGraph,
    Simulation,
    SolverPlanner,
    Source,
    Sum,
    WrongLog,
    check_run,
    recovery,
    reference_run,
)
from falkirk.solver import Checkpoint, Dataflow, Processor


def _plans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, set[str], dict[str, int]]]:
    """Record (plan, failed, queue lengths of the failed before they were lost) of every failure."""
    seen: list[tuple[Any, set[str], dict[str, int]]] = []
    orig = recovery.fail_and_recover

    def spy(sim: Simulation, names: Any) -> Any:
        queued = {n: sum(len(q) for q in sim.procs[n].queues.values()) for n in names}
        plan = orig(sim, names)
        seen.append((plan, set(names), queued))
        return plan

    monkeypatch.setattr(recovery, "fail_and_recover", spy)
    return seen


def _steps(graph: SimGraph, seed: int = 0) -> int:
    return reference_run(graph, seed=seed).steps


# -- failure during recovery (Flink FLIP-547, Feldera #4567) --------------------------
def _firewall() -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("sum", Sum(), Lazy(logs=["e2"])),
         Node("buf", Buffer(), Lazy(every=2)), Node("out", Output(), Commit())],
        [Link("e1", "src", "sum"), Link("e2", "sum", "buf"), Link("e3", "buf", "out")],
        inputs={"src": [[1, 2], [3], [4, 5], [6]]},
    )


def test_failure_during_recovery(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second and third failure while the first recovery is still replaying/re-executing."""
    plans = _plans(monkeypatch)
    g = _firewall()
    for k in range(_steps(g) + 1):
        fs = [Failure(k, {"buf"}), Failure(k + 1, {"buf", "sum"}), Failure(k + 2, {"out"})]
        verdict = check_run(g, fs, seed=k)
        assert verdict.ok, (k, verdict.problem)
    # buf failed again while its queue held messages replayed from sum's log
    assert any(failed == {"buf", "sum"} and queued["buf"] > 0 for _, failed, queued in plans)


# -- crash before the first checkpoint / in the first epoch (Bytewax #181) ----------------
@pytest.mark.parametrize("who", ["src", "sum", "buf", "out", "all"])
def test_crash_before_first_checkpoint(who: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failing at any step of the first epoch, before anything is persisted, restarts from ∅."""
    plans = _plans(monkeypatch)
    g = _firewall()
    names = set(g.nodes) if who == "all" else {who}
    for k in range(8):
        verdict = check_run(g, [Failure(k, names)], seed=k)
        assert verdict.ok, (k, verdict.problem)
    assert any(plan.actions[n] == "restart" for plan, failed, _ in plans for n in failed)


# -- state and timers inside a loop (Feldera #6765, Bytewax #138) -----------------------------
def _loop(policy: Any) -> SimGraph:
    """The loop body logs its feedback edge, so the Sum inside can restore mid-loop."""
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("body", Halve(), Batch(), "loop"),
         Node("inner", Sum(), policy, "loop"), Node("out", Output(), Commit())],
        [Link("e0", "src", "body", "enter"), Link("fb", "body", "body", "feedback", "loop"),
         Link("e1", "body", "inner"), Link("e2", "inner", "out", "leave")],
        inputs={"src": [[5, 3], [8], [1, 6]]},
    )


@pytest.mark.parametrize(
    "policy", [Lazy(logs=["e2"]), Lazy(every=3), HistoryLog(logs=["e2"]), Never()], ids=lambda p: p.describe()
)
def test_state_and_timers_inside_a_loop(policy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Sum keeping state and notifications per (epoch, iteration) recovers from any failure."""
    g = _loop(policy)
    ref = reference_run(g)
    # the Sum inside the loop fired timers at later iterations: one output per (epoch, i)
    assert ref.output["out"][0] == (1, 3, 8)  # 5+3 at i=0, 2+1 at i=1, 1 at i=2
    plans = _plans(monkeypatch)
    for k in range(ref.steps + 1):
        names = ({"inner"}, {"body"}, {"inner", "body"})[k % 3]
        verdict = check_run(g, [Failure(k, names), Failure(k + 4, {"inner"})], seed=k, reference=ref)
        assert verdict.ok, (k, names, verdict.problem)
    if policy.logs:  # (without logging e2, leaving the loop mid-epoch forces out, hence inner, back)
        restored = {str(plan.frontiers["inner"]) for plan, _, _ in plans if plan.actions["inner"] == "restore"}
        # restored to a loop frontier that cuts epoch 0 part-way through its iterations
        assert any("before=[(0, " in f for f in restored), restored


def test_loop_notification_waits_for_the_feedback_edge() -> None:
    """A notification at (e, i) inside the loop comes only when no iteration ≤ i is pending."""
    sim = Simulation(_loop(Lazy()), seed=3)
    seen: list[Any] = []
    orig = Sum.on_notify

    def spy(self: Sum, ctx: Any) -> None:
        seen.append((ctx.time, sorted(m.time for q in sim.procs["body"].queues.values() for m in q)))
        orig(self, ctx)

    Sum.on_notify = spy  # type: ignore[method-assign]
    try:
        sim.run()
    finally:
        Sum.on_notify = orig  # type: ignore[method-assign]
    assert seen
    for t, pending in seen:
        assert all(not (p[0] <= t[0] and p[1] <= t[1]) for p in pending), (t, pending)


# -- a non-deterministic operator re-executed after rollback (SPARK-25341) -------------------
def _salted(policy: Any) -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("salt", Salt(), policy),
         Node("sum", Sum(), Lazy(every=2)), Node("out", Output(), Commit())],
        [Link("a", "src", "salt"), Link("b", "salt", "sum"), Link("c", "sum", "out")],
        inputs={"src": [[1, 2], [3], [4]]},
    )


def test_nondeterministic_operator_reexecuted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-running Salt draws new salts: whatever consumed the old ones must roll back."""
    plans = _plans(monkeypatch)
    g = _salted(Ephemeral(every=2))
    for k in range(_steps(g) + 2):
        verdict = check_run(g, [Failure(k, {"salt"})], seed=k)
        assert verdict.ok, (k, verdict.problem)
    rolled = [p for p, failed, _ in plans if failed == {"salt"} and p.actions["sum"] in ("rollback", "restore")]
    assert rolled, "no schedule made sum roll back after salt re-executed"


def test_nondeterministic_operator_with_a_false_logging_claim_is_caught() -> None:
    """The same graph where Salt claims to log its output but does not: the oracle objects."""
    g = _salted(WrongLog(claims=["b"]))
    problems = [check_run(g, [Failure(k, {"sum"})], seed=k).problem for k in range(_steps(g) + 2)]
    assert any("differs" in p for p in problems)


# -- the notification example of SPEC §4 (paper Figure 5) -------------------------------------
def _figure5() -> SimGraph:
    """p chooses on its notification whether to send on to r; s also hears from q.

    The source logs its output (a firewall), so p's restart does not roll q back;
    s checkpoints rarely, so it is often notified of a time it has no checkpoint for.
    """
    return SimGraph(
        [Node("src", Source(), Batch()), Node("p", Chooser(), Never()),
         Node("r", Map(), Lazy()), Node("q", Map(), Ephemeral()),
         Node("s", Sum(), Lazy(every=3)), Node("out", Output(), Commit())],
        [Link("a", "src", "p"), Link("b", "p", "r"), Link("c", "src", "q"),
         Link("d", "r", "s"), Link("e", "q", "s"), Link("f", "s", "out")],
        inputs={"src": [[1], [2]]},
    )


class _NoNotifications(SolverPlanner):
    """A planner that forgets notifications (C4 cannot act): the bug SPEC §4's example shows."""

    def _dataflow(self, live: Any) -> Dataflow:
        def strip(c: Checkpoint | None) -> Checkpoint | None:
            return None if c is None else attrs.evolve(c, notifications=None)

        procs = [
            Processor(**{**self.decls[n], "notifications": False},
                      checkpoints=[strip(c) for c in self.checkpoints[n]], live=strip(live.get(n)))
            for n in self.graph.nodes
        ]
        return Dataflow(procs, self.edges)


def test_spec_notification_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """s was notified of t and got nothing from p's branch; when p re-runs t, C4 rolls s back."""
    plans = _plans(monkeypatch)
    g = _figure5()
    n = _steps(g) + 2
    for k in range(n):
        for seed in range(4):
            verdict = check_run(g, [Failure(k, {"p"})], seed=seed)
            assert verdict.ok, (k, seed, verdict.problem)
    by_c4 = [
        plan for plan, _, _ in plans
        if any(r.constraint == "C4" for r in plan.reasons["s"]) and plan.actions["s"] != "keep"
    ]
    assert by_c4, "no schedule needed C4 to roll s back"


def test_spec_notification_example_without_c4_goes_wrong() -> None:
    """Without notification frontiers some schedule delivers a message after its notification."""
    g = _figure5()
    problems = []
    for k in range(_steps(g) + 2):
        for seed in range(4):
            try:
                Simulation(g, seed=seed, failures=[Failure(k, {"p"})], planner=_NoNotifications(g)).run()
            except ProtocolViolation as exc:
                problems.append(str(exc))
    assert any("already notified" in p or "claiming that time complete" in p for p in problems)


# -- a checkpoint that relied on a time a non-deterministic sender re-runs -----------------------
def _stale() -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Batch()), Node("p", Chooser(), Never()),
         Node("r", Sum(), Lazy()), Node("out", Output(), Commit())],
        [Link("a", "src", "p"), Link("b", "p", "r"), Link("c", "r", "out")],
        inputs={"src": [[1], [2]]},
    )


def test_checkpoint_downstream_of_a_choice_stays_valid() -> None:
    """r checkpointed epochs p sent nothing in; p's re-run may now send there, so r rolls back (C4)."""
    g = _stale()
    for k in range(_steps(g) + 2):
        for seed in range(8):
            verdict = check_run(g, [Failure(k, {"p"})], seed=seed)
            assert verdict.ok, (k, seed, verdict.problem)


def test_without_that_rule_the_checkpoint_goes_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reporting only real notifications lets r keep a checkpoint a new message then lands in."""
    monkeypatch.setattr(SimGraph, "_after_choices", lambda self: frozenset())
    g = _stale()
    problems = []
    for k in range(_steps(g) + 2):
        for seed in range(8):
            try:
                Simulation(g, seed=seed, failures=[Failure(k, {"p"})]).run()
            except ProtocolViolation as exc:
                problems.append(str(exc))
    assert any("claiming that time complete" in p for p in problems)
