"""Which processors a :class:`~falkirk.solver.model.Dataflow` resolves on first use, and their columns (SPEC
§3, §5, §9).

A processor is *plain* when its checkpoints give only their frontiers, it
has no live metadata and none of its output edges has a recorded
projection. Every resolved field of such a checkpoint is then a safe
default (SPEC §9): ``N_p(f) = f`` (or ``∅``), ``M_e(f) = f``,
``φ_e(f)`` and ``D_e(f)`` the edge's projection of ``f`` (``∅`` on logged
edges). So its chain is valid exactly when the frontiers, leaving out
repeats of the one before, strictly increase (neither ``∅`` nor ``⊤``) and,
on each output edge whose projection is not the identity, the images
``φ_e(∅) ⊆ φ_e(f_1) ⊆ …`` can be computed and rise too. That much is checked
here, with array operations and one call of each projection per distinct
frontier (:func:`check_images_many`); the processor is then resolved only when
its metadata are read (:func:`~falkirk.solver.model.resolve.resolve_processor`,
the same code and result as resolving at once). Anything else is resolved
at construction, which raises the errors it always raised.

Plain chains are kept as columns: epochs in CSR form
(:mod:`falkirk.solver.model.table`), ``product(k)`` and
``lexicographic(k)`` antichains per domain (:mod:`falkirk.solver.model.orders`).

Costs: :func:`epoch_candidates` and :func:`tuple_candidates` ``O(k)`` per
processor with ``k`` checkpoints (one pass over the values, then array
operations); :func:`check_images_many` one projection call per distinct
frontier and distinct projection, and one ``⊆`` per distinct pair of
successive images.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from itertools import chain
from operator import attrgetter, countOf
from typing import TYPE_CHECKING, Any

import numpy as np

from falkirk.domains import Domain, Epoch, Frontier, Lexicographic, Product
from falkirk.domains.projections import BoundProjection
from falkirk.errors import FalkirkError
from falkirk.solver.model.elements import EMPTY_MAPPING, Checkpoint, Processor
from falkirk.solver.model.orders import (
    TupleChains,
    decode_bound,
    encode_bounds,
    lex_frontier,
    prefix_code,
    tuple_chains,
)
from falkirk.solver.model.table import epoch_chains

if TYPE_CHECKING:
    from falkirk.solver.model.dataflow import Dataflow

__all__ = [
    "epoch_candidates",
    "tuple_candidates",
    "check_images_many",
    "tuple_ids",
    "select_chains",
    "epoch_frontier",
    "TUPLE_DOMAINS",
]

Array = Any  # a numpy array
#: The domain types whose plain chains are kept as antichain columns.
TUPLE_DOMAINS = (Product, Lexicographic)

_PLAIN_TAIL = attrgetter("notifications", "delivered", "discarded", "projection", "logged", "state")
# what a plain checkpoint gives besides its frontier (the shared empty mapping: compared by identity first)
_NOTHING_MORE: tuple[Any, ...] = (None, EMPTY_MAPPING, EMPTY_MAPPING, EMPTY_MAPPING, EMPTY_MAPPING, None)
_FRONTIER = attrgetter("frontier")


def _small_ints(values: list[Any]) -> Any:
    """``values`` as an ``int64`` array when every one is an ``int`` that fits (else ``None``)."""
    if not set(map(type, values)) <= {int}:
        return None
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return None


def _bare(cks: list[tuple[Checkpoint, ...]]) -> tuple[list[Any], Array, Array]:
    """The checkpoints of each processor flattened: ``(flat, segment of each, fine per processor)``.

    A processor is not fine when one of its checkpoints is not a
    :class:`Checkpoint` giving only its frontier; its places in ``flat``
    hold ``None``.
    """
    counts = np.fromiter(map(len, cks), dtype=np.int64, count=len(cks))
    flat: list[Any] = list(chain.from_iterable(cks))
    seg = np.repeat(np.arange(len(cks)), counts)
    fine = np.ones(len(cks), dtype=bool)
    if set(map(type, flat)) - {Checkpoint}:
        wrong = [j for j, c in enumerate(flat) if type(c) is not Checkpoint]
        fine[seg[wrong]] = False
        for j in wrong:
            flat[j] = None
    given = flat if fine.all() else [c for c in flat if c is not None]
    # streamed: a list of 10^5 tuples would wake the garbage collector over the caller's values
    if countOf(map(_PLAIN_TAIL, given), _NOTHING_MORE) != len(given):
        more = [j for j, c in enumerate(flat) if c is not None and _PLAIN_TAIL(c) != _NOTHING_MORE]
        fine[seg[more]] = False
    return flat, seg, fine


def _epoch_of(f: Frontier) -> Any:
    """Epoch ``k`` of the frontier ``↓k`` of an epoch domain; ``None`` (not plain) for ``⊤`` or another
    domain."""
    if type(f.domain) is Epoch and f.antichain:
        return f.antichain[0] - 1
    return None


def epoch_candidates(procs: list[Processor], idx: Array) -> tuple[Array, Array, Array]:
    """Of processors ``idx`` (epoch domain), which are plain, and their distinct epochs: ``(fine, d_ptr,
    d_val)``.

    ``d_ptr``/``d_val`` is the CSR over ``idx`` (a processor that is not
    fine keeps its epochs there; :func:`select_chains` drops them).
    """
    flat, seg, fine = _bare([procs[i].checkpoints for i in idx.tolist()])
    vals = [-1 if c is None else c.frontier for c in flat]
    if Frontier in set(map(type, vals)):  # epoch frontiers given as values (a scenario file's): ↓k is k
        vals = [_epoch_of(v) if type(v) is Frontier else v for v in vals]
    epochs = _small_ints(vals)
    bad: list[int] = []
    if epochs is None:  # some frontier is not an int, or too large for int64: one by one
        small = [type(v) is int and -(2**62) < v < 2**62 for v in vals]
        bad = [j for j, ok in enumerate(small) if not ok]
        epochs = np.array([v if ok else -1 for v, ok in zip(vals, small, strict=True)], np.int64)
    else:
        bad = np.flatnonzero((epochs <= -(2**62)) | (epochs >= 2**62)).tolist()
    if bad:
        fine[seg[bad]] = False
        epochs[bad] = -1
    sub_ptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(seg, minlength=idx.shape[0]), out=sub_ptr[1:])
    d_ptr, d_val, ok = epoch_chains(sub_ptr, epochs)
    return fine & ok, d_ptr, d_val


def _antichain(domain: Domain, value: Any) -> tuple[Any, ...] | None:
    """The antichain of a checkpoint frontier given as a :class:`Frontier` of ``domain`` or its encoding."""
    if type(value) is Frontier:
        return value.antichain if value.domain is domain or value.domain == domain else None
    try:
        return domain.decode(value).antichain  # type: ignore[attr-defined]
    except (FalkirkError, TypeError, ValueError):
        return None


def tuple_candidates(procs: list[Processor], idx: Array, domain: Domain) -> tuple[Array, TupleChains]:
    """Of processors ``idx`` (all in ``domain``, a tuple domain), which are plain, and their chains over
    ``idx``."""
    flat, seg, fine = _bare([procs[i].checkpoints for i in idx.tolist()])
    k = domain.arity  # type: ignore[attr-defined]
    acs: list[Any] = []
    for j, c in enumerate(flat):
        a = None if c is None else _antichain(domain, c.frontier)
        if a is None:
            fine[seg[j]] = False
            a = ()
        acs.append(a)
    sizes = np.fromiter(map(len, acs), dtype=np.int64, count=len(acs))
    try:
        rows = np.fromiter(chain.from_iterable(chain.from_iterable(acs)), dtype=np.int64)
        rows = rows.reshape(-1, k)
        if rows.shape[0] != int(sizes.sum()):
            raise ValueError("ragged times")
    except (TypeError, ValueError, OverflowError):  # times that are not k integers: resolved one by one
        return np.zeros(idx.shape[0], dtype=bool), TupleChains.empty(idx.shape[0], k)
    ptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(seg, minlength=idx.shape[0]), out=ptr[1:])
    ac = np.zeros(len(acs) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ac[1:])
    chains, ok = tuple_chains(ptr, ac, rows, domain)
    return fine & ok, chains


def select_chains(chains: TupleChains, keep: Array, at: Array, n: int) -> TupleChains:
    """The chains of the processors ``keep`` (over ``at``, their indices among ``n`` processors), the others
    empty."""
    counts = np.diff(chains.ptr)
    ck_keep = np.repeat(keep, counts)
    sizes = np.diff(chains.ac)[ck_keep]
    per = np.zeros(n, dtype=np.int64)
    per[at[keep]] = counts[keep]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per, out=ptr[1:])
    ac = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=ac[1:])
    rows = chains.rows[np.repeat(ck_keep, np.diff(chains.ac))]
    return TupleChains(ptr, ac, rows, chains.bound[ck_keep], chains.lex[ck_keep])


class _Images:
    """``φ`` of one bound projection at frontiers, each computed once (``None``: it failed or is not a
    frontier)."""

    def __init__(self, b: BoundProjection) -> None:
        self.b = b
        self.at: dict[Any, Frontier | None] = {}
        self.rises: dict[tuple[Any, Any], bool] = {}

    def image(self, key: Any, frontier: Callable[[], Frontier]) -> Frontier | None:
        if key not in self.at:
            try:
                out = self.b.apply(frontier())
                self.at[key] = out if type(out) is Frontier and out.domain == self.b.target else None
            except Exception:  # the full resolution raises it again, naming the processor
                self.at[key] = None
        return self.at[key]

    def rise(self, a: Any, b: Any) -> bool:
        pair = (a, b)
        if pair not in self.rises:
            x, y = self.at[a], self.at[b]
            self.rises[pair] = x is not None and y is not None and x <= y
        return self.rises[pair]


def check_images_many(
    df: Dataflow,
    ident: Array,
    idx: Array,
    ptr: Array,
    ids: Array,
    frontier: Callable[[int], Frontier],
    cache: dict[int, Any],
) -> Array:
    """Whether each of processors ``idx`` has, on every non-identity output edge, images ``φ_e(∅) ⊆ φ_e(f_1) ⊆
    …``.

    Processor ``idx[j]``'s distinct checkpoints are ``ids[ptr[j]:ptr[j+1]]``,
    integers ``≥ 0`` naming frontiers (``frontier(id)`` makes one; epochs, or
    encoded prefix bounds). The projections are called once per distinct
    (projection, frontier) and ``⊆`` once per distinct (projection, frontier,
    next frontier); the rest is array operations, ``O(checkpoints · edges)``.
    Edges that bind alike share one :class:`_Images` in ``cache``. A
    projection whose ``D_e`` is not its image (it overrides ``discarded``)
    makes its senders not plain.
    """
    t = df.table
    ok = np.ones(idx.shape[0], dtype=bool)
    if not t.m or not idx.size:
        return ok
    pos = np.full(t.n, -1, dtype=np.int64)
    pos[idx] = np.arange(idx.shape[0])
    sel = np.flatnonzero(~ident & (pos[t.src] >= 0))
    if not sel.size:
        return ok
    sample = t.sample
    G = len(sample)
    pair = np.unique(pos[t.src[sel]] * G + t.sample_of[sel])
    j, g = pair // G, pair % G
    for c in np.unique(g).tolist():
        b = sample[c]
        images = cache.get(c)
        if images is None:
            images = cache[c] = _Images(b)
        empty = images.image(-1, partial(Frontier.empty, b.source))  # φ_e(∅), asked even without checkpoints
        if type(b).discarded is not BoundProjection.discarded or empty is None:
            ok[j[g == c]] = False
    lens = ptr[j + 1] - ptr[j]
    starts = np.cumsum(lens) - lens
    ent = np.repeat(ptr[j] - starts, lens) + np.arange(int(lens.sum()))
    owner = np.repeat(np.arange(pair.shape[0]), lens)
    first = np.zeros(ent.shape[0], dtype=bool)
    first[starts[lens > 0]] = True  # each chain starts at ∅
    cur = ids[ent]
    bad = np.zeros(ent.shape[0], dtype=bool)
    for c in np.unique(g).tolist():
        images = cache[c]
        mine = np.flatnonzero(g[owner] == c)
        distinct, back = np.unique(cur[mine], return_inverse=True)
        got = [images.image(x, lambda x=x: frontier(x)) for x in distinct.tolist()]
        # images that are prefixes compare by code; others as frontiers, once per pair
        codes = [-1 if y is None else prefix_code(y) for y in [*got, images.at[-1]]]
        code = np.array([-2 if x is None else x for x in codes], dtype=np.int64)
        here = back.reshape(-1)
        there = np.where(first[mine], len(got), np.roll(here, 1))  # the frontier before, ∅ first
        a_code, b_code = code[there], code[here]
        bad[mine] = (b_code == -1) | ((a_code >= 0) & (b_code >= 0) & (a_code > b_code))
        slow = np.flatnonzero(((a_code == -2) | (b_code == -2)) & (b_code != -1))
        keys = distinct.tolist() + [-1]
        for r in slow.tolist():
            bad[mine[r]] = not images.rise(keys[there[r]], keys[here[r]])
    ok[j[owner[bad]]] = False
    return ok


def tuple_ids(chains: TupleChains, domain: Domain) -> tuple[Array, Callable[[int], Frontier]]:
    """An integer per checkpoint of ``chains`` naming its frontier, and the frontier of an integer.

    A prefix is named by its encoded bound (:func:`~falkirk.solver.model.orders.encode_bounds`),
    any other antichain by ``2**62`` plus its position.
    """
    k = chains.rows.shape[1]
    codes = encode_bounds(chains.bound)
    lex = chains.lex if codes is not None else np.zeros(chains.lex.shape[0], dtype=bool)
    ids = np.where(lex, codes if codes is not None else 0, (1 << 62) + np.arange(lex.shape[0]))

    def frontier(i: int) -> Frontier:
        if i >= 1 << 62:
            c = i - (1 << 62)
            return Frontier(domain, tuple(map(tuple, chains.rows[chains.ac[c] : chains.ac[c + 1]].tolist())))
        return lex_frontier(domain, decode_bound(i, k))

    return ids, frontier


def epoch_frontier(domain: Domain) -> Callable[[int], Frontier]:
    """Epoch ``k`` as a frontier of ``domain`` (``↓k``: the antichain ``(k + 1,)``)."""
    assert isinstance(domain, Epoch)
    return lambda k: Frontier(domain, (k + 1,))
