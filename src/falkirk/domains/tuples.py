"""Shared validation and JSON encoding for the tuple domains (product, lexicographic).

Frontiers are written ``{"before": [[...], ...]}`` (the sorted antichain of the
complement) and read from that or from ``{"upto": [[...], ...]}``, the downward
closure of the listed times; ``"top"`` and ``"empty"`` stand for ``⊤`` and ``∅``.
"""

from __future__ import annotations

from typing import Any

from falkirk.domains.frontier import Frontier
from falkirk.errors import DomainError

__all__ = ["TupleCodec", "check_arity"]


def check_arity(instance: object, attribute: object, value: int) -> None:
    """attrs validator: the arity ``k`` is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DomainError(f"the arity of a tuple domain is an integer >= 1, not {value!r}")


class TupleCodec:
    """Mixin: ``check_time``, ``encode``, ``decode`` for ``k``-tuples of integers >= 0."""

    __slots__ = ()
    arity: int

    def check_time(self, t: Any) -> tuple[int, ...]:
        if (
            not isinstance(t, (tuple, list))
            or len(t) != self.arity
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in t)
        ):
            raise DomainError(f"a time of {self} is a list of {self.arity} integers >= 0, not {t!r}")
        return tuple(t)

    def encode(self, f: Frontier) -> Any:
        if f.is_top:
            return "top"
        if f.is_empty:
            return "empty"
        return {"before": [list(t) for t in f.antichain]}

    def decode(self, obj: Any, *, edge: str | None = None) -> Frontier:
        if obj == "top":
            return Frontier.top(self)  # type: ignore[arg-type]
        if obj == "empty":
            return Frontier.empty(self)  # type: ignore[arg-type]
        if isinstance(obj, dict) and len(obj) == 1:
            ((kind, times),) = obj.items()
            if kind in ("before", "upto") and isinstance(times, list):
                if kind == "before":
                    return Frontier.before(self, times)  # type: ignore[arg-type]
                return Frontier.upto(self, times)  # type: ignore[arg-type]
        raise DomainError(
            f"a frontier of {self} is 'top', 'empty', {{\"before\": [[...]]}} "
            f'or {{"upto": [[...]]}}, not {obj!r}'
        )
