"""Quokka lineage recovery (seed 000) as the ``quokka`` scheme: fuzzing, alive objects, parallel recovery."""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

import pytest

from falkirk.domains import Frontier
from falkirk.sim import Simulation, SolverPlanner
from falkirk.sim.cases import RandomChooser, build_case
from falkirk.sim.oracle import compare_outputs, reference_run
from falkirk.sim.persistence import live_metadata, persist_all
from falkirk.sim.recovery import fail_and_recover
from falkirk.sim.schemes import SCHEMES
from falkirk.sim.schemes.quokka import QUOKKA, all_to_all, naming_cost, recovery
from falkirk.testing.fuzz import fuzz

Obj = tuple[Any, Any, Any]  # (cause time at the sender, message time at the receiver, payload)


class Recorder(Simulation):
    """A simulation that remembers every object (message) sent, per edge, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: dict[str, list[Obj]] = {e: [] for e in self.graph.links}

    def send(self, p: Any, edge: str, cause: Any, payload: Any) -> None:
        super().send(p, edge, cause, payload)
        msg = self.procs[self.graph.links[edge].dst].queues[edge][-1]
        self.sent[edge].append((cause, msg.time, msg.payload))


def run_steps(sim: Simulation, steps: int) -> None:
    """Advance ``sim`` by at most ``steps`` scheduler steps (the loop of ``Simulation.run``)."""
    for _ in range(steps):
        sim.progress()
        persist_all(sim, final=False)
        actions = sim.actions()
        if not actions:
            return
        sim.execute(actions[sim.rng.randrange(len(actions))])
        sim.steps += 1


def floor(sim: Simulation, name: str) -> Frontier:
    """The low-watermark garbage collection last used at ``name`` (the cemetery bound)."""
    f = sim.procs[name].store.floor
    return Frontier.empty(sim.procs[name].domain) if f is None else f


def test_quokka_scheme_passes_the_fuzzer() -> None:
    """2,000 fuzz cases in CI (200 locally) under the quokka scheme recover with 0 divergences."""
    n = int(os.environ.get("FALKIRK_SCHEME_CASES", "2000" if os.environ.get("CI") else "200"))
    report = fuzz(n, seed=8, quiet=True, scheme=QUOKKA)
    assert report.cases == n
    assert report.divergent == [], report.problem


def test_quokka_is_registered_and_uses_lineage_policies() -> None:
    """The scheme is selectable by name; input/stateless epoch tasks are stateless; no loops, deterministic."""
    assert SCHEMES["quokka"] is QUOKKA
    kinds: Counter[str] = Counter()
    for i in range(40):
        case = build_case(RandomChooser(i), scheme=QUOKKA)
        for n in case.graph.nodes.values():
            kinds[type(n.policy).__name__] += 1
            assert n.domain != "loop" and n.op.deterministic
            if type(n.op).__name__ in ("Source", "Map", "Filter") and n.domain == "epoch":
                assert n.policy.stateless, n
    assert set(kinds) == {"Ephemeral", "Lazy", "Never", "Commit"}


def _alive_case(i: int) -> Counter[str]:
    """One node death in a quokka case; checks plan-regenerated objects == alive objects, per edge.

    Returns the object counts (alive, cemetery, repushed, rerun) and the number of edges checked.
    """
    rnd = random.Random(i)
    case = build_case(RandomChooser(10_000 + i), scheme=QUOKKA, max_failures=0)
    g = case.graph
    sim = Recorder(g, seed=case.seed)
    run_steps(sim, rnd.randint(0, 60))
    node = set(rnd.sample(sorted(g.nodes), rnd.randint(1, min(3, len(g.nodes)))))
    # the run's own records, taken before the failure
    sent = {e: list(v) for e, v in sim.sent.items()}
    buffered = {e: list(sim.procs[link.src].store.logs.get(e, ())) for e, link in g.links.items()}
    cemetery_bound = {n: floor(sim, n) for n in g.nodes}
    plan = fail_and_recover(sim, node)
    f = plan.frontiers
    totals: Counter[str] = Counter()
    for e, link in g.links.items():
        p, q = link.src, link.dst
        objs = sent[e]
        # independent of the plan's producer side: what the consumer still needs (alive) and
        # what the cemetery holds (consumed below the consumer's low-watermark)
        alive = Counter(o for o in objs if o[1] not in f[q])
        cemetery = Counter(o for o in objs if o[1] in cemetery_bound[q])
        # the plan's regeneration: buffered objects re-pushed, plus everything p re-runs from lineage
        repushed: Counter[Obj] = Counter()
        if e in plan.replay:
            r = plan.replay[e]
            repushed = Counter((s.cause, s.msg.time, s.msg.payload) for s in buffered[e]
                               if s.cause in r.log_frontier and s.msg.time not in r.exclude)
        rerun = Counter(o for o in objs if o[0] not in f[p])
        assert repushed + rerun == alive, (i, e, sorted(node), repushed, rerun, alive)
        assert not (alive & cemetery), (i, e, "a collected object is regenerated")
        assert not any(s.msg.time in cemetery_bound[q] for s in buffered[e]), (i, e, "cemetery still buffered")
        totals.update(alive=alive.total(), cemetery=cemetery.total(), repushed=repushed.total(),
                      rerun=rerun.total(), edges=1)
    # and the run, resumed, still produces the failure-free output
    result = sim.run()
    assert compare_outputs(result.output, reference_run(g, seed=case.seed + 1).output) == [], i
    return totals


@pytest.mark.slow
def test_plan_regenerates_exactly_the_alive_objects() -> None:
    """On 300 node deaths, each edge's re-pushed + re-run objects equal its alive ones, none collected."""
    totals: Counter[str] = Counter()
    for i in range(300):
        totals += _alive_case(i)
    # the property was exercised on both kinds of regeneration, with a populated cemetery
    assert all(totals[k] > 0 for k in ("alive", "cemetery", "repushed", "rerun")), totals
    assert totals["edges"] > 300, totals


