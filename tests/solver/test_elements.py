"""The value objects (``falkirk.solver.model.elements``): the hand-written ``__init__`` keeps the ``attrs`` behaviour."""

from __future__ import annotations

import pickle
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.domains.projections import Identity
from falkirk.solver import Checkpoint, Edge, Processor

_maps = st.one_of(st.none(), st.dictionaries(st.sampled_from(["e1", "e2"]), st.integers(0, 3), max_size=2))


def _generated(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """The value ``attrs``' own generated ``__init__`` (``__attrs_init__``) makes from the same arguments."""
    obj = cls.__new__(cls)
    obj.__attrs_init__(*args, **kwargs)
    return obj


@given(
    st.integers(0, 5),
    st.one_of(st.none(), st.integers(0, 5)),
    st.fixed_dictionaries({}, optional={f: _maps for f in ("delivered", "discarded", "projection", "logged")}),
)
def test_a_checkpoint_is_what_the_generated_init_makes(frontier: int, notes: Any, maps: dict[str, Any]) -> None:
    """Property: every combination of given and left-out mappings converts as ``attrs`` would."""
    ours = Checkpoint(frontier, notes, **maps)
    theirs = _generated(Checkpoint, frontier, notes, **maps)
    assert ours == theirs and repr(ours) == repr(theirs)  # not hashable: the mappings are dicts
    for f in ("delivered", "discarded", "projection", "logged"):
        assert type(getattr(ours, f)) is type(getattr(theirs, f))


def test_checkpoint_mappings_are_copied_and_empty_ones_shared() -> None:
    given_map = {"e1": 2}
    ck = Checkpoint(1, delivered=given_map)
    given_map["e1"] = 5
    assert ck.delivered == {"e1": 2}
    assert Checkpoint(1).delivered is Checkpoint(2, delivered={}).logged is Checkpoint(3, projection=None).discarded
    with pytest.raises(TypeError, match="read-only"):
        Checkpoint(1).delivered["e1"] = 1  # type: ignore[index]


@given(st.lists(st.sampled_from(["a", "b", "c"])), st.lists(st.integers(0, 3)), st.booleans())
def test_a_processor_is_what_the_generated_init_makes(logs: list[str], cks: list[int], stateless: bool) -> None:
    checkpoints = [Checkpoint(c) for c in cks]
    ours = Processor("p", "epoch", stateless, logs, checkpoints, arity=None, restartable=False)
    theirs = _generated(Processor, "p", "epoch", stateless, logs, checkpoints, arity=None, restartable=False)
    assert ours == theirs and repr(ours) == repr(theirs)
    assert type(ours.logs) is frozenset and type(ours.checkpoints) is tuple


def test_processor_defaults() -> None:
    p = Processor("p", "epoch")
    assert p == _generated(Processor, "p", "epoch")
    assert (p.logs, p.checkpoints, p.live, p.arity, p.notifications, p.restartable) == (
        frozenset(), (), None, None, None, True
    )


def test_an_edge_is_what_the_generated_init_makes() -> None:
    assert Edge("e", "a", "b") == _generated(Edge, "e", "a", "b")
    ours, theirs = Edge("e", "a", "b", "identity"), _generated(Edge, "e", "a", "b", projection="identity")
    assert ours == theirs and hash(ours) == hash(theirs) and repr(ours) == repr(theirs)
    assert Edge(name="e", src="a", dst="b").projection == Identity()
    assert Edge("e", "a", "b").projection is not Edge("e", "a", "b").projection  # a new default each time
    assert attrs.fields(Edge).projection.default == attrs.Factory(Identity)


@pytest.mark.parametrize(
    "value",
    [
        Edge("e", "a", "b", "identity"),
        Checkpoint(2, notifications=1, delivered={"e": 2}, state="s"),
        Processor("p", "epoch", stateless=True, logs=["e"], checkpoints=[Checkpoint(1)], live=Checkpoint("top")),
    ],
)
def test_values_stay_frozen_evolvable_and_picklable(value: Any) -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        value.name = "x"
    assert pickle.loads(pickle.dumps(value)) == value
    first = attrs.fields(type(value))[0].name
    changed = attrs.evolve(value, **{first: "other"})
    assert getattr(changed, first) == "other" and changed != value
    assert attrs.evolve(changed, **{first: getattr(value, first)}) == value


def test_arguments_are_checked_as_before() -> None:
    with pytest.raises(TypeError):
        Edge("e", "a")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Checkpoint(1, colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Processor("p")  # type: ignore[call-arg]
