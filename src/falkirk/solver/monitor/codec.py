"""The monitor's JSON form of a dataflow graph and of checkpoint metadata.

A persistent monitor stores its graph once (processors without their
checkpoints, edges, the external outputs) and then one JSON object per
checkpoint, in the order they were acknowledged. Frontiers are written with
their domain's canonical encoding (SPEC §7, §9), so reading a document back
and resolving it gives the same metadata. What has no JSON form is refused
with a :class:`~falkirk.errors.MonitorError` naming it: a projection that is a
Python function, a domain the registry cannot rebuild, ``state``/``logged``
handles that are not JSON values.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"]), Processor("b", "product", arity=2)],
...               [Edge("ab", "a", "b", "epoch_to_loop")])
>>> doc = graph_to_json(df, outputs=["b"])
>>> doc["edges"], doc["outputs"]
({'ab': {'src': 'a', 'dst': 'b', 'projection': 'epoch_to_loop'}}, ['b'])
>>> checkpoint_to_json(df, "b", Checkpoint({"upto": [[1, 2]]}, delivered={"ab": "empty"}))
{'frontier': {'before': [[0, 3], [2, 0]]}, 'delivered': {'ab': 'empty'}}
>>> df2, outs = graph_from_json(doc, {"b": [checkpoint_from_json({"frontier": "empty"})]})
Traceback (most recent call last):
...
falkirk.errors.ValidationError: processor 'b', checkpoint 0: the empty frontier is always implied; do not list it
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from falkirk.domains import INPUT_EDGE, Domain, make_domain
from falkirk.errors import FalkirkError, MonitorError
from falkirk.solver.model import Checkpoint, Dataflow, Edge, Processor
from falkirk.solver.model.resolve import coerce

__all__ = ["FORMAT", "graph_to_json", "graph_from_json", "checkpoint_to_json", "checkpoint_from_json"]

#: ``format`` field of the graph document.
FORMAT = "falkirk-monitor/1"

_CHECKPOINT_FIELDS = ("frontier", "notifications", "delivered", "discarded", "projection", "logged", "state")


def _domain_json(df: Dataflow, name: str) -> dict[str, Any]:
    dom = df.domains[name]
    out: dict[str, Any] = {"domain": dom.name}
    options: dict[str, Any] = {}
    if dom.name == "sequence":
        options["edges"] = df.inputs[name] or [INPUT_EDGE]
    elif getattr(dom, "arity", None) is not None:
        out["arity"] = options["arity"] = dom.arity  # type: ignore[attr-defined]
    try:
        again = make_domain(dom.name, **options)
    except FalkirkError:
        again = None
    if again != dom or not (hasattr(dom, "encode") and hasattr(dom, "decode")):
        raise MonitorError(
            f"processor {name!r}: its domain {dom} cannot be rebuilt from the registry name "
            f"{dom.name!r} (or has no JSON encoding), so it cannot be persisted; register it "
            "(falkirk.domains.register_domain) with encode/decode, or use a MemoryStore"
        )
    return out


def graph_to_json(df: Dataflow, outputs: Iterable[str] = ()) -> dict[str, Any]:
    """The graph of ``df`` (no checkpoints) and the external ``outputs``, as JSON."""
    procs: dict[str, Any] = {}
    for name, p in df.processors.items():
        doc = _domain_json(df, name)
        if p.stateless:
            doc["stateless"] = True
        if p.logs:
            doc["logs"] = sorted(p.logs)
        if p.notifications is not None:
            doc["notifications"] = p.notifications
        if not p.restartable:
            doc["restartable"] = False
        procs[name] = doc
    edges: dict[str, Any] = {}
    for name, e in df.edges.items():
        try:
            spec = df.bound[name].spec.to_json()
        except FalkirkError as exc:
            raise MonitorError(f"edge {name!r}: {exc}; it cannot be persisted (use a MemoryStore)") from None
        edges[name] = {"src": e.src, "dst": e.dst, "projection": spec}
    return {
        "format": FORMAT,
        "notifications": df.system_notifications,
        "processors": procs,
        "edges": edges,
        "outputs": sorted(outputs),
    }


def graph_from_json(
    doc: Mapping[str, Any], checkpoints: Mapping[str, list[Checkpoint]]
) -> tuple[Dataflow, frozenset[str]]:
    """Rebuild the dataflow of :func:`graph_to_json`, with ``checkpoints`` per processor."""
    if doc.get("format") != FORMAT:
        raise MonitorError(f"not a {FORMAT} graph document (format {doc.get('format')!r})")
    procs = [
        Processor(
            name,
            spec["domain"],
            stateless=spec.get("stateless", False),
            logs=spec.get("logs", ()),
            checkpoints=tuple(checkpoints.get(name, ())),
            arity=spec.get("arity"),
            notifications=spec.get("notifications"),
            restartable=spec.get("restartable", True),
        )
        for name, spec in doc["processors"].items()
    ]
    edges = [Edge(name, e["src"], e["dst"], e["projection"]) for name, e in doc["edges"].items()]
    df = Dataflow(procs, edges, notifications=doc["notifications"])
    return df, frozenset(doc["outputs"])


def _plain(value: Any, where: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise MonitorError(f"{where} is not a JSON value ({exc}); it cannot be persisted") from None


def _enc(dom: Domain, value: Any, where: str, edge: str | None = None) -> Any:
    return dom.encode(coerce(dom, value, where, edge=edge))  # type: ignore[attr-defined]


def checkpoint_to_json(df: Dataflow, name: str, ck: Checkpoint) -> dict[str, Any]:
    """``ck`` (a checkpoint of processor ``name`` of ``df``) as JSON; omitted fields stay omitted."""
    dom = df.domains[name]
    where = f"processor {name!r}, checkpoint at {ck.frontier!r}"
    out: dict[str, Any] = {"frontier": _enc(dom, ck.frontier, f"{where} frontier")}
    if ck.notifications is not None:
        out["notifications"] = _enc(dom, ck.notifications, f"{where} notifications")
    if ck.delivered:
        out["delivered"] = {e: _enc(dom, v, f"{where} delivered[{e!r}]", e) for e, v in ck.delivered.items()}
    for fld in ("discarded", "projection"):
        values: Mapping[str, Any] = getattr(ck, fld)
        if values:
            out[fld] = {}
            for e, v in values.items():
                if e not in df.bound:
                    raise MonitorError(f"{where}: {fld} names {e!r}, which is not an edge")
                out[fld][e] = _enc(df.bound[e].target, v, f"{where} {fld}[{e!r}]", e)
    if ck.logged:
        out["logged"] = _plain(dict(ck.logged), f"{where} logged")
    if ck.state is not None:
        out["state"] = _plain(ck.state, f"{where} state")
    return out


def checkpoint_from_json(doc: Mapping[str, Any]) -> Checkpoint:
    """A :class:`~falkirk.solver.Checkpoint` from its JSON form (frontiers stay encoded)."""
    unknown = sorted(set(doc) - set(_CHECKPOINT_FIELDS))
    if unknown or "frontier" not in doc:
        raise MonitorError(
            f"a checkpoint document has the fields {list(_CHECKPOINT_FIELDS)} (frontier required), got {sorted(doc)}"
        )
    return Checkpoint(**doc)