def _plans(sim: Simulation, lost: list[str]) -> tuple[Any, list[Any]]:
    """The reference solver's plan for losing ``lost`` together, and for losing each alone."""
    live = {n: live_metadata(sim, n) for n in sim.procs if not sim.graph.nodes[n].policy.stateless}
    solver = sim.planner
    assert isinstance(solver, SolverPlanner)
    together = SolverPlanner.plan_rollback(solver, lost, {n: c for n, c in live.items() if n not in lost})
    alone = [SolverPlanner.plan_rollback(solver, [p], {n: c for n, c in live.items() if n != p}) for p in lost]
    return together, alone


def _meet(frontiers: list[Frontier]) -> Frontier:
    out = frontiers[0]
    for f in frontiers[1:]:
        out = out & f
    return out


def test_lost_stateless_tasks_recover_in_parallel_on_random_cases() -> None:
    """Losing several input/stateless tasks at once costs each processor no more than the worst single loss."""
    checked = 0
    for i in range(150):
        rnd = random.Random(i)
        case = build_case(RandomChooser(20_000 + i), scheme=QUOKKA, max_failures=0)
        stateless = sorted(n for n, node in case.graph.nodes.items() if node.policy.stateless)
        if len(stateless) < 2:
            continue
        sim = Simulation(case.graph, seed=case.seed)
        run_steps(sim, rnd.randint(0, 60))
        lost = rnd.sample(stateless, rnd.randint(2, len(stateless)))
        together, alone = _plans(sim, lost)
        for n in case.graph.nodes:
            assert together.frontiers[n] == _meet([a.frontiers[n] for a in alone]), (i, n, lost)
            if together.actions[n] == "rollback":
                assert any(a.actions[n] == "rollback" for a in alone), (i, n, lost)
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("step", [0, 7, 15, 30, 60, 1000])
def test_lost_input_and_stateless_tasks_relaunch_independently_in_a_shuffle(step: int) -> None:
    """A 3×3 shuffle loses s0, m1, s2: each resumes at its own frontier; upstream survivors keep ⊤."""
    g = all_to_all(3, [[1, 2], [3], [4, 5]])
    sim = Simulation(g, seed=step, planner=SolverPlanner(g))
    run_steps(sim, step)
    lost = ["s0", "m1", "s2"]
    reported = {p: sim.procs[p].store.last_frontier(sim.procs[p].domain) for p in lost}
    together, alone = _plans(sim, lost)
    for p, single in zip(lost, alone, strict=True):
        # independent: the same restart point as when p is lost alone, namely its own reported frontier
        assert together.frontiers[p] == single.frontiers[p] == reported[p], (p, step)
        assert together.actions[p] == ("restart" if reported[p].is_empty else "restore")
    # the surviving input task is untouched; a stateful survivor rewinds only if one loss alone forces it
    assert together.actions["s1"] == "keep"
    for a in ("a0", "a1", "a2", "out"):
        assert (together.actions[a] == "rollback") == any(x.actions[a] == "rollback" for x in alone), (a, step)
    plan = fail_and_recover(sim, set(lost))
    assert set(recovery(plan).relaunch) == set(lost)
    assert sim.run().output == reference_run(g, seed=1).output


def test_naming_cost_grows_quadratically_for_quokka_and_linearly_for_falkirk() -> None:
    """Quokka names w²·epochs shuffle objects and w² cemetery keys; falkirk keeps 3w+1 frontier entries."""
    for w in (2, 4, 8):
        cost = naming_cost(w, 3)
        assert cost == {"objects": 3 * w * w, "cemetery_keys": w * w, "frontier_entries": 3 * w + 1}, cost
