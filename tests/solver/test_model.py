"""Model validation (SPEC §3, §5, §9): what a Dataflow accepts, resolves and rejects, and how the monitor agrees."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.domains import Frontier
from falkirk.errors import (
    FalkirkError,
    MonitorError,
    NotAChainError,
    ScenarioError,
    UnknownNameError,
    ValidationError,
)
from falkirk.scenario import loads
from falkirk.solver import Checkpoint, Dataflow, Edge, Monitor, Processor, check_consistent, solve_frontiers
from falkirk.solver.model.access import View


def chain(*cks: Checkpoint, projection: Any = "identity", stateless: bool = False) -> Dataflow:
    """a → b on one edge ``ab``; ``a`` has checkpoints ``cks``."""
    return Dataflow(
        [Processor("a", "epoch", stateless=stateless, logs=[], checkpoints=cks), Processor("b", "epoch")],
        [Edge("ab", "a", "b", projection)],
    )


def frontiers(df: Dataflow, name: str) -> list[Any]:
    """The encoded chain ``F(name)`` of a failed processor (``∅`` first)."""
    return [df.domains[name].encode(m.frontier) for m in df.candidates(name, failed=True)]  # type: ignore[attr-defined]


# -- checkpoints form a chain (SPEC §5) ---------------------------------------------------------


def test_checkpoints_in_increasing_order_are_a_chain() -> None:
    """Strictly increasing checkpoints are accepted as listed, with ∅ implied first."""
    df = chain(Checkpoint(1), Checkpoint(3))
    assert frontiers(df, "a") == ["empty", 1, 3]


def test_checkpoints_out_of_order_are_rejected_naming_the_processor() -> None:
    """A checkpoint that does not contain the one before it is a NotAChainError naming both."""
    with pytest.raises(NotAChainError, match=r"processor 'a': checkpoint 1 .*increasing order"):
        chain(Checkpoint(3), Checkpoint(1))


def test_the_same_checkpoint_twice_is_one_checkpoint() -> None:
    """Two successive checkpoints at one frontier with identical metadata (an idle period) are one."""
    twice = chain(Checkpoint(1), Checkpoint(2, discarded={"ab": 2}), Checkpoint(2, discarded={"ab": 2}))
    once = chain(Checkpoint(1), Checkpoint(2, discarded={"ab": 2}))
    assert frontiers(twice, "a") == frontiers(once, "a") == ["empty", 1, 2]
    assert twice.candidates("a", failed=True) == once.candidates("a", failed=True)
    assert solve_frontiers(twice, ["a"]).to_json() == solve_frontiers(once, ["a"]).to_json()


def test_the_same_checkpoint_three_times_is_one_checkpoint() -> None:
    """An idle period of any length collapses to one checkpoint; later ones still follow the chain rule."""
    df = chain(Checkpoint(2), Checkpoint(2), Checkpoint(2), Checkpoint(4))
    assert frontiers(df, "a") == ["empty", 2, 4]


def test_same_frontier_with_other_metadata_points_at_a_source_edge() -> None:
    """Same frontier, different metadata: rejected, naming the field and pointing at '@input'."""
    with pytest.raises(NotAChainError) as info:
        chain(Checkpoint(2), Checkpoint(2, discarded={"ab": 3}))
    msg = str(info.value)
    assert "processor 'a': checkpoint 1" in msg and "same frontier as checkpoint 0" in msg
    assert "discarded" in msg and "'@input'" in msg


def test_a_given_field_equal_to_its_default_is_the_same_metadata() -> None:
    """Metadata are compared resolved: an explicit value equal to the default is the same checkpoint."""
    df = Dataflow(
        [
            Processor("s", "epoch", stateless=True),
            Processor("a", "epoch", checkpoints=[Checkpoint(2), Checkpoint(2, delivered={"sa": 2})]),
        ],
        [Edge("sa", "s", "a")],
    )
    assert frontiers(df, "a") == ["empty", 2]
    with pytest.raises(NotAChainError, match=r"metadata differ \(delivered\)"):
        Dataflow(
            [
                Processor("s", "epoch", stateless=True),
                Processor("a", "epoch", checkpoints=[Checkpoint(2), Checkpoint(2, delivered={"sa": 1})]),
            ],
            [Edge("sa", "s", "a")],
        )


def test_duplicate_checkpoints_of_a_stateless_processor_are_one() -> None:
    """The rule holds for a stateless processor's reported complete frontiers too."""
    df = chain(Checkpoint(2), Checkpoint(2), stateless=True)
    assert frontiers(df, "a") == ["empty", 2]


