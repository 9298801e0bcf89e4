"""Checkpoint chains of ``product(k)`` and ``lexicographic(k)`` processors as columns (SPEC §1, §5, §7).

A tuple-domain frontier is the antichain of minimal times of its complement
(SPEC §1). A dataflow keeps the checkpoints of its *plain* tuple-domain
processors (:mod:`falkirk.solver.model.deferred`) as three arrays, the
partial-order counterpart of the epoch CSR of :mod:`falkirk.solver.model.table`:

* ``ptr`` (``V + 1``): processor ``i``'s checkpoints are ``ptr[i]:ptr[i+1]``;
* ``ac`` (checkpoints ``+ 1``): checkpoint ``c``'s antichain is the rows
  ``rows[ac[c]:ac[c+1]]``;
* ``rows`` (antichain elements × ``k``, ``int64``): one time per row, sorted
  as tuples within a checkpoint (the canonical order of SPEC §9).

**Encoded frontiers.** Most checkpoints of iterative jobs are *lexicographic
prefixes*: every time lexicographically before a bound ``b`` — in
``product(2)`` = ``(epoch, iteration)``, every earlier epoch and the
iterations before ``b[1]`` of epoch ``b[0]`` (Naiad's loop checkpoints). In
``product(k)`` that set is downward closed, and its antichain is ``b``
followed by ``(b[0], …, b[i-1] + 1, 0, …)`` for every ``i`` before the last
non-zero coordinate of ``b`` (:func:`lex_bounds`). Such frontiers are
nested like the bounds: ``f ⊆ g`` iff ``b(f) ≤ b(g)`` lexicographically, and
the meet is the lesser bound, so a chain of them is checked with one
lexicographic comparison per pair of rows (:func:`compare_rows`) and
solved as a total order (:mod:`falkirk.solver.vectorised.orders`). In
``lexicographic(k)`` every frontier is one (a single bound). Other
antichains are kept as they are and compared as frontiers.

Costs: :func:`lex_bounds` ``O(rows · k)`` array operations;
:func:`tuple_chains` the same plus, for a processor with a checkpoint that
is no lexicographic prefix, ``O(a · b)`` per pair of successive checkpoints
(``O(a + b)`` in ``product(2)``), in Python.

>>> import numpy as np
>>> rows = np.array([[2, 1], [3, 0], [4, 0], [1, 1], [2, 0]])
>>> b, lex = lex_bounds(np.array([0, 2, 3, 5]), rows, product=True)
>>> b.tolist(), lex.tolist()
([[2, 1], [4, 0], [1, 1]], [True, True, True])
>>> compare_rows(b[:-1], b[1:]).tolist()
[1, -1]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from falkirk.domains import Domain, Frontier
from falkirk.errors import FalkirkError

__all__ = [
    "TupleChains",
    "lex_bounds",
    "compare_rows",
    "tuple_chains",
    "lex_frontier",
    "encode_bounds",
    "decode_bound",
    "prefix_code",
    "TOP_CODE",
]

Array = Any  # a numpy array


@dataclass
class TupleChains:
    """The CSR of the module docstring, with each checkpoint's bound and whether it is a lexicographic
    prefix."""

    ptr: Array
    ac: Array
    rows: Array
    bound: Array  # (checkpoints, k): the first row of each antichain (the bound of a lexicographic prefix)
    lex: Array  # (checkpoints,): the checkpoint is the lexicographic prefix below its bound

    @classmethod
    def empty(cls, n: int, k: int = 1) -> TupleChains:
        """No checkpoint for any of ``n`` processors."""
        z = np.zeros((0, k), dtype=np.int64)
        return cls(np.zeros(n + 1, np.int64), np.zeros(1, np.int64), z, z, np.zeros(0, dtype=bool))

    def antichains(self, i: int) -> list[tuple[tuple[int, ...], ...]]:
        """Processor ``i``'s checkpoint antichains (tuples of tuples), ascending."""
        ac = self.ac[self.ptr[i] : self.ptr[i + 1] + 1].tolist()
        rows = self.rows[ac[0] : ac[-1]].tolist() if ac else []
        base = ac[0] if ac else 0
        return [tuple(map(tuple, rows[a - base : b - base])) for a, b in zip(ac, ac[1:], strict=False)]


