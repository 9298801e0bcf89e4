"""Edges and projections of a :class:`~falkirk.solver.model.Dataflow`: bound, checked, logged (SPEC §2, §3,
§9).

:func:`bind` checks every edge's projection against its two domains, once
per distinct projection and pair of domains (in edge order, so the first
edge that cannot be bound is named), and makes the dataflow's ``edges``
and ``bound`` views; :func:`check_logs` and :func:`check_stateless` check
what processors log and the residual rule of stateless senders.

Cost: ``O(E)`` array operations plus one binding per group of edges that
bind alike (one per edge at a sequence domain).
"""

from __future__ import annotations

from collections.abc import Sequence as PySequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from falkirk.domains import Domain, Identity, Sequence
from falkirk.domains.projections import BoundProjection, projection_from_spec
from falkirk.errors import FalkirkError, UnknownNameError, ValidationError
from falkirk.solver.model.elements import Edge, Processor
from falkirk.solver.model.views import OnDemand

if TYPE_CHECKING:
    from falkirk.solver.model.dataflow import Dataflow

__all__ = ["bind", "bind_identity", "check_logs", "check_stateless", "edge_values"]

_IDENTITY = Identity()  # the projection of every edge of an epoch job given as arrays (one immutable value)


def edge_values(df: Dataflow, specs: list[Any], code: Any) -> None:
    """:attr:`edges`: edge ``k`` made again from the columns when read, its projection ``specs[code[k]]``."""
    t = df.table

    def edge(e: str) -> Edge:
        k = t.edge_index()[e]
        return Edge(e, t.names[t.src[k]], t.names[t.dst[k]], specs[code[k]])

    df.edges = OnDemand(t.edge_index, edge, size=t.m)


def spec_object(spec: Any, named: dict[Any, Any]) -> Any:
    """The projection object of an edge's ``projection`` field (names made once)."""
    if hasattr(spec, "bind"):
        return spec
    if type(spec) is str:
        if spec not in named:
            named[spec] = projection_from_spec(spec)
        return named[spec]
    return projection_from_spec(spec)


def bind_edge(df: Dataflow, k: int, spec: Any, named: dict[Any, Any]) -> BoundProjection:
    t = df.table
    name = t.edge_name(k)
    try:
        return spec_object(spec, named).bind(
            df.domains[t.names[t.src[k]]], df.domains[t.names[t.dst[k]]], name
        )
    except FalkirkError as exc:
        msg = str(exc)
        raise type(exc)(msg if name in msg else f"edge {name!r}: {msg}") from None


