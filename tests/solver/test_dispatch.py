"""The one entry point's ``strategy`` (SPEC §5): every solver gives the same plan; ``fast=`` is a deprecated alias."""

from __future__ import annotations

import warnings
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from falkirk.cli import main
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, dispatch, solve_frontiers
from falkirk.solver.dispatch import STRATEGIES, choose, strategy_of
from falkirk.testing import dataflows


def chain(n: int) -> Dataflow:
    """``p0 → p1 → … → p{n-1}`` in epochs, every processor checkpointed at 1 and 3, p0 logging."""
    procs = [
        Processor(f"p{i}", "epoch", logs=["e0"] if i == 0 else [], checkpoints=[Checkpoint(1), Checkpoint(3)])
        for i in range(n)
    ]
    return Dataflow(procs, [Edge(f"e{i}", f"p{i}", f"p{i + 1}") for i in range(n - 1)])


def test_the_strategies_are_auto_worklist_round_robin_vectorised() -> None:
    """The four strategies, ``"auto"`` first (the default)."""
    assert STRATEGIES == ("auto", "worklist", "round_robin", "vectorised")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_gives_the_same_plan(strategy: str) -> None:
    """Frontiers, notification frontiers, actions and explanations agree whichever solver runs."""
    df = chain(4)
    ref = solve_frontiers(df, ["p1"], strategy="round_robin")
    plan = solve_frontiers(df, ["p1"], strategy=strategy)  # type: ignore[arg-type]
    assert plan.to_json() == ref.to_json()
    assert [plan.explain(p) for p in df.processors] == [ref.explain(p) for p in df.processors]


def test_worklist_means_the_worklist_even_where_auto_vectorises() -> None:
    """``"worklist"`` always runs the worklist; only ``"auto"`` switches (the switch itself: test_fast_paths)."""
    df = chain(4)
    assert choose(df) == choose(df, strategy="auto") == "vectorised"
    assert choose(df, strategy="worklist") == "worklist"
    assert isinstance(solve_frontiers(df, ["p1"], strategy="worklist").reasons, dict)
    assert isinstance(solve_frontiers(df, ["p1"]).reasons, dispatch.LazyReasons)


def test_an_unknown_strategy_is_a_value_error_listing_the_choices() -> None:
    """A misspelt strategy is refused before anything is solved."""
    with pytest.raises(ValueError, match="'fast'.*'auto', 'worklist', 'round_robin', 'vectorised'"):
        solve_frontiers(chain(2), ["p0"], strategy="fast")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fast", "strategy", "expected"),
    [
        (True, "auto", "auto"),
        (False, "auto", "worklist"),
        (True, "worklist", "auto"),
        (False, "round_robin", "round_robin"),
    ],
)
def test_fast_is_a_deprecated_alias(fast: bool, strategy: str, expected: str) -> None:
    """``fast=True`` is ``"auto"``, ``fast=False`` ``"worklist"``; other strategies ignore it; it warns."""
    with pytest.warns(DeprecationWarning, match="fast= is deprecated"):
        assert strategy_of(strategy, fast) == expected


