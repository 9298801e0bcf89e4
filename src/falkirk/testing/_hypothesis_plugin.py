"""Hypothesis plugin: ``st.from_type`` strategies for falkirk's value types.

Hypothesis runs :func:`_register` at import time when falkirk is installed
with the entry point (in ``pyproject.toml``)::

    [project.entry-points.hypothesis]
    _ = "falkirk.testing._hypothesis_plugin:_register"

Registered types: the built-in domains (``Epoch``, ``Sequence``, ``Product``,
``Lexicographic``), ``Frontier`` (in a random built-in domain) and
``Dataflow``. Strategies are resolved lazily, so nothing of falkirk's
strategies is imported until a test asks for one.

>>> _register()
>>> from hypothesis import find, strategies as st
>>> from falkirk.domains import Frontier
>>> find(st.from_type(Frontier), lambda f: f.is_top)
Frontier(epoch, top)
"""

from __future__ import annotations

from typing import Any

__all__ = ["_register"]

_ARITIES = (1, 2, 3)
_EDGE_SETS = (("a",), ("a", "b"), ("x", "y", "z"))


def _domains() -> Any:
    from hypothesis import strategies as st

    from falkirk.domains import Epoch, Lexicographic, Product, Sequence

    return st.one_of(
        st.just(Epoch()),
        st.sampled_from(_ARITIES).map(Product),
        st.sampled_from(_ARITIES).map(Lexicographic),
        st.sampled_from(_EDGE_SETS).map(Sequence),
    )


def _frontiers(_: type) -> Any:
    from falkirk.testing.strategies import frontiers

    return _domains().flatmap(frontiers)


def _dataflows(_: type) -> Any:
    from falkirk.testing.strategies import dataflows

    return dataflows()


def _register() -> None:
    """Register falkirk's strategies with ``st.register_type_strategy`` (idempotent)."""
    from hypothesis import strategies as st

    from falkirk.domains import Epoch, Frontier, Lexicographic, Product, Sequence
    from falkirk.solver import Dataflow

    st.register_type_strategy(Epoch, st.just(Epoch()))
    st.register_type_strategy(Product, st.sampled_from(_ARITIES).map(Product))
    st.register_type_strategy(Lexicographic, st.sampled_from(_ARITIES).map(Lexicographic))
    st.register_type_strategy(Sequence, st.sampled_from(_EDGE_SETS).map(Sequence))
    st.register_type_strategy(Frontier, _frontiers)
    st.register_type_strategy(Dataflow, _dataflows)