def bind(df: Dataflow, enames: PySequence[str], projs: PySequence[Any]) -> Any:
    """Check every edge's projection against its two domains; :attr:`bound` binds on first read.

    Edges with the same projection between the same two domains bind
    alike, so one edge of each such group is bound now, in edge order
    (the first edge that cannot be bound is named, as when binding one
    by one). Edges at a sequence domain, whose binding depends on the
    edge, and projections that are not hashable are bound one by one,
    now. Returns whether each edge is an identity edge.
    """
    t = df.table
    m = len(enames)
    named: dict[Any, Any] = {}
    made: dict[str, BoundProjection] = {}
    try:
        distinct = list(dict.fromkeys(projs))
    except TypeError:  # e.g. a projection given as a JSON object: bind them all now
        for k in range(m):
            made[enames[k]] = bind_edge(df, k, projs[k], named)
        edge_values(df, list(projs), np.arange(m))
        df.bound = OnDemand(df.edges, made.__getitem__, made)
        ident = np.fromiter((type(b.spec) is Identity for b in made.values()), dtype=bool, count=m)
        t.set_groups(
            residual=np.fromiter((b.recorded or b.has_residual for b in made.values()), bool, m),
            recorded=np.fromiter((b.recorded for b in made.values()), bool, m),
            sample=list(made.values()),
            sample_of=np.arange(m),
        )
        return ident
    codes = {s: i for i, s in enumerate(distinct)}
    scode = (
        np.zeros(m, dtype=np.int64)
        if len(distinct) <= 1
        else np.fromiter(map(codes.__getitem__, projs), dtype=np.int64, count=m)
    )
    kinds = {id(d): d for d in df.domains.values()}  # distinct domain objects, first seen first
    dindex = {d: i for i, d in enumerate(kinds)}
    dcode = np.fromiter((dindex[id(d)] for d in df.domains.values()), dtype=np.int64, count=t.n)
    by_edge = np.array([isinstance(d, Sequence) for d in kinds.values()], dtype=bool)
    dsrc, ddst = dcode[t.src], dcode[t.dst]
    nd = max(len(kinds), 1)
    key = (scode * nd + dsrc) * nd + ddst
    own = by_edge[dsrc] | by_edge[ddst] if m else np.zeros(0, dtype=bool)
    key[own] = key.max(initial=0) + 1 + np.flatnonzero(own)  # a group of its own
    if m and key[0] == key.min() == key.max():  # one group (e.g. identity edges in one domain): no sort
        first, group = np.zeros(1, dtype=np.int64), np.zeros(m, dtype=np.int64)
    else:
        _, first, group = np.unique(key, return_index=True, return_inverse=True)
    residual = np.zeros(first.shape[0], dtype=bool)  # per group: recorded, or has a residual
    recorded = np.zeros(first.shape[0], dtype=bool)
    sample: list[BoundProjection] = [None] * first.shape[0]  # type: ignore[list-item]
    for g in np.argsort(first, kind="stable").tolist():
        k = int(first[g])
        b = sample[g] = bind_edge(df, k, distinct[scode[k]], named)
        residual[g] = b.recorded or b.has_residual
        recorded[g] = b.recorded
        if own[k]:
            made[enames[k]] = b
    # one bound projection per group: edges that bind alike project alike (their images are shared)
    t.set_groups(
        residual=residual[group.reshape(-1)] if m else np.zeros(0, dtype=bool),
        recorded=recorded[group.reshape(-1)] if m else np.zeros(0, dtype=bool),
        sample=sample,
        sample_of=group.reshape(-1) if m else np.zeros(0, dtype=np.int64),
    )
    objs = [spec_object(s, named) for s in distinct]
    edge_values(df, distinct, scode)
    domains, names = df.domains, t.names

    def bind(e: str) -> BoundProjection:
        k = t.edge_index()[e]
        return objs[scode[k]].bind(domains[names[t.src[k]]], domains[names[t.dst[k]]], e)

    df.bound = OnDemand(t.edge_index, bind, made, size=t.m)
    is_id = np.array([type(o) is Identity for o in objs], dtype=bool)
    return is_id[scode] if m else np.zeros(0, dtype=bool)


def bind_identity(df: Dataflow, dom: Domain) -> None:
    """Every edge the identity within the one domain ``dom``: :attr:`edges` and :attr:`bound` made when read.

    Nothing to check (the identity binds within a domain) and no binding
    groups recorded: for :func:`~falkirk.solver.model.arrays.epoch_dataflow`.
    """
    t = df.table
    names = t.names

    def edge(e: str) -> Edge:
        k = t.edge_index()[e]
        return Edge(e, names[t.src[k]], names[t.dst[k]], _IDENTITY)

    df.edges = OnDemand(t.edge_index, edge, size=t.m)
    df.bound = OnDemand(t.edge_index, lambda e: _IDENTITY.bind(dom, dom, e), size=t.m)


def check_logs(df: Dataflow, procs: list[Processor]) -> Any:
    """Every logged edge is an output edge of its processor; whether each edge is logged.

    Each processor logs as many of its own output edges as it names in
    ``logs`` exactly when every name is one of them; the first
    processor in declaration order for which that fails is named.
    """
    t = df.table
    logs = list(map(attrgetter("logs"), procs))
    mine = map(frozenset.__contains__, map(logs.__getitem__, t.src.tolist()), t.edge_names())
    logged = np.fromiter(mine, dtype=bool, count=t.m)
    named = np.fromiter(map(len, logs), dtype=np.int64, count=len(logs))
    found = np.bincount(t.src[logged], minlength=len(logs))
    for i in np.flatnonzero(named != found).tolist():
        p = procs[i]
        unknown = sorted(set(p.logs) - set(df.outputs[p.name]))
        raise UnknownNameError(f"processor {p.name!r}: logs {unknown}, which are not its output edges")
    return logged


def check_stateless(df: Dataflow) -> None:
    """A stateless processor's unlogged output edges need a projection with a residual (SPEC §3)."""
    t = df.table
    bad = np.flatnonzero(t.stateless[t.src] & ~t.logged & ~t.residual)
    if bad.size:
        k = int(bad[np.lexsort((bad, t.src[bad]))[0]])  # first by processor, then by edge, as declared
        e, p = t.edge_name(k), t.names[t.src[k]]
        raise ValidationError(
            f"processor {p!r}: stateless, but edge {e!r} is not logged and its "
            f"projection {df.bound[e].spec.name!r} has no residual (SPEC §3); log the edge or "
            "make the processor stateful"
        )
