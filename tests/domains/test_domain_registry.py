"""The domain registry: names to factories (SPEC §7)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from falkirk.domains import (
    REGISTRY,
    Epoch,
    Lexicographic,
    Product,
    Sequence,
    domain_options,
    make_domain,
    register_domain,
)
from falkirk.errors import DomainError, UnknownNameError


@pytest.fixture
def scratch_name() -> Iterator[str]:
    """A registry name removed again after the test."""
    name = "test-scratch-domain"
    yield name
    REGISTRY.pop(name, None)


def test_make_domain_builds_the_builtins() -> None:
    """make_domain builds each family from its scenario options."""
    assert make_domain("epoch") == Epoch()
    assert make_domain("product", arity=3) == Product(3)
    assert make_domain("lexicographic", arity=2) == Lexicographic(2)
    assert make_domain("sequence", edges=["b", "a"]) == Sequence(("a", "b"))
    assert domain_options("sequence") == ("edges",) and domain_options("epoch") == ()


def test_unknown_names_and_options_are_rejected() -> None:
    """Unknown families are UnknownNameErrors listing the known ones; bad options are DomainErrors."""
    with pytest.raises(UnknownNameError, match="unknown domain 'epochs'; known: "):
        make_domain("epochs")
    with pytest.raises(UnknownNameError):
        domain_options("epochs")
    with pytest.raises(DomainError, match="bad options"):
        make_domain("epoch", arity=2)


def test_register_domain(scratch_name: str) -> None:
    """A registered family is built by make_domain; re-registering needs replace=True."""
    register_domain(scratch_name, lambda width: Product(width), options=("width",))
    assert make_domain(scratch_name, width=2) == Product(2)
    assert domain_options(scratch_name) == ("width",)
    with pytest.raises(DomainError, match="already registered"):
        register_domain(scratch_name, Epoch)
    register_domain(scratch_name, Epoch, replace=True)
    assert make_domain(scratch_name) == Epoch()


def test_builtins_cannot_be_replaced() -> None:
    """The built-in families are not replaceable."""
    with pytest.raises(DomainError, match="cannot be replaced"):
        register_domain("epoch", Epoch, replace=True)
