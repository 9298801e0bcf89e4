"""Final-commit outputs (``Commit(final=True)``): committed output is never rewritten, and still correct."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import pytest
from attrs import frozen
from hypothesis import given, settings, target

from falkirk.domains import Epoch, Frontier
from falkirk.errors import ValidationError
from falkirk.sim import (
    Commit,
    Ephemeral,
    Failure,
    Lazy,
    Link,
    Node,
    Output,
    Result,
    RunningTotal,
    Salt,
    SimGraph,
    Simulation,
    Source,
    Sum,
    check_run,
    reference_run,
)
from falkirk.sim.cases import Case, RandomChooser, build_case, check_case
from falkirk.sim.external import ExternalOutput
from falkirk.testing.sim_strategies import sim_cases

E = Epoch()


def all_final(case: Case) -> Case:
    """``case`` with every output that may commit finally (deterministic upstream) made final."""
    g = case.graph
    nodes = [
        attrs.evolve(n, policy=attrs.evolve(n.policy, final=True))
        if n.name in g.outputs and n.name not in g.after_choices else n
        for n in g.nodes.values()
    ]
    return attrs.evolve(case, graph=g.replace(nodes=nodes))


def finals(graph: SimGraph) -> list[str]:
    return [o for o in graph.outputs if getattr(graph.nodes[o].policy, "final", False)]


def assert_written_once(result: Result, outputs: list[str]) -> None:
    """What each final output's service was told: every time written once, nothing retracted or rewritten."""
    for o in outputs:
        written = [t for kind, t, _ in result.journal[o] if kind == "write"]
        retracted = [t for kind, t, _ in result.journal[o] if kind == "retract"]
        assert not retracted, f"{o} retracted committed times {retracted}"
        assert len(written) == len(set(written)), f"{o} rewrote committed times: {result.journal[o]}"
        assert not result.divergent[o], f"{o} was re-sent other records for committed times: {result.divergent[o]}"


# -- the hand-derived example ------------------------------------------------------------
@frozen
class EveryThird(Lazy):
    """Lazy(every=3) with its checkpoints pinned to epochs 2, 5, 8, 11 (so the example does not depend on the schedule)."""

    def persist_points(self, sim: Any, proc: Any, settled: Frontier) -> list[Frontier]:
        last = int(settled.antichain[0]) - 1  # the last settled epoch
        k = last - (last - 2) % 3
        if k < 0 or E.frontier(k) <= proc.store.last_frontier(proc.domain):
            return []
        return [E.frontier(k)]


def chain(final: bool) -> SimGraph:
    """src → sum (stateful, checkpoints at 2, 5, 8, …) → out, twelve epochs; epoch e sums to 11·e."""
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("sum", Sum(), EveryThird()), Node("out", Output(), Commit(final=final))],
        [Link("e1", "src", "sum"), Link("e2", "sum", "out")],
        inputs={"src": [[e, 10 * e] for e in range(12)]},
    )


class _Watch(Simulation):
    """Records, before each step, out's committed frontier and sum's latest checkpoint."""

    def execute(self, action: tuple[Any, ...]) -> None:
        self.seen: list[tuple[int, Frontier, Frontier]] = getattr(self, "seen", [])
        self.seen.append((self.steps, self.outputs["out"].committed, self.procs["sum"].store.last_frontier(E)))
        super().execute(action)

    def fail(self, names: Any) -> None:
        self.at_failure = (self.outputs["out"].committed, self.procs["sum"].store.last_frontier(E))
        super().fail(names)


def _committed_9_checkpoint_8(seed: int) -> int:
    """The first step at which out has committed exactly epoch 9 while sum's latest checkpoint is 8.

    A failure at step ``k + 1`` sees the commits and checkpoints recorded before step ``k``
    (a step only runs an event; commits and checkpoints come between steps).
    """
    watch = _Watch(chain(final=True), seed=seed)
    watch.run()
    return next(k for k, c, s in watch.seen if c == E.frontier(9) and s == E.frontier(8)) + 1


@pytest.mark.parametrize("final", [True, False])
def test_output_keeps_epoch_9_while_sum_rolls_back_to_8(final: bool) -> None:
    """src → sum → out: out committed epoch 9, sum's checkpoint is 8, sum fails.

    Plan (C1–C4 by hand): ``F(sum) = {∅, 2, 5, 8}``, so ``f(sum) = 8`` (C1).
    ``src`` is stateless and does not log ``e1``: ``D_e1(f(src)) = f(src) ⊆ 8``
    (C2), so ``f(src) = 8`` — it re-reads epochs 9 on. ``out`` delivered
    epoch 9 but ``φ_e2(8) = 8`` (C3; C4 too, its commits count as
    notifications), so it returns to its commit at 8. The solver is the same
    in both modes.

    Final commit: ``out``'s external data is not touched; ``sum`` restores
    ``S(8)`` and re-sends epoch 9's total (99), which ``out`` discards (9 is
    committed); epochs 10 and 11 are written once. Plain ``Commit()``: the
    rollback retracts epoch 9 and writes it again. Both end with the
    failure-free output.
    """
    step = _committed_9_checkpoint_8(seed=1)
    sim = _Watch(chain(final), seed=1, failures=[Failure(step, {"sum"})], trace=True)
    r = sim.run()
    assert sim.at_failure == (E.frontier(9), E.frontier(8))
    assert r.trace == [f"[step {step}] fail ['sum'] -> src: rollback 8, sum: restore 8, out: rollback 8"]
    assert r.output == reference_run(chain(final)).output == {"out": {e: (11 * e,) for e in range(12)}}
    later = [(kind, t, recs) for kind, t, recs in r.journal["out"] if t >= 9]
    if final:
        assert r.discarded == {"out": 1} and r.divergent == {"out": []}
        assert later == [("write", 9, (99,)), ("write", 10, (110,)), ("write", 11, (121,))]
        assert_written_once(r, ["out"])
    else:
        assert r.discarded == {"out": 0}
        assert later == [("write", 9, (99,)), ("retract", 9, (99,)), ("write", 9, (99,)),
                         ("write", 10, (110,)), ("write", 11, (121,))]


