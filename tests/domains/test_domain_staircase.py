"""product(2)'s staircase fast paths (falkirk.domains.frontier) agree with the general antichain operations."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from falkirk.domains import Frontier, Product
from falkirk.domains.frontier import _stair, _stair_le, _staircase

D = Product(2)
pairs = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=8)


def _minimal(times: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Minimal elements by brute force: no other time is componentwise below."""
    ts = set(times)
    return tuple(sorted(t for t in ts if not any(a != t and D.less_equal(a, t) for a in ts)))


def _subset(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    """``⊆`` of the frontiers whose complements' antichains are ``a`` and ``b``, pairwise."""
    return all(any(D.less_equal(x, y) for x in a) for y in b)


def test_only_pairs_are_staircases() -> None:
    """product(2) declares itself a staircase domain; product(1), product(3) do not."""
    assert _staircase(D) and not _staircase(Product(1)) and not _staircase(Product(3))


@given(pairs)
def test_stair_minimises(times: list[tuple[int, int]]) -> None:
    """The sweep keeps exactly the minimal pairs, sorted (first coordinates rise, second ones fall)."""
    out = _stair(sorted(set(times)))
    assert out == _minimal(times)
    assert all(a[0] < b[0] and a[1] > b[1] for a, b in zip(out, out[1:], strict=False))


@given(pairs, pairs)
def test_stair_subset_and_meet_agree_with_pairwise(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    """``⊆`` by merge equals the pairwise test, and the meet equals the minimised union, on non-⊤ frontiers."""
    x, y = _minimal(a), _minimal(b)
    if x and y:
        assert _stair_le(x, y) == _subset(x, y)
        fx, fy = Frontier(D, x), Frontier(D, y)
        assert (fx <= fy) == _subset(x, y)
        assert (fx & fy).antichain == _minimal(list(x + y))
        assert Frontier.before(D, a).antichain == x
