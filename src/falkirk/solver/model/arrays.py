"""``Dataflow.from_arrays`` for jobs of several domains and projections: loop jobs as columns (SPEC §7, §9).

An iterative job gives, besides the graph's index arrays (:mod:`falkirk.solver.model.bulk`):

* ``domain``: a sequence of domains and ``domain_of`` (``(V,)`` integers),
  processor ``i`` being in ``domain[domain_of[i]]``;
* ``projection``: a sequence of projections (names such as
  ``"epoch_to_loop"`` or projection objects) and ``projection_of``
  (``(E,)`` integers), edge ``k`` projecting by ``projection[projection_of[k]]``;
* ``ck_val`` of shape ``(rows, d)``: each row a time of the processor's
  domain — for a ``product(k)`` or ``lexicographic(k)`` processor one
  minimal time of the complement of a checkpoint frontier (the ``before``
  encoding of SPEC §9, first ``k`` columns), for an ``epoch`` processor its
  epoch ``k`` (the frontier ``↓k``) in column 0 — with ``ck_ac`` (checkpoints
  ``+ 1``, optional) grouping rows into checkpoints (checkpoint ``c`` is
  rows ``ck_ac[c]:ck_ac[c+1]``; without it every row is one checkpoint) and
  ``ck_ptr`` grouping checkpoints into processors as for epochs.

:func:`from_columns` fills a dataflow's columns straight from those arrays
when every processor is *plain* (:mod:`falkirk.solver.model.deferred`): no
:class:`Processor`, :class:`Edge` or :class:`Checkpoint` is made until one
is read (a checkpoint then reads ``Checkpoint({"before": rows})``, or the
epoch). Otherwise it returns ``None`` and the object constructors decide,
raising the errors they always raise.

Cost: ``O(V + E + rows)`` array operations, the projections checked once per
distinct projection and pair of domains, and each non-identity projection
called once per distinct checkpoint frontier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from falkirk.domains import Domain, Epoch, Frontier, Identity, Lexicographic, Product
from falkirk.domains import Sequence as SequenceDomain
from falkirk.errors import FalkirkError
from falkirk.solver.model import binding
from falkirk.solver.model.deferred import check_images_many, epoch_frontier, tuple_ids
from falkirk.solver.model.elements import Checkpoint, Edge, Processor
from falkirk.solver.model.orders import TupleChains, tuple_chains
from falkirk.solver.model.table import Table, epoch_chains

if TYPE_CHECKING:
    from falkirk.solver.model.dataflow import Dataflow

__all__ = ["JobColumns", "from_columns", "checkpoint_values", "epoch_dataflow", "networkx_loops", "objects"]

Array = Any  # a numpy array


def checkpoint_values(kind: Any, rows: Array, ac: Array, lo: int, hi: int) -> list[Checkpoint]:
    """The :class:`Checkpoint` values of checkpoints ``lo:hi`` given as rows (see the module docstring).

    ``kind`` is the processor's domain (or its spec): epoch checkpoints read
    column 0, tuple-domain ones ``{"before": rows}`` of their first ``k`` columns.
    """
    k = getattr(kind, "arity", None)
    if k is None and not isinstance(kind, (Product, Lexicographic)):
        return [Checkpoint(int(rows[ac[c], 0])) for c in range(lo, hi)]
    return [Checkpoint({"before": rows[ac[c] : ac[c + 1], :k].tolist()}) for c in range(lo, hi)]


def epoch_dataflow(
    cls: type[Dataflow], t: Table, domain: Any, ck_ptr: Any, ck_val: Any, notifications: bool
) -> Dataflow:
    """A dataflow of plain processors in one epoch domain, straight from its columns (no object made).

    ``t`` holds valid names, edges (identity), flags; ``ck_ptr``/``ck_val``
    are the checkpoint epochs as given, every chain already checked by
    :func:`~falkirk.solver.model.table.epoch_chains`. The
    :class:`Processor` and :class:`Edge` values are made when read.
    """
    given = ck_val.tolist()
    ptr = ck_ptr.tolist()

    def processor(p: str) -> Processor:
        i = t.index[p]
        return Processor(
            p,
            domain,
            stateless=bool(t.stateless[i]),
            logs=[t.edge_name(k) for k in t.outgoing(i) if t.logged[k]],
            checkpoints=[Checkpoint(v) for v in given[ptr[i] : ptr[i + 1]]],
        )

    df, (dom,) = cls._from_table(t, [domain], None, processor, notifications=notifications)
    binding.bind_identity(df, dom)
    t.notifications = np.full(t.n, bool(notifications))
    d_ptr, d_val, _ = epoch_chains(ck_ptr, ck_val)
    t.set_plain(np.ones(t.n, dtype=bool), d_ptr, d_val, epoch_plain=t.n > 0)
    return df


def _chains(
    domains: list[Domain], dcode: Array, ptr: Array, rows: Array, ac: Array
) -> tuple[Array, Array, dict[Domain, TupleChains]] | None:
    """Epoch chains (CSR of distinct epochs) and tuple chains per domain, or ``None`` if one is not plain."""
    n = dcode.shape[0]
    counts = np.diff(ptr)
    cdom = np.repeat(dcode, counts)
    sizes = np.diff(ac)
    ep_ptr = np.zeros(n + 1, dtype=np.int64)
    ep_val = np.zeros(0, dtype=np.int64)
    tuples: dict[Domain, TupleChains] = {}
    for c, dom in enumerate(domains):
        mine = dcode == c
        if not mine.any():
            continue
        cks = np.flatnonzero(cdom == c)
        sub_ptr = np.zeros(int(mine.sum()) + 1, dtype=np.int64)
        np.cumsum(counts[mine], out=sub_ptr[1:])
        if type(dom) is Epoch:
            if (sizes[cks] != 1).any():
                return None
            d_ptr, d_val, ok = epoch_chains(sub_ptr, rows[ac[cks], 0])
            if not ok.all():
                return None
            per = np.zeros(n, dtype=np.int64)
            per[mine] = np.diff(d_ptr)
            np.cumsum(per, out=ep_ptr[1:])
            ep_val = d_val  # one epoch domain at most: two would be the same domain
        elif isinstance(dom, (Product, Lexicographic)):
            k = dom.arity
            if rows.shape[1] < k or (rows[:, :k] < 0).any():
                return None
            sub_ac = np.zeros(cks.shape[0] + 1, dtype=np.int64)
            np.cumsum(sizes[cks], out=sub_ac[1:])
            sel = np.repeat(cdom == c, sizes)  # the rows of this domain's checkpoints, in order
            chains, ok = tuple_chains(sub_ptr, sub_ac, np.ascontiguousarray(rows[sel, :k]), dom)
            if not ok.all():
                return None
            full = np.zeros(n + 1, dtype=np.int64)
            per = np.zeros(n, dtype=np.int64)
            per[mine] = np.diff(chains.ptr)
            np.cumsum(per, out=full[1:])
            chains.ptr = full
            tuples[dom] = chains
        else:
            return None
    return ep_ptr, ep_val, tuples


@dataclass
class JobColumns:
    """What a loop job gives besides its graph: ``kinds`` (the domain specs as given) with ``dcode``
    (``domain_of``), ``specs`` (the projections) with ``pcode`` (``projection_of``), and the checkpoints
    ``ptr``/``ac``/``rows`` as in the module docstring."""

    kinds: Sequence[Any]
    dcode: Array
    specs: Sequence[Any]
    pcode: Array
    ptr: Array
    rows: Array
    ac: Array


def from_columns(cls: type[Dataflow], table: Table, cols: JobColumns, notifications: bool) -> Dataflow | None:
    """The dataflow made from its columns, or ``None`` when the object constructors must decide.

    ``table`` holds valid, distinct names and edges.
    """
    kinds, dcode, specs, pcode = cols.kinds, cols.dcode, cols.specs, cols.pcode
    ptr, rows, ac = cols.ptr, cols.rows, cols.ac
    if any(isinstance(k, SequenceDomain) or (isinstance(k, str) and k == "sequence") for k in kinds):
        return None  # a sequence domain is made from the processor's input edges: the objects decide
    t = table
    n = t.n
    given_of = [kinds[c] for c in dcode.tolist()]

    def processor(p: str) -> Processor:
        i = t.index[p]
        lo, hi = int(ptr[i]), int(ptr[i + 1])
        return Processor(
            p,
            given_of[i],
            stateless=bool(t.stateless[i]),
            logs=[t.edge_name(k) for k in t.outgoing(i) if t.logged[k]],
            checkpoints=checkpoint_values(domains[dcode[i]], rows, ac, lo, hi),
        )

    try:
        df, domains = cls._from_table(t, kinds, dcode, processor, notifications=notifications)
    except FalkirkError:
        return None
    if len({id(d) for d in domains}) != len(domains) or any(d.name == "sequence" for d in domains):
        return None
    try:
        ident = binding.bind(df, t.edge_names(), [specs[c] for c in pcode.tolist()])
        binding.check_stateless(df)
    except FalkirkError:
        return None
    t.notifications = np.full(n, bool(notifications))
    got = _chains(domains, dcode, ptr, rows, ac)
    if got is None:
        return None
    ep_ptr, ep_val, tuples = got
    t.tuples = tuples
    images: dict[int, Any] = {}
    if t.m and t.recorded.any():
        return None
    everyone = np.arange(n)
    for c, dom in enumerate(domains):
        if dom in tuples:
            ok = check_images_many(df, ident, everyone, tuples[dom].ptr, *tuple_ids(tuples[dom], dom), images)
        elif type(dom) is Epoch:
            ok = check_images_many(df, ident, everyone, ep_ptr, ep_val, epoch_frontier(dom), images)
        if not ok[dcode == c].all():
            return None
    epoch = np.fromiter((type(d) is Epoch for d in df.domains.values()), dtype=bool, count=n)
    one = len(domains) <= 1
    t.set_plain(
        np.ones(n, dtype=bool),
        ep_ptr,
        ep_val,
        epoch_plain=bool(one and ident.all() and epoch.all()) and n > 0,
    )
    t.lex_plain = all(bool(c.lex.all()) for c in tuples.values())
    return df


def objects(names: list[str], table: Table, cols: JobColumns) -> tuple[list[Processor], list[Edge]]:
    """The same content as :class:`Processor` and :class:`Edge` values, for the object constructors."""
    t = table
    kinds, dcode, specs, pcode = cols.kinds, cols.dcode, cols.specs, cols.pcode
    ptr, rows, ac = cols.ptr, cols.rows, cols.ac
    logs: list[list[str]] = [[] for _ in names]
    enames = t.edge_names()
    src, dst = t.src.tolist(), t.dst.tolist()
    for k in np.flatnonzero(t.logged).tolist():
        logs[src[k]].append(enames[k])
    dl, pl, less = dcode.tolist(), ptr.tolist(), t.stateless.tolist()
    procs = [
        Processor(
            names[i],
            kinds[dl[i]],
            stateless=less[i],
            logs=logs[i],
            checkpoints=checkpoint_values(kinds[dl[i]], rows, ac, pl[i], pl[i + 1]),
        )
        for i in range(len(names))
    ]
    pc = pcode.tolist()
    edges = [Edge(enames[k], names[src[k]], names[dst[k]], specs[pc[k]]) for k in range(t.m)]
    return procs, edges


#: Node and edge attributes :func:`networkx_loops` reads; any other sends the graph to the objects.
_LOOP_NODE = frozenset({"stateless", "checkpoints", "domain"})
_LOOP_EDGE = frozenset({"name", "logged", "projection"})
_IDENTITY = Identity()


def _rows(value: Any) -> list[Any] | None:
    """A checkpoint given to networkx as rows: an epoch ``k`` → ``[[k]]``, a tuple frontier → its ``before``
    rows."""
    if type(value) is int:
        return [[value]]
    if type(value) is Frontier:
        return (
            [list(a) if isinstance(a, tuple) else [a] for a in value.antichain] if value.antichain else None
        )
    if type(value) is dict and value.keys() == {"before"} and type(value["before"]) is list:
        return value["before"]
    return None


def networkx_loops(cls: type[Dataflow], graph: Any, domain: Any, notifications: bool) -> Dataflow | None:
    """A job of plain processors in several domains (loops) read into columns, or ``None`` (the objects
    decide)."""
    names: list[str] = []
    less: list[bool] = []
    kinds: dict[Any, int] = {}
    dcode: list[int] = []
    per: list[int] = []
    sizes: list[int] = []
    flat: list[Any] = []
    try:
        for u, data in graph.nodes(data=True):
            stateless = data.get("stateless", False)
            if type(u) is not str or not data.keys() <= _LOOP_NODE or type(stateless) is not bool:
                return None
            dcode.append(kinds.setdefault(data.get("domain", domain), len(kinds)))
            cks = data.get("checkpoints", ())
            for c in cks:
                rows = _rows(c)
                if rows is None:
                    return None
                sizes.append(len(rows))
                flat.extend(rows)
            names.append(u)
            less.append(stateless)
            per.append(len(cks))
        width = max(map(len, flat), default=1)
        if any(len(r) != width for r in flat):  # epochs beside tuples: pad with zeros
            flat = [list(r) + [0] * (width - len(r)) for r in flat]
        rows_arr = np.array(flat, dtype=np.int64).reshape(-1, width)
    except (TypeError, ValueError, OverflowError):
        return None
    index = {p: i for i, p in enumerate(names)}
    specs: dict[Any, int] = {}
    src, dst, enames, logged, pcode = [], [], [], [], []
    try:
        for u, v, data in graph.edges(data=True):
            if not data.keys() <= _LOOP_EDGE:
                return None
            src.append(index[u])
            dst.append(index[v])
            enames.append(data.get("name", f"{u}->{v}"))
            logged.append(data.get("logged", False))
            pcode.append(specs.setdefault(data.get("projection", _IDENTITY), len(specs)))
    except TypeError:  # an unhashable domain or projection
        return None
    if len(index) != len(names) or len(set(enames)) != len(enames) or not all(type(e) is str for e in enames):
        return None
    if not all(type(x) is bool for x in logged):
        return None
    ptr = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum(per, out=ptr[1:])
    ac = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ac[1:])
    t = Table(
        names,
        np.array(src, np.int64),
        np.array(dst, np.int64),
        np.array(logged, bool),
        np.array(less, bool),
        index=index,
        edge_names=enames,
    )
    cols = JobColumns(
        list(kinds), np.array(dcode, np.int64), list(specs), np.array(pcode, np.int64), ptr, rows_arr, ac
    )
    return from_columns(cls, t, cols, notifications)
