"""Edge transforms, loop projections and path summaries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.domains import Epoch, Frontier, Product
from falkirk.errors import ValidationError
from falkirk.sim.transforms import (
    ENTER,
    FEEDBACK,
    IDENTITY,
    LEAVE,
    LOOP_EXIT,
    LOOP_FEEDBACK,
    SEQUENCE,
    apply_summary,
    compose,
    identity_summary,
    summary_le,
)

LOOP = Product(2)
loop_times = st.tuples(st.integers(0, 5), st.integers(0, 5))
loop_frontiers = st.one_of(
    st.just(Frontier.top(LOOP)),
    st.lists(loop_times, max_size=3).map(lambda ts: Frontier.before(LOOP, ts) if ts else Frontier.empty(LOOP)),
)
FB = LOOP_FEEDBACK.bind(LOOP, LOOP, "fb")
EXIT = LOOP_EXIT.bind(LOOP, Epoch(), "x")


@given(loop_frontiers, loop_times)
def test_feedback_projection_is_exact_and_safe(f: Frontier, t: tuple[int, int]) -> None:
    """An event at t sends at t+(0,1): that time is in φ(f) exactly when t is in f."""
    assert ((t[0], t[1] + 1) in FB.apply(f)) == (t in f)


@given(loop_frontiers, loop_frontiers)
def test_feedback_residual_is_the_largest(f: Frontier, y: Frontier) -> None:
    """φ(f) ⊆ Y iff f ⊆ residual(Y)."""
    r = FB.residual(y)
    assert r is not None
    assert (FB.apply(f) <= y) == (f <= r)


@given(loop_frontiers, loop_times)
def test_exit_projection_is_safe(f: Frontier, t: tuple[int, int]) -> None:
    """An event outside f never sends at an epoch in φ(f)."""
    if t not in f:
        assert t[0] not in EXIT.apply(f)


@given(loop_frontiers, st.integers(-1, 6))
def test_exit_residual_is_safe_and_largest_over_whole_epochs(f: Frontier, k: int) -> None:
    """φ(residual(Y)) ⊆ Y, and every whole-epoch f with φ(f) ⊆ Y is inside residual(Y)."""
    y = Epoch().frontier(k)
    r = EXIT.residual(y)
    assert EXIT.apply(r) <= y
    whole = Frontier.below(LOOP, (min((a[0] for a in f.antichain), default=6), 0))
    if EXIT.apply(whole) <= y:
        assert whole <= r


def test_projections_of_empty_and_top() -> None:
    """φ(∅) = ∅ and φ(⊤) = ⊤ for both loop projections."""
    assert FB.apply(Frontier.empty(LOOP)).is_empty and FB.apply(Frontier.top(LOOP)).is_top
    assert EXIT.apply(Frontier.empty(LOOP)).is_empty and EXIT.apply(Frontier.top(LOOP)).is_top


def test_transform_times() -> None:
    """Each transform maps the sender's time to the receiver's."""
    assert (IDENTITY.apply(3), ENTER.apply(3), FEEDBACK.apply((3, 1)), LEAVE.apply((3, 1))) == (3, (3, 0), (3, 2), 3)


def test_transform_domain_checks() -> None:
    """A transform between the wrong kinds of processor is rejected, naming the edge."""
    with pytest.raises(ValidationError, match="'e'"):
        ENTER.check("e", "loop", "loop")
    with pytest.raises(ValidationError, match="sequence"):
        IDENTITY.check("e", "epoch", "sequence")
    SEQUENCE.check("e", "epoch", "sequence")
    FEEDBACK.check("e", "loop", "loop")


def test_summaries_compose_and_order() -> None:
    """Going round a loop adds an iteration; leaving and re-entering resets it."""
    s = compose(compose(identity_summary("loop"), FEEDBACK), FEEDBACK)
    assert apply_summary(s, (2, 3)) == (2, 5)
    reset = compose(compose(s, LEAVE), ENTER)
    assert apply_summary(reset, (2, 3)) == (2, 0)
    assert summary_le(reset, compose(reset, FEEDBACK)) and not summary_le(s, reset)
    assert summary_le(("loop", False, 1), ("loop", True, 1)) and not summary_le(("loop", True, 0), ("loop", False, 0))
