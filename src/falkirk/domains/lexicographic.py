"""The ``lexicographic(k)`` domain: ``k``-tuples of integers ≥ 0, ordered lexicographically.

The order is total, so a frontier is a single bound: every time strictly
before a tuple ``b`` (or ``⊤``). Because ``ℕ^k`` is well ordered
lexicographically, every downward-closed set has this form.

>>> from falkirk.domains import Lexicographic, Frontier
>>> d = Lexicographic(2)
>>> f = Frontier.below(d, (1, 1))
>>> (0, 99) in f, (1, 0) in f, (1, 1) in f
(True, True, False)
>>> Frontier.upto(d, [(0, 5), (1, 2)])
Frontier(lexicographic(2), before=[(1, 3)])
"""

from __future__ import annotations

from attrs import field, frozen

from falkirk.domains.tuples import TupleCodec, check_arity

__all__ = ["Lexicographic"]


@frozen(cache_hash=True)
class Lexicographic(TupleCodec):
    """``k``-tuples in lexicographic (total) order."""

    arity: int = field(validator=check_arity)

    @property
    def name(self) -> str:
        return "lexicographic"

    @property
    def is_total(self) -> bool:
        return True

    def less_equal(self, a: tuple[int, ...], b: tuple[int, ...]) -> bool:
        return a <= b

    def minimal(self) -> tuple[tuple[int, ...], ...]:
        return ((0,) * self.arity,)

    def join_times(self, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        return (a if a >= b else b,)

    def successors(self, t: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        return (t[:-1] + (t[-1] + 1,),)

    def sort_key(self, t: tuple[int, ...]) -> tuple[int, ...]:
        return t

    def __str__(self) -> str:
        return f"lexicographic({self.arity})"
