"""Which checkpoint regime each dataset and flow of an SDP project runs with: the default, and overrides.

The default mapping:

=========================================  ============================================================
dataset                                    regime
=========================================  ============================================================
streaming table                            ``Output(log=True)``: its rows appended each epoch are its
                                           table (committed, final); the log lets consumers replay
                                           instead of making it recompute
sink                                       ``Output()``: each epoch's rows, written once
temporary view, append flow                ``Ephemeral()``: recomputed from its inputs
materialized view, mergeable aggregate     ``Eager(key=<first grouping column>, log=True)``: its state
                                           is the aggregate, merged with each update's new rows
other materialized view                    ``Batch()``: recomputed from whole tables each update, as
                                           SDP does; its output logged (the table)
=========================================  ============================================================

Overrides, strongest first: ``regimes=`` / ``--regime NAME=REGIME``; a spec
``configuration`` entry ``falkirk.regime.NAME: REGIME``; a table property
``falkirk.regime`` (``@dp.materialized_view(table_properties={"falkirk.regime":
"lazy(every=3)"})``). ``REGIME`` is a regime's kind with optional arguments:
``batch``, ``ephemeral(log=true)``, ``lazy(every=3)``, ``eager(incremental=true,
snapshot_every=5)``. What a dataset may take:

* a streaming table or sink: only ``output`` (a table's log is kept on);
* a view or flow: a stateless regime (``ephemeral``, ``batch``);
* a materialized view: ``batch`` (recomputed in full), or ``lazy``/``eager``
  when its query is a mergeable aggregate (its key defaults to the first
  grouping column). A materialized view always logs its output: that log is
  its table.

>>> parse("lazy(every=3, key=user)", "totals")
Lazy(log=False, key='user', partitions=None, max_parallelism=16, incremental=False, snapshot_every=None, replicas=2, changes=False, differential=False, append=False, every=3)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from attrs import evolve

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.regimes import Batch, Eager, Ephemeral, Keyed, Lazy, Output, Regime

if TYPE_CHECKING:
    from falkirk.spark.sdp.graph import Dataset, Graph

__all__ = ["parse", "text", "fit", "default_regime", "choose", "PROPERTY"]

#: The table property that sets a dataset's regime.
PROPERTY = "falkirk.regime"
_KINDS: dict[str, type[Regime]] = {
    "ephemeral": Ephemeral,
    "batch": Batch,
    "lazy": Lazy,
    "eager": Eager,
    "output": Output,
}
_SPEC = re.compile(r"^\s*([A-Za-z]+)\s*(?:\((.*)\))?\s*$")


def _value(text: str) -> Any:
    t = text.strip().strip("'\"")
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    return t


def parse(text: str | Regime, name: str, *, key: str | None = None) -> Regime:
    """The regime ``text`` describes (``"lazy(every=3)"``), or :class:`PipelineError` naming dataset ``name``.

    ``key``: the key of a ``lazy`` or ``eager`` regime that names none (a materialized view's grouping
    column).
    """
    if isinstance(text, Regime):
        return text
    m = _SPEC.match(str(text))
    if m is None or m.group(1).lower() not in _KINDS:
        raise PipelineError(
            f"{name}: regime {text!r}: expected one of {', '.join(_KINDS)} with optional "
            "arguments, e.g. 'lazy(every=3)'"
        )
    args: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
        arg, eq, value = part.partition("=")
        if not eq or not arg.strip().isidentifier():
            raise PipelineError(f"{name}: regime {text!r}: argument {part!r} is not NAME=VALUE")
        args[arg.strip()] = _value(value)
    kind = m.group(1).lower()
    if key is not None and kind in ("lazy", "eager") and "key" not in args and "database" not in args:
        args["key"] = key
    try:
        return _KINDS[kind](**args)
    except TypeError as exc:
        raise PipelineError(f"{name}: regime {text!r}: {exc}") from None
    except PipelineError as exc:
        raise PipelineError(f"{name}: regime {text!r}: {exc}") from None


def text(regime: Regime) -> str:
    """``regime`` as :func:`parse` reads it: its kind and the arguments that differ from the kind's defaults.

    >>> text(Lazy(every=3, key="user")), text(Batch()), text(Output(log=True))
    ('lazy(key=user, every=3)', 'batch', 'output(log=true)')
    """
    import attrs

    default = type(regime)()
    args = {
        f.name: getattr(regime, f.name)
        for f in attrs.fields(type(regime))
        if getattr(regime, f.name) != getattr(default, f.name)
    }
    shown = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in args.items()]
    return regime.kind + (f"({', '.join(shown)})" if shown else "")


def default_regime(graph: Graph, node: str) -> Regime:
    """The regime of ``node`` (a dataset or an append flow) when nothing overrides it."""
    d = graph.datasets.get(node)
    if d is None:
        return Ephemeral()
    if d.kind == "streaming table":
        return Output(log=True)
    if d.kind == "sink":
        return Output()
    if d.kind == "temporary view":
        return Ephemeral()
    if d.shape is not None and d.shape.incremental:
        return Eager(key=d.shape.keys[0], log=True) if d.shape.keys else Eager(log=True)
    return Batch()


def fit(d: Dataset | None, node: str, regime: Regime) -> Regime:
    """``regime`` made fit for ``d`` (``None``: an append flow), or :class:`PipelineError` saying why it
    cannot."""
    what = d.describe() if d is not None else f"flow {node!r}"
    if d is not None and d.kind in ("streaming table", "sink"):
        if not isinstance(regime, Output):
            raise PipelineError(
                f"{what}: regime {regime.kind}: a {d.kind} is an appended output (regime output)"
            )
        return evolve(regime, log=True) if d.kind == "streaming table" else regime
    if isinstance(regime, Output):
        raise PipelineError(f"{what}: regime output is for streaming tables and sinks")
    if d is None or d.kind == "temporary view":
        if not regime.stateless:
            raise PipelineError(
                f"{what}: regime {regime.kind}: a view or flow keeps no state (ephemeral or batch)"
            )
        return regime
    if regime.stateless:
        if isinstance(regime, Ephemeral):
            raise PipelineError(
                f"{what}: regime ephemeral: a materialized view keeps its table (batch, or lazy/eager "
                "for a mergeable aggregate)"
            )
        return regime
    shape = d.shape
    if shape is None or not shape.incremental or getattr(regime, "database", None):
        why = shape.describe() if shape is not None else "its query was not analysed"
        raise PipelineError(
            f"{what}: regime {regime.kind}: falkirk keeps a materialized view as state only when its "
            f"query is a mergeable aggregate of one append-only table, and this one is not ({why}); "
            "use batch"
        )
    assert isinstance(regime, Keyed)
    key = regime.key
    if key is None and shape.keys:
        regime = evolve(regime, key=shape.keys[0])
    elif key is not None and key not in shape.keys:
        raise PipelineError(
            f"{what}: regime key={key!r} is not one of its grouping columns {list(shape.keys)}"
        )
    return evolve(regime, log=True)


def choose(graph: Graph, given: Mapping[str, str | Regime], spec: Mapping[str, str]) -> dict[str, Regime]:
    """Every node's regime: ``given`` (by dataset or flow name), else the spec's, else the table property,
    else the default; each checked against what its dataset may take."""
    names = {n.lower(): n for n in [*graph.datasets, *graph.flows]}
    for source, mapping in (("regimes", given), ("the spec's configuration", spec)):
        for name in mapping:
            if name.lower() not in names and graph.key(name) is None:
                raise PipelineError(
                    f"{source} sets the regime of {name!r}, which is not a dataset or flow of this "
                    f"pipeline ({', '.join(sorted(names.values()))})"
                )
    lookup = {
        **{names.get(k.lower()) or graph.key(k): v for k, v in spec.items()},
        **{names.get(k.lower()) or graph.key(k): v for k, v in given.items()},
    }
    out: dict[str, Regime] = {}
    nodes = [n for n in graph.order]
    for node in nodes:
        d = graph.datasets.get(node)
        text = lookup.get(node) or (d.properties.get(PROPERTY) if d is not None else None)
        key = d.shape.keys[0] if d is not None and d.shape is not None and d.shape.keys else None
        regime = parse(text, node, key=key) if text is not None else default_regime(graph, node)
        out[node] = fit(d, node, regime)
    return out
