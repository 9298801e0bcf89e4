"""Reading ``falkirk-scenario/1`` documents (SPEC §9): :func:`parse`, :func:`loads`, :func:`load`.

The reader maps JSON onto :class:`~falkirk.solver.Processor`,
:class:`~falkirk.solver.Edge` and :class:`~falkirk.solver.Checkpoint`,
decoding every frontier with its domain's ``decode`` (so errors point at the
exact field), and leaves safe defaults and the chain/monotonicity checks to
:class:`~falkirk.solver.Dataflow`, whose errors are re-raised at the JSON path
they concern. Everything is validated before anything is returned: a
scenario is never half-read.

>>> s = loads('''{"format": "falkirk-scenario/1",
...   "processors": {"a": {"domain": "epoch", "logs": ["ab"], "checkpoints": [{"frontier": 3}]},
...                  "b": {"domain": "epoch", "checkpoints": [{"frontier": 2}], "x-note": "ignored"}},
...   "edges": {"ab": {"src": "a", "dst": "b"}},
...   "failed": ["a"]}''')
>>> s.solve().to_json()["frontiers"]
{'a': 3, 'b': 2}
>>> loads('{"format": "falkirk-scenario/1", "processors": {"a": {"domain": "epoch", '
...       '"checkpoints": [{"frontier": 1, "deliverd": {}}]}}}')
Traceback (most recent call last):
...
falkirk.errors.ScenarioError: processors.a.checkpoints[0].deliverd: unknown field 'deliverd' in a checkpoint (did you mean 'delivered'?); known fields: frontier, notifications, delivered, discarded, projection
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import IO, Any

from falkirk.domains import INPUT_EDGE, REGISTRY, Domain, Frontier, Sequence, domain_options
from falkirk.domains.projections import Projection, projection_from_spec
from falkirk.errors import DomainError, FalkirkError, ScenarioError, UnknownNameError
from falkirk.scenario.model import Scenario
from falkirk.scenario.paths import did_you_mean, error_at, from_model_error, join, show
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor

__all__ = ["FORMAT", "decode_frontier", "load", "loads", "parse"]

#: The ``format`` every scenario document declares.
FORMAT = "falkirk-scenario/1"

TOP_FIELDS = ("format", "processors", "edges", "failed", "notifications")
PROCESSOR_FIELDS = ("domain", "arity", "stateless", "logs", "checkpoints", "live")
EDGE_FIELDS = ("src", "dst", "projection")
CHECKPOINT_FIELDS = ("frontier", "notifications", "delivered", "discarded", "projection")
STATELESS_CHECKPOINT_FIELDS = ("frontier", "projection")
LIVE_FIELDS = ("notifications", "delivered", "discarded")

_DERIVED = "is derived for a stateless processor (SPEC §3); give only frontier and projection"
_NOT_HERE: dict[str, dict[str, str]] = {
    "live metadata": {
        "frontier": "live is the metadata at ⊤, it has no frontier",
        "projection": "the live projection is always ⊤ (φ_e(⊤) = ⊤)",
    },
    "stateless checkpoint": {f: f"{f} {_DERIVED}" for f in ("delivered", "notifications", "discarded")},
}


def _fields(
    obj: Any, path: str, allowed: tuple[str, ...], what: str, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``obj`` as a dict without ``x-`` annotations, rejecting unknown and missing fields."""
    if not isinstance(obj, dict):
        raise error_at(path, f"a {what} is a JSON object, not {show(obj)}")
    out = {}
    for key, value in obj.items():
        if isinstance(key, str) and key.startswith("x-"):
            continue
        if key not in allowed:
            why = _NOT_HERE.get(what, {}).get(key)
            if why is not None:
                raise error_at(join(path, key), f"field {key!r} is not allowed here: {why}")
            raise error_at(
                join(path, str(key)),
                f"unknown field {key!r} in a {what}{did_you_mean(str(key), allowed)}; "
                f"known fields: {', '.join(allowed)}",
            )
        out[key] = value
    for key in required:
        if key not in out:
            raise error_at(join(path, key), f"missing field {key!r} in a {what}")
    return out


def _names(obj: Any, path: str, what: str) -> dict[str, Any]:
    """A JSON object keyed by names (processors, edges, per-edge maps)."""
    if not isinstance(obj, dict):
        raise error_at(path, f"{what} is a JSON object keyed by name, not {show(obj)}")
    for key in obj:
        if not isinstance(key, str) or not key:
            raise error_at(path, f"a name is a non-empty string, not {show(key)}")
    return obj


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise error_at(path, f"expected true or false, not {show(value)}")
    return value


