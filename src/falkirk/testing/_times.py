"""Default time strategies per domain family, and frontier strategies.

Re-exported by :mod:`falkirk.testing.strategies`; see there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from falkirk.domains import Domain, Frontier
from falkirk.testing._args import check_domain_argument, check_sizes

__all__ = ["times", "frontiers", "register_time_strategy"]

TimeStrategyFactory = Callable[[Domain], SearchStrategy[Any]]

#: Default time strategies, by domain family name (``domain.name``).
_TIME_STRATEGIES: dict[str, TimeStrategyFactory] = {}


def register_time_strategy(name: str, factory: TimeStrategyFactory, *, replace: bool = False) -> None:
    """Make ``times(domain)`` work for domains whose ``name`` is ``name``.

    ``factory(domain)`` returns a strategy of valid times of ``domain``.
    Small ranges find more law violations than large ones (times collide).

    >>> from falkirk.domains import Epoch
    >>> register_time_strategy("epoch", lambda d: st.integers(0, 3))
    Traceback (most recent call last):
    ...
    hypothesis.errors.InvalidArgument: a time strategy for 'epoch' is already registered (pass replace=True)
    """
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"name={name!r} must be a non-empty string")
    if not callable(factory):
        raise InvalidArgument(f"factory={factory!r} must be callable: domain -> strategy")
    if name in _TIME_STRATEGIES and not replace:
        raise InvalidArgument(f"a time strategy for {name!r} is already registered (pass replace=True)")
    _TIME_STRATEGIES[name] = factory


def _ints(hi: int) -> SearchStrategy[int]:
    return st.integers(0, hi)


register_time_strategy("epoch", lambda d: _ints(20))
register_time_strategy("product", lambda d: st.tuples(*[_ints(5)] * d.arity))  # type: ignore[attr-defined]
register_time_strategy("lexicographic", lambda d: st.tuples(*[_ints(5)] * d.arity))  # type: ignore[attr-defined]
register_time_strategy(
    "sequence",
    lambda d: st.tuples(st.sampled_from(d.edges), st.integers(1, 8)),  # type: ignore[attr-defined]
)


def times(domain: Domain) -> SearchStrategy[Any]:
    """Valid times of ``domain``, from the registry of default time strategies.

    >>> from hypothesis import find
    >>> from falkirk.domains import Sequence
    >>> find(times(Sequence(("a", "b"))), lambda t: t[0] == "b")
    ('b', 1)
    """
    check_domain_argument(domain)
    factory = _TIME_STRATEGIES.get(domain.name)
    if factory is None:
        raise InvalidArgument(
            f"no default time strategy for domain family {domain.name!r}: pass times=... "
            "or call falkirk.testing.register_time_strategy"
        )
    return factory(domain)


_default_times = times


def frontiers(
    domain: Domain,
    *,
    times: SearchStrategy[Any] | None = None,
    max_size: int = 3,
    allow_top: bool = True,
    allow_empty: bool = True,
) -> SearchStrategy[Frontier]:
    """Frontiers of ``domain``: ``⊤``, ``∅``, ``↓S`` and "every time not ≥ any of S".

    ``S`` is a list of 1..``max_size`` times drawn from ``times`` (default:
    the registry's strategy of :func:`times`). In the built-in domains ``↓S``
    is a finite set of times and the ``before`` form an infinite one (except
    in the epoch domain, where every frontier but ``⊤`` is finite).

    >>> from hypothesis import find
    >>> from falkirk.domains import Epoch
    >>> find(frontiers(Epoch()), lambda f: 3 in f and 4 not in f)
    Frontier(epoch, 3)
    """
    check_domain_argument(domain)
    if times is None:
        times = _default_times(domain)
    elif not isinstance(times, SearchStrategy):
        raise InvalidArgument(f"times={times!r} must be a hypothesis strategy of times of {domain}")
    check_sizes(1, max_size, low=1)
    for argname, value in (("allow_top", allow_top), ("allow_empty", allow_empty)):
        if not isinstance(value, bool):
            raise InvalidArgument(f"{argname}={value!r} must be a bool")
    groups = st.lists(times, min_size=1, max_size=max_size)
    options: list[SearchStrategy[Frontier]] = []
    if allow_top:
        options.append(st.just(Frontier.top(domain)))
    if allow_empty:
        options.append(st.just(Frontier.empty(domain)))
    options.append(groups.map(lambda ts: Frontier.upto(domain, ts)))
    options.append(groups.map(lambda ts: Frontier.before(domain, ts)))
    out = st.one_of(options)
    if not (allow_top and allow_empty):  # e.g. before([0]) is ∅ in epochs
        out = out.filter(lambda f: (allow_top or not f.is_top) and (allow_empty or not f.is_empty))
    return out
