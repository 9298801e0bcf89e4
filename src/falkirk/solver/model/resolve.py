"""Resolve a processor's checkpoints into complete, validated metadata (SPEC §3, §9).

Fills every omitted field with its safe default, coerces encodings into
frontiers, and rejects input that is not a chain or not monotone, naming the
processor, checkpoint and field.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from typing import TYPE_CHECKING, Any

from attrs import frozen

from falkirk.domains import INPUT_EDGE, Domain, Frontier, Sequence
from falkirk.errors import DomainError, NotAChainError, NotMonotoneError, ValidationError
from falkirk.solver.model.elements import Checkpoint, ResolvedCheckpoint

if TYPE_CHECKING:
    from falkirk.solver.model.dataflow import Dataflow

__all__ = [
    "Resolved",
    "resolve_processor",
    "resolve_checkpoint",
    "coerce",
    "edge_view",
    "delivered_default",
    "check_monotone",
    "same_frontier_message",
    "differing_fields",
    "METADATA_FIELDS",
    "functional_projection_message",
]


@frozen
class Resolved:
    """A processor's resolved chain (``∅`` first) and its live metadata at ``⊤``."""

    chain: tuple[ResolvedCheckpoint, ...]
    live: ResolvedCheckpoint


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
    metas: list[ResolvedCheckpoint] = []
    for i, ck in enumerate(p.checkpoints):
        where = f"processor {name!r}, checkpoint {i}"
        if not isinstance(ck, Checkpoint):
            raise ValidationError(f"{where}: expected a Checkpoint, got {ck!r}")
        f = coerce(dom, ck.frontier, f"{where} frontier")
        if f == empty:
            raise ValidationError(f"{where}: the empty frontier is always implied; do not list it")
        if f.is_top:
            raise ValidationError(f"{where}: a checkpoint at 'top' is the live state; give it as 'live'")
        metas.append(resolve_checkpoint(df, name, ck, f, where, live=False))
    chain = [_empty_meta(df, name)]
    labels = ["empty"]  # what error messages call each chain element
    for i, meta in enumerate(metas):
        prev, cur = chain[-1].frontier, meta.frontier
        if prev == cur and i > 0:
            fields = differing_fields(chain[-1], meta)
            if fields:
                from falkirk.domains.encoding import frontier_text

                subject = f"processor {name!r}: checkpoint {i} ({frontier_text(cur)})"
                raise NotAChainError(same_frontier_message(subject, labels[-1], fields))
            continue  # the same checkpoint again (an idle period) is that one checkpoint (SPEC §5)
        if not (prev <= cur and prev != cur):
            raise NotAChainError(
                f"processor {name!r}: checkpoint {i} ({cur!r}) does not strictly contain "
                f"the one before it ({prev!r}); checkpoints must be listed in increasing order"
            )
        chain.append(meta)
        labels.append(f"checkpoint {i}")
    live_ck = p.live if p.live is not None else Checkpoint("top")
    where = f"processor {name!r}, live"
    if live_ck.frontier not in ("top", None) and coerce(dom, live_ck.frontier, where) != top:
        raise ValidationError(f"{where}: the live frontier is 'top'")
    live = resolve_checkpoint(df, name, live_ck, top, where, live=True)
    check_monotone(name, chain + [live], labels + ["live"])
    return Resolved(tuple(chain), live)


#: The fields of a :class:`ResolvedCheckpoint` besides its frontier (``recorded``: which edges record φ).
METADATA_FIELDS = ("notifications", "delivered", "discarded", "projection", "logged", "state", "recorded")


def differing_fields(a: ResolvedCheckpoint, b: ResolvedCheckpoint) -> list[str]:
    """The metadata fields (frontier aside) in which two resolved checkpoints differ.

    Two successive checkpoints at the same frontier are one checkpoint when
    this is empty (SPEC §5: an idle period). The metadata are compared
    resolved, so a field given explicitly equals the same value left to its
    default.
    """
    return [fld for fld in METADATA_FIELDS if getattr(a, fld) != getattr(b, fld)]