def test_a_scenario_file_gives_the_duplicate_error_at_its_path() -> None:
    """In a scenario file the error names the JSON path of the offending checkpoint."""
    doc = """{"format": "falkirk-scenario/1",
      "processors": {"a": {"domain": "epoch", "checkpoints": [{"frontier": 2}, {"frontier": 2, "notifications": 1}]}},
      "edges": {}, "failed": ["a"]}"""
    with pytest.raises(ScenarioError, match="@input") as info:
        loads(doc)
    assert info.value.path == "processors.a.checkpoints[1].frontier"


def test_a_scenario_file_with_an_idle_period_solves_as_without_it() -> None:
    """A scenario listing one checkpoint twice gives the plan of the scenario listing it once."""
    doc = """{"format": "falkirk-scenario/1",
      "processors": {"a": {"domain": "epoch", "logs": ["ab"], "checkpoints": %s}, "b": {"domain": "epoch", "checkpoints": [{"frontier": 1}]}},
      "edges": {"ab": {"src": "a", "dst": "b"}}, "failed": ["a"]}"""
    twice = loads(doc % '[{"frontier": 2}, {"frontier": 2}]').solve().to_json()
    once = loads(doc % '[{"frontier": 2}]').solve().to_json()
    assert twice == once and twice["frontiers"] == {"a": 2, "b": 1}


# -- projections given per checkpoint (SPEC §9) -------------------------------------------------


@pytest.mark.parametrize("projection", ["identity", "epoch_to_loop"])
def test_a_checkpoint_projection_on_a_functional_edge_is_rejected(projection: str) -> None:
    """A functional projection is one function: a checkpoint may not give a value for it (named edge and checkpoint)."""
    b = Processor("b", "product", arity=2) if projection == "epoch_to_loop" else Processor("b", "epoch")
    with pytest.raises(ValidationError) as info:
        Dataflow(
            [Processor("a", "epoch", checkpoints=[Checkpoint(1), Checkpoint(3, projection={"ab": 2})]), b],
            [Edge("ab", "a", "b", projection)],
        )
    msg = str(info.value)
    assert "processor 'a', checkpoint 1" in msg and "edge 'ab'" in msg and repr(projection) in msg


def test_a_functional_projection_equal_to_the_function_is_rejected_too() -> None:
    """Even a value equal to the function's is refused: the rule is about the edge, not the value."""
    with pytest.raises(ValidationError, match="edge 'ab'"):
        chain(Checkpoint(3, projection={"ab": 3}))


def test_a_stateless_checkpoint_projection_on_a_functional_edge_is_rejected() -> None:
    """The rule covers stateless processors, whose projection on a functional edge the solver never read."""
    with pytest.raises(ValidationError, match="edge 'ab'"):
        chain(Checkpoint(3, projection={"ab": 3}), stateless=True)


def test_live_metadata_may_not_give_a_functional_projection() -> None:
    """Live metadata is a checkpoint at ⊤: the same rule applies."""
    with pytest.raises(ValidationError, match="processor 'a', live"):
        Dataflow(
            [
                Processor("a", "epoch", live=Checkpoint("top", projection={"ab": "top"})),
                Processor("b", "epoch"),
            ],
            [Edge("ab", "a", "b")],
        )


@pytest.mark.parametrize("projection", ["recorded", "epoch_to_sequence"])
def test_recorded_projections_may_be_given_per_checkpoint(projection: str) -> None:
    """Recorded projections ('recorded', 'sequence', 'epoch_to_sequence') are exactly the ones a checkpoint gives."""
    b = Processor("b", "sequence") if projection == "epoch_to_sequence" else Processor("b", "epoch")
    df = Dataflow(
        [Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3, projection={"ab": 2})]), b],
        [Edge("ab", "a", "b", projection)],
    )
    assert df.candidates("a", failed=True)[-1].recorded == frozenset({"ab"})


def test_a_scenario_file_gives_the_projection_error_at_its_path() -> None:
    """In a scenario file the functional-projection error points at the checkpoint's projection of that edge."""
    doc = """{"format": "falkirk-scenario/1",
      "processors": {"a": {"domain": "epoch", "checkpoints": [{"frontier": 2, "projection": {"ab": 2}}]},
                     "b": {"domain": "epoch"}},
      "edges": {"ab": {"src": "a", "dst": "b"}}, "failed": ["a"]}"""
    with pytest.raises(ScenarioError, match="functional projection 'identity'") as info:
        loads(doc)
    assert info.value.path == "processors.a.checkpoints[0].projection.ab"


