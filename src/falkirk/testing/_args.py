"""Argument validation shared by falkirk's strategies (hypothesis API style)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from falkirk.domains import Domain

__all__ = ["check_domain_argument", "check_sizes", "bool_strategy"]


def check_domain_argument(domain: Any, argname: str = "domain") -> Domain:
    """``domain`` if it satisfies :class:`falkirk.domains.Domain`, else ``InvalidArgument``."""
    if isinstance(domain, type) or not isinstance(domain, Domain):
        raise InvalidArgument(
            f"{argname}={domain!r} is not a time domain (an instance with name, is_total, "
            "less_equal, minimal, join_times, successors, sort_key and check_time)"
        )
    return domain


def check_sizes(min_size: Any, max_size: Any, *, low: int = 0) -> None:
    """Validate a ``min_size``/``max_size`` pair (``max_size`` may be ``None``)."""
    for argname, value in (("min_size", min_size), ("max_size", max_size)):
        if value is None and argname == "max_size":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidArgument(f"{argname}={value!r} must be an integer >= {low}")
    if max_size is not None and min_size > max_size:
        raise InvalidArgument(f"min_size={min_size} is larger than max_size={max_size}")


def bool_strategy(value: Any, argname: str) -> SearchStrategy[bool]:
    """``value`` as a strategy of booleans: a bool becomes ``st.just(value)``."""
    if isinstance(value, bool):
        return st.just(value)
    if isinstance(value, SearchStrategy):
        return value
    raise InvalidArgument(f"{argname}={value!r} must be a bool or a strategy of bools")
