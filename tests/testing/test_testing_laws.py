"""check_domain_laws rejects broken domains, naming the law, and validates its arguments."""

from __future__ import annotations

import re
from typing import Any

import pytest
from attrs import frozen
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from falkirk.domains import Epoch, Product
from falkirk.testing import DomainLawError, check_domain_laws

SMALL_INTS = st.integers(0, 6)
PAIRS = st.tuples(st.integers(0, 3), st.integers(0, 3))


@frozen
class Ints:
    """Integers 0, 1, 2, … with a pluggable (possibly broken) order: a toy domain for the tests."""

    @property
    def name(self) -> str:
        return "toy-ints"

    @property
    def is_total(self) -> bool:
        return True

    def less_equal(self, a: int, b: int) -> bool:
        return a <= b

    def minimal(self) -> tuple[int, ...]:
        return (0,)

    def join_times(self, a: int, b: int) -> tuple[int, ...]:
        return (max(a, b),)

    def successors(self, t: int) -> tuple[int, ...]:
        return (t + 1,)

    def sort_key(self, t: int) -> Any:
        return t

    def check_time(self, t: Any) -> int:
        return t


class NotTransitive(Ints):
    """``a <= b`` iff ``b`` is ``a`` or ``a + 1``: reflexive, antisymmetric, not transitive."""

    @property
    def is_total(self) -> bool:
        return False

    def less_equal(self, a: int, b: int) -> bool:
        return b - a in (0, 1)


class NotAntisymmetric(Ints):
    """Every time is ``<=`` every other one."""

    def less_equal(self, a: int, b: int) -> bool:
        return True


class ReversedKey(Ints):
    """``sort_key`` runs against the order."""

    def sort_key(self, t: int) -> Any:
        return -t


class CollidingKey(Ints):
    """``sort_key`` maps two times to one key."""

    def sort_key(self, t: int) -> Any:
        return t // 2


class SkippingSuccessors(Ints):
    """``successors(t)`` skips ``t + 1``."""

    def successors(self, t: int) -> tuple[int, ...]:
        return (t + 2,)


class LowJoin(Ints):
    """``join_times`` returns the smaller time."""

    def join_times(self, a: int, b: int) -> tuple[int, ...]:
        return (min(a, b),)


class TwoMinimal(Ints):
    """``minimal()`` lists a time that is not minimal."""

    def minimal(self) -> tuple[int, ...]:
        return (1,)


class NotNormalising(Ints):
    """``check_time`` changes valid times."""

    def check_time(self, t: Any) -> int:
        return t + 1


@frozen
class FakeTotalProduct(Product):
    """``product(2)`` claiming to be totally ordered."""

    @property
    def is_total(self) -> bool:  # type: ignore[override]
        return True


@pytest.mark.parametrize(
    ("domain", "times", "law"),
    [
        (NotTransitive(), SMALL_INTS, "transitivity"),
        (NotAntisymmetric(), SMALL_INTS, "antisymmetry"),
        (ReversedKey(), SMALL_INTS, "sort_key agrees with the order"),
        (CollidingKey(), SMALL_INTS, "sort_key injective"),
        (SkippingSuccessors(), SMALL_INTS, "successors"),
        (LowJoin(), SMALL_INTS, "join_times"),
        (TwoMinimal(), SMALL_INTS, "minimal"),
        (NotNormalising(), SMALL_INTS, "check_time"),
        (FakeTotalProduct(2), PAIRS, "totality"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, (str, st.SearchStrategy)) else None,
)
def test_broken_domain_fails_naming_the_law(domain: Any, times: Any, law: str) -> None:
    """A domain breaking one law raises DomainLawError whose message starts with that law."""
    with pytest.raises(DomainLawError, match="^" + re.escape(law) + ":") as info:
        check_domain_laws(domain, times=times, max_examples=200)
    assert info.value.law == law


def test_transitivity_message_shows_the_counterexample() -> None:
    """The transitivity failure names a, b and c with a <= b <= c but not a <= c."""
    with pytest.raises(DomainLawError) as info:
        check_domain_laws(NotTransitive(), times=SMALL_INTS, max_examples=200)
    msg = str(info.value)
    assert msg.startswith("transitivity: a <= b and b <= c but not a <= c for a=")
    a, b, c = (int(x) for x in re.findall(r"[abc]=(\d+)", msg))
    assert (b - a, c - b) == (1, 1)


def test_a_correct_toy_domain_passes() -> None:
    """A correct user domain (plain integers) passes when given its times."""
    check_domain_laws(Ints(), times=SMALL_INTS, max_examples=50)


def test_domain_law_error_is_an_assertion_error() -> None:
    """DomainLawError subclasses AssertionError, so test runners report it as a failure."""
    assert issubclass(DomainLawError, AssertionError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"domain": "epoch"}, "is not a time domain"),
        ({"domain": Epoch, "max_examples": 5}, "is not a time domain"),
        ({"domain": Ints()}, "no default time strategy for domain family 'toy-ints'"),
        ({"domain": Epoch(), "max_examples": 0}, "max_examples=0"),
        ({"domain": Epoch(), "times": [1, 2]}, "must be a hypothesis strategy"),
    ],
)
def test_bad_arguments_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    """Invalid arguments raise InvalidArgument naming the argument."""
    domain = kwargs.pop("domain")
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        check_domain_laws(domain, **kwargs)
