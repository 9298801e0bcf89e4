"""The planner seam: the incremental monitor and the reference solver plan alike."""

from __future__ import annotations

from hypothesis import given, settings

from falkirk.sim import Simulation
from falkirk.sim.cases import Case
from falkirk.sim.planner import MonitorPlanner, Planner, SolverPlanner, default_planner
from falkirk.testing.sim_strategies import sim_cases


@settings(max_examples=40)
@given(sim_cases())
def test_monitor_and_solver_give_the_same_runs(case: Case) -> None:
    """Same case, either planner: the same plans (trace), watermarks and output."""
    runs = []
    for make in (SolverPlanner, MonitorPlanner):
        sim = Simulation(case.graph, seed=case.seed, failures=case.failures, trace=True, planner=make(case.graph))
        r = sim.run()
        runs.append((r.trace, r.output, r.released, {n: p.store.floor for n, p in sim.procs.items()}))
    assert runs[0] == runs[1]


def test_default_planner_is_the_monitor() -> None:
    """With falkirk.solver.monitor available, simulations use it by default."""
    from falkirk.sim.cases import RandomChooser, build_case

    g = build_case(RandomChooser(1)).graph
    p: Planner = default_planner(g)
    assert isinstance(p, MonitorPlanner)
    assert set(p.watermarks()) == set(g.nodes)
