"""Every built-in domain passes falkirk.testing.check_domain_laws."""

from __future__ import annotations

import pytest
from hypothesis import settings

from falkirk.domains import BUILTIN, Domain, Frontier, Product, make_domain
from falkirk.testing import check_domain_laws

INSTANCES: list[Domain] = [
    make_domain("epoch"),
    make_domain("sequence", edges=("a", "b")),
    make_domain("sequence", edges=("x",)),
    *(make_domain("product", arity=k) for k in (1, 2, 3)),
    *(make_domain("lexicographic", arity=k) for k in (1, 2, 3)),
]


def test_instances_cover_every_builtin_family() -> None:
    """The law-checked instances include every family of falkirk.domains.BUILTIN."""
    assert {d.name for d in INSTANCES} == set(BUILTIN)


@pytest.mark.parametrize("domain", INSTANCES, ids=str)
def test_builtin_domain_obeys_the_laws(domain: Domain) -> None:
    """check_domain_laws passes for the built-in domain (the profile's example count per law group)."""
    check_domain_laws(domain, max_examples=settings.default.max_examples)


def test_below_in_product_is_every_time_not_above() -> None:
    """Frontier.below(Product(2), (1,1)) holds (0,7) and (5,0) but not (1,1) or (3,2) (the issue's case)."""
    f = Frontier.below(Product(2), (1, 1))
    assert (0, 7) in f and (5, 0) in f
    assert (1, 1) not in f and (3, 2) not in f