def decode_frontier(domain: Domain, value: Any, path: str = "", *, edge: str | None = None) -> Frontier:
    """Decode one frontier of ``domain`` (SPEC §7/§9 encodings) or raise at ``path``.

    ``edge`` is the edge the frontier concerns (``delivered``/``discarded``/
    ``projection`` entries); in a ``sequence`` domain it makes a bare integer
    ``n`` stand for ``{edge: n}`` and limits the counts to that edge.

    >>> from falkirk.domains import Product, Sequence
    >>> decode_frontier(Product(2), {"upto": [[1, 2]]})
    Frontier(product(2), before=[(0, 3), (2, 0)])
    >>> decode_frontier(Sequence(["a", "b"]), 4, "delivered.a", edge="a")
    Frontier(sequence(a,b), a:4)
    """
    if isinstance(value, str) and value in ("top", "empty"):
        return Frontier.top(domain) if value == "top" else Frontier.empty(domain)
    if edge is not None and isinstance(domain, Sequence) and isinstance(value, dict):
        others = sorted(set(value) - {edge})
        if others:
            raise error_at(
                path, f"this frontier concerns edge {edge!r} only, but it also counts {others}", DomainError
            )
    if (
        edge is None
        and isinstance(domain, Sequence)
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        example = json.dumps({domain.edges[0]: value})
        raise error_at(
            path,
            f"a frontier of {domain} is a count per input edge, e.g. {example}; a bare count is "
            "allowed only inside delivered, discarded and projection",
            DomainError,
        )
    decode = getattr(domain, "decode", None)
    if decode is None:
        raise error_at(path, f"domain {domain} has no JSON encoding of its frontiers", DomainError)
    try:
        result = decode(value, edge=edge)
    except (FalkirkError, TypeError, ValueError, LookupError) as exc:
        raise error_at(path, f"not a frontier of {domain}: {exc}", DomainError) from None
    if not isinstance(result, Frontier):
        raise error_at(
            path, f"domain {domain} decoded {show(value)} to {result!r}, not a Frontier", DomainError
        )
    return result


class _Reader:
    """One parse: the document's names and the skeleton dataflow that gives domains."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.notifications = _bool(doc.get("notifications", True), "notifications")
        self.raw = _names(doc["processors"], "processors", "processors")
        self.edges = self._edges(_names(doc.get("edges", {}), "edges", "edges"))
        self.inputs: dict[str, list[str]] = {p: [] for p in self.raw}
        self.outputs: dict[str, list[str]] = {p: [] for p in self.raw}
        for e in self.edges:
            self.outputs[e.src].append(e.name)
            self.inputs[e.dst].append(e.name)
        self.fields = {p: self._processor_fields(p, obj) for p, obj in self.raw.items()}
        skeleton = [self._processor(p) for p in self.raw]
        self.skeleton = _dataflow(skeleton, self.edges, self.notifications)

    # -- edges and processors ---------------------------------------------------------
    def _edges(self, raw: dict[str, Any]) -> list[Edge]:
        edges = []
        for name, obj in raw.items():
            path = join("edges", name)
            if name == INPUT_EDGE:
                raise error_at(path, f"{INPUT_EDGE!r} is reserved for the implicit input of sequence sources")
            fields = _fields(obj, path, EDGE_FIELDS, "edge", required=("src", "dst"))
            for end in ("src", "dst"):
                who = fields[end]
                if not isinstance(who, str) or who not in self.raw:
                    hint = did_you_mean(who, self.raw) if isinstance(who, str) else ""
                    raise error_at(join(path, end), f"unknown processor {show(who)}{hint}", UnknownNameError)
            projection = _projection(fields.get("projection", "identity"), join(path, "projection"))
            edges.append(Edge(name, fields["src"], fields["dst"], projection))
        return edges

    def _processor_fields(self, name: str, obj: Any) -> dict[str, Any]:
        path = join("processors", name)
        domain = obj.get("domain") if isinstance(obj, dict) else None
        extra: tuple[str, ...] = ()
        if isinstance(domain, str) and domain in REGISTRY:
            extra = tuple(o for o in domain_options(domain) if o not in PROCESSOR_FIELDS + ("edges",))
        fields = _fields(obj, path, PROCESSOR_FIELDS + extra, "processor", required=("domain",))
        domain = fields["domain"]
        if not isinstance(domain, str) or domain not in REGISTRY:
            hint = did_you_mean(domain, REGISTRY) if isinstance(domain, str) else ""
            raise error_at(
                join(path, "domain"),
                f"unknown domain {show(domain)}{hint}; known: {', '.join(sorted(REGISTRY))}",
                UnknownNameError,
            )
        options = domain_options(domain)
        if "arity" in options:
            if "arity" not in fields:
                raise error_at(
                    join(path, "arity"), f"domain {domain!r} needs an arity (the number of tuple components)"
                )
            arity = fields["arity"]
            if isinstance(arity, bool) or not isinstance(arity, int) or arity < 1:
                raise error_at(join(path, "arity"), f"an arity is an integer >= 1, not {show(arity)}")
        elif "arity" in fields:
            raise error_at(join(path, "arity"), f"domain {domain!r} takes no arity")
        if "stateless" in fields:
            _bool(fields["stateless"], join(path, "stateless"))
        logs = fields.get("logs", [])
        if not isinstance(logs, list):
            raise error_at(join(path, "logs"), f"logs is a list of output edge names, not {show(logs)}")
        for i, e in enumerate(logs):
            if e not in self.outputs[name] or logs.index(e) != i:
                why = "is listed twice" if e in logs[:i] else f"is not an output edge of {name!r}"
                raise error_at(join(join(path, "logs"), i), f"{show(e)} {why}", UnknownNameError)
        return fields

    def _processor(
        self, name: str, checkpoints: tuple[Checkpoint, ...] = (), live: Checkpoint | None = None
    ) -> Processor:
        fields = self.fields[name]
        options = domain_options(fields["domain"])
        domain: Domain | str = fields["domain"]
        custom = [o for o in options if o not in ("arity", "edges")]
        if custom:  # a registered domain with options of its own: build it here
            kwargs = {o: fields[o] for o in custom if o in fields}
            if "edges" in options:
                kwargs["edges"] = self.inputs[name] or [INPUT_EDGE]
            try:
                domain = REGISTRY[fields["domain"]](**kwargs)
            except (FalkirkError, TypeError, ValueError) as exc:
                raise error_at(
                    join("processors", name), f"domain {fields['domain']!r}: {exc}", DomainError
                ) from None
        metadata: dict[str, Any] = {"checkpoints": checkpoints, "live": live}
        return Processor(
            name,
            domain,
            stateless=fields.get("stateless", False),
            logs=fields.get("logs", ()),
            arity=fields.get("arity") if "arity" in options else None,
            **metadata,
        )

    # -- metadata ---------------------------------------------------------------------------
    def finish(self, failed: Any) -> Scenario:
        procs = []
        for name in self.raw:
            path = join("processors", name)
            fields = self.fields[name]
            stateless = fields.get("stateless", False)
            raw_cks = fields.get("checkpoints", [])
            if not isinstance(raw_cks, list):
                raise error_at(join(path, "checkpoints"), f"checkpoints is a list, not {show(raw_cks)}")
            cks = tuple(
                self._checkpoint(name, ck, f"{join(path, 'checkpoints')}[{i}]", stateless=stateless)
                for i, ck in enumerate(raw_cks)
            )
            live = None
            if "live" in fields:
                if stateless:
                    raise error_at(
                        join(path, "live"), "a stateless processor's live metadata is derived; remove 'live'"
                    )
                live = self._checkpoint(name, fields["live"], join(path, "live"), live=True)
            procs.append(self._processor(name, cks, live))
        df = _dataflow(procs, self.edges, self.notifications)
        return Scenario(df, _failed(failed, self.raw))

    def _checkpoint(
        self, name: str, obj: Any, path: str, *, stateless: bool = False, live: bool = False
    ) -> Checkpoint:
        if live:
            fields = _fields(obj, path, LIVE_FIELDS, "live metadata")
        elif stateless:
            fields = _fields(
                obj, path, STATELESS_CHECKPOINT_FIELDS, "stateless checkpoint", required=("frontier",)
            )
        else:
            fields = _fields(obj, path, CHECKPOINT_FIELDS, "checkpoint", required=("frontier",))
        dom = self.skeleton.domains[name]
        frontier: Any = "top"
        if not live:
            frontier = decode_frontier(dom, fields["frontier"], join(path, "frontier"))
            if frontier.is_empty or frontier.is_top:
                what = "∅ is always implied" if frontier.is_empty else "⊤ is the live state: use 'live'"
                raise error_at(
                    join(path, "frontier"), f"a checkpoint cannot be at {show(fields['frontier'])}: {what}"
                )
        notes = None
        if "notifications" in fields:
            notes = decode_frontier(dom, fields["notifications"], join(path, "notifications"))
            if not self.skeleton.receives_notifications[name] and not notes.is_empty:
                why = (
                    "its domain is a sequence domain"
                    if isinstance(dom, Sequence)
                    else 'the scenario says "notifications": false'
                )
                raise error_at(
                    join(path, "notifications"),
                    f"{name!r} receives no notifications ({why}); remove this field",
                )
        return Checkpoint(
            frontier,
            notifications=notes,
            delivered=self._per_edge(name, fields, "delivered", path, self.inputs[name], "input"),
            discarded=self._per_edge(name, fields, "discarded", path, self.outputs[name], "output"),
            projection=self._per_edge(name, fields, "projection", path, self.outputs[name], "output"),
        )

    def _per_edge(
        self, name: str, fields: Mapping[str, Any], key: str, path: str, edges: list[str], kind: str
    ) -> dict[str, Frontier]:
        if key not in fields:
            return {}
        path = join(path, key)
        raw = _names(fields[key], path, key)
        out = {}
        for e, value in raw.items():
            if e not in edges:
                known = ", ".join(edges) if edges else "none"
                raise error_at(
                    join(path, e),
                    f"{e!r} is not an {kind} edge of {name!r}{did_you_mean(e, edges)} ({kind} edges: {known})",
                    UnknownNameError,
                )
            dom = self.skeleton.domains[name] if kind == "input" else self.skeleton.bound[e].target
            out[e] = decode_frontier(dom, value, join(path, e), edge=e)
        return out


def _projection(spec: Any, path: str) -> Projection:
    if isinstance(spec, dict):
        spec = {k: v for k, v in spec.items() if not (isinstance(k, str) and k.startswith("x-"))}
    try:
        return projection_from_spec(spec)
    except FalkirkError as exc:
        raise error_at(path, str(exc), type(exc)) from None


def _dataflow(procs: list[Processor], edges: list[Edge], notifications: bool) -> Dataflow:
    try:
        return Dataflow(procs, edges, notifications=notifications)
    except FalkirkError as exc:
        raise from_model_error(exc) from None


def _failed(value: Any, names: Mapping[str, Any]) -> Any:
    if value == "all":
        return "all"
    if not isinstance(value, list):
        raise error_at("failed", f'failed is a list of processor names or "all", not {show(value)}')
    for i, name in enumerate(value):
        if not isinstance(name, str) or name not in names:
            hint = did_you_mean(name, names) if isinstance(name, str) else ""
            raise error_at(f"failed[{i}]", f"unknown processor {show(name)}{hint}", UnknownNameError)
        if name in value[:i]:
            raise error_at(f"failed[{i}]", f"{name!r} is listed twice")
    return value


def parse(obj: Any) -> Scenario:
    """A :class:`Scenario` from a decoded ``falkirk-scenario/1`` JSON document.

    Raises :class:`~falkirk.errors.ScenarioError` (possibly also a more
    precise :class:`~falkirk.errors.FalkirkError` subclass) whose ``path``
    names the offending field.
    """
    if not isinstance(obj, dict):
        raise error_at("", f"a scenario is a JSON object, not {show(obj)}")
    fmt = obj.get("format")
    if fmt != FORMAT:
        if "format" not in obj:
            raise error_at("format", f'missing field \'format\': a scenario starts with "format": "{FORMAT}"')
        extra = " (that is a rollback plan, not a scenario)" if fmt == "falkirk-plan/1" else ""
        raise error_at("format", f"unsupported format {show(fmt)}{extra}; expected {FORMAT!r}")
    doc = _fields(obj, "", TOP_FIELDS, "scenario", required=("processors",))
    return _Reader(doc).finish(doc.get("failed", []))


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ScenarioError(
                f"duplicate key {key!r} in a JSON object (keys: {', '.join(k for k, _ in pairs)})"
            )
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ScenarioError(f"invalid JSON: {name} is not a JSON number")


def loads(text: str | bytes) -> Scenario:
    """Parse a scenario from JSON text (see :func:`parse`).

    Invalid JSON is reported with its line and column; duplicate keys are rejected.
    """
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse(obj)


def load(source: str | os.PathLike[str] | IO[Any]) -> Scenario:
    """Read a scenario from a file path or an open file (see :func:`loads`).

    ``OSError`` (missing or unreadable file) propagates unchanged.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            return loads(fh.read())
    return loads(source.read())
