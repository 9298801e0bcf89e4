"""The ``sequence`` domain: per-edge sequence numbers (SPEC §7).

A time is ``(edge, s)`` with ``s >= 1``: the ``s``-th message on input edge
``edge``. Times on different edges are incomparable, so the domain is the
product of one chain per input edge. A frontier is a count per edge
(``{edge: c}`` = the first ``c`` messages of each edge; absent edges count 0,
``"top"`` = every message), stored as the antichain ``{(edge, c + 1)}`` of the
first message it excludes on each edge.

>>> from falkirk.domains import Sequence
>>> d = Sequence(("a", "b"))
>>> f = d.frontier({"a": 3, "b": "top"})
>>> ("a", 3) in f, ("a", 4) in f, ("b", 10**9) in f
(True, False, True)
>>> d.counts(f)
{'a': 3, 'b': None}
>>> d.encode(f)
{'a': 3, 'b': 'top'}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from attrs import field, frozen

from falkirk.domains.frontier import Frontier
from falkirk.errors import DomainError

__all__ = ["Sequence", "INPUT_EDGE"]

#: Name of the implicit input edge of a sequence-domain processor with no inputs.
INPUT_EDGE = "@input"


def _edges(value: Iterable[str]) -> tuple[str, ...]:
    edges = tuple(sorted(set(value)))
    if not edges or not all(isinstance(e, str) and e for e in edges):
        raise DomainError(f"a sequence domain needs one or more edge names, not {value!r}")
    return edges


@frozen(cache_hash=True)
class Sequence:
    """Sequence numbers on the input edges ``edges``; the order is per edge."""

    edges: tuple[str, ...] = field(converter=_edges)

    @property
    def name(self) -> str:
        return "sequence"

    @property
    def is_total(self) -> bool:
        return len(self.edges) == 1

    def less_equal(self, a: tuple[str, int], b: tuple[str, int]) -> bool:
        return a[0] == b[0] and a[1] <= b[1]

    def minimal(self) -> tuple[tuple[str, int], ...]:
        return tuple((e, 1) for e in self.edges)

    def join_times(self, a: tuple[str, int], b: tuple[str, int]) -> tuple[tuple[str, int], ...]:
        if a[0] != b[0]:
            return ()
        return (a if a[1] >= b[1] else b,)

    def successors(self, t: tuple[str, int]) -> tuple[tuple[str, int], ...]:
        edge, s = t
        return tuple((e, s + 1) if e == edge else (e, 1) for e in self.edges)

    def sort_key(self, t: tuple[str, int]) -> tuple[str, int]:
        return t

    def check_time(self, t: Any) -> tuple[str, int]:
        if (
            isinstance(t, (tuple, list))
            and len(t) == 2
            and t[0] in self.edges
            and isinstance(t[1], int)
            and not isinstance(t[1], bool)
            and t[1] >= 1
        ):
            return (t[0], t[1])
        raise DomainError(
            f"a time of {self} is (edge, s) with edge in {list(self.edges)} and s >= 1, not {t!r}"
        )

    # -- counts -----------------------------------------------------------------
    def frontier(self, counts: Mapping[str, int | str | None]) -> Frontier:
        """The frontier holding the first ``counts[e]`` messages of each edge.

        Missing edges count 0; a count of ``"top"`` or ``None`` means every message.
        """
        if not isinstance(counts, Mapping):
            raise DomainError(f"a frontier of {self} is a mapping edge -> count, not {counts!r}")
        unknown = sorted(set(counts) - set(self.edges))
        if unknown:
            raise DomainError(f"edge(s) {unknown} are not input edges of {self}")
        anti = []
        for e in self.edges:
            c = counts.get(e, 0)
            if c is None or c == "top":
                continue
            if isinstance(c, bool) or not isinstance(c, int) or c < 0:
                raise DomainError(f"the count of edge {e!r} must be an integer >= 0 or 'top', not {c!r}")
            anti.append((e, c + 1))
        return Frontier(self, tuple(anti))

    def counts(self, f: Frontier) -> dict[str, int | None]:
        """Count per edge of ``f`` (``None`` = every message)."""
        out: dict[str, int | None] = dict.fromkeys(self.edges)
        for e, s in f.antichain:
            out[e] = s - 1
        return out

    def count(self, f: Frontier, edge: str) -> int | None:
        """Count of ``f`` on one edge (``None`` = every message)."""
        for e, s in f.antichain:
            if e == edge:
                return s - 1
        return None

    def only(self, f: Frontier, edge: str) -> Frontier:
        """``f`` on ``edge`` and ``⊤`` on every other edge (what ``edge`` alone says)."""
        return Frontier(self, tuple(t for t in f.antichain if t[0] == edge))

    def restrict(self, f: Frontier, edge: str) -> Frontier:
        """``f`` on ``edge`` and ``∅`` (count 0) on every other edge."""
        anti = [t for t in f.antichain if t[0] == edge]
        anti.extend((e, 1) for e in self.edges if e != edge)
        return Frontier(self, tuple(sorted(anti)))

    # -- encoding ---------------------------------------------------------------
    def encode(self, f: Frontier) -> Any:
        if f.is_top:
            return "top"
        out: dict[str, Any] = {}
        for e, c in self.counts(f).items():
            if c is None:
                out[e] = "top"
            elif c:
                out[e] = c
        return out if out else "empty"

    def decode(self, obj: Any, *, edge: str | None = None) -> Frontier:
        if obj == "top":
            return Frontier.top(self)
        if obj == "empty":
            return Frontier.empty(self)
        if isinstance(obj, int) and not isinstance(obj, bool):
            if edge is None:
                raise DomainError(f"a bare count {obj!r} needs an edge to refer to in {self}")
            return self.frontier({edge: obj})
        return self.frontier(obj)

    def describe_frontier(self, f: Frontier) -> str:
        enc = self.encode(f)
        return enc if isinstance(enc, str) else ", ".join(f"{e}:{c}" for e, c in enc.items())

    def __str__(self) -> str:
        return "sequence(" + ",".join(self.edges) + ")"
