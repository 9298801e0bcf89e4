"""The dataflow model: processors, edges, checkpoint metadata (SPEC §2–§3).

Value objects are frozen; a :class:`Dataflow` validates them at construction
and resolves every omitted field to its safe default (SPEC §9), so the solver
only ever sees complete, monotone, chain-ordered metadata.

Frontier-valued fields accept a :class:`~falkirk.domains.Frontier` or the
domain's JSON encoding (``2`` for epoch 2, ``{"e1": 3}`` for sequence counts,
``"top"``, ``"empty"``…).

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow(
...     [Processor("src", "epoch", stateless=True),
...      Processor("sum", "epoch", logs=["e2"],
...                checkpoints=[Checkpoint(2, notifications=2, delivered={"e1": 2})]),
...      Processor("sink", "epoch", checkpoints=[Checkpoint(1, delivered={"e2": 1})],
...                live=Checkpoint("top", delivered={"e2": 4}))],
...     [Edge("e1", "src", "sum"), Edge("e2", "sum", "sink")])
>>> [str(m.frontier) for m in df.candidates("sink", failed=False)]
['Frontier(epoch, empty)', 'Frontier(epoch, 1)', 'Frontier(epoch, top)']
"""

from collections.abc import Callable, Iterable
from collections.abc import Sequence as PySequence
from operator import attrgetter
from typing import Any

import numpy as np

from falkirk.domains import (
    BUILTIN,
    INPUT_EDGE,
    REGISTRY,
    Domain,
    Epoch,
    Frontier,
    Sequence,
    make_domain,
)
from falkirk.domains.projections import BoundProjection
from falkirk.errors import FalkirkError, UnknownNameError, ValidationError
from falkirk.solver.model import binding, bulk
from falkirk.solver.model.deferred import (
    TUPLE_DOMAINS,
    check_images_many,
    epoch_candidates,
    epoch_frontier,
    select_chains,
    tuple_candidates,
    tuple_ids,
)
from falkirk.solver.model.elements import (
    Checkpoint,
    Edge,
    Meta,
    Processor,
    ResolvedCheckpoint,
)
from falkirk.solver.model.plain import plain_chain
from falkirk.solver.model.resolve import Resolved, resolve_processor
from falkirk.solver.model.table import Table
from falkirk.solver.model.views import OnDemand

__all__ = ["Checkpoint", "Processor", "Edge", "Dataflow", "ResolvedCheckpoint", "Meta"]


class _OnDemand(dict[str, Resolved]):
    """A dict whose missing entries are computed by ``make(key)`` on first access (and kept)."""

    def __init__(self, make: Callable[[str], Resolved]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: str) -> Resolved:
        value = self[key] = self._make(key)
        return value


#: Whether plain processors are resolved on first use (``False``: every processor at once, as a reference).
DEFER_PLAIN = True

_NAME, _SRC, _DST, _PROJECTION = map(attrgetter, ("name", "src", "dst", "projection"))


def _processors(procs: list[Processor]) -> dict[str, Processor]:
    """The processors by name; the first mistake in declaration order raises."""
    if set(map(type, procs)) <= {Processor}:
        out = dict(zip(map(attrgetter("name"), procs), procs, strict=True))
        if len(out) == len(procs):
            return out
    out = {}
    for p in procs:
        if not isinstance(p, Processor):
            raise ValidationError(f"expected a Processor, got {p!r}")
        if p.name in out:
            raise ValidationError(f"processor {p.name!r} is declared twice")
        out[p.name] = p
    return out


def _edges(
    edges: list[Edge], index: dict[str, int]
) -> tuple[PySequence[str], Any, Any, PySequence[Any], dict[str, int] | None]:
    """Names, ends (as processor indices) and projections of the edges, and each edge's position by name.

    The positions are ``None`` when every edge is an :class:`Edge`: the
    table makes them on first use (:meth:`~falkirk.solver.model.table.Table.edge_index`;
    a million entries take about 70 MB and 0.25 s, and a solve of plain
    processors never reads them), and the names are checked distinct with
    a set. The first mistake in declaration order raises: a name declared
    twice, an unknown ``src``, an unknown ``dst``.
    """
    m = len(edges)
    if not edges or set(map(type, edges)) == {Edge}:
        names = list(map(_NAME, edges))
        if len(set(names)) == m:
            try:
                src = np.fromiter(map(index.__getitem__, map(_SRC, edges)), dtype=np.int64, count=m)
                dst = np.fromiter(map(index.__getitem__, map(_DST, edges)), dtype=np.int64, count=m)
            except KeyError:
                pass
            else:
                return names, src, dst, list(map(_PROJECTION, edges)), None
    by_name = {}
    for k, e in enumerate(edges):
        name, s, d = e.name, e.src, e.dst
        if name in by_name:
            raise ValidationError(f"edge {name!r} is declared twice")
        if s not in index:
            raise UnknownNameError(f"edge {name!r}: src {s!r} is not a declared processor")
        if d not in index:
            raise UnknownNameError(f"edge {name!r}: dst {d!r} is not a declared processor")
        by_name[name] = k
    names = [e.name for e in edges]
    src = np.array([index[e.src] for e in edges], dtype=np.int64)
    dst = np.array([index[e.dst] for e in edges], dtype=np.int64)
    return names, src, dst, [e.projection for e in edges], by_name


