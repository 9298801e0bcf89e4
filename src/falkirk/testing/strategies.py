"""Hypothesis strategies for falkirk: times, frontiers, dataflows, failures.

In the style of ``hypothesis.extra``: options are keyword-only, arguments are
validated at once (``hypothesis.errors.InvalidArgument`` naming the
argument), and sizes are ``min_size``/``max_size``.

* :func:`times` — times of a domain, from a registry of default strategies
  (built-ins: epochs ``0..20``; product/lexicographic tuples of integers
  ``0..5``; sequence ``(edge, 1..8)``). Register one for your own domain
  family with :func:`register_time_strategy`.
* :func:`frontiers` — frontiers of a domain, finite and infinite, ``⊤`` and
  ``∅`` included.
* :func:`dataflows` — valid :class:`falkirk.solver.Dataflow` objects with
  random monotone checkpoint chains (see :mod:`falkirk.testing.generate`).
* :func:`failure_sets`, :func:`failure_schedules` — which processors fail.

>>> from hypothesis import find
>>> from falkirk.domains import Product
>>> find(frontiers(Product(2)), lambda f: not f.is_top and (7, 0) in f and (0, 7) in f)
Frontier(product(2), before=[(1, 1)])
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from falkirk.solver import Dataflow
from falkirk.testing._args import check_sizes
from falkirk.testing._times import frontiers, register_time_strategy, times
from falkirk.testing.generate import dataflows

__all__ = [
    "times",
    "frontiers",
    "register_time_strategy",
    "dataflows",
    "failure_sets",
    "failure_schedules",
]


def _check_dataflow(dataflow: object) -> Dataflow:
    if not isinstance(dataflow, Dataflow):
        raise InvalidArgument(f"dataflow={dataflow!r} must be a falkirk.solver.Dataflow")
    return dataflow


def failure_sets(
    dataflow: Dataflow, *, min_size: int = 0, max_size: int | None = None
) -> SearchStrategy[frozenset[str]]:
    """Sets of failed processors of ``dataflow`` (names), ``min_size..max_size`` of them.

    >>> from hypothesis import find
    >>> from falkirk.solver import Dataflow, Processor
    >>> df = Dataflow([Processor("a", "epoch"), Processor("b", "epoch")], [])
    >>> sorted(find(failure_sets(df, min_size=2), lambda s: True))
    ['a', 'b']
    """
    names = list(_check_dataflow(dataflow).processors)
    check_sizes(min_size, max_size)
    if min_size > len(names):
        raise InvalidArgument(f"min_size={min_size} but the dataflow has only {len(names)} processors")
    if not names:
        return st.just(frozenset())
    return st.frozensets(st.sampled_from(names), min_size=min_size, max_size=max_size)


def failure_schedules(
    dataflow: Dataflow, *, min_size: int = 1, max_size: int = 3
) -> SearchStrategy[list[frozenset[str]]]:
    """Successive failures: lists of ``min_size..max_size`` non-empty failure sets.

    >>> from hypothesis import find
    >>> from falkirk.solver import Dataflow, Processor
    >>> df = Dataflow([Processor("a", "epoch")], [])
    >>> find(failure_schedules(df, min_size=2), lambda s: True)
    [frozenset({'a'}), frozenset({'a'})]
    """
    if not _check_dataflow(dataflow).processors:
        raise InvalidArgument("dataflow has no processors, so nothing can fail")
    check_sizes(min_size, max_size)
    return st.lists(failure_sets(dataflow, min_size=1), min_size=min_size, max_size=max_size)
