"""Encodings (SPEC §7, §9), reprs and validation of the built-in domains."""

from __future__ import annotations

from typing import Any

import pytest

from falkirk.domains import Epoch, Frontier, Lexicographic, Product, Sequence
from falkirk.errors import DomainError

EPOCH = Epoch()
SEQ = Sequence(("b", "a"))
PROD = Product(2)
LEX = Lexicographic(2)


# -- epoch ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("encoded", "contains", "excludes"),
    [(3, [0, 3], [4]), ("empty", [], [0]), (-1, [], [0]), ("top", [0, 10**9], [])],
)
def test_epoch_decode(encoded: Any, contains: list[int], excludes: list[int]) -> None:
    """An epoch frontier k holds epochs 0..k; -1/'empty' is ∅, 'top' is ⊤."""
    f = EPOCH.decode(encoded)
    assert all(t in f for t in contains) and not any(t in f for t in excludes)


@pytest.mark.parametrize(("encoded", "canonical"), [(3, 3), (0, 0), (-1, "empty"), ("empty", "empty"), ("top", "top")])
def test_epoch_encode_is_canonical(encoded: Any, canonical: Any) -> None:
    """Encoding a decoded epoch frontier gives the canonical form (∅ as 'empty', never -1)."""
    assert EPOCH.encode(EPOCH.decode(encoded)) == canonical


@pytest.mark.parametrize("bad", [-2, 1.5, True, "3", None])
def test_epoch_rejects_bad_frontiers(bad: Any) -> None:
    """Anything but an integer >= -1, 'top' or 'empty' is a DomainError."""
    with pytest.raises(DomainError, match="epoch frontier"):
        EPOCH.decode(bad)


@pytest.mark.parametrize("bad", [-1, True, "0", (0,)])
def test_epoch_rejects_bad_times(bad: Any) -> None:
    """An epoch time is an integer >= 0."""
    with pytest.raises(DomainError, match="an epoch is an integer >= 0"):
        EPOCH.check_time(bad)


def test_epoch_repr_and_last() -> None:
    """Epoch frontiers print their encoding; last() is the largest epoch (None for ⊤)."""
    assert repr(EPOCH.frontier(3)) == "Frontier(epoch, 3)"
    assert repr(Frontier.empty(EPOCH)) == "Frontier(epoch, empty)"
    assert (EPOCH.last(EPOCH.frontier(3)), EPOCH.last(Frontier.empty(EPOCH)), EPOCH.last(Frontier.top(EPOCH))) == (3, -1, None)
    assert str(EPOCH) == "epoch" and EPOCH == Epoch()


# -- sequence ---------------------------------------------------------------------------------
def test_sequence_edges_are_sorted_and_deduplicated() -> None:
    """A sequence domain's edges are a sorted tuple without duplicates."""
    assert Sequence(["b", "a", "b"]).edges == ("a", "b") == SEQ.edges
    assert str(SEQ) == "sequence(a,b)" and SEQ.is_total is False and Sequence(["x"]).is_total is True


@pytest.mark.parametrize("edges", [[], [""], [1]])
def test_sequence_needs_edge_names(edges: Any) -> None:
    """A sequence domain needs one or more non-empty edge names."""
    with pytest.raises(DomainError, match="edge names"):
        Sequence(edges)


def test_sequence_counts() -> None:
    """counts/count report the first-c-messages count per edge (None for every message)."""
    f = SEQ.frontier({"a": 3, "b": "top"})
    assert SEQ.counts(f) == {"a": 3, "b": None}
    assert (SEQ.count(f, "a"), SEQ.count(f, "b")) == (3, None)
    assert SEQ.counts(Frontier.empty(SEQ)) == {"a": 0, "b": 0}
    assert ("a", 3) in f and ("a", 4) not in f and ("b", 99) in f


@pytest.mark.parametrize(
    ("counts", "encoded"),
    [
        ({"a": 3, "b": "top"}, {"a": 3, "b": "top"}),
        ({"a": 2}, {"a": 2}),
        ({"a": 0, "b": 1}, {"b": 1}),
        ({}, "empty"),
        ({"a": "top", "b": None}, "top"),
    ],
)
def test_sequence_encode_omits_zero_counts(counts: dict[str, Any], encoded: Any) -> None:
    """Encodings omit zero counts; all-zero is 'empty', all-'top' is 'top'."""
    f = SEQ.frontier(counts)
    assert SEQ.encode(f) == encoded
    assert SEQ.decode(encoded) == f


def test_sequence_bare_count_needs_an_edge() -> None:
    """A bare integer means {edge: n} when the edge is known, an error otherwise."""
    assert SEQ.decode(4, edge="b") == SEQ.frontier({"b": 4})
    with pytest.raises(DomainError, match="needs an edge"):
        SEQ.decode(4)


