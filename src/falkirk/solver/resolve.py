"""Resolve a processor's checkpoints into complete, validated metadata (SPEC §3, §9).

Fills every omitted field with its safe default, coerces encodings into
frontiers, and rejects input that is not a chain or not monotone, naming the
processor, checkpoint and field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attrs import frozen

from falkirk.domains import Domain, Frontier, Sequence
from falkirk.errors import DomainError, NotAChainError, NotMonotoneError, ValidationError
from falkirk.solver.elements import Checkpoint, Meta

if TYPE_CHECKING:
    from falkirk.solver.model import Dataflow

__all__ = ["Resolved", "resolve_processor", "coerce", "edge_view", "delivered_default"]


@frozen
class Resolved:
    """A processor's resolved chain (``∅`` first) and its live metadata at ``⊤``."""

    chain: tuple[Meta, ...]
    live: Meta


def coerce(domain: Domain, value: Any, where: str, *, edge: str | None = None) -> Frontier:
    """``value`` as a frontier of ``domain``; ``where`` names the field for errors."""
    if isinstance(value, Frontier):
        if value.domain != domain:
            raise DomainError(f"{where}: {value!r} is a frontier of {value.domain}, expected {domain}")
        return value
    decode = getattr(domain, "decode", None)
    if decode is None:
        raise DomainError(f"{where}: give a Frontier of {domain} (the domain has no encoding)")
    if edge is None and isinstance(domain, Sequence) and len(domain.edges) == 1:
        edge = domain.edges[0]
    try:
        result: Frontier = decode(value, edge=edge)
    except DomainError as exc:
        raise DomainError(f"{where}: {exc}") from None
    return result


def edge_view(domain: Domain, f: Frontier, edge: str) -> Frontier:
    """What ``f`` says about input edge ``edge`` alone: itself, or ``⊤`` on other sequence edges."""
    if isinstance(domain, Sequence):
        return domain.only(f, edge)
    return f


def delivered_default(domain: Domain, f: Frontier, edge: str) -> Frontier:
    """``M_e(f) = f`` (in a sequence domain: ``f``'s count on ``e`` only)."""
    if isinstance(domain, Sequence):
        return domain.restrict(f, edge)
    return f


def resolve_processor(df: Dataflow, name: str) -> Resolved:
    """Resolve processor ``name`` of ``df`` (see the module docstring)."""

    p = df.processors[name]
    dom = df.domains[name]
    empty = Frontier.empty(dom)
    top = Frontier.top(dom)
    chain = [_empty_meta(df, name)]
    for i, ck in enumerate(p.checkpoints):
        where = f"processor {name!r}, checkpoint {i}"
        if not isinstance(ck, Checkpoint):
            raise ValidationError(f"{where}: expected a Checkpoint, got {ck!r}")
        f = coerce(dom, ck.frontier, f"{where} frontier")
        if f == empty:
            raise ValidationError(f"{where}: the empty frontier is always implied; do not list it")
        if f.is_top:
            raise ValidationError(f"{where}: a checkpoint at 'top' is the live state; give it as 'live'")
        chain.append(_meta(df, name, ck, f, where, live=False))
    for i in range(1, len(chain)):
        prev, cur = chain[i - 1].frontier, chain[i].frontier
        if not (prev <= cur and prev != cur):
            raise NotAChainError(
                f"processor {name!r}: checkpoint {i - 1} ({cur!r}) does not strictly contain "
                f"the one before it ({prev!r}); checkpoints must be listed in increasing order"
            )
    live_ck = p.live if p.live is not None else Checkpoint("top")
    where = f"processor {name!r}, live"
    if live_ck.frontier not in ("top", None) and coerce(dom, live_ck.frontier, where) != top:
        raise ValidationError(f"{where}: the live frontier is 'top'")
    live = _meta(df, name, live_ck, top, where, live=True)
    _check_monotone(name, chain + [live])
    return Resolved(tuple(chain), live)


def _empty_meta(df: Dataflow, name: str) -> Meta:

    dom = df.domains[name]
    empty = Frontier.empty(dom)
    outs = {}
    for e in df.outputs[name]:
        b = df.bound[e]
        outs[e] = Frontier.empty(b.target) if b.recorded else b.apply(empty)
    return Meta(
        frontier=empty,
        notifications=empty,
        delivered={e: Frontier.empty(dom) for e in df.inputs[name]},
        discarded={e: Frontier.empty(df.bound[e].target) for e in df.outputs[name]},
        projection=outs,
        logged={},
        state=None,
        recorded=frozenset(e for e in df.outputs[name] if df.bound[e].recorded),
    )