class Dataflow:
    """A validated dataflow graph with resolved checkpoint metadata.

    Raises :class:`~falkirk.errors.ValidationError` (or a subclass) naming
    the processor, edge or field when the input is not well formed.

    The graph is kept as columns (:mod:`falkirk.solver.model.table`):
    names interned once, edges as index arrays, the checkpoints of plain
    processors in CSR form. :attr:`processors`, :attr:`edges`,
    :attr:`inputs`, :attr:`outputs`, :attr:`domains`, :attr:`bound` and
    :attr:`receives_notifications` are dictionaries over them whose values
    are made when first read (:class:`~falkirk.solver.model.views.OnDemand`).

    Cost: ``O(V + E)`` with the per-edge work done by array operations
    (edge projections are bound once per distinct projection and pair of
    domains, and per edge when first read), plus resolving every processor
    that is not plain, ``O(k · edges of p)`` for ``k`` checkpoints. A plain
    processor (:mod:`falkirk.solver.model.deferred`: bare checkpoints in an
    epoch, ``product`` or ``lexicographic`` domain, no live metadata, no
    recorded output projection) costs ``O(k)`` here — its chain is kept as
    columns, epochs or antichains (:mod:`falkirk.solver.model.orders`), and
    each non-identity projection is called once per distinct checkpoint
    frontier — and is resolved when its metadata are first read;
    :attr:`plain` holds its checkpoint keys (epochs in the ``epoch``
    domain, frontiers otherwise).

    :meth:`from_arrays` and :meth:`from_networkx` build one from a
    scheduler's arrays or a ``networkx`` graph; they are defined, with their
    signatures and docs, in :mod:`falkirk.solver.model.bulk`.

    The solver's own modules (the vectorised engine, the dispatch rule,
    the plans, the model's builders) read the columns through
    :attr:`table` and nothing else of its private state; they do not write
    through it. It is not for users: its layout follows the solver.
    """

    edges: dict[str, Edge]
    bound: dict[str, BoundProjection]

    def __init__(
        self, processors: Iterable[Processor], edges: Iterable[Edge], *, notifications: bool = True
    ) -> None:
        procs = list(processors)
        edge_list = list(edges)
        self.system_notifications = notifications
        self._made: dict[tuple[str, int | None], Domain] = {}
        self.processors: dict[str, Processor] = _processors(procs)
        names = list(self.processors)
        index = {p: i for i, p in enumerate(names)}
        enames, src, dst, projs, positions = _edges(edge_list, index)
        del edge_list  # the columns keep what the edges said; Edge values are made again when read
        m = len(enames)
        self._table = t = Table(
            names,
            src,
            dst,
            np.zeros(m, dtype=bool),
            np.zeros(len(names), dtype=bool),
            index=index,
            edge_names=enames,
        )
        t._edge_index = positions
        self._views()
        self.domains: dict[str, Domain] = {n: self._domain(p) for n, p in self.processors.items()}
        ident = self._bind(enames, projs)
        t.logged = self._check_logs(procs)
        t.stateless = np.fromiter(map(attrgetter("stateless"), procs), dtype=bool, count=len(procs))
        t.restartable = np.fromiter(map(attrgetter("restartable"), procs), dtype=bool, count=len(procs))
        self._check_stateless()
        t.notifications = np.fromiter(
            (notifications if p.notifications is None else bool(p.notifications) for p in procs),
            dtype=bool,
            count=len(procs),
        )
        self._defer(procs, ident)

    @property
    def table(self) -> Table:
        """The columns (:class:`~falkirk.solver.model.table.Table`), read-only: for the solver's own modules.

        One attribute read: a hot loop binds it to a local once. The
        arrays are shared, not copied; writing to them breaks the dataflow.
        """
        return self._table

    def _views(self) -> None:
        """The dictionaries over the table whose values are made on first read."""
        t = self._table
        self.inputs: dict[str, list[str]] = OnDemand(
            t.index, lambda p: [t.edge_name(k) for k in t.incoming(t.index[p])]
        )
        self.outputs: dict[str, list[str]] = OnDemand(
            t.index, lambda p: [t.edge_name(k) for k in t.outgoing(t.index[p])]
        )
        self.receives_notifications: dict[str, bool] = OnDemand(
            t.index, lambda p: self._notifications(self.processors[p])
        )
        self._resolved: dict[str, Resolved] = _OnDemand(self._resolve)
        self._plain_other: dict[str, list[Any]] = {}  # plain processors of other totally ordered domains
        self.plain: dict[str, list[Any]] = OnDemand(self._plain_names, self._plain_keys)

    @classmethod
    def _from_table(
        cls,
        table: Table,
        kinds: PySequence[Any],
        kind_of: Any,
        processor: Callable[[str], Processor],
        *,
        notifications: bool,
    ) -> tuple["Dataflow", list[Domain]]:
        """A dataflow over columns already validated, and the domains made of ``kinds``.

        The one way in besides ``__init__``, for the bulk constructors
        (:mod:`falkirk.solver.model.arrays`). ``table`` holds valid,
        distinct names and edges and the processors' flags; processor ``i``
        is in the domain made of ``kinds[kind_of[i]]`` (domain values or
        specs, each made once; ``kind_of`` ``None`` when there is one kind;
        never a ``sequence``, which is made from the input edges);
        ``processor(name)`` makes its :class:`Processor` when it is first
        read. The caller then binds the edges
        (:mod:`falkirk.solver.model.binding`) and records the checkpoint
        chains on the table. Raises the :class:`~falkirk.errors.FalkirkError`
        of a kind that makes no domain.
        """
        self = cls.__new__(cls)
        self.system_notifications = notifications
        self._made = {}
        made = [self._domain(Processor("", k)) for k in kinds]
        self._table = table
        self.processors = OnDemand(table.index, processor)
        self._views()
        if kind_of is None:
            self.domains = dict.fromkeys(table.names, made[0])
        else:
            self.domains = dict(zip(table.names, map(made.__getitem__, kind_of.tolist()), strict=True))
        return self, made

    def _resolve(self, name: str) -> Resolved:
        return resolve_processor(self, name)

    # -- construction: edges and projections (falkirk.solver.model.binding) -------
    def _bind(self, enames: PySequence[str], projs: PySequence[Any]) -> Any:
        return binding.bind(self, enames, projs)

    def _check_logs(self, procs: list[Processor]) -> Any:
        return binding.check_logs(self, procs)

    def _check_stateless(self) -> None:
        binding.check_stateless(self)

    # -- construction: plain processors ----------------------------------------
    def _defer(self, procs: list[Processor], ident: Any) -> None:
        """Keep plain chains as columns (resolved on first read); resolve every other processor now.

        See :mod:`falkirk.solver.model.deferred` for what is plain and how it is checked.
        """
        t = self._table
        n = t.n
        doms = list(self.domains.values())
        live = np.fromiter((p.live is not None for p in procs), dtype=bool, count=n)
        recorded_out = np.bincount(t.src[t.recorded], minlength=n) > 0 if t.m else np.zeros(n, dtype=bool)
        free = ~live & ~recorded_out if DEFER_PLAIN else np.zeros(n, dtype=bool)
        plain = np.zeros(n, dtype=bool)
        images: dict[int, Any] = {}
        epoch = np.fromiter((type(d) is Epoch for d in doms), dtype=bool, count=n)
        idx = np.flatnonzero(epoch & free)
        fine, d_ptr, d_val = epoch_candidates(procs, idx)
        if idx.size:
            fine &= check_images_many(self, ident, idx, d_ptr, d_val, epoch_frontier(doms[idx[0]]), images)
        plain[idx[fine]] = True
        ck_ptr = np.zeros(n + 1, dtype=np.int64)
        kept = np.diff(d_ptr) * fine
        np.cumsum(np.bincount(idx, weights=kept, minlength=n).astype(np.int64), out=ck_ptr[1:])
        ck_val = d_val[np.repeat(fine, np.diff(d_ptr))]
        t.tuples = {}
        for dom in {id(d): d for d in doms if type(d) in TUPLE_DOMAINS}.values():
            idx = np.flatnonzero(np.fromiter((d is dom for d in doms), dtype=bool, count=n) & free)
            if not idx.size:
                continue
            fine, chains = tuple_candidates(procs, idx, dom)
            fine &= check_images_many(self, ident, idx, chains.ptr, *tuple_ids(chains, dom), images)
            plain[idx[fine]] = True
            t.tuples[dom] = select_chains(chains, fine, idx, n)
        for i in np.flatnonzero(~plain).tolist():
            name = t.names[i]
            keys = plain_chain(self, name) if DEFER_PLAIN and not free[i] else None
            if keys is None:
                self._resolved[name]
            else:
                self._plain_other[name] = keys
        one = len({id(d) for d in doms}) <= 1
        everything = bool(plain.all() and t.restartable.all())
        t.set_plain(
            plain,
            ck_ptr,
            ck_val,
            epoch_plain=everything and one and bool(ident.all() and epoch.all()) and n > 0,
        )
        t.lex_plain = (
            everything
            and all(type(d) in (Epoch, *TUPLE_DOMAINS) for d in doms)
            and all(bool(c.lex.all()) for c in t.tuples.values())
        )

    def _plain_names(self) -> dict[str, None]:
        t = self._table
        chosen = set(np.flatnonzero(t.plain).tolist())
        other = self._plain_other
        return {p: None for i, p in enumerate(t.names) if i in chosen or p in other}

    def _plain_keys(self, name: str) -> list[Any]:
        if name in self._plain_other:
            return self._plain_other[name]
        t = self._table
        i = t.index[name]
        dom = self.domains[name]
        if dom in t.tuples:
            return [Frontier(dom, a) for a in t.tuples[dom].antichains(i)]
        return t.epochs(i)

    # -- bulk constructors: defined once, signature and docs, in falkirk.solver.model.bulk --------
    from_arrays = classmethod(bulk.from_arrays)
    from_networkx = classmethod(bulk.from_networkx)

    # -- construction helpers ---------------------------------------------------
    def _domain(self, p: Processor) -> Domain:
        if type(p.domain) is str:
            made = self._made.get((p.domain, p.arity))  # a built-in family made before: the same value
            if made is not None:
                return made
        if not isinstance(p.domain, str):
            if isinstance(p.domain, Sequence):
                self._check_sequence_edges(p, p.domain)
            return p.domain
        options: dict[str, Any] = {}
        if p.domain == "sequence":
            options["edges"] = self.inputs[p.name] or [INPUT_EDGE]
        elif p.domain in ("product", "lexicographic"):
            if p.arity is None:
                raise ValidationError(f"processor {p.name!r}: domain {p.domain!r} needs an arity")
            options["arity"] = p.arity
        elif p.arity is not None:
            options["arity"] = p.arity
        # a built-in family other than sequence gives equal, immutable domains: make each once
        key = (
            (p.domain, p.arity)
            if p.domain != "sequence" and REGISTRY.get(p.domain) is BUILTIN.get(p.domain)
            else None
        )
        if key is not None and key in self._made:
            return self._made[key]
        try:
            dom = make_domain(p.domain, **options)
        except FalkirkError as exc:
            raise type(exc)(f"processor {p.name!r}: {exc}") from None
        if key is not None:
            self._made[key] = dom
        return dom

    def _check_sequence_edges(self, p: Processor, dom: Sequence) -> None:
        want = tuple(sorted(self.inputs[p.name] or [INPUT_EDGE]))
        if dom.edges != want:
            raise ValidationError(
                f"processor {p.name!r}: its sequence domain has edges {list(dom.edges)} "
                f"but its input edges are {list(want)}"
            )

    def _notifications(self, p: Processor) -> bool:
        if isinstance(self.domains[p.name], Sequence):
            return False
        if p.notifications is not None:
            return p.notifications
        return self.system_notifications

    # -- queries ----------------------------------------------------------------
    def processor(self, name: str) -> Processor:
        """The processor called ``name`` (``UnknownNameError`` otherwise)."""
        try:
            return self.processors[name]
        except KeyError:
            raise UnknownNameError(f"unknown processor {name!r}") from None

    def candidates(self, name: str, *, failed: bool) -> list[ResolvedCheckpoint]:
        """``F(p)`` of a stateful processor, ascending (a chain), resolved.

        For a stateless processor: its recorded frontiers (``∅``, reported
        complete frontiers, and ``⊤`` when it has not failed).
        """
        res = self._resolved[self.processor(name).name]
        out = list(res.chain)
        if not failed:
            out.append(res.live)
        return out

    def empty_meta(self, name: str) -> ResolvedCheckpoint:
        """The resolved metadata at ``∅``."""
        return self._resolved[name].chain[0]

    def live_meta(self, name: str) -> ResolvedCheckpoint:
        """The resolved metadata at ``⊤`` (live history of a processor that has not failed)."""
        return self._resolved[name].live

    def topological_names(self) -> list[str]:
        """Processor names in declaration order (deterministic iteration order)."""
        return list(self.processors)

    def __repr__(self) -> str:
        return f"<Dataflow: {len(self.processors)} processors, {len(self.edges)} edges>"