def encode_bounds(bound: Array) -> Array | None:
    """Bounds ``(n, k)`` as one ``int64`` each, ordered as the bounds are lexicographically, or ``None``.

    Coordinate ``i`` takes ``62 // k`` bits; ``None`` when a coordinate is
    negative or does not fit. Cost ``O(n · k)``.

    >>> encode_bounds(np.array([[1, 2], [0, 7]])).tolist()
    [2147483650, 7]
    """
    k = bound.shape[1]
    bits = 62 // k
    if bound.size and (bound.min() < 0 or bound.max() >= 1 << bits):
        return None
    out = np.zeros(bound.shape[0], dtype=np.int64)
    for i in range(k):
        out = (out << bits) | bound[:, i]
    return out


def decode_bound(code: int, k: int) -> tuple[int, ...]:
    """The bound of :func:`encode_bounds`' ``code`` (``k`` coordinates)."""
    bits = 62 // k
    mask = (1 << bits) - 1
    return tuple((code >> (bits * (k - 1 - i))) & mask for i in range(k))


#: The code of ``⊤`` in :func:`prefix_code`: after every encoded bound.
TOP_CODE = 1 << 62


def _encode(bound: tuple[int, ...]) -> int | None:
    """One bound as :func:`encode_bounds` codes it (``None``: it does not fit)."""
    bits = 62 // len(bound)
    out = 0
    for x in bound:
        if not 0 <= x < 1 << bits:
            return None
        out = (out << bits) | x
    return out


def prefix_code(f: Frontier) -> int | None:
    """The code of a prefix frontier's bound (epochs: the bound ``k + 1``; ``⊤``: :data:`TOP_CODE`), or
    ``None``.

    Codes order prefix frontiers of one domain as ``⊆`` does. Cost ``O(k²)``.

    >>> from falkirk.domains import Product
    >>> prefix_code(lex_frontier(Product(2), (0, 3))), prefix_code(Frontier.before(Product(2), [(0, 3), (2, 0)]))
    (3, None)
    """
    a = f.antichain
    if not a:
        return TOP_CODE
    if not isinstance(a[0], tuple):  # a total domain of plain bounds (epochs)
        return a[0] if type(a[0]) is int and 0 <= a[0] < TOP_CODE else None
    if not f.domain.is_total and lex_frontier(f.domain, a[0]).antichain != a:
        return None
    return _encode(a[0])


def lex_frontier(domain: Domain, bound: tuple[int, ...]) -> Frontier:
    """The frontier of ``domain`` holding every time lexicographically before ``bound`` (``product`` or
    ``lexicographic``)."""
    if domain.is_total:
        return Frontier(domain, (bound,))
    k = len(bound)
    last = max((i for i in range(k) if bound[i]), default=-1)
    ups = [bound[:i] + (bound[i] + 1,) + (0,) * (k - i - 1) for i in range(last - 1, -1, -1)]
    return Frontier(domain, (bound, *ups))


def compare_rows(a: Array, b: Array) -> Array:
    """Row by row, the sign of ``b - a`` in lexicographic order (``-1``, ``0``, ``1``). Cost ``O(rows ·
    k)``."""
    if a.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    d = b - a
    nz = d != 0
    first = np.argmax(nz, axis=1)
    return np.sign(d[np.arange(d.shape[0]), first]) * nz.any(axis=1)


