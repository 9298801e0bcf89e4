"""An SDP project's dataflow graph as falkirk sees it: what each flow reads, and what each dataset's step
outputs.

Every query function is called once at load time under a *discovery*
binding (:mod:`~falkirk.spark.sdp.session`): a read of a dataset of the
pipeline is recorded and answered with an empty DataFrame of that dataset's
schema, marked by an alias (:func:`~falkirk.spark.sdp.analysis.marker`); a file
stream is recorded as a :class:`~falkirk.spark.sdp.session.FileSource`; a read
of a table outside the pipeline goes to the session's catalog. A query that
reads a dataset whose schema is not known yet waits for it (the flows are
tried until none makes progress: what is left is a cycle or a read of a
failed dataset, named).

Then each dataset is **classified** by what its step hands its consumers
each epoch (one epoch = one update, ``spark-pipelines run``):

=================  =========================================================  ==========
dataset            its step's output each epoch                                mode
=================  =========================================================  ==========
streaming table    the rows its flows appended (file streams: the new files)  ``append``
sink               the rows its flows sent                                    ``append``
streaming view     its query over its streams' new rows                       ``append``
batch view,        its query over its table's new rows: ``q(T ∪ Δ) = q(T) ∪   ``append``
row-wise over one  q(Δ)``
append-only table
other batch view   its query over whole tables                                 ``snapshot``
materialized view  its contents (kept incrementally when its query is a       ``snapshot``
                   mergeable aggregate, :mod:`~falkirk.spark.sdp.analysis`)
=================  =========================================================  ==========

SDP's own rules on reads are checked here, with SDP's reasons: a stream is
read only from a streaming table or a streaming view, a streaming view only
as a stream, a materialized view only as a batch, a sink never.
"""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from typing import TYPE_CHECKING, Any

from attrs import define, field, frozen

from falkirk.spark.errors import PipelineError
from falkirk.spark.sdp.analysis import Shape, marker, shape_of, stateful_nodes
from falkirk.spark.sdp.registry import where
from falkirk.spark.sdp.session import FileSource, bound

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Graph", "Dataset", "Flow", "Read", "discover", "TICK"]

#: The input every step that reads nothing of the pipeline reads: one record per update (its epoch clock).
TICK = "_update"
KINDS = {
    "MaterializedView": "materialized view",
    "StreamingTable": "streaming table",
    "TemporaryView": "temporary view",
    "Sink": "sink",
}


@frozen
class Read:
    """A read in a query: dataset ``name`` (a key of the graph, or an outside table), as a stream or a
    batch."""

    name: str
    streaming: bool
    external: bool = False


@define
class Flow:
    """A flow: ``func`` writes into dataset ``target``; ``default``: the dataset's own query (same name)."""

    name: str
    node: str
    target: str
    func: Any
    where: str
    default: bool
    reads: list[Read] = field(factory=list)
    sources: dict[str, FileSource] = field(factory=dict)  # input node name -> file stream
    shape: Shape | None = None

    @property
    def streaming(self) -> bool:
        return bool(self.sources) or any(r.streaming for r in self.reads)


@define
class Dataset:
    """A dataset of the pipeline and how falkirk runs it (see the module docstring)."""

    name: str
    node: str
    kind: str  # "streaming table", "materialized view", "temporary view", "sink"
    output: Any
    flows: list[Flow] = field(factory=list)
    schema: Any = None
    mode: str = "snapshot"  # "append" | "snapshot"
    shape: Shape | None = None

    @property
    def query(self) -> Flow | None:
        """The dataset's own flow (``None`` for a sink or a table fed only by append flows)."""
        return next((f for f in self.flows if f.default), None)

    @property
    def streaming(self) -> bool:
        return self.kind in ("streaming table", "sink") or (
            self.kind == "temporary view" and bool(self.query and self.query.streaming)
        )

    @property
    def properties(self) -> dict[str, str]:
        return dict(getattr(self.output, "table_properties", None) or {})

    def describe(self) -> str:
        return f"{self.kind} {self.name!r} ({where(self.output)})"


