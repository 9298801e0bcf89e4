"""The ``epoch`` domain: integers ``0, 1, 2, …`` in their usual total order.

Frontiers are encoded (SPEC §7) as the largest epoch they contain: ``k``
means epochs ``0..k``; ``-1`` (or ``"empty"``) is ``∅`` and ``"top"`` is ``⊤``.

>>> from falkirk.domains import Epoch, Frontier
>>> d = Epoch()
>>> f = d.frontier(3)
>>> 3 in f, 4 in f, f
(True, False, Frontier(epoch, 3))
>>> d.encode(d.frontier(-1)), d.encode(Frontier.top(d))
('empty', 'top')
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from falkirk.domains.frontier import Frontier
from falkirk.errors import DomainError

__all__ = ["Epoch"]


@frozen(cache_hash=True)
class Epoch:
    """Epochs: non-negative integers, totally ordered."""

    @property
    def name(self) -> str:
        return "epoch"

    @property
    def is_total(self) -> bool:
        return True

    def less_equal(self, a: int, b: int) -> bool:
        return a <= b

    def minimal(self) -> tuple[int, ...]:
        return (0,)

    def join_times(self, a: int, b: int) -> tuple[int, ...]:
        return (a if a >= b else b,)

    def successors(self, t: int) -> tuple[int, ...]:
        return (t + 1,)

    def sort_key(self, t: int) -> int:
        return t

    def check_time(self, t: Any) -> int:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise DomainError(f"an epoch is an integer >= 0, not {t!r}")
        return t

    # -- encoding -------------------------------------------------------------
    def frontier(self, k: int) -> Frontier:
        """The frontier of epochs ``0..k`` (``k = -1`` gives ``∅``)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < -1:
            raise DomainError(f"an epoch frontier is an integer >= -1, 'top' or 'empty', not {k!r}")
        return Frontier(self, (k + 1,))

    def last(self, f: Frontier) -> int | None:
        """The largest epoch in ``f`` (``-1`` for ``∅``, ``None`` for ``⊤``)."""
        return f.antichain[0] - 1 if f.antichain else None

    def encode(self, f: Frontier) -> Any:
        if not f.antichain:
            return "top"
        k = f.antichain[0] - 1
        return "empty" if k < 0 else k

    def decode(self, obj: Any, *, edge: str | None = None) -> Frontier:
        if obj == "top":
            return Frontier.top(self)
        if obj == "empty":
            return Frontier.empty(self)
        return self.frontier(obj)

    def describe_frontier(self, f: Frontier) -> str:
        return str(self.encode(f))

    def __str__(self) -> str:
        return "epoch"