def _meta(df: Dataflow, name: str, ck: Checkpoint, f: Frontier, where: str, *, live: bool) -> Meta:

    p = df.processors[name]
    dom = df.domains[name]
    empty = Frontier.empty(dom)
    for fld, keys, allowed in (
        ("delivered", ck.delivered, df.inputs[name]),
        ("discarded", ck.discarded, df.outputs[name]),
        ("projection", ck.projection, df.outputs[name]),
        ("logged", ck.logged, df.outputs[name]),
    ):
        unknown = sorted(set(keys) - set(allowed))
        if unknown:
            kind = "input" if fld == "delivered" else "output"
            raise ValidationError(f"{where}: {fld} names {unknown}, which are not {kind} edges of {name!r}")
    if p.stateless and (ck.delivered or ck.notifications is not None or ck.discarded):
        raise ValidationError(
            f"{where}: a stateless processor's delivered/notifications/discarded are derived; give only frontier and projection"
        )
    if not df.receives_notifications[name]:
        if ck.notifications is not None and coerce(dom, ck.notifications, f"{where} notifications") != empty:
            raise ValidationError(f"{where}: notifications given, but {name!r} receives no notifications")
        notes = empty
    elif ck.notifications is None:
        notes = f
    else:
        notes = coerce(dom, ck.notifications, f"{where} notifications")
    delivered = {}
    for e in df.inputs[name]:
        if e in ck.delivered:
            v = coerce(dom, ck.delivered[e], f"{where} delivered[{e!r}]", edge=e)
            delivered[e] = delivered_default(dom, v, e) if isinstance(dom, Sequence) else v
        else:
            delivered[e] = delivered_default(dom, f, e)
    projection, discarded, recorded = {}, {}, set()
    for e in df.outputs[name]:
        b = df.bound[e]
        tgt = b.target
        if e in ck.projection:
            projection[e] = coerce(tgt, ck.projection[e], f"{where} projection[{e!r}]", edge=e)
            recorded.add(e)
        elif live:
            projection[e] = Frontier.top(tgt)
            recorded.add(e)
        elif b.recorded:
            projection[e] = _union_rule(df, name, e, f, where)
        else:
            projection[e] = b.apply(f)
        if e in ck.discarded:
            discarded[e] = coerce(tgt, ck.discarded[e], f"{where} discarded[{e!r}]", edge=e)
        elif e in p.logs:
            discarded[e] = Frontier.empty(tgt)
        elif b.recorded and e not in ck.projection and not live and not p.stateless:
            raise ValidationError(
                f"{where}: edge {e!r} has a recorded projection ({b.spec.name!r}) with no record "
                "at this checkpoint, so 'discarded' must be given for it"
            )
        elif live or b.recorded or e in ck.projection:
            discarded[e] = projection[e]
        else:
            discarded[e] = b.discarded(f)
        if isinstance(tgt, Sequence):  # SPEC §7: φ_e and D_e concern edge e's count only
            projection[e] = delivered_default(tgt, projection[e], e)
            discarded[e] = delivered_default(tgt, discarded[e], e)
    return Meta(
        frontier=f,
        notifications=notes,
        delivered=delivered,
        discarded=discarded,
        projection=projection,
        logged=dict(ck.logged),
        state=ck.state,
        recorded=frozenset(recorded),
    )


def _union_rule(df: Dataflow, name: str, edge: str, f: Frontier, where: str) -> Frontier:
    """``φ_e(f) = ∪ {φ_e(f') : f' recorded, f' ⊆ f}`` over the checkpoints listed so far."""
    p = df.processors[name]
    tgt = df.bound[edge].target
    dom = df.domains[name]
    out = Frontier.empty(tgt)
    for i, ck in enumerate(p.checkpoints):
        if edge in ck.projection:
            fi = coerce(dom, ck.frontier, f"processor {name!r}, checkpoint {i} frontier")
            if fi <= f:
                out = out | coerce(
                    tgt,
                    ck.projection[edge],
                    f"processor {name!r}, checkpoint {i} projection[{edge!r}]",
                    edge=edge,
                )
    return out


def _check_monotone(name: str, chain: list[Meta]) -> None:
    for i in range(1, len(chain)):
        a, b = chain[i - 1], chain[i]
        label = "live" if i == len(chain) - 1 and b.frontier.is_top else f"checkpoint {i - 1}"
        pairs: list[tuple[str, Frontier, Frontier]] = [("notifications", a.notifications, b.notifications)]
        for fld in ("delivered", "discarded", "projection"):
            x, y = getattr(a, fld), getattr(b, fld)
            pairs.extend((f"{fld}[{e!r}]", x[e], y[e]) for e in y)
        for fld, lo, hi in pairs:
            if not lo <= hi:
                from falkirk.domains.encoding import frontier_text as t

                raise NotMonotoneError(
                    f"processor {name!r}, {label} (frontier {t(b.frontier)}): {fld} = {t(hi)} is not "
                    f"monotone: the smaller frontier {t(a.frontier)} has {t(lo)}"
                )