def same_frontier_message(subject: str, before: str, fields: list[str]) -> str:
    """Why ``subject``, at the frontier of ``before`` with other metadata (``fields``), is refused (SPEC
    §5)."""
    return (
        f"{subject} is at the same frontier as {before} but its metadata differ ({', '.join(fields)}); "
        "two checkpoints at one frontier are one checkpoint only when their metadata are identical. "
        f"Output produced without new input needs a source edge ('{INPUT_EDGE}', SPEC §7) so that "
        "the frontier moves"
    )


def _empty_meta(df: Dataflow, name: str) -> ResolvedCheckpoint:

    dom = df.domains[name]
    empty = Frontier.empty(dom)
    outs = {}
    for e in df.outputs[name]:
        b = df.bound[e]
        outs[e] = Frontier.empty(b.target) if b.recorded else b.apply(empty)
    return ResolvedCheckpoint(
        frontier=empty,
        notifications=empty,
        delivered={e: Frontier.empty(dom) for e in df.inputs[name]},
        discarded={e: Frontier.empty(df.bound[e].target) for e in df.outputs[name]},
        projection=outs,
        logged={},
        state=None,
        recorded=frozenset(e for e in df.outputs[name] if df.bound[e].recorded),
    )


def resolve_checkpoint(
    df: Dataflow,
    name: str,
    ck: Checkpoint,
    f: Frontier,
    where: str,
    *,
    live: bool,
    records: Seq[Checkpoint] | None = None,
) -> ResolvedCheckpoint:
    """The complete metadata of checkpoint ``ck`` of ``name`` at frontier ``f`` (``where`` names it in
    errors).

    Omitted fields take their safe defaults (SPEC §9). ``records`` are the
    checkpoints whose recorded projections the union rule of SPEC §3 reads
    (default: the processor's own; an incremental caller passes the ones it
    kept). Cost: ``O(edges of p)`` coercions, plus ``O(records)`` per
    recorded edge without a record here.
    """

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
            if not b.recorded:
                raise ValidationError(functional_projection_message(where, e, b.spec.name))
            projection[e] = coerce(tgt, ck.projection[e], f"{where} projection[{e!r}]", edge=e)
            recorded.add(e)
        elif live:
            projection[e] = Frontier.top(tgt)
            recorded.add(e)
        elif b.recorded:
            projection[e] = _union_rule(df, name, e, f, p.checkpoints if records is None else records)
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
    return ResolvedCheckpoint(
        frontier=f,
        notifications=notes,
        delivered=delivered,
        discarded=discarded,
        projection=projection,
        logged=dict(ck.logged),
        state=ck.state,
        recorded=frozenset(recorded),
    )


def functional_projection_message(where: str, edge: str, projection: str) -> str:
    """Why a checkpoint (``where``) may not give ``projection[edge]``: the edge's projection is a function
    (SPEC §9)."""
    return (
        f"{where}: projection[{edge!r}]: edge {edge!r} has the functional projection {projection!r}, so a "
        "checkpoint may not give its projection; only recorded projections ('recorded', 'sequence', "
        "'epoch_to_sequence') are given per checkpoint (SPEC §9): a value that differs from the edge's "
        "projection function would make φ more than one function for the solver and the monitor. "
        "Omit it, or declare the edge's projection 'recorded'"
    )


def _union_rule(df: Dataflow, name: str, edge: str, f: Frontier, records: Seq[Checkpoint]) -> Frontier:
    """``φ_e(f) = ∪ {φ_e(f') : f' recorded, f' ⊆ f}`` over the checkpoints ``records``."""
    tgt = df.bound[edge].target
    dom = df.domains[name]
    out = Frontier.empty(tgt)
    for i, ck in enumerate(records):
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


def check_monotone(name: str, chain: list[ResolvedCheckpoint], labels: list[str]) -> None:
    """Refuse metadata that is not monotone along ``chain`` (``labels[i]`` names ``chain[i]``)."""
    for i in range(1, len(chain)):
        a, b = chain[i - 1], chain[i]
        label = labels[i]
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