@pytest.mark.parametrize(
    ("counts", "message"), [({"c": 1}, "not input edges"), ({"a": -1}, "integer >= 0"), ({"a": 1.5}, "integer >= 0")]
)
def test_sequence_rejects_bad_counts(counts: dict[str, Any], message: str) -> None:
    """Unknown edges and negative or non-integer counts are DomainErrors naming the problem."""
    with pytest.raises(DomainError, match=message):
        SEQ.frontier(counts)


def test_sequence_only_and_restrict() -> None:
    """only() keeps one edge's count and opens the others; restrict() closes them."""
    f = SEQ.frontier({"a": 3, "b": 5})
    assert SEQ.only(f, "a") == SEQ.frontier({"a": 3, "b": "top"})
    assert SEQ.restrict(f, "a") == SEQ.frontier({"a": 3})


def test_sequence_repr() -> None:
    """Sequence frontiers print their counts."""
    assert repr(SEQ.frontier({"a": 3, "b": "top"})) == "Frontier(sequence(a,b), a:3, b:top)"
    assert repr(Frontier.top(SEQ)) == "Frontier(sequence(a,b), top)"
    assert repr(Frontier.empty(SEQ)) == "Frontier(sequence(a,b), empty)"


@pytest.mark.parametrize("bad", [("c", 1), ("a", 0), ("a",), ["a", True]])
def test_sequence_rejects_bad_times(bad: Any) -> None:
    """A sequence time is (edge, s) with a known edge and s >= 1."""
    with pytest.raises(DomainError, match=r"\(edge, s\)"):
        SEQ.check_time(bad)


# -- product and lexicographic ------------------------------------------------------------------
@pytest.mark.parametrize("domain", [PROD, LEX], ids=str)
def test_tuple_domains_decode_upto_and_before(domain: Any) -> None:
    """{'upto': S} is ↓S and {'before': S} the times not >= S; both encode as 'before'."""
    up = domain.decode({"upto": [[0, 2], [1, 0]]})
    assert up == Frontier.upto(domain, [(0, 2), (1, 0)])
    assert domain.decode(domain.encode(up)) == up
    before = domain.decode({"before": [[1, 1]]})
    assert before == Frontier.below(domain, (1, 1))
    assert domain.encode(before) == {"before": [[1, 1]]}


def test_product_encoding_is_the_sorted_antichain() -> None:
    """Product frontiers encode as the sorted minimal elements of the complement."""
    f = PROD.decode({"upto": [[2, 0], [0, 2]]})
    assert PROD.encode(f) == {"before": [[0, 3], [1, 1], [3, 0]]}
    assert repr(f) == "Frontier(product(2), before=[(0, 3), (1, 1), (3, 0)])"


def test_lexicographic_frontiers_are_single_bounds() -> None:
    """A lexicographic frontier is one bound: ↓{(0,5),(1,2)} is everything before (1,3)."""
    f = LEX.decode({"upto": [[0, 5], [1, 2]]})
    assert LEX.encode(f) == {"before": [[1, 3]]}
    assert repr(f) == "Frontier(lexicographic(2), before=[(1, 3)])"
    assert (0, 99) in f and (1, 3) not in f


@pytest.mark.parametrize("domain", [PROD, LEX], ids=str)
@pytest.mark.parametrize(("encoded", "canonical"), [("top", "top"), ("empty", "empty"), ({"before": [[0, 0]]}, "empty"), ({"before": []}, "top")])
def test_tuple_domains_canonical_top_and_empty(domain: Any, encoded: Any, canonical: str) -> None:
    """⊤ and ∅ always encode as 'top' and 'empty' (SPEC §9 canonical output)."""
    assert domain.encode(domain.decode(encoded)) == canonical


@pytest.mark.parametrize("domain", [PROD, LEX], ids=str)
@pytest.mark.parametrize("bad", [{"upto": [[1]]}, {"before": [[1, -1]]}, {"after": [[1, 1]]}, [[1, 1]], 3])
def test_tuple_domains_reject_bad_frontiers(domain: Any, bad: Any) -> None:
    """Wrong arity, negative components and unknown forms are DomainErrors."""
    with pytest.raises(DomainError):
        domain.decode(bad)


@pytest.mark.parametrize("arity", [0, -1, True, 1.0])
def test_tuple_domains_need_a_positive_arity(arity: Any) -> None:
    """The arity of product/lexicographic is an integer >= 1."""
    with pytest.raises(DomainError, match="arity"):
        Product(arity)


def test_product_and_lexicographic_are_different_domains() -> None:
    """product(k) and lexicographic(k) are distinct (their orders differ)."""
    assert Product(2) != Lexicographic(2) and str(Product(3)) == "product(3)"
    assert PROD.less_equal((0, 3), (1, 2)) is False and LEX.less_equal((0, 3), (1, 2)) is True


def test_frontiers_of_different_domains_do_not_mix() -> None:
    """Combining frontiers of different domains is a DomainError."""
    with pytest.raises(DomainError, match="different domains"):
        Frontier.top(PROD) & Frontier.top(LEX)
