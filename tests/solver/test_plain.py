"""Deferred resolution of plain processors (``falkirk.solver.model.plain``): same acceptance, errors and metadata as resolving at once."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.domains import Epoch, Frontier, Lexicographic
from falkirk.errors import FalkirkError
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
from falkirk.solver.model import dataflow as dataflow_module
from falkirk.solver.model.plain import plain_chain

#: Checkpoint frontiers as users give them: valid epochs, repeats, and values the model refuses.
FRONTIERS = st.one_of(
    st.integers(-2, 6),
    st.sampled_from(["top", "empty", True, 1.5, None]),
    st.builds(Epoch().frontier, st.integers(-1, 6)),
)


def _build(spec: list[tuple[Any, list[Any], bool, bool]], edges: list[tuple[int, int, bool]]) -> Dataflow:
    """A dataflow from ``(domain, checkpoint frontiers, stateless, plain)`` per processor and ``(src, dst, logged)`` edges."""
    names = [f"p{i}" for i in range(len(spec))]
    procs = []
    for i, (dom, fronts, stateless, plain) in enumerate(spec):
        cks = [Checkpoint(f) if plain else Checkpoint(f, state="s") for f in fronts]
        logs = [f"e{k}" for k, (s, _, lg) in enumerate(edges) if s == i and lg]
        procs.append(Processor(names[i], dom, stateless=stateless, logs=logs, checkpoints=cks))
    return Dataflow(procs, [Edge(f"e{k}", names[s], names[d]) for k, (s, d, _) in enumerate(edges)])


def _outcome(spec: Any, edges: Any) -> Any:
    """The chains (with all metadata) of every processor, or the error type and message."""
    try:
        df = _build(spec, edges)
    except FalkirkError as exc:
        return type(exc), str(exc)
    return {p: (df.candidates(p, failed=True), df.live_meta(p)) for p in df.processors}


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[tuple[Any, list[Any], bool, bool]], list[tuple[int, int, bool]]]:
    """Small graphs of epoch (and a few lexicographic) processors with plain or not-quite-plain checkpoints."""
    n = draw(st.integers(1, 4))
    spec = []
    for _ in range(n):
        dom = draw(st.sampled_from(["epoch", "epoch", Epoch(), Lexicographic(2)]))
        if isinstance(dom, Lexicographic):
            times = st.tuples(st.integers(0, 2), st.integers(0, 2))
            fronts: list[Any] = [Frontier.below(dom, t) for t in draw(st.lists(times, max_size=3))]
        else:
            fronts = draw(st.lists(FRONTIERS, max_size=4))
        spec.append((dom, fronts, draw(st.booleans()), draw(st.booleans()) or draw(st.booleans())))
    edges = draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.booleans()), max_size=2 * n)
    )
    kinds = [isinstance(s[0], Lexicographic) for s in spec]
    edges = [e for e in edges if kinds[e[0]] == kinds[e[1]]]  # identity edges join equal domains
    return spec, edges


@given(graphs())
def test_deferred_resolution_matches_resolving_at_once(case: Any) -> None:
    """Property: a Dataflow accepts, refuses (same error, same message) and resolves exactly as when nothing is deferred."""
    spec, edges = case
    got = _outcome(spec, edges)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dataflow_module, "DEFER_PLAIN", False)
        mp.setattr(dataflow_module, "plain_chain", lambda df, name: None)
        want = _outcome(spec, edges)
    assert got == want


def test_plain_chains_are_deferred_and_others_resolved_at_once() -> None:
    """Bare epoch checkpoints are kept as epochs, repeats dropped; a checkpoint with more is resolved at once."""
    df = Dataflow(
        [
            Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(1), Checkpoint(1), Checkpoint(3)]),
            Processor("b", "epoch", checkpoints=[Checkpoint(2, state="s")]),
        ],
        [Edge("ab", "a", "b")],
    )
    assert df.plain == {"a": [1, 3]}
    assert "a" not in df._resolved and "b" in df._resolved
    assert [m.frontier for m in df.candidates("a", failed=True)][1:] == [
        Epoch().frontier(1),
        Epoch().frontier(3),
    ]


def test_a_plain_chain_that_is_not_increasing_is_refused_as_before() -> None:
    """A decreasing bare chain is not deferred: the full resolution names the checkpoint."""
    with pytest.raises(FalkirkError, match=r"processor 'a': checkpoint 1 .*increasing order"):
        Dataflow([Processor("a", "epoch", checkpoints=[Checkpoint(3), Checkpoint(1)])], [])


def test_live_metadata_or_other_projections_are_not_plain() -> None:
    """Given live metadata, or an output edge that is not identity, the processor is resolved at once."""
    df = Dataflow(
        [
            Processor("a", "epoch", checkpoints=[Checkpoint(1)], live=Checkpoint("top")),
            Processor("b", "epoch", checkpoints=[Checkpoint(1)]),
            Processor("c", Lexicographic(2)),
        ],
        [Edge("bc", "b", "c", "epoch_to_loop")],
    )
    assert plain_chain(df, "a") is None and plain_chain(df, "b") is None
    assert plain_chain(df, "c") == []
