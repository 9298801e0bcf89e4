"""Writing scenarios back to ``falkirk-scenario/1`` documents: :func:`dump`, :func:`dumps`.

Frontiers are written in the canonical encodings of SPEC §9 (``"empty"``,
``"top"``, an epoch integer, ``{edge: count}``, ``{"before": [...]}``), so
``parse(dump(s)) == s`` for every scenario read by :func:`~falkirk.scenario.parse`.
A dataflow built in Python can be dumped when everything in it has a JSON
form (no function projections, opaque state handles or per-processor
options the format lacks); otherwise a :class:`~falkirk.errors.ScenarioError`
names the culprit.

>>> from falkirk.scenario import loads
>>> s = loads('{"format": "falkirk-scenario/1", "processors": {"p": {"domain": "product",'
...           ' "arity": 2, "checkpoints": [{"frontier": {"upto": [[1, 1]]}}]}}, "failed": "all"}')
>>> dump(s)["processors"]["p"]["checkpoints"]
[{'frontier': {'before': [[0, 2], [2, 0]]}}]
"""

from __future__ import annotations

import json
from typing import Any

from falkirk.domains import Domain, Frontier, Sequence, domain_options
from falkirk.errors import FalkirkError
from falkirk.scenario.model import Scenario
from falkirk.scenario.paths import error_at, join
from falkirk.scenario.reader import FORMAT
from falkirk.solver import Checkpoint, Dataflow, Processor, encode_frontier
from falkirk.solver.model.resolve import coerce

__all__ = ["dump", "dumps"]


def dump(scenario: Scenario) -> dict[str, Any]:
    """The ``falkirk-scenario/1`` document of ``scenario`` (a JSON-ready dict)."""
    df = scenario.dataflow
    doc: dict[str, Any] = {"format": FORMAT}
    if not scenario.notifications:
        doc["notifications"] = False
    doc["processors"] = {name: _processor(df, p) for name, p in df.processors.items()}
    edges = {}
    for name, e in df.edges.items():
        try:
            projection = df.bound[name].spec.to_json()
        except FalkirkError as exc:
            raise error_at(join(join("edges", name), "projection"), str(exc), type(exc)) from None
        edges[name] = {"src": e.src, "dst": e.dst, "projection": projection}
    doc["edges"] = edges
    doc["failed"] = "all" if scenario.failed == "all" else scenario.failed_names
    return doc


def dumps(scenario: Scenario, *, indent: int | None = 2) -> str:
    """:func:`dump` as JSON text."""
    return json.dumps(dump(scenario), indent=indent, ensure_ascii=False)


def _processor(df: Dataflow, p: Processor) -> dict[str, Any]:
    path = join("processors", p.name)
    dom = df.domains[p.name]
    family = p.domain if isinstance(p.domain, str) else dom.name
    obj: dict[str, Any] = {"domain": family}
    for opt in domain_options(family):
        if opt == "arity" and p.arity is not None:
            obj["arity"] = p.arity
        elif opt != "edges":
            if not hasattr(dom, opt):
                raise error_at(path, f"domain {dom} does not expose its option {opt!r}")
            obj[opt] = getattr(dom, opt)
    if p.stateless:
        obj["stateless"] = True
    if p.logs:
        obj["logs"] = [e for e in df.outputs[p.name] if e in p.logs]
    default = False if isinstance(dom, Sequence) else df.system_notifications
    if p.notifications is not None and p.notifications != default:
        raise error_at(
            path, "a per-processor 'notifications' setting has no JSON form (only the top-level one)"
        )
    if not p.restartable:
        raise error_at(path, "restartable=False has no JSON form (∅ is always in F(p) in a scenario)")
    if p.checkpoints:
        obj["checkpoints"] = [
            _checkpoint(df, p.name, ck, f"{path}.checkpoints[{i}]") for i, ck in enumerate(p.checkpoints)
        ]
    if p.live is not None:
        obj["live"] = _checkpoint(df, p.name, p.live, join(path, "live"), live=True)
    return obj


def _encode(domain: Domain, value: Any, path: str, edge: str | None = None) -> Any:
    try:
        f = coerce(domain, value, path, edge=edge)
    except FalkirkError as exc:
        raise error_at(path, str(exc), type(exc)) from None
    if edge is not None and isinstance(domain, Sequence):
        f = domain.restrict(f, edge)
    return encode_frontier(f)


def _checkpoint(df: Dataflow, name: str, ck: Checkpoint, path: str, *, live: bool = False) -> dict[str, Any]:
    dom = df.domains[name]
    obj: dict[str, Any] = {}
    if not live:
        obj["frontier"] = _encode(dom, ck.frontier, join(path, "frontier"))
    elif not (ck.frontier in ("top", None) or isinstance(ck.frontier, Frontier) and ck.frontier.is_top):
        raise error_at(join(path, "frontier"), "live metadata is at ⊤")
    if ck.notifications is not None:
        obj["notifications"] = _encode(dom, ck.notifications, join(path, "notifications"))
    for field in ("delivered", "discarded", "projection"):
        values = getattr(ck, field)
        if live and field == "projection" and values:
            raise error_at(join(path, field), "a live projection has no JSON form (it is always ⊤)")
        if values:
            where = join(path, field)
            obj[field] = {
                e: _encode(dom if field == "delivered" else df.bound[e].target, v, join(where, e), edge=e)
                for e, v in values.items()
            }
    if ck.logged:
        raise error_at(join(path, "logged"), "logged-message references have no JSON form")
    if ck.state is not None:
        raise error_at(join(path, "state"), "state handles have no JSON form")
    return obj
