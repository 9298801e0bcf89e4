"""The ``product(k)`` domain: Naiad structured times, ordered componentwise.

``(a1, …, ak) <= (b1, …, bk)`` iff ``ai <= bi`` for every ``i``. Frontiers
are general antichains; by Dickson's lemma every downward-closed set of
``ℕ^k`` has a finite one, so infinite frontiers such as "every time not
``>= (1, 1)``" are exact.

>>> from falkirk.domains import Product, Frontier
>>> d = Product(2)
>>> f = Frontier.below(d, (1, 1))
>>> (0, 7) in f, (5, 0) in f, (1, 1) in f, (3, 2) in f
(True, True, False, False)
"""

from __future__ import annotations

from attrs import field, frozen

from falkirk.domains.tuples import TupleCodec, check_arity

__all__ = ["Product"]


@frozen(cache_hash=True)
class Product(TupleCodec):
    """``k``-tuples in the componentwise (product) partial order."""

    arity: int = field(validator=check_arity)

    @property
    def name(self) -> str:
        return "product"

    @property
    def is_total(self) -> bool:
        return self.arity == 1

    @property
    def staircase(self) -> bool:
        """Pairs: a sorted antichain is a staircase, so ``⊆``, meet and minimising are merges
        (:mod:`~falkirk.domains.frontier`)."""
        return self.arity == 2

    def less_equal(self, a: tuple[int, ...], b: tuple[int, ...]) -> bool:
        for x, y in zip(a, b, strict=True):
            if x > y:
                return False
        return True

    def minimal(self) -> tuple[tuple[int, ...], ...]:
        return ((0,) * self.arity,)

    def join_times(self, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        return (tuple(x if x >= y else y for x, y in zip(a, b, strict=True)),)

    def successors(self, t: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        k = self.arity
        return tuple((0,) * i + (t[i] + 1,) + (0,) * (k - i - 1) for i in range(k))

    def sort_key(self, t: tuple[int, ...]) -> tuple[int, ...]:
        return t

    def __str__(self) -> str:
        return f"product({self.arity})"
