"""Edge projections (SPEC §2, §7): binding, application, residuals, specs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.domains import (
    Epoch,
    EpochToLoop,
    EpochToSequence,
    Frontier,
    FunctionProjection,
    Identity,
    Lexicographic,
    Product,
    Recorded,
    Sequence,
    SequenceCount,
    SequenceToEpoch,
    projection_from_spec,
)
from falkirk.errors import ProjectionError
from falkirk.testing import frontiers

EPOCH = Epoch()
LOOP = Product(2)
ONE = Sequence(["e"])
EPOCHS = st.integers(-1, 8).map(EPOCH.frontier) | st.just(Frontier.top(EPOCH))


# -- identity -----------------------------------------------------------------------------------
def test_identity_maps_a_frontier_to_itself() -> None:
    """identity is f ↦ f with residual Y ↦ Y."""
    b = Identity().bind(LOOP, Product(2), "e")
    f = Frontier.below(LOOP, (1, 1))
    assert b.apply(f) == f and b.residual(f) == f


@pytest.mark.parametrize(
    ("source", "target"),
    [(Product(2), Lexicographic(2)), (Product(2), Product(3)), (EPOCH, LOOP), (ONE, ONE)],
    ids=str,
)
def test_identity_rejects_mismatched_domains(source: Any, target: Any) -> None:
    """identity needs the same domain (family and arity), never a sequence domain; errors name the edge."""
    with pytest.raises(ProjectionError, match="edge 'e7'"):
        Identity().bind(source, target, "e7")


# -- epoch_to_loop -----------------------------------------------------------------------------
@pytest.mark.parametrize("target", [LOOP, Lexicographic(2), Product(3)], ids=str)
def test_epoch_to_loop_apply(target: Any) -> None:
    """Epochs 0..e become every loop iteration of epochs 0..e."""
    b = EpochToLoop().bind(EPOCH, target, "in")
    f = b.apply(EPOCH.frontier(2))
    pad = (0,) * (target.arity - 2)
    assert (2, 99) + pad in f and (0, 5) + pad in f and (3, 0) + pad not in f
    assert b.apply(Frontier.top(EPOCH)).is_top and b.apply(Frontier.empty(EPOCH)).is_empty


def test_epoch_to_loop_residual() -> None:
    """The residual keeps the epochs whose whole loop range is inside Y."""
    b = EpochToLoop().bind(EPOCH, LOOP, "in")
    assert b.residual(Frontier.below(LOOP, (1, 5))) == EPOCH.frontier(0)
    assert b.residual(Frontier.upto(LOOP, [(4, 4)])) == Frontier.empty(EPOCH)
    assert b.residual(Frontier.before(LOOP, [(3, 0)])) == EPOCH.frontier(2)
    assert b.residual(Frontier.top(LOOP)).is_top


@given(EPOCHS, frontiers(LOOP))
def test_epoch_to_loop_residual_is_the_galois_adjoint(f: Frontier, y: Frontier) -> None:
    """apply(f) ⊆ Y exactly when f ⊆ residual(Y)."""
    b = EpochToLoop().bind(EPOCH, LOOP, "in")
    assert (b.apply(f) <= y) == (f <= b.residual(y))


@pytest.mark.parametrize(("source", "target"), [(LOOP, LOOP), (EPOCH, EPOCH), (EPOCH, Product(1))], ids=str)
def test_epoch_to_loop_rejects_other_domains(source: Any, target: Any) -> None:
    """epoch_to_loop maps epoch to a tuple domain of arity >= 2."""
    with pytest.raises(ProjectionError, match="epoch_to_loop"):
        EpochToLoop().bind(source, target, "in")


# -- sequence_to_epoch --------------------------------------------------------------------------
WINDOWS = SequenceToEpoch([3, 5]).bind(ONE, EPOCH, "w")
COUNTS = st.integers(0, 8).map(lambda n: ONE.frontier({"e": n})) | st.just(Frontier.top(ONE))


@pytest.mark.parametrize(("count", "epoch"), [(0, -1), (2, -1), (3, 0), (4, 0), (5, 1), (9, 1)])
def test_sequence_to_epoch_windows(count: int, epoch: int) -> None:
    """Epoch k is complete once the first cuts[k] messages are in f."""
    assert WINDOWS.apply(ONE.frontier({"e": count})) == EPOCH.frontier(epoch)
    assert WINDOWS.apply(Frontier.top(ONE)).is_top


@pytest.mark.parametrize(("count", "image"), [(0, -1), (3, 0), (4, 1), (5, 1), (6, "top")])
def test_sequence_to_epoch_discarded_image(count: int, image: Any) -> None:
    """The exact image holds every epoch that has a message in f (unknown epochs past the last cut)."""
    assert WINDOWS.discarded(ONE.frontier({"e": count})) == EPOCH.decode(image)


@given(COUNTS, EPOCHS)
def test_sequence_to_epoch_residuals_are_galois_adjoints(f: Frontier, y: Frontier) -> None:
    """apply(f) ⊆ Y iff f ⊆ residual(Y), and discarded(f) ⊆ Y iff f ⊆ discarded_residual(Y).

    ``residual`` is None when Y holds every epoch the cuts name: then every
    ``f`` but ``⊤`` fits, and there is no largest one.
    """
    r = WINDOWS.residual(y)
    if r is None:
        assert (WINDOWS.apply(f) <= y) == (not f.is_top)
    else:
        assert (WINDOWS.apply(f) <= y) == (f <= r)
    assert (WINDOWS.discarded(f) <= y) == (f <= WINDOWS.discarded_residual(y))


def test_sequence_to_epoch_cuts_must_grow() -> None:
    """Cuts that shrink are rejected, naming the edge."""
    with pytest.raises(ProjectionError, match="edge 'w'.*must grow"):
        SequenceToEpoch([5, 3]).bind(ONE, EPOCH, "w")


def test_sequence_to_epoch_multi_edge_cuts_need_counts_per_edge() -> None:
    """With several input edges each cut is a count per edge; the projection then has no residual."""
    two = Sequence(["a", "b"])
    with pytest.raises(ProjectionError, match="count per edge"):
        SequenceToEpoch([3]).bind(two, EPOCH, "w")
    b = SequenceToEpoch([{"a": 1, "b": 2}]).bind(two, EPOCH, "w")
    assert b.apply(two.frontier({"a": 1, "b": 2})) == EPOCH.frontier(0)
    assert b.apply(two.frontier({"a": 1})) == Frontier.empty(EPOCH)
    assert b.residual(Frontier.empty(EPOCH)) is None


# -- recorded projections ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "source", "target"),
    [(SequenceCount(), EPOCH, ONE), (EpochToSequence(), EPOCH, ONE), (Recorded(), LOOP, EPOCH)],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_recorded_projections_cannot_be_applied(spec: Any, source: Any, target: Any) -> None:
    """Recorded projections are known per checkpoint only: apply raises, residual is None."""
    b = spec.bind(source, target, "e")
    assert b.recorded
    with pytest.raises(ProjectionError, match="recorded per checkpoint"):
        b.apply(Frontier.top(source))
    assert b.residual(Frontier.top(target)) is None


@pytest.mark.parametrize(
    ("spec", "source", "target"),
    [(SequenceCount(), EPOCH, EPOCH), (SequenceCount(), EPOCH, Sequence(["other"])), (EpochToSequence(), LOOP, ONE)],
    ids=str,
)
def test_recorded_projections_check_their_domains(spec: Any, source: Any, target: Any) -> None:
    """sequence needs a sequence receiver with the edge; epoch_to_sequence needs an epoch sender."""
    with pytest.raises(ProjectionError, match="edge 'e'"):
        spec.bind(source, target, "e")


# -- user functions ----------------------------------------------------------------------------
def test_function_projection_applies_and_checks() -> None:
    """A FunctionProjection applies fn, uses residual_fn, and checks domains and results."""
    shift = FunctionProjection(lambda f: f, residual_fn=lambda y: y, source=EPOCH, target=EPOCH, label="same")
    b = shift.bind(EPOCH, EPOCH, "u")
    assert b.apply(EPOCH.frontier(2)) == EPOCH.frontier(2) and b.has_residual
    assert b.residual(EPOCH.frontier(1)) == EPOCH.frontier(1)
    with pytest.raises(ProjectionError, match="edge 'u'"):
        shift.bind(LOOP, EPOCH, "u")
    bad = FunctionProjection(lambda f: 3).bind(EPOCH, EPOCH, "u")
    assert bad.has_residual is False and bad.residual(Frontier.top(EPOCH)) is None
    with pytest.raises(ProjectionError, match="not a frontier of epoch"):
        bad.apply(Frontier.top(EPOCH))
    with pytest.raises(ProjectionError, match="no JSON form"):
        shift.to_json()


# -- specs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("identity", Identity()),
        ("epoch_to_loop", EpochToLoop()),
        ("sequence", SequenceCount()),
        ("epoch_to_sequence", EpochToSequence()),
        ("recorded", Recorded()),
        ({"kind": "sequence_to_epoch", "cuts": [3, 5]}, SequenceToEpoch((3, 5))),
    ],
)
def test_projection_specs_round_trip(spec: Any, expected: Any) -> None:
    """projection_from_spec reads every built-in, and to_json writes the same spec back."""
    p = projection_from_spec(spec)
    assert p == expected and p.to_json() == spec


@pytest.mark.parametrize(
    ("spec", "message"),
    [("shift", "unknown projection 'shift'"), ({"kind": "identity", "k": 1}, "does not take options"), (3, "a projection is")],
)
def test_bad_projection_specs(spec: Any, message: str) -> None:
    """Unknown names, unknown options and malformed specs are ProjectionErrors."""
    with pytest.raises(ProjectionError, match=message):
        projection_from_spec(spec)
