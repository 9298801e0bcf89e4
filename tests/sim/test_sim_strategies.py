"""Hypothesis strategies for the simulator, and assert_recovers."""

from __future__ import annotations

import pytest
from hypothesis import Phase, given, settings
from hypothesis.errors import InvalidArgument

from falkirk.sim import (
    Commit,
    Eager,
    Ephemeral,
    HistoryLog,
    Lazy,
    Link,
    Node,
    Output,
    SimGraph,
    Source,
    Sum,
    WrongLog,
)
from falkirk.sim.cases import Case, check_case
from falkirk.testing.sim_strategies import assert_recovers, failure_schedules, sim_cases, sim_graphs


@given(sim_cases())
def test_every_generated_case_recovers(case: Case) -> None:
    """The main property: any graph, policy mix and failure schedule gives the failure-free output."""
    verdict = check_case(case)
    assert verdict.ok, f"{verdict.problem}\n{case.describe()}"


@settings(max_examples=60)
@given(sim_cases(max_failures=2, max_step=5))
def test_early_failures_recover(case: Case) -> None:
    """Failures in the first few steps, before most checkpoints exist, recover too."""
    verdict = check_case(case)
    assert verdict.ok, f"{verdict.problem}\n{case.describe()}"


def _pipeline(policy: object) -> SimGraph:
    return SimGraph(
        [Node("src", Source(), policy if isinstance(policy, (Ephemeral, WrongLog)) else Ephemeral()),
         Node("sum", Sum(), Lazy() if isinstance(policy, (Ephemeral, WrongLog)) else policy),
         Node("out", Output(), Commit())],
        [Link("a", "src", "sum"), Link("b", "sum", "out")],
        inputs={"src": [[1, 2], [3], [4]]},
    )


def test_assert_recovers_passes_for_correct_policies() -> None:
    """assert_recovers accepts policies that recover."""
    assert_recovers(_pipeline, [Lazy(every=2), Eager(logs=["b"]), HistoryLog()], settings=settings(max_examples=40))


def test_assert_recovers_reports_a_wrong_policy() -> None:
    """assert_recovers fails with the counterexample when the policy lies about logging."""
    with pytest.raises(AssertionError, match="WrongLog"):
        assert_recovers(
            _pipeline, [WrongLog(claims=["a"])],
            settings=settings(max_examples=200, database=None, phases=[Phase.generate]),
        )


@pytest.mark.parametrize(
    "call",
    [
        lambda: sim_cases(max_ops=0),
        lambda: sim_cases(loops="yes"),
        lambda: sim_cases(max_failures=-1),
        lambda: sim_cases(final="yes"),
        lambda: sim_cases(schedule="parallel"),
        lambda: sim_cases(max_window=0),
        lambda: assert_recovers(_pipeline, [Lazy()], schedule="parallel"),
        lambda: failure_schedules("not a graph"),
        lambda: failure_schedules(_pipeline(Lazy()), min_size=3, max_size=1),
        lambda: failure_schedules(_pipeline(Lazy()), max_together=0),
        lambda: assert_recovers(_pipeline, []),
        lambda: assert_recovers(42),
    ],
)
def test_arguments_are_validated(call: object) -> None:
    """Bad arguments raise InvalidArgument at once."""
    with pytest.raises(InvalidArgument):
        call()  # type: ignore[operator]


@settings(max_examples=30)
@given(sim_cases(schedule=None, max_window=2))
def test_cases_draw_final_outputs_and_schedules(case: Case) -> None:
    """Drawn cases carry a schedule and window; final outputs only where no non-deterministic operator is upstream."""
    assert case.schedule in ("sequential", "pipelined") and 1 <= case.window <= 2
    assert case.window == 1 or case.schedule == "pipelined"
    assert ("schedule: pipelined" in case.describe()) == (case.schedule == "pipelined")
    for o in case.graph.outputs:
        if case.graph.nodes[o].policy.describe().endswith("final=True)"):
            assert o not in case.graph.after_choices


def test_strategies_draw_both_kinds_of_output() -> None:
    """sim_cases draws final and plain outputs (and only plain ones with final=False)."""
    from hypothesis import find
    from hypothesis.errors import NoSuchExample

    def finals(case: Case) -> int:
        return sum("final=True" in case.graph.nodes[o].policy.describe() for o in case.graph.outputs)

    assert finals(find(sim_cases(), lambda c: finals(c) > 0)) > 0
    assert find(sim_cases(), lambda c: finals(c) < len(c.graph.outputs))
    with pytest.raises(NoSuchExample):
        find(sim_cases(final=False), lambda c: finals(c) > 0, settings=settings(max_examples=50, database=None))


@settings(max_examples=20)
@given(sim_graphs(loops=True, sequences=False))
def test_graphs_validate_as_dataflows(graph: SimGraph) -> None:
    """Every generated graph's falkirk declarations form a valid Dataflow."""
    from falkirk.solver import Dataflow

    df = Dataflow(graph.solver_processors(), graph.solver_edges())
    assert set(df.processors) == set(graph.nodes)