def test_the_monitor_rejects_a_functional_projection_as_the_model_does() -> None:
    """The monitor refuses the report the model refuses, with the same explanation, and changes nothing."""
    m = Monitor(chain(Checkpoint(1)))
    before = m.watermarks
    with pytest.raises(MonitorError, match="edge 'ab' has the functional projection 'identity'"):
        m.record("a", Checkpoint(3, projection={"ab": 3}))
    with pytest.raises(ValidationError, match="edge 'ab' has the functional projection 'identity'"):
        chain(Checkpoint(1), Checkpoint(3, projection={"ab": 3}))
    assert m.watermarks == before and m.checkpoints("a") == (Checkpoint(1),)


def test_the_monitor_refuses_the_same_frontier_again_pointing_at_a_source_edge() -> None:
    """A report at the latest frontier with other metadata names '@input'; the identical report is the same
    checkpoint (an idle period, SPEC §5): accepted, and nothing changes."""
    m = Monitor(chain(Checkpoint(1), Checkpoint(2)))
    with pytest.raises(MonitorError, match="'@input'"):
        m.record("a", Checkpoint(2, notifications=1))
    before = m.watermarks
    assert not m.record("a", Checkpoint(2)).watermarks
    assert m.checkpoints("a") == (Checkpoint(1), Checkpoint(2)) and m.watermarks == before


def test_the_monitor_accepts_a_dataflow_with_an_idle_period() -> None:
    """A dataflow listing one checkpoint twice starts a monitor as the deduplicated one does."""
    twice = Monitor(chain(Checkpoint(1), Checkpoint(1), Checkpoint(2)))
    once = Monitor(chain(Checkpoint(1), Checkpoint(2)))
    assert twice.watermarks == once.watermarks
    twice.record("a", Checkpoint(4))
    twice._check()


# -- D_e of stateless senders on recorded edges (SPEC §3, §9) --------------------------------------


def recorded_stateless(failed: bool) -> View:
    """Stateless ``s`` with records at 2 and 6 on recorded edge ``sb``, complete up to 8."""
    df = Dataflow(
        [
            Processor(
                "s",
                "epoch",
                stateless=True,
                checkpoints=[
                    Checkpoint(2, projection={"sb": 3}),
                    Checkpoint(4),
                    Checkpoint(6, projection={"sb": 7}),
                    Checkpoint(8),
                ],
            ),
            Processor("b", "epoch"),
        ],
        [Edge("sb", "s", "b", "recorded")],
    )
    return View(df, frozenset({"s"}) if failed else frozenset())


@pytest.mark.parametrize(
    ("f", "expected"),
    [("empty", "empty"), (1, 3), (2, 3), (3, 7), (4, 7), (6, 7), (7, "top"), (8, "top")],
)
def test_stateless_discarded_on_a_recorded_edge_is_the_next_record(f: Any, expected: Any) -> None:
    """D_e(f) is the record at the smallest recorded frontier containing f (⊤ if none), not the union below f."""
    view = recorded_stateless(failed=True)
    dom = view.df.domains["s"]
    got = view.discarded("s", "sb", dom.decode(f))  # type: ignore[attr-defined]
    assert dom.encode(got) == expected  # type: ignore[attr-defined]


def test_stateless_discarded_uses_live_top_as_a_record_when_not_failed() -> None:
    """A stateless processor that has not failed has ⊤ (φ(⊤) = ⊤) as its largest record."""
    view = recorded_stateless(failed=False)
    dom = view.df.domains["s"]
    assert view.discarded("s", "sb", dom.decode(7)).is_top  # type: ignore[attr-defined]


def test_stateless_recorded_edge_solves_to_a_record() -> None:
    """C2 keeps a failed stateless sender at a recorded frontier whose record fits the receiver (SPEC §3 residual)."""
    df = Dataflow(
        [
            Processor(
                "s", "epoch", stateless=True, checkpoints=[Checkpoint(2, projection={"sb": 3}), Checkpoint(8)]
            ),
            Processor("b", "epoch", checkpoints=[Checkpoint(3), Checkpoint(5)]),
        ],
        [Edge("sb", "s", "b", "recorded")],
    )
    plan = solve_frontiers(df, ["s", "b"])
    assert plan.to_json()["frontiers"] == {"s": 2, "b": 3}
    assert check_consistent(df, {"s": 2, "b": 3}, failed=["s", "b"]) == []
    bad = check_consistent(df, {"s": 4, "b": 3}, failed=["s", "b"])
    assert [(v.constraint, v.edge) for v in bad] == [("C2", "sb")]


# -- other validation ---------------------------------------------------------------------------


def test_unknown_edge_ends_are_named() -> None:
    """An edge to an undeclared processor is an UnknownNameError naming the edge and the end."""
    with pytest.raises(UnknownNameError, match=r"edge 'ab': dst 'z'"):
        Dataflow([Processor("a", "epoch")], [Edge("ab", "a", "z")])