def test_the_deprecation_warning_points_at_the_caller() -> None:
    """``solve_frontiers(fast=...)`` warns once, at the line that called it, and still solves."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = solve_frontiers(chain(3), ["p0"], fast=False)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert caught[0].filename == __file__
    assert plan.to_json() == solve_frontiers(chain(3), ["p0"]).to_json()


def test_no_warning_without_fast() -> None:
    """The new keyword alone does not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve_frontiers(chain(3), ["p0"], strategy="worklist")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_command_line_takes_every_strategy(strategy: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``falkirk solve --strategy S --json`` prints the same plan for every S."""
    import pathlib

    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "spec_example.json"
    assert main(["solve", str(example), "--json", "--strategy", strategy]) == 0
    got = capsys.readouterr().out
    assert main(["solve", str(example), "--json"]) == 0
    assert capsys.readouterr().out == got


def with_live(df: Dataflow) -> Dataflow:
    """``df`` with default live metadata on every processor: no columns, the vectorised solver must convert."""
    procs = [attrs.evolve(p, live=Checkpoint("top")) for p in df.processors.values()]
    return Dataflow(procs, df.edges.values())


def dense(n: int) -> Dataflow:
    """``n`` epoch processors, ``p{i}`` feeding the next three (about 3 edges each), one checkpoint at 2."""
    procs = [Processor(f"p{i}", "epoch", checkpoints=[Checkpoint(2)]) for i in range(n)]
    edges = [Edge(f"e{i}_{j}", f"p{i}", f"p{j}") for i in range(n) for j in (i + 1, i + 2, i + 3) if j < n]
    edges.append(Edge("back", f"p{n - 1}", "p0"))
    return Dataflow(procs, edges)


@pytest.mark.parametrize("n", [2, 3, 50, 3000])
def test_auto_vectorises_plain_epoch_columns_at_every_size(n: int) -> None:
    """Plain epoch processors (the Dataflow's columns): the vectorised solver, however small or sparse."""
    assert choose(chain(n)) == "vectorised"


def test_auto_converts_other_total_dataflows_only_when_large() -> None:
    """Without columns: the worklist below CONVERT_FROM processors + edges, unless the graph is dense."""
    assert choose(with_live(chain(100))) == "worklist"
    below, above = (
        dispatch.CONVERT_FROM // 2 - 1,
        dispatch.CONVERT_FROM // 2 + 1,
    )  # V + E = CONVERT_FROM -3, +1
    assert choose(with_live(chain(below))) == "worklist"
    assert choose(with_live(chain(above))) == "vectorised"
    assert choose(with_live(dense(dispatch.VECTORISE_FROM - 1))) == "worklist"
    assert choose(with_live(dense(dispatch.VECTORISE_FROM))) == "vectorised"


def test_auto_converts_only_when_the_rollback_can_reach_half_the_processors() -> None:
    """Without columns and large: the worklist when the failed processors' rollback region is under REGION_FROM × V."""
    # a chain of n where p{n-4} logs its edge to p{n-3}: the region of p{n-2} is p{n-3}, p{n-2}, p{n-1}
    n = dispatch.CONVERT_FROM
    procs = [
        Processor(
            f"p{i}",
            "epoch",
            logs=[f"e{i}"] if i == n - 4 else [],
            checkpoints=[Checkpoint(1)],
            live=Checkpoint("top"),
        )
        for i in range(n)
    ]
    df = Dataflow(procs, [Edge(f"e{i}", f"p{i}", f"p{i + 1}") for i in range(n - 1)])
    t = df.table
    assert dispatch.rollback_region(t, [t.index[f"p{n - 2}"]], n) == 3
    assert choose(df, failed=[f"p{n - 2}"]) == "worklist"
    assert choose(df, failed=[f"p{n - 5}"]) == "vectorised"  # downstream: the last 5, upstream: all the rest
    everything = [choose(df), choose(df, failed=list(df.processors)), choose(df, failed="all")]
    assert everything == ["vectorised"] * 3  # unknown or all: everything may roll back
    assert (
        solve_frontiers(df, [f"p{n - 2}"]).to_json()
        == solve_frontiers(df, [f"p{n - 2}"], strategy="vectorised").to_json()
    )


def test_auto_vectorises_a_partial_order_only_as_a_loop_job() -> None:
    """A product domain goes to the vectorised (loop) engine only when its checkpoints are plain prefixes;
    any other antichain is solved by the worklist whatever its size."""
    n = dispatch.CONVERT_FROM
    edges = [Edge(f"e{i}", f"p{i}", f"p{i + 1}") for i in range(n - 1)]
    prefixes = [Processor(f"p{i}", "product", arity=2) for i in range(n)]
    assert choose(Dataflow(prefixes, edges)) == "vectorised"
    corner = Checkpoint({"before": [[1, 1]]})  # every time not >= (1, 1): (0, 5) and (5, 0) both in it
    other = [Processor(f"p{i}", "product", arity=2, checkpoints=[corner] if i == 0 else []) for i in range(n)]
    assert choose(Dataflow(other, edges)) == "worklist"


@settings(max_examples=100, deadline=None)
@given(df=dataflows(max_size=7), data=st.data())
def test_auto_gives_the_reference_plan_whichever_solver_it_picks(df: Dataflow, data: st.DataObject) -> None:
    """Property: auto's plan is the round robin's, as shipped and converting at any size; its explanations the worklist's."""
    names = list(df.processors)
    failed: Any = data.draw(st.one_of(st.just("all"), st.lists(st.sampled_from(names), unique=True)))
    ref = solve_frontiers(df, failed, strategy="round_robin")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dispatch, "CONVERT_FROM", 0)
        mp.setattr(dispatch, "REGION_FROM", 0)
        low = solve_frontiers(df, failed)
    assert low.to_json() == solve_frontiers(df, failed).to_json() == ref.to_json()
    worklist = solve_frontiers(df, failed, strategy="worklist")
    assert [low.explain(p) for p in names] == [worklist.explain(p) for p in names]


def test_the_monitor_s_rollback_plans_go_through_the_same_choice() -> None:
    """``Monitor.plan_rollback`` solves with ``"auto"``: the columns without live metadata, the worklist with it (small)."""
    from falkirk.solver import Monitor

    monitor = Monitor(chain(50))
    plain = monitor.plan_rollback(["p1"])
    live = monitor.plan_rollback(["p1"], live={"p2": Checkpoint("top")})
    assert isinstance(plain.reasons, dispatch.LazyReasons) and isinstance(live.reasons, dict)
    assert plain.to_json() == solve_frontiers(monitor.dataflow(), ["p1"], strategy="worklist").to_json()
