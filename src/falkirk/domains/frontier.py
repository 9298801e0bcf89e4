"""Frontiers: downward-closed sets of times, finite or infinite.

A :class:`Frontier` is stored as the antichain of minimal elements of its
complement (timely dataflow's convention, SPEC §1): a time ``t`` is in the
frontier iff no element ``a`` of the antichain has ``a <= t``. ``⊤`` is the
empty antichain; ``∅`` is the antichain of the domain's minimal times. In a
totally ordered domain the antichain has at most one element, so every
operation is a comparison of two bounds (the fast path).

Frontiers are immutable, hashable values. Operators: ``f <= g`` is ``⊆``,
``f & g`` is the meet, ``f | g`` the join, ``t in f`` membership.

>>> from falkirk.domains import Product, Frontier
>>> d = Product(2)
>>> f = Frontier.below(d, (1, 1))
>>> [(0, 7) in f, (5, 0) in f, (1, 1) in f, (3, 2) in f]
[True, True, False, False]
>>> g = Frontier.upto(d, [(0, 2), (2, 0)])
>>> g
Frontier(product(2), before=[(0, 3), (1, 1), (3, 0)])
>>> g <= f, (f & g) == g, (f | g) == f
(True, True, True)
>>> h = Frontier.upto(d, [(4, 4)])
>>> h <= f, f <= h, f & h
(False, False, Frontier(product(2), before=[(0, 5), (1, 1), (5, 0)]))

Complexities (``a``, ``b`` antichain sizes): membership O(a), ``⊆`` O(a·b),
meet O((a+b)²), join O((a·b)²) comparisons; each O(1) in a total domain.
In ``product(2)`` (a domain with ``staircase = True``) an antichain sorted
as tuples is a staircase, and minimising is a sort and one sweep
(O(n log n)), ``⊆`` and the meet are merges (O(a+b), the meet plus a sort of
the two runs) and the join O(a·b log(a·b)).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from falkirk.domains.base import Domain
from falkirk.errors import DomainError

__all__ = ["Frontier"]


def _minimize(domain: Domain, times: Iterable[Any]) -> tuple[Any, ...]:
    """Minimal elements of ``times``, deduplicated and sorted by ``sort_key``."""
    key = domain.sort_key
    if domain.is_total:
        best = None
        best_key = None
        for t in times:
            k = key(t)
            if best_key is None or k < best_key:
                best, best_key = t, k
        return () if best_key is None else (best,)
    if _staircase(domain):
        return _stair(sorted(set(times)))
    le = domain.less_equal
    ordered = sorted(set(times), key=key)
    out: list[Any] = []
    for t in ordered:  # anything <= t sorts no later than t
        if not any(le(a, t) for a in out):
            out.append(t)
    return tuple(out)


#: Whether a domain's antichains are staircases (``product(2)``), by domain; filled on first sight.
_STAIRCASE: dict[Any, bool] = {}


def _staircase(domain: Domain) -> bool:
    """Whether ``domain`` is ``product(2)``-like: times are pairs ordered componentwise, sorted as tuples.

    Such an antichain, sorted, is a *staircase*: first coordinates strictly
    rise and second ones strictly fall, which makes minimising, ``⊆`` and the
    meet linear merges (the domain says so with ``staircase = True``).
    """
    known = _STAIRCASE.get(domain)
    if known is None:
        known = _STAIRCASE[domain] = bool(getattr(domain, "staircase", False))
    return known


def _stair(ordered: list[Any]) -> tuple[Any, ...]:
    """The minimal pairs of ``ordered`` (distinct pairs sorted as tuples), as a staircase. Cost ``O(n)``.

    A pair is minimal exactly when its second coordinate is below every
    second coordinate before it (everything before it has a first
    coordinate no larger).
    """
    out: list[Any] = []
    low = None
    for t in ordered:
        if low is None or t[1] < low:
            out.append(t)
            low = t[1]
    return tuple(out)


def _stair_le(mine: tuple[Any, ...], other: tuple[Any, ...]) -> bool:
    """Every pair of staircase ``other`` is above some pair of staircase ``mine``. Cost ``O(a + b)``.

    For a pair ``b`` the best candidate is the last ``a`` with ``a[0] <= b[0]``
    (the one with the least second coordinate among those).
    """
    i, last = 0, len(mine) - 1
    for b in other:
        b0 = b[0]
        while i < last and mine[i + 1][0] <= b0:
            i += 1
        a = mine[i]
        if a[0] > b0 or a[1] > b[1]:
            return False
    return True


class Frontier:
    """A downward-closed set of times of ``domain`` (see the module docstring).

    Build frontiers with the class methods (:meth:`top`, :meth:`empty`,
    :meth:`below`, :meth:`before`, :meth:`upto`); the constructor takes an
    already minimal, sorted antichain and is for internal use.
    """

    __slots__ = ("domain", "antichain", "_hash")

    domain: Domain
    antichain: tuple[Any, ...]
    _hash: int | None

    def __init__(self, domain: Domain, antichain: tuple[Any, ...]) -> None:
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "antichain", antichain)
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Frontier is immutable")

    # -- construction -------------------------------------------------------
    @classmethod
    def top(cls, domain: Domain) -> Frontier:
        """``⊤``: every time of the domain."""
        return cls(domain, ())

    @classmethod
    def empty(cls, domain: Domain) -> Frontier:
        """``∅``: no time at all."""
        return cls(domain, _minimize(domain, domain.minimal()))

    @classmethod
    def before(cls, domain: Domain, times: Iterable[Any]) -> Frontier:
        """Every time that is not ``>=`` any of ``times`` (antichain form)."""
        check = domain.check_time
        return cls(domain, _minimize(domain, (check(t) for t in times)))

    @classmethod
    def below(cls, domain: Domain, t: Any) -> Frontier:
        """The largest frontier not containing ``t`` (all times not ``>= t``)."""
        return cls(domain, (domain.check_time(t),))

    @classmethod
    def upto(cls, domain: Domain, times: Iterable[Any]) -> Frontier:
        """``↓times``: the smallest frontier containing every one of ``times``."""
        result = cls.empty(domain)
        for t in times:
            t = domain.check_time(t)
            result = result | cls(domain, _minimize(domain, domain.successors(t)))
        return result

    # -- queries ------------------------------------------------------------
    def __contains__(self, t: Any) -> bool:
        le = self.domain.less_equal
        return not any(le(a, t) for a in self.antichain)

    @property
    def is_top(self) -> bool:
        """Whether this is ``⊤``."""
        return not self.antichain

    @property
    def is_empty(self) -> bool:
        """Whether this is ``∅``."""
        return self == Frontier.empty(self.domain)

    def issubset(self, other: Frontier) -> bool:
        """``self ⊆ other``."""
        self._same_domain(other)
        if not other.antichain:
            return True
        if not self.antichain:
            return False
        dom = self.domain
        if dom.is_total:
            return dom.less_equal(self.antichain[0], other.antichain[0])
        if _staircase(dom):
            return _stair_le(self.antichain, other.antichain)
        le = dom.less_equal
        mine = self.antichain
        return all(any(le(a, b) for a in mine) for b in other.antichain)

    __le__ = issubset

    def __ge__(self, other: Frontier) -> bool:
        return other.issubset(self)

    def __lt__(self, other: Frontier) -> bool:
        return self != other and self.issubset(other)

    def __gt__(self, other: Frontier) -> bool:
        return self != other and other.issubset(self)

    def meet(self, other: Frontier) -> Frontier:
        """``self ∩ other``."""
        self._same_domain(other)
        if not other.antichain:
            return self
        if not self.antichain:
            return other
        if _staircase(self.domain):
            return Frontier(self.domain, _stair(sorted(set(self.antichain + other.antichain))))
        return Frontier(self.domain, _minimize(self.domain, self.antichain + other.antichain))

    __and__ = meet

    def join(self, other: Frontier) -> Frontier:
        """``self ∪ other``."""
        self._same_domain(other)
        if not self.antichain or not other.antichain:
            return Frontier(self.domain, ())
        dom = self.domain
        if dom.is_total:
            a, b = self.antichain[0], other.antichain[0]
            return self if dom.less_equal(b, a) else other
        ups = (j for a in self.antichain for b in other.antichain for j in dom.join_times(a, b))
        return Frontier(dom, _minimize(dom, ups))

    __or__ = join

    def __iter__(self) -> Iterator[Any]:
        """Iterate over the antichain of the complement (not over the times)."""
        return iter(self.antichain)

    # -- value semantics ----------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frontier):
            return NotImplemented
        return self.antichain == other.antichain and self.domain == other.domain

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self.domain, self.antichain))
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        describe = getattr(self.domain, "describe_frontier", None)
        if describe is not None:
            return f"Frontier({self.domain}, {describe(self)})"
        if not self.antichain:
            return f"Frontier({self.domain}, top)"
        if self.is_empty:
            return f"Frontier({self.domain}, empty)"
        return f"Frontier({self.domain}, before={list(self.antichain)!r})"

    def _same_domain(self, other: Frontier) -> None:
        if other.domain is not self.domain and other.domain != self.domain:
            raise DomainError(
                f"cannot combine frontiers of different domains {self.domain} and {other.domain}"
            )