class _Unresolved(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@define
class Graph:
    """The datasets and extra flows, by node name, in an order where every node follows what it reads."""

    datasets: dict[str, Dataset]
    flows: dict[str, Flow]  # every flow by node (a dataset's own query shares the dataset's node)
    order: list[str]
    catalog: str | None = None
    database: str | None = None

    def key(self, name: str) -> str | None:
        """The node of dataset ``name`` as a query names it (``db.name``, ``catalog.db.name``,
        back-quoted…)."""
        parts = [p.strip("`").lower() for p in name.split(".")]
        qualifiers = parts[:-1]
        ok = (
            [(self.catalog or "spark_catalog").lower(), (self.database or "default").lower()][
                -len(qualifiers) :
            ]
            if qualifiers
            else []
        )
        if qualifiers and (len(qualifiers) > 2 or qualifiers != ok):
            return None
        return self._by_lower.get(parts[-1])

    @property
    def _by_lower(self) -> dict[str, str]:
        return {d.name.lower(): n for n, d in self.datasets.items()}

    def inputs_of(self, node: str) -> list[str]:
        """The nodes (datasets, extra flows, file inputs) ``node``'s step reads."""
        if node in self.datasets:
            d = self.datasets[node]
            own = d.query
            deps = self._deps(own) if own is not None else []
            deps += [f.node for f in d.flows if not f.default]
            return list(dict.fromkeys(deps))
        return self._deps(self.flows[node])

    def _deps(self, flow: Flow) -> list[str]:
        return list(dict.fromkeys([r.name for r in flow.reads if not r.external] + list(flow.sources)))

    def downstream(self, node: str) -> list[str]:
        """``node`` and every node that reads it, transitively, in order."""
        found = {node}
        for n in self.order:
            if any(u in found for u in self.inputs_of(n)):
                found.add(n)
        return [n for n in self.order if n in found]


def _node_name(name: str, what: str) -> str:
    short = name.split(".")[-1].strip("`")
    if not short.isidentifier() or short.startswith("_"):
        raise PipelineError(
            f"{what} {name!r}: falkirk names its step after it, so it must be a Python identifier "
            "not starting with '_'"
        )
    return short


def build_graph(registry: Any, *, catalog: str | None, database: str | None) -> Graph:
    """The datasets and flows a :class:`~falkirk.spark.sdp.registry.Registry` holds, before discovery."""
    datasets: dict[str, Dataset] = {}
    for out in registry.outputs.values():
        kind = KINDS.get(type(out).__name__)
        if kind is None:
            raise PipelineError(f"dataset {out.name!r} ({where(out)}): unknown kind {type(out).__name__}")
        node = _node_name(out.name, kind)
        if node in datasets:
            raise PipelineError(f"datasets {datasets[node].name!r} and {out.name!r} have the same name")
        datasets[node] = Dataset(out.name, node, kind, out)
    graph = Graph(datasets, {}, [], catalog, database)
    for flow in registry.flows.values():
        target = graph.key(flow.target)
        if target is None:
            raise PipelineError(
                f"flow {flow.name!r} ({where(flow)}) writes to {flow.target!r}, which is not a dataset "
                "of this pipeline"
            )
        d = datasets[target]
        default = flow.name.split(".")[-1].strip("`").lower() == d.name.split(".")[-1].strip("`").lower()
        node = target if default else _node_name(flow.name, "flow")
        if not default and (node in datasets or node in graph.flows):
            raise PipelineError(f"flow {flow.name!r} ({where(flow)}) has the name of another dataset or flow")
        f = Flow(flow.name, node, target, flow.func, where(flow), default)
        d.flows.append(f)
        graph.flows[node] = f
        if not default and d.kind not in ("streaming table", "sink"):
            raise PipelineError(
                f"flow {flow.name!r} ({where(flow)}) appends to {d.describe()}: only streaming tables "
                "and sinks take append flows"
            )
    for d in datasets.values():
        if not d.flows:
            raise PipelineError(f"{d.describe()} has no flow: nothing writes to it")
    return graph


class _Discovery:
    """The binding of the discovery pass: records reads, answers with empty marked frames."""

    def __init__(self, graph: Graph, flow: Flow, spark: SparkSession) -> None:
        self.graph, self.flow, self.spark = graph, flow, spark

    def table(self, name: str, *, streaming: bool) -> DataFrame:
        key = self.graph.key(name)
        if key is None:
            if streaming:
                raise PipelineError(
                    f"it reads {name!r} as a stream, and that is not a dataset of this pipeline: "
                    "falkirk sdp streams from the pipeline's datasets and from files"
                )
            self.flow.reads.append(Read(name, False, external=True))
            return self.spark.read.table(name)
        self.flow.reads.append(Read(key, streaming))
        schema = self.graph.datasets[key].schema
        if schema is None:
            raise _Unresolved(key)
        return self.spark.createDataFrame([], schema).alias(marker(key))

    def files(self, source: FileSource) -> DataFrame:
        known = [n for n, s in self.flow.sources.items() if s == source]
        node = (
            known[0]
            if known
            else (
                f"{self.flow.node}_files"
                if not self.flow.sources
                else f"{self.flow.node}_files{len(self.flow.sources) + 1}"
            )
        )
        self.flow.sources[node] = source
        return self.spark.createDataFrame([], source.schema).alias(marker(node))

    def sql(self) -> None:
        raise PipelineError(
            "it calls spark.sql(...): the tables a SQL string names cannot be resolved to each "
            "update's data; read them with spark.read.table(name) / spark.readStream.table(name)"
        )


def discover(graph: Graph, spark: SparkSession) -> Graph:
    """Call every query function once (see the module docstring), then classify and order the datasets."""
    pending = [f for d in graph.datasets.values() for f in d.flows]
    frames: dict[str, DataFrame] = {}
    waiting: dict[str, str] = {}
    while pending:
        left = []
        for f in pending:
            f.reads.clear()
            f.sources.clear()
            try:
                with bound(_Discovery(graph, f, spark)):
                    df = f.func()
            except _Unresolved as exc:
                waiting[f.node] = exc.name
                left.append(f)
                continue
            except PipelineError as exc:
                raise PipelineError(f"flow {f.name!r} ({f.where}): {exc}") from None
            except Exception as exc:
                raise PipelineError(
                    f"flow {f.name!r} ({f.where}) failed when falkirk called its query function: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            if not hasattr(df, "schema") or not hasattr(df, "unionByName"):
                raise PipelineError(
                    f"flow {f.name!r} ({f.where}): its query function returned {type(df).__name__}, "
                    "not a DataFrame"
                )
            frames[f.node] = df
            target = graph.datasets[f.target]
            if target.schema is None:
                target.schema = df.schema
        if len(left) == len(pending):
            stuck = "; ".join(
                f"flow {f.name!r} ({f.where}) waits for {graph.datasets[waiting[f.node]].describe()}"
                for f in left
            )
            raise PipelineError(
                f"the flows read each other in a cycle, or read a dataset no flow could define: {stuck}"
            )
        pending = left
    _order(graph)
    for n in graph.order:
        if n in graph.datasets:
            _classify(graph, graph.datasets[n], frames)
    for f in graph.flows.values():
        if not f.default:
            _check_stateless(f, frames)
            _check_reads(graph, f, "flow")
    return graph


def _order(graph: Graph) -> None:
    deps = {
        n: graph.inputs_of(n)
        for n in [*graph.datasets, *(f for f, fl in graph.flows.items() if not fl.default)]
    }
    nodes = {n: [u for u in us if u in deps] for n, us in deps.items()}
    try:
        graph.order = list(TopologicalSorter(nodes).static_order())
    except CycleError as exc:
        raise PipelineError(f"the datasets read each other in a cycle: {' -> '.join(exc.args[1])}") from None


def _check_reads(graph: Graph, flow: Flow, what: str) -> None:
    for r in flow.reads:
        if r.external:
            continue
        d = graph.datasets[r.name]
        why = None
        if d.kind == "sink":
            why = "a sink is written, never read"
        elif r.streaming and d.kind == "materialized view":
            why = "a materialized view is read as a batch (spark.read.table), not as a stream"
        elif r.streaming and d.kind == "temporary view" and not d.streaming:
            why = "it is a batch view (its query reads no stream): read it with spark.read.table"
        elif not r.streaming and d.kind == "temporary view" and d.streaming:
            why = (
                "it is a streaming view and must be read with spark.readStream.table "
                "(SDP: INCOMPATIBLE_STREAMING_VIEW_READ)"
            )
        if why:
            how = "as a stream" if r.streaming else "as a batch"
            raise PipelineError(f"{what} {flow.name!r} ({flow.where}) reads {d.describe()} {how}: {why}")


def _append_only(graph: Graph, name: str | None) -> bool:
    """Whether dataset ``name``'s step outputs each update's new rows and its table is read as a batch."""
    d = graph.datasets.get(name or "")
    return (
        d is not None
        and d.mode == "append"
        and d.kind in ("streaming table", "temporary view")
        and (d.kind == "streaming table" or not d.streaming)
    )


def _check_stateless(f: Flow, frames: dict[str, DataFrame]) -> None:
    """A streaming flow must not keep state across updates: falkirk runs each update's new rows as a batch."""
    found = stateful_nodes(frames[f.node]) if f.streaming else []
    if found:
        raise PipelineError(
            f"flow {f.name!r} ({f.where}) is a streaming query with state across micro-batches "
            f"({', '.join(found)}): falkirk runs each update's new rows as one batch and keeps no "
            "streaming state; aggregate in a materialized view over the streaming table instead"
        )


def _classify(graph: Graph, d: Dataset, frames: dict[str, DataFrame]) -> None:
    for f in d.flows:
        _check_stateless(f, frames)
        if f.default:
            _check_reads(graph, f, d.kind)
    q = d.query
    if d.kind in ("streaming table", "sink"):
        for f in d.flows:
            if not f.streaming:
                raise PipelineError(
                    f"{d.describe()}: its flow {f.name!r} ({f.where}) reads no stream; a {d.kind} is fed by "
                    "streaming reads (spark.readStream...): declare a batch query with @dp.materialized_view"
                )
        d.mode = "append"
        return
    assert q is not None
    if d.kind == "materialized view" and q.streaming:
        raise PipelineError(
            f"{d.describe()} reads a stream: a materialized view's query is a batch query "
            "(spark.read.table); stream into a streaming table (@dp.table) instead"
        )
    if d.kind == "temporary view" and q.streaming:
        d.mode = "append"
        return
    shape = shape_of(frames[q.node])
    if shape.kind != "other" and not _append_only(graph, shape.source):
        shape = Shape("other", why=f"it reads {shape.source}, whose table is not append-only")
    d.shape = q.shape = shape
    d.mode = "append" if d.kind == "temporary view" and shape.kind == "rowwise" else "snapshot"
