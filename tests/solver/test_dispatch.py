"""The one entry point's ``strategy`` (SPEC §5): every solver gives the same plan; ``fast=`` is a deprecated alias."""

from __future__ import annotations

import warnings

import pytest

from falkirk.cli import main
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, dispatch, solve_frontiers
from falkirk.solver.dispatch import STRATEGIES, choose, strategy_of


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


def test_worklist_means_the_worklist_even_where_auto_vectorises(monkeypatch: pytest.MonkeyPatch) -> None:
    """``"worklist"`` always runs the worklist; only ``"auto"`` switches (the switch itself: test_fast_paths)."""
    df = chain(4)
    assert choose(df) == choose(df, strategy="auto") == choose(df, strategy="worklist") == "worklist"
    monkeypatch.setattr(dispatch, "VECTORISE_FROM", 2)
    monkeypatch.setattr(dispatch, "DENSE_FROM", 0)
    assert choose(df) == "vectorised" and choose(df, strategy="worklist") == "worklist"
    assert isinstance(solve_frontiers(df, ["p1"], strategy="worklist").reasons, dict)


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
