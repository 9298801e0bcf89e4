"""DBSP's three approaches (seed 003) as schemes: fuzzing, the input-log invariant, deltas, coordinated commits."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.domains import Epoch, Frontier
from falkirk.errors import ValidationError
from falkirk.sim import (
    Buffer,
    Eager,
    Failure,
    Halve,
    Link,
    Map,
    Node,
    Output,
    RunningTotal,
    Scan,
    SimGraph,
    Simulation,
    Source,
    Sum,
    check_run,
)
from falkirk.sim.cases import RandomChooser, build_case
from falkirk.sim.operators import apply_state_delta, state_delta
from falkirk.sim.policies import Never, Policy
from falkirk.sim.recovery import fail_and_recover
from falkirk.sim.schemes import SCHEMES
from falkirk.sim.schemes.dbsp import (
    DBSP_CHECKPOINT_DELTA,
    DBSP_INPUT_LOG,
    DBSP_PERSISTENT,
    InputLog,
    InputLogInvariantViolated,
    SnapshotDelta,
    StepCommit,
    Transactional,
    commit_steps,
    rebuild,
)
from falkirk.sim.state import History, Record, Store
from falkirk.testing.fuzz import fuzz

CASES = int(os.environ.get("FALKIRK_SCHEME_CASES", "2000" if os.environ.get("CI") else "200"))
BATCHES = [[1, 2], [3], [4, 5, 6], [7], [8, 9]]


def pipeline(mid: Policy, *, src: Policy | None = None, out: Policy | None = None, op: Any = None) -> SimGraph:
    """``src → map → op (default Sum) → out`` with ``mid`` on the two middle processors."""
    return SimGraph(
        [Node("src", Source(), src or InputLog()), Node("map", Map(mul=2), mid),
         Node("agg", op if op is not None else Sum(), mid), Node("out", Output(), out or StepCommit())],
        [Link("e1", "src", "map"), Link("e2", "map", "agg"), Link("e3", "agg", "out")],
        inputs={"src": BATCHES},
    )


@pytest.mark.slow
@pytest.mark.parametrize("scheme", [DBSP_INPUT_LOG, DBSP_CHECKPOINT_DELTA, DBSP_PERSISTENT], ids=lambda s: s.name)
def test_dbsp_scheme_passes_the_fuzzer(scheme: Any) -> None:
    """CASES random graphs and failure schedules (2,000 in CI) recover with 0 divergences under the scheme."""
    report = fuzz(CASES, seed=31, scheme=scheme, quiet=True)
    assert report.cases == CASES
    assert report.divergent == [], report.problem


def test_schemes_are_registered_with_their_policies() -> None:
    """The three schemes are selectable by name and give sources, outputs and operators their DBSP policies."""
    expected = {
        "dbsp-input-log": {"Never"},
        "dbsp-checkpoint-delta": {"SnapshotDelta"},
        "dbsp-persistent": {"Transactional"},
    }
    for name, middle in expected.items():
        kinds = set()
        for i in range(20):
            case = build_case(RandomChooser(i), scheme=SCHEMES[name])
            for n in case.graph.nodes.values():
                kinds.add(type(n.policy).__name__)
                assert isinstance(n.policy, InputLog) == isinstance(n.op, Source)
                assert isinstance(n.policy, StepCommit) == isinstance(n.op, Output)
        assert kinds == {"InputLog", "StepCommit"} | middle


# -- input logging ----------------------------------------------------------------------------
def test_input_logging_replays_everything_from_the_start() -> None:
    """A failed operator sends every processor back to ∅; input is never acknowledged, output never released."""
    sim = Simulation(pipeline(Never()), seed=1)
    want = sim.run().output
    plan = fail_and_recover(sim, {"agg"})
    assert all(f.is_empty for f in plan.frontiers.values())
    assert plan.actions == {"src": "rollback", "map": "rollback", "agg": "restart", "out": "rollback"}
    assert sim.inputs["src"].acked == set()
    assert sim.outputs["out"].released_records == {}
    assert sim.run().output == want


def test_input_logging_checkpoints_nothing_but_the_input_steps() -> None:
    """Under input logging only sources (input-step log) and outputs persist; F(p) = {∅} elsewhere."""
    sim = Simulation(pipeline(Never()), seed=2, measure=True)
    result = sim.run()
    assert result.checkpoint_bytes == 0
    assert sim.procs["map"].store.records == [] and sim.procs["agg"].store.records == []
    assert sim.procs["src"].store.reported == Epoch().frontier(len(BATCHES) - 1)
    assert result.log_bytes_end > 0  # the whole input is retained


def test_outputs_commit_only_after_the_input_step_is_logged() -> None:
    """With a lagging input-step log, StepCommit waits for it: every commit finds the log durable."""
    commits: list[tuple[Frontier, Frontier]] = []

    class Watch(StepCommit):
        def persist_points(self, sim: Any, proc: Any, settled: Frontier) -> list[Frontier]:
            points = super().persist_points(sim, proc, settled)
            commits.append((settled, sim.procs["src"].store.reported))
            return points

    g = pipeline(Never(), src=InputLog(every=3), out=Watch())
    verdict = check_run(g, [], seed=4)
    assert verdict.ok, verdict.problem
    assert commits and all(c <= logged for c, logged in commits)


def test_breaking_the_input_log_invariant_is_caught() -> None:
    """StepCommit(wait=False) with a lagging input-step log commits too early, and the check catches it."""
    g = pipeline(Never(), src=InputLog(every=3), out=StepCommit(wait=False))
    with pytest.raises(InputLogInvariantViolated, match="input-step"):
        Simulation(g, seed=4).run()
    verdict = check_run(g, [], seed=4)
    assert not verdict.ok and "InputLogInvariantViolated" in verdict.problem
    assert StepCommit(wait=False).describe() == "StepCommit(wait=False)"


# -- the delta API --------------------------------------------------------------------------
states = st.dictionaries(st.integers(0, 5), st.one_of(st.integers(-3, 3), st.lists(st.integers(0, 3), max_size=3)))


@given(states, states)
def test_a_delta_turns_its_base_into_the_new_state(base: dict[int, Any], new: dict[int, Any]) -> None:
    """apply_state_delta(a, state_delta(a, b)) == b, and neither snapshot is modified."""
    a, b = dict(base), dict(new)
    delta = state_delta(a, b)
    assert apply_state_delta(a, delta) == b
    assert (a, b) == (base, new)
    assert apply_state_delta(None, state_delta(None, b)) == b


def test_operators_report_and_apply_deltas() -> None:
    """The Operator API: get_delta from a snapshot, apply_delta back, for dict and custom states."""
    f2, f9 = Epoch().frontier(2), Epoch().frontier(9)
    op = Sum()
    op.parts = {0: 1, 1: 2}
    base = op.get_state(f2)
    op.parts = {1: 5, 2: 3, 3: 8}
    delta = op.get_delta(base, f2)
    assert delta == ("patch", {1: 5, 2: 3}, (0,))
    assert op.apply_delta(base, delta) == op.get_state(f2)
    total = RunningTotal()
    total.total, total.folded = 4, [0, 1]
    snap = total.get_state(f9)
    assert total.get_delta(None, f9)[0] == "replace"
    assert total.apply_delta(None, total.get_delta(None, f9)) == snap
    scan = Scan()
    scan.total = 7
    assert scan.apply_delta(3, scan.get_delta(3, f9)) == 7


def test_deltas_apply_from_the_latest_or_an_older_snapshot() -> None:
    """Every record rebuilds to the same state from the latest snapshot, any older kept one, or ∅."""
    policy = SnapshotDelta(snapshot_every=2, keep_snapshots=2)
    op, store = Buffer(), Store()
    for k in range(9):
        op.parts.setdefault(k % 4, []).append(k)
        if k % 3 == 2:
            op.parts.pop(min(op.parts))
        f = Epoch().frontier(k)
        entry = policy.save_state(op, store, f)
        store.records.append(Record(f, entry, History()))
        want = op.get_state(f)
        assert policy.load_state(op, store.records[-1]) == want
        assert [rebuild(op, entry, older=n) for n in range(5)] == [want] * 5
    assert sum(r.state.has_snapshot for r in store.records) >= 4
    assert any(not r.state.has_snapshot for r in store.records)


def test_deltas_write_less_than_snapshots() -> None:
    """On a growing state, snapshot + deltas write fewer bytes than a snapshot at every checkpoint."""
    batches = [[k, k + 1, k + 2] for k in range(12)]

    def written(policy: Policy) -> int:
        g = SimGraph([Node("src", Source(), InputLog()), Node("buf", Buffer(), policy), Node("out", Output(), StepCommit())],
                     [Link("e1", "src", "buf"), Link("e2", "buf", "out")], inputs={"src": batches})
        return Simulation(g, seed=3, measure=True).run().checkpoint_bytes

    assert 0 < written(SnapshotDelta(snapshot_every=6)) < written(Eager())


def test_snapshot_delta_recovers_through_deltas() -> None:
    """A processor restored from snapshot + deltas produces the failure-free output."""
    g = pipeline(SnapshotDelta(snapshot_every=3), op=RunningTotal())
    for step in (8, 15, 22, 30):
        verdict = check_run(g, [Failure(step, {"agg"}), Failure(step + 4, {"map", "out"})], seed=step)
        assert verdict.ok, verdict.problem


def test_policy_options_are_validated() -> None:
    """Counts below 1 are rejected with the field named; describe() shows non-default options."""
    with pytest.raises(ValidationError, match="snapshot_every"):
        SnapshotDelta(snapshot_every=0)
    with pytest.raises(ValidationError, match="period"):
        Transactional(period=0)
    assert SnapshotDelta(every=2, snapshot_every=3).describe() == "SnapshotDelta(every=2, snapshot_every=3)"
    assert Transactional().describe() == "Transactional()"


# -- persistent state -----------------------------------------------------------------------
def test_persistent_state_commits_the_same_steps_everywhere() -> None:
    """Every Transactional processor commits exactly the coordinated steps (every period-th and the last)."""
    sim = Simulation(pipeline(Transactional(period=2), op=RunningTotal()), seed=5, gc_every=0)
    sim.run()
    steps = [Epoch().frontier(k) for k in commit_steps(len(BATCHES), 2)]
    assert steps == [Epoch().frontier(k) for k in (1, 3, 4)]
    for name in ("map", "agg"):
        assert [r.frontier for r in sim.procs[name].store.records] == steps


def test_persistent_state_reruns_nothing_after_the_last_commit() -> None:
    """After the run, a failed processor reopens its committed version: no event is executed again."""
    sim = Simulation(pipeline(Transactional()), seed=6, measure=True)
    want = sim.run()
    plan = fail_and_recover(sim, {"agg", "map"})
    assert plan.actions["agg"] == plan.actions["map"] == "restore"
    again = sim.run()
    assert again.output == want.output
    assert again.events == want.events and again.replayed == 0


def test_persistent_state_in_loops_commits_whole_steps() -> None:
    """A stateful processor inside a loop commits every iteration of a step at once, and recovers."""
    g = SimGraph(
        [Node("src", Source(), InputLog()), Node("body", Halve(), Transactional(), "loop"),
         Node("inner", Sum(), Transactional(), "loop"), Node("after", Map(), Transactional()),
         Node("out", Output(), StepCommit())],
        [Link("a", "src", "body", "enter"), Link("fb", "body", "body", "feedback", "loop"),
         Link("b", "body", "inner"), Link("c", "inner", "after", "leave"), Link("d", "after", "out")],
        inputs={"src": [[9, 4], [7], [16]]},
    )
    sim = Simulation(g, seed=2, gc_every=0)
    sim.run()
    loop = sim.procs["inner"].domain
    assert [r.frontier for r in sim.procs["inner"].store.records] == [
        Frontier.before(loop, [(k + 1, 0)]) for k in range(3)
    ]
    for step in (5, 12, 20):
        assert check_run(g, [Failure(step, {"inner", "body"})], seed=step).ok