def lex_bounds(ac: Array, rows: Array, *, product: bool) -> tuple[Array, Array]:
    """Each checkpoint's first row and whether its antichain is the lexicographic prefix below it.

    In a lexicographic domain a one-row antichain is always one; in
    ``product(k)`` the rows must be exactly those of :func:`lex_frontier`.
    An empty antichain (``⊤``) has bound 0 and is none. Cost ``O(rows · k)``.
    """
    n = ac.shape[0] - 1
    k = rows.shape[1]
    size = np.diff(ac)
    some = size > 0
    bound = np.zeros((n, k), dtype=np.int64)
    bound[some] = rows[ac[:-1][some]]
    if not product:
        return bound, size == 1
    nonzero = bound != 0
    # 1-based index of the last non-zero coordinate (0 when the bound is all zeros)
    last = np.where(nonzero.any(axis=1), k - np.argmax(nonzero[:, ::-1], axis=1), 0)
    want = 1 + np.maximum(last - 1, 0)
    lex = some & (size == want)
    extra = np.flatnonzero(lex & (size > 1))
    if extra.size:
        lens = size[extra] - 1
        owner = np.repeat(extra, lens)
        j = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens) + 1  # 1.. within each antichain
        pos = last[owner] - j - 1  # the coordinate that goes up by one
        q = np.arange(k)[None, :]
        expect = np.where(q < pos[:, None], bound[owner], 0) + np.where(
            q == pos[:, None], bound[owner] + 1, 0
        )
        got = rows[np.repeat(ac[:-1][extra], lens) + j]
        bad = ~(got == expect).all(axis=1)
        lex[owner[bad]] = False
    return bound, lex


def tuple_chains(ptr: Array, ac: Array, rows: Array, domain: Domain) -> tuple[TupleChains, Array]:
    """Chains checked and de-duplicated: ``(chains of the valid processors, ok per processor)``.

    Processor ``i``'s checkpoints (``ptr``/``ac``/``rows``, canonical
    antichains, sorted and minimal, as given) are valid when none is ``∅`` or ``⊤`` and each
    strictly contains the one before, a repeat of the one before being that
    checkpoint again (SPEC §5); a processor that is not valid keeps no
    checkpoint in the result (the full resolution then names its mistake).
    """
    n = ptr.shape[0] - 1
    k = rows.shape[1]
    product = not domain.is_total
    bound, lex = lex_bounds(ac, rows, product=product)
    ncks = ac.shape[0] - 1
    seg = np.repeat(np.arange(n), np.diff(ptr))
    size = np.diff(ac)
    zero = size.astype(bool) & ~bound.any(axis=1) & (size == 1)  # the antichain of (0, …, 0): ∅
    ok = np.ones(n, dtype=bool)
    ok[seg[(size == 0) | zero]] = False
    first = np.zeros(ncks, dtype=bool)
    first[ptr[:-1][np.diff(ptr) > 0]] = True
    cmp = np.ones(ncks, dtype=np.int64)
    if ncks > 1:
        cmp[1:] = compare_rows(bound[:-1], bound[1:])
    cmp[first] = 1
    keep = np.ones(ncks, dtype=bool)
    all_lex = np.ones(n, dtype=bool)
    all_lex[seg[~lex]] = False
    fast = all_lex[seg]
    ok[seg[fast & (cmp < 0)]] = False
    keep[fast & (cmp == 0)] = False
    for i in np.flatnonzero(~all_lex & ok).tolist():  # general antichains: compared as frontiers
        lo = int(ptr[i])
        prev: Frontier | None = None
        for j, a in enumerate(TupleChains(ptr, ac, rows, bound, lex).antichains(i)):
            try:
                f: Frontier | None = Frontier.before(domain, a)
            except FalkirkError:
                f = None
            if f is None or f.antichain != a:  # not a canonical antichain: the full resolution decides
                ok[i] = False
                break
            if prev is not None and f == prev:
                keep[lo + j] = False
                continue
            if prev is not None and not prev <= f:
                ok[i] = False
                break
            prev = f
    keep &= ok[seg]
    kept = np.bincount(seg[keep], minlength=n)
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(kept, out=out_ptr[1:])
    sizes = size[keep]
    out_ac = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_ac[1:])
    row_keep = np.repeat(keep, size)
    return TupleChains(out_ptr, out_ac, rows[row_keep].reshape(-1, k), bound[keep], lex[keep]), ok
