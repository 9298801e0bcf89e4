"""The time-domain protocol every domain implements.

A domain is a set of logical times with a partial order. falkirk never uses
Python's ``<`` on times: the order belongs to the domain (``less_equal``),
as in timely dataflow's ``PartialOrder`` trait. A domain whose order is total
says so with ``is_total``; that promise unlocks single-bound frontiers.

Besides the order, a domain names the operations frontiers need when they
are represented by the antichain of minimal elements of their complement
(SPEC §1):

* ``minimal()`` — the minimal times (the antichain of the empty frontier);
* ``join_times(a, b)`` — the minimal common upper bounds of two times
  (empty when they have none);
* ``successors(t)`` — the minimal times that are **not** ``<= t``
  (the antichain of ``↓{t}``).

``sort_key`` must be injective and a linear extension of the order
(``a < b`` implies ``sort_key(a) < sort_key(b)``); it makes representations
canonical and lets antichains be minimised in one sorted pass.
``check_time`` validates and normalises a time (e.g. a JSON list becomes a
tuple), raising :class:`falkirk.errors.DomainError`.

A domain must be hashable and compare equal to an equivalent domain.

>>> from falkirk.domains import Product
>>> d = Product(2)
>>> d.less_equal((0, 3), (1, 3)), d.less_equal((0, 3), (1, 2))
(True, False)
>>> d.successors((1, 2))
((2, 0), (0, 3))
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol, runtime_checkable

__all__ = ["Domain", "Time"]

Time = Hashable


@runtime_checkable
class Domain(Protocol):
    """A partially ordered set of logical times (see the module docstring)."""

    @property
    def name(self) -> str:
        """Registry name of the domain family, e.g. ``"epoch"``."""
        ...

    @property
    def is_total(self) -> bool:
        """Whether ``less_equal`` is a total order."""
        ...

    def less_equal(self, a: Any, b: Any) -> bool:
        """Whether ``a <= b`` in the domain's order."""
        ...

    def minimal(self) -> tuple[Any, ...]:
        """The minimal times of the domain."""
        ...

    def join_times(self, a: Any, b: Any) -> tuple[Any, ...]:
        """Minimal common upper bounds of ``a`` and ``b`` (may be empty)."""
        ...

    def successors(self, t: Any) -> tuple[Any, ...]:
        """Minimal times that are not ``<= t``."""
        ...

    def sort_key(self, t: Any) -> Any:
        """A key whose order extends the domain's order."""
        ...

    def check_time(self, t: Any) -> Any:
        """Validate ``t`` and return its normal form, or raise ``DomainError``."""
        ...
