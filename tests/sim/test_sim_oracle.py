"""The oracle, garbage collection, and the loud failures the simulator raises."""

from __future__ import annotations

from typing import Any

import pytest

from falkirk.domains import Epoch, Frontier
from falkirk.sim import (
    Batch,
    CollectedStateNeeded,
    Commit,
    Ephemeral,
    Failure,
    Lazy,
    Link,
    Map,
    Node,
    Output,
    ReleasedOutputChanged,
    SimGraph,
    Simulation,
    SolverPlanner,
    Source,
    Sum,
    WrongLog,
    check_run,
    reference_run,
)
from falkirk.sim.cases import RandomChooser, build_case, check_case
from falkirk.sim.external import ExternalInput, ExternalOutput
from falkirk.sim.oracle import compare_outputs

E = Epoch()


def _graph(middle: Any) -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("m", Map(add=1), middle),
         Node("sum", Sum(), Lazy(every=2)), Node("out", Output(), Commit())],
        [Link("a", "src", "m"), Link("b", "m", "sum"), Link("c", "sum", "out")],
        inputs={"src": [[1, 2], [3], [4, 5]]},
    )


def test_correct_policies_pass() -> None:
    """Ephemeral and Batch middles recover from a failure at every step."""
    for policy in (Ephemeral(), Batch(), Lazy(logs=["b"])):
        g = _graph(policy)
        ref = reference_run(g)
        for k in range(ref.steps + 1):
            verdict = check_run(g, [Failure(k, {"sum"})], seed=k, reference=ref)
            assert verdict.ok, (policy, k, verdict.problem)


def test_wrong_logging_claim_is_caught_readably() -> None:
    """Claiming to log an edge that is not logged loses messages; the oracle says which."""
    g = _graph(WrongLog(claims=["b"]))
    verdicts = [check_run(g, [Failure(k, {"sum"})], seed=k) for k in range(20)]
    bad = [v for v in verdicts if not v.ok]
    assert bad
    assert "output differs from the failure-free run" in bad[0].problem
    assert "out at time" in bad[0].problem and "expected" in bad[0].problem


def test_compare_outputs() -> None:
    """compare_outputs lists each time whose records differ."""
    got = {"o": {0: (1,), 1: (2,)}}
    want = {"o": {0: (1,), 2: (3,)}}
    assert compare_outputs(got, want) == [
        "o at time 1: got [2], expected []",
        "o at time 2: got [], expected [3]",
    ]


def test_released_output_never_changes() -> None:
    """Re-acknowledging a released time with other records, or retracting it, is loud."""
    out = ExternalOutput(E)
    out.commit(E.frontier(1), E.frontier(-1), {0: [1], 1: [2]})
    out.release(E.frontier(0))
    out.commit(E.frontier(1), E.frontier(-1), {0: [1], 1: [5]})  # unreleased time 1 may change
    assert out.acknowledged == {0: (1,), 1: (5,)}
    with pytest.raises(ReleasedOutputChanged):
        out.commit(E.frontier(1), E.frontier(-1), {0: [9]})
    with pytest.raises(ReleasedOutputChanged):
        out.rollback(E.frontier(-1))


def test_acknowledged_input_cannot_be_reread() -> None:
    """An input batch acknowledged by garbage collection is gone for good."""
    src = ExternalInput("src", [[1], [2]])
    src.acknowledge(E.frontier(0))
    assert src.read(1) == [2]
    with pytest.raises(CollectedStateNeeded, match="epoch 0"):
        src.read(0)


def test_garbage_collection_runs_and_is_sound() -> None:
    """With GC after every checkpoint, random cases never need anything collected."""
    for i in range(30):
        case = build_case(RandomChooser(10_000 + i))
        verdict = check_case(case, gc_every=1)
        assert verdict.ok, (i, verdict.problem, case.describe())
    sim = Simulation(_graph(Batch()), seed=1)
    sim.run()
    collected = len(sim.inputs["src"].acked) + sum(len(g) for g in sim.procs["m"].store.ghosts.values())
    assert collected > 0  # inputs were acknowledged and logged messages deleted
    assert sim.outputs["out"].released_records  # and output was released


class _Optimist(SolverPlanner):
    """A broken planner whose low-watermarks are every processor's latest persisted frontier."""

    def watermarks(self) -> dict[str, Frontier]:
        out = {}
        for n in self.graph.nodes:
            cks = self.checkpoints[n]
            out[n] = self._frontier(n, cks[-1]) if cks else Frontier.empty(self.graph.domain(n))
        return out


def test_collecting_too_much_fails_loudly() -> None:
    """If garbage collection deletes something a rollback needs, the run raises, naming it."""
    g = _graph(Batch())
    errors = []
    for k in range(25):
        try:
            Simulation(g, seed=k, failures=[Failure(k, {"sum", "m"})], planner=_Optimist(g)).run()
        except CollectedStateNeeded as exc:
            errors.append(str(exc))
    assert errors and any("garbage-collected" in e or "acknowledged" in e for e in errors)