def test_the_empty_frontier_is_implied() -> None:
    """A checkpoint at ∅ is refused: ∅ is always in F(p)."""
    with pytest.raises(ValidationError, match="always implied"):
        chain(Checkpoint("empty"))


def test_resolved_chain_starts_empty_and_ends_at_top_when_live() -> None:
    """F(p) of a processor that has not failed ends with ⊤."""
    cands = chain(Checkpoint(1)).candidates("a", failed=False)
    assert cands[0].frontier == Frontier.empty(cands[0].frontier.domain) and cands[-1].frontier.is_top


@st.composite
def _edge_mistakes(draw: st.DrawFn) -> tuple[list[Processor], list[Edge]]:
    """Processors of several domains and edges that may repeat a name, name an unknown end or not bind."""
    from falkirk.domains import Identity

    doms = draw(st.lists(st.sampled_from(["epoch", "product", "sequence", "lexicographic"]), min_size=1, max_size=5))
    procs = [Processor(f"p{i}", d, arity=2 if d in ("product", "lexicographic") else None) for i, d in enumerate(doms)]
    ends = st.sampled_from([p.name for p in procs] + ["zz"])
    projections = st.sampled_from(["identity", Identity(), "epoch_to_loop", "sequence", "bogus", {"kind": "recorded"}])
    edges = [
        Edge(f"e{draw(st.integers(0, 6))}", draw(ends), draw(ends), draw(projections))
        for _ in range(draw(st.integers(0, 8)))
    ]
    return procs, edges


def _error(procs: list[Processor], edges: list[Edge]) -> tuple[type, str] | None:
    try:
        Dataflow(procs, edges)
    except FalkirkError as exc:
        return type(exc), str(exc)
    return None


@given(_edge_mistakes())
def test_the_first_wrong_edge_in_declaration_order_is_named(case: tuple[list[Processor], list[Edge]]) -> None:
    """Property: with projections checked in groups, the error is the one checking edge by edge gives.

    Names and ends are checked first, for every edge in declaration order
    (the shortest failing prefix of the same edges between epoch
    processors with identity projections); then projections, in
    declaration order (the shortest failing prefix of the edges).
    """
    procs, edges = case

    def first_failing_prefix(ps: list[Processor], es: list[Edge]) -> tuple[type, str] | None:
        return next((err for k in range(len(es)) if (err := _error(ps, es[: k + 1])) is not None), None)

    def blame(err: tuple[type, str] | None) -> tuple[type, str] | None:
        # the error and the edge it names (a prefix's sequence domains know fewer edges, so their text differs)
        return None if err is None else (err[0], err[1].split(":")[0])

    structure = first_failing_prefix(
        [Processor(p.name, "epoch") for p in procs], [Edge(e.name, e.src, e.dst) for e in edges]
    )
    got = _error(procs, edges)
    assert got == structure if structure else blame(got) == blame(first_failing_prefix(procs, edges))


def test_edge_positions_by_name_are_made_on_first_use() -> None:
    """From Edge values the names are checked distinct at once; the name → position map waits for a read."""
    df = Dataflow([Processor("a", "epoch"), Processor("b", "epoch")], [Edge("e2", "a", "b"), Edge("e1", "b", "a")])
    assert df.table._edge_index is None
    assert len(df.edges) == len(df.bound) == 2 and df.table._edge_index is None
    assert df.edges["e1"] == Edge("e1", "b", "a") and list(df.bound) == ["e2", "e1"]
    assert df.table._edge_index == {"e2": 0, "e1": 1}
    with pytest.raises(ValidationError, match="edge 'e' is declared twice"):
        Dataflow([Processor("a", "epoch")], [Edge("e", "a", "a"), Edge("e", "a", "a")])


@pytest.mark.parametrize(
    ("epochs", "plain"),
    [([1, 2**62 - 1], True), ([1, 2**62], False), ([2**63 + 5], False), ([1, 1, 2], True)],
)
def test_only_small_int_epochs_make_a_plain_chain(epochs: list[int], plain: bool) -> None:
    """Epochs outside ``(-2**62, 2**62)`` (or beyond int64) are resolved one processor at a time, with the same answer."""
    procs = [Processor("a", "epoch", checkpoints=[Checkpoint(v) for v in epochs]), Processor("b", "epoch")]
    df = Dataflow(procs, [Edge("e", "a", "b")])
    assert ("a" in df.plain) is plain
    assert df.candidates("a", failed=True)[-1].frontier == Frontier.before(df.domains["a"], [max(epochs) + 1])
