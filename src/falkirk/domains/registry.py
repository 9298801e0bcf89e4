"""The domain registry: scenario names → domain factories.

``BUILTIN`` holds the four built-in families. A factory takes the options a
scenario gives a processor (``arity`` for tuple domains, ``edges`` for the
sequence domain) and returns a domain. Register your own with
:func:`register_domain`.

>>> from falkirk.domains import make_domain
>>> make_domain("product", arity=2)
Product(arity=2)
>>> make_domain("sequence", edges=["b", "a"])
Sequence(edges=('a', 'b'))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from falkirk.domains.base import Domain
from falkirk.domains.epoch import Epoch
from falkirk.domains.lexicographic import Lexicographic
from falkirk.domains.product import Product
from falkirk.domains.sequence import Sequence
from falkirk.errors import DomainError, UnknownNameError

__all__ = ["BUILTIN", "REGISTRY", "register_domain", "make_domain", "domain_options"]

DomainFactory = Callable[..., Domain]


def _epoch() -> Domain:
    return Epoch()


def _product(arity: int) -> Domain:
    return Product(arity)


def _lexicographic(arity: int) -> Domain:
    return Lexicographic(arity)


def _sequence(edges: Any) -> Domain:
    return Sequence(edges)


#: The built-in families, by scenario name (read-only view).
BUILTIN: Mapping[str, DomainFactory] = {
    "epoch": _epoch,
    "sequence": _sequence,
    "product": _product,
    "lexicographic": _lexicographic,
}

#: Every registered family: the built-ins plus user registrations.
REGISTRY: dict[str, DomainFactory] = dict(BUILTIN)

#: Which scenario options each family takes (``edges`` is filled in from the graph).
_OPTIONS: dict[str, tuple[str, ...]] = {
    "epoch": (),
    "sequence": ("edges",),
    "product": ("arity",),
    "lexicographic": ("arity",),
}


def register_domain(
    name: str, factory: DomainFactory, *, options: tuple[str, ...] = (), replace: bool = False
) -> None:
    """Register a domain family under ``name``.

    ``factory(**options)`` must return an object satisfying
    :class:`falkirk.domains.Domain`; ``options`` names the keyword
    arguments a scenario may give (``"arity"``, ``"edges"`` or your own).
    Check a new domain with ``falkirk.testing.check_domain_laws``.
    """
    if not isinstance(name, str) or not name:
        raise DomainError(f"a domain name is a non-empty string, not {name!r}")
    if name in REGISTRY and not replace:
        raise DomainError(f"domain {name!r} is already registered (pass replace=True to override)")
    if name in BUILTIN and replace:
        raise DomainError(f"the built-in domain {name!r} cannot be replaced")
    REGISTRY[name] = factory
    _OPTIONS[name] = tuple(options)


def domain_options(name: str) -> tuple[str, ...]:
    """The options family ``name`` takes."""
    if name not in REGISTRY:
        raise UnknownNameError(f"unknown domain {name!r}; known: {sorted(REGISTRY)}")
    return _OPTIONS.get(name, ())


def make_domain(name: str, **options: Any) -> Domain:
    """Build a domain of family ``name`` with ``options`` (see :data:`BUILTIN`)."""
    factory = REGISTRY.get(name)
    if factory is None:
        raise UnknownNameError(f"unknown domain {name!r}; known: {sorted(REGISTRY)}")
    try:
        return factory(**options)
    except TypeError as exc:
        raise DomainError(f"domain {name!r}: bad options {sorted(options)} ({exc})") from None
