"""The brute-force reference: enumeration, candidates, its own C1–C4 check."""

from __future__ import annotations

import pytest

from falkirk.domains import Epoch, Frontier, Recorded, Sequence
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
from falkirk.testing import brute_force_solve, candidate_frontiers, is_consistent

E = Epoch()


def spec_example() -> Dataflow:
    """SPEC §9's scenario."""
    return Dataflow(
        [
            Processor("src", "epoch", stateless=True),
            Processor("sum", "epoch", logs=["e2"], checkpoints=[Checkpoint(2, notifications=2, delivered={"e1": 2})]),
            Processor("sink", "epoch", checkpoints=[Checkpoint(1, delivered={"e2": 1})], live=Checkpoint("top", delivered={"e2": 4})),
        ],
        [Edge("e1", "src", "sum"), Edge("e2", "sum", "sink")],
    )


def enc(a: dict[str, Frontier]) -> dict[str, object]:
    return {p: f.domain.encode(f) for p, f in a.items()}  # type: ignore[attr-defined]


def test_spec_example_has_the_spec_answer_as_its_only_maximum() -> None:
    """The maximal consistent assignment of SPEC §9's scenario is the documented plan."""
    assert [enc(a) for a in brute_force_solve(spec_example(), ["sum"], maximal=True)] == [
        {"src": 2, "sum": 2, "sink": 1}
    ]


def test_every_enumerated_assignment_is_consistent_and_they_differ() -> None:
    """All enumerated assignments pass the checker, are distinct, and include the restart from ∅."""
    df = spec_example()
    found = brute_force_solve(df, ["sum"])
    assert all(is_consistent(df, a, ["sum"]) for a in found)
    assert len({tuple(sorted(enc(a).items(), key=str)) for a in found}) == len(found)
    assert {"src": "empty", "sum": "empty", "sink": "empty"} in [enc(a) for a in found]


def test_stateless_candidates_are_below_the_reported_frontier_when_failed() -> None:
    """A failed stateless processor's candidates are the mentioned frontiers ⊆ its last report."""
    df = Dataflow(
        [Processor("s", "epoch", stateless=True, checkpoints=[Checkpoint(2), Checkpoint(4)]), Processor("t", "epoch", checkpoints=[Checkpoint(3)])],
        [Edge("st", "s", "t")],
    )
    cands = candidate_frontiers(df, ["s"])
    assert [E.encode(f) for f in cands["s"]] == ["empty", 2, 3, 4]
    assert [E.encode(f) for f in cands["t"]] == ["empty", 3, "top"]
    assert [E.encode(f) for f in candidate_frontiers(df)["s"]][-1] == "top"


def test_failed_all_removes_every_top() -> None:
    """failed="all" (low-watermarks) leaves no processor a ⊤ candidate."""
    cands = candidate_frontiers(spec_example(), "all")
    assert not any(f.is_top for fs in cands.values() for f in fs)


def test_independent_components_multiply() -> None:
    """Unconnected processors are solved apart and combined: 3 × 3 assignments."""
    df = Dataflow([Processor(p, "epoch", checkpoints=[Checkpoint(1)]) for p in "ab"], [])
    assert len(brute_force_solve(df)) == 9
    assert [enc(a) for a in brute_force_solve(df, maximal=True)] == [{"a": "top", "b": "top"}]


def test_unrecorded_stateless_discards_fit_nowhere() -> None:
    """Between records, a stateless sender's D_e is unknown: it may not keep times its receiver lost."""
    df = Dataflow(
        [Processor("p0", "epoch", stateless=True, checkpoints=[Checkpoint(0)]), Processor("p1", "epoch", stateless=True)],
        [Edge("e0", "p1", "p0", Recorded())],
        notifications=False,
    )
    assert not is_consistent(df, {"p0": Frontier.empty(E), "p1": E.frontier(0)})
    assert is_consistent(df, {"p0": Frontier.empty(E), "p1": Frontier.empty(E)})


def test_sequence_constraints_compare_one_edge() -> None:
    """In a sequence domain C2/C3 look at edge e's count only (SPEC §7)."""
    df = Dataflow(
        [Processor("a", "sequence"), Processor("b", "sequence"), Processor("c", "sequence", stateless=True)],
        [Edge("ea", "a", "c", "sequence"), Edge("eb", "b", "c", "sequence")],
    )
    c = Sequence(["ea", "eb"])
    (best,) = brute_force_solve(df, ["b"], maximal=True)
    assert best["a"].is_top and best["c"] == c.frontier({"ea": "top"})


def test_bad_input_is_rejected() -> None:
    """Unknown failed names and oversized searches raise ValueError."""
    with pytest.raises(ValueError, match="unknown processor"):
        brute_force_solve(spec_example(), ["nope"])
    with pytest.raises(ValueError, match="too many partial assignments"):
        brute_force_solve(spec_example(), ["sum"], max_nodes=3)