# -- properties ----------------------------------------------------------------------------
@settings(max_examples=max(20, settings.default.max_examples // 3))  # the main property draws final outputs too
@given(sim_cases(final=True).map(all_final))
def test_final_outputs_are_written_once_and_equal_the_failure_free_run(case: Case) -> None:
    """Any graph, policy mix and failures: every final output is written once per time, never retracted,
    re-sent records equal the kept ones, and the output equals the failure-free run."""
    verdict = check_case(case)
    assert verdict.ok, f"{verdict.problem}\n{case.describe()}"
    assert verdict.result is not None
    outs = finals(case.graph)
    assert_written_once(verdict.result, outs)
    target(float(sum(verdict.result.discarded[o] for o in outs)), label="records discarded")


def test_generated_failures_do_roll_back_below_committed_output() -> None:
    """Generated cases exercise the discard: in many of them a rollback re-sends committed times.

    A discard means some processor upstream re-executed a time the final
    output had committed, i.e. was rolled back below it.
    """
    runs = discards = 0
    for i in range(60):
        case = all_final(build_case(RandomChooser(20_000 + i), nondeterministic=False, max_failures=4, max_step=60))
        verdict = check_case(case)
        assert verdict.ok and verdict.result is not None, f"{verdict.problem}\n{case.describe()}"
        assert_written_once(verdict.result, case.graph.outputs)
        runs += 1
        discards += any(verdict.result.discarded.values())
    assert discards >= runs // 10, f"only {discards} of {runs} cases discarded a re-sent record"


def test_the_oracle_catches_an_output_that_rewrites_committed_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """If a final output let re-sent records through (a rewrite of the same values), check_run says so."""
    monkeypatch.setattr(ExternalOutput, "is_final", lambda self, t: False)
    step = _committed_9_checkpoint_8(seed=1)
    verdict = check_run(chain(final=True), [Failure(step, {"sum"})], seed=1)
    assert not verdict.ok
    assert verdict.problem == "committed output changed at a final output:\n  out wrote committed time 9 again, with [99]"


# -- non-determinism -----------------------------------------------------------------------
def _salted(policy: Commit) -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("salt", Salt(), Ephemeral()),
         Node("rt", RunningTotal(), Lazy(every=2)), Node("out", Output(), policy)],
        [Link("a", "src", "salt"), Link("b", "salt", "rt"), Link("c", "rt", "out")],
        inputs={"src": [[1], [2], [3]]},
    )


def test_final_output_after_a_nondeterministic_operator_is_rejected() -> None:
    """Commit(final=True) downstream of a non-deterministic operator is a ValidationError naming both."""
    with pytest.raises(ValidationError, match=r"processor 'out': a final commit .* 'salt' upstream"):
        _salted(Commit(final=True))


def test_why_a_final_output_needs_deterministic_operators_upstream() -> None:
    """Forced past the check, a final output after Salt → RunningTotal ends with no failure-free output.

    ``out`` keeps epoch 0 with the first salt; ``salt`` and ``rt`` roll back
    and epoch 0 is re-run with another salt, which ``rt`` folds into its
    total while ``out`` discards its epoch 0 (``divergent``). Later totals
    then contradict the kept epoch 0 for every choice of salts.
    """
    g = _salted(Commit())
    legal = set()
    for salts in itertools.product(range(3), repeat=3):
        choices = {("salt", e, "salt"): s for e, s in enumerate(salts)}
        legal.add(tuple(sorted(reference_run(g, choices=choices).output["out"].items())))
    sim = Simulation(g, seed=0, failures=[Failure(11, {"salt", "rt"})])
    sim.outputs["out"].final = True  # what Commit(final=True) would do, had the graph not been rejected
    r = sim.run()
    assert r.divergent["out"] and r.divergent["out"][0][0] == 0
    assert tuple(sorted(r.output["out"].items())) not in legal


def test_two_final_outputs_after_a_stateless_nondeterministic_operator_disagree() -> None:
    """No stateful operator needed: Salt feeding two final outputs leaves them with different salts for one epoch.

    ``out2`` fails before committing epoch 0, which ``out1`` has committed;
    ``salt`` (stateless) re-runs epoch 0 with another salt: ``out1``
    discards it, ``out2`` writes it. With plain commits the plan rolls
    ``out1`` back as well (its commit counts as a notification, C4) and
    both agree.
    """
    g = SimGraph(
        [Node("src", Source(), Ephemeral()), Node("salt", Salt(), Ephemeral()),
         Node("out1", Output(), Commit()), Node("out2", Output(), Commit())],
        [Link("a", "src", "salt"), Link("b", "salt", "out1"), Link("c", "salt", "out2")],
        inputs={"src": [[10], [20], [30]]},
    )
    plain = Simulation(g, seed=2, failures=[Failure(7, {"out2"})]).run()
    assert plain.output["out1"] == plain.output["out2"]
    sim = Simulation(g, seed=2, failures=[Failure(7, {"out2"})])
    for out in sim.outputs.values():
        out.final = True
    r = sim.run()
    assert r.output["out1"][0] != r.output["out2"][0] and r.divergent["out1"][0][0] == 0
