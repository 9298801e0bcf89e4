"""The falkirk :class:`~falkirk.spark.Pipeline` that runs an SDP graph: inputs, steps, and what a read
returns.

* Each **file stream** a flow reads is a falkirk input log (``<flow>_files``):
  epoch ``e``'s slice is the files under the path not read by an earlier
  epoch (:class:`FileFeed`; the list of each epoch's files is kept under
  ``ROOT/sdp/sources/`` before they are appended, so an epoch read again
  reads the same files). A step that reads nothing of the pipeline reads
  the tick input ``_update`` (one record per update).
* Each dataset and each append flow is a step (:func:`add_steps`) whose
  function calls the SDP query function with its reads bound to the epoch
  (:class:`EpochBinding`):

  - ``spark.readStream.table(X)``: ``X``'s step output (its new rows);
  - a file stream: the input log's slice for the epoch;
  - ``spark.read.table(X)``: ``X``'s whole table at this epoch — a
    materialized view's or a batch view's step output; a streaming table's
    committed output epochs ``0..e`` (final: no recovery rewrites them); a
    row-wise view over one, its query over that;
  - inside an incremental materialized view or a row-wise batch view
    (``delta``), ``spark.read.table(X)`` is ``X``'s new rows instead.

* :class:`SdpPipeline` is a :class:`~falkirk.spark.Pipeline` that can also be
  told to **redo** steps whose code did not change (``refresh``): the
  restart's plan then holds them to the epoch given, as for
  ``code_changes``, and the solver derives what follows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import reduce
from typing import TYPE_CHECKING, Any

from attrs import evolve

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.api import Pipeline
from falkirk.spark.pipeline.declare.evolution import Changes
from falkirk.spark.pipeline.store.storage import Storage, as_root
from falkirk.spark.sdp.analysis import merge
from falkirk.spark.sdp.graph import TICK, Graph
from falkirk.spark.sdp.session import FileSource, bound

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from falkirk.spark.pipeline.declare.regimes import Regime

__all__ = [
    "SdpPipeline",
    "EpochBinding",
    "FileFeed",
    "Rebuilds",
    "add_steps",
    "read_outputs",
    "ddl",
    "INTERNAL_COLUMNS",
]

INTERNAL_COLUMNS = ("_partition", "_offset")


class SdpPipeline(Pipeline):
    """A :class:`~falkirk.spark.Pipeline` with ``refresh``: ``{step: E}`` redoes ``step`` and what the
    solver says must follow from epoch ``E + 1``, though its code is unchanged (as ``code_changes={step:
    E}`` would)."""

    refresh: dict[str, int] = {}

    def check_root(self, *, write: bool = True) -> Changes:
        found = super().check_root(write=write)
        extra = {n: e for n, e in self.refresh.items() if found.code.get(n, "keep") == "keep"}
        if not extra:
            return found
        return evolve(
            found,
            code={**found.code, **extra},
            accepted=found.accepted
            + tuple(
                f"step {n!r} refreshed: it and what depends on it redo epoch(s) from {e + 1}"
                for n, e in extra.items()
            ),
        )


def ddl(schema: Any) -> str:
    """A StructType as the Spark DDL an input log declares."""
    return ", ".join(
        f"`{f.name.replace('`', '``')}` {f.dataType.simpleString()}" + ("" if f.nullable else " NOT NULL")
        for f in schema.fields
    )


class FileFeed:
    """``source(epoch)`` of a file stream's input log: the files under the path no earlier epoch read."""

    def __init__(self, pipe: Pipeline, name: str, source: FileSource, spark: SparkSession) -> None:
        self.pipe, self.name, self.source, self.spark = pipe, name, source, spark
        self.files = as_root(source.path)

    def _listing(self, epoch: int) -> str:
        return f"sdp/sources/{self.name}/{epoch:08d}.json"

    def _recorded(self) -> dict[int, list[str]]:
        loc = self.pipe.location
        out = {}
        for n in loc.listdir(f"sdp/sources/{self.name}"):
            if n.endswith(".json") and n[:-5].isdigit():
                out[int(n[:-5])] = json.loads(loc.read_bytes(f"sdp/sources/{self.name}/{n}"))
        return out

    def _present(self) -> list[str]:
        recursive = dict((k.lower(), v) for k, v in self.source.options).get("recursivefilelookup") == "true"
        names = (
            [rel for rel, _ in self.files.walk_files("")]
            if recursive
            else [n for n in self.files.listdir("") if not self.files.isdir(n)]
        )
        return sorted(n for n in names if not any(part.startswith(("_", ".")) for part in n.split("/")))

    def __call__(self, epoch: int) -> Any:
        recorded = self._recorded()
        files = recorded.get(epoch)
        if files is None:
            seen = {f for e, fs in recorded.items() if e < epoch for f in fs}
            files = [f for f in self._present() if f not in seen]
            self.pipe.location.replace(self._listing(epoch), json.dumps(files).encode())
        if not files:
            return []
        reader = self.spark.read.format(self.source.format).schema(self.source.schema)
        return reader.options(**self.source.batch_options()).load([self.files.spark_uri(f) for f in files])


class EpochBinding:
    """The reads of one step's query functions at one epoch (see the module docstring)."""

    def __init__(
        self,
        graph: Graph,
        storage: Storage,
        spark: SparkSession,
        epoch: int,
        inputs: Mapping[str, DataFrame],
        mode: str,
        who: str,
    ) -> None:
        self.graph, self.storage, self.spark, self.epoch = graph, storage, spark, epoch
        self.inputs, self.mode, self.who = inputs, mode, who

    def _input(self, node: str) -> DataFrame:
        if node not in self.inputs:
            raise PipelineError(
                f"step {self.who!r} read {node!r}, which it did not read when falkirk loaded the "
                "pipeline (a query function must read the same tables every time)"
            )
        return self.inputs[node]

    def table(self, name: str, *, streaming: bool) -> DataFrame:
        node = self.graph.key(name)
        if node is None:
            if streaming:
                raise PipelineError(
                    f"step {self.who!r} streams from {name!r}, not a dataset of this pipeline"
                )
            return self.spark.read.table(name)
        if streaming or self.mode == "delta":
            return self._input(node)
        return self.snapshot(node)

    def snapshot(self, node: str) -> DataFrame:
        """Dataset ``node``'s whole table at this epoch."""
        d = self.graph.datasets[node]
        if d.mode == "snapshot":
            return self._input(node)
        if d.kind == "streaming table":
            return read_outputs(self.storage, self.spark, node, d.schema, self.epoch)
        q = d.query
        assert q is not None and not d.streaming, f"{node} is not read as a batch"
        inner = EpochBinding(self.graph, self.storage, self.spark, self.epoch, {}, "snapshot", self.who)
        with bound(inner):
            return q.func()

    def files(self, source: FileSource) -> DataFrame:
        flow = self.graph.flows[self.who]
        node = next((n for n, s in flow.sources.items() if s == source), None)
        if node is None:
            raise PipelineError(
                f"step {self.who!r} reads {source.describe()}, which it did not read when falkirk "
                "loaded the pipeline"
            )
        return self._input(node).drop(*INTERNAL_COLUMNS)

    def sql(self) -> None:
        raise PipelineError(f"step {self.who!r} calls spark.sql(...) in its query function (not supported)")


def read_outputs(storage: Storage, spark: SparkSession, step: str, schema: Any, upto: int) -> DataFrame:
    """The committed output epochs ``0..upto`` of output step ``step``, in one scan (columns as
    ``schema``)."""
    from pyspark.sql import functions as F

    paths = []
    for e in storage.epochs(step, "output"):
        if e > upto:
            break
        m = storage.get(step, "output", e)
        base = storage.fs.spark_uri(m.location or "")
        paths += [f"{base}/{f.name}" for f in m.files]
    if not paths:
        return spark.createDataFrame([], schema)
    df = spark.read.schema(schema).parquet(*paths)
    return df.select(*(F.col(f"`{f.name}`") for f in schema.fields))


def _union(frames: list[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


class Rebuilds:
    """For incremental materialized views: the epochs at which each is recomputed from whole tables (its state
    set aside), after a change of its query or of what it reads, or a full refresh. Read at run time, not part
    of a step's code: kept under ``ROOT/sdp/rebuilds.json`` by the project."""

    def __init__(self, epochs: Mapping[str, list[int]] | None = None) -> None:
        self.epochs = {n: sorted(set(es)) for n, es in (epochs or {}).items()}

    def at(self, node: str, epoch: int) -> bool:
        return epoch in self.epochs.get(node, ())

    def add(self, node: str, epoch: int) -> None:
        self.epochs[node] = sorted({*self.epochs.get(node, ()), epoch})


def add_steps(
    pipe: Pipeline, graph: Graph, regimes: Mapping[str, Regime], spark: SparkSession, rebuilds: Rebuilds
) -> None:
    """Declare every input and step of ``graph`` on ``pipe`` (see the module docstring).

    ``rebuilds``: when incremental materialized views are recomputed from whole tables (:class:`Rebuilds`).
    """
    storage = Storage(pipe.location, fsync=False, checksums=False)
    sources = {n: s for f in graph.flows.values() for n, s in f.sources.items()}
    for name, source in sources.items():
        if name in graph.datasets or name in graph.flows:
            raise PipelineError(
                f"the input of {source.describe()} would be named {name!r}, the name of a dataset"
            )
        pipe.input(name, ddl(source.schema), partitions=2, source=FileFeed(pipe, name, source, spark))
    needs_tick = [n for n in graph.order if not graph.inputs_of(n)]
    if needs_tick:
        pipe.input(TICK, "update BIGINT", source=lambda epoch: [{"update": epoch}])
    for node in graph.order:
        inputs = graph.inputs_of(node) or [TICK]
        pipe.step(
            _step_function(graph, node, regimes[node], storage, rebuilds),
            name=node,
            inputs=inputs,
            regime=regimes[node],
        )


def _step_function(graph: Graph, node: str, regime: Regime, storage: Storage, rebuilds: Rebuilds) -> Any:
    d = graph.datasets.get(node)
    own = graph.flows[node] if d is None else d.query
    func = own.func if own is not None else None
    appended = tuple(f.node for f in d.flows if not f.default) if d is not None else ()
    # the query functions of the views this step may evaluate over whole tables, for the fingerprint of its
    # code
    inlined = tuple(
        graph.datasets[r.name].query.func  # type: ignore[union-attr]
        for r in (own.reads if own else ())
        if not r.external
        and graph.datasets[r.name].kind == "temporary view"
        and graph.datasets[r.name].mode == "append"
        and not graph.datasets[r.name].streaming
    )
    streaming = own is not None and (d is None or d.streaming)
    mode = "stream" if streaming else "delta" if d is not None and d.mode == "append" else "snapshot"
    shape = d.shape if d is not None and d.kind == "materialized view" and not regime.stateless else None

    def evaluate(spark: Any, epoch: int, inputs: dict[str, DataFrame], how: str) -> DataFrame:
        with bound(EpochBinding(graph, storage, spark, epoch, inputs, how, node)):
            return func()  # type: ignore[misc]

    def step(*, epoch: int, spark: Any, state: Any = None, **inputs: DataFrame) -> Any:
        _ = inlined  # in the closure: the fingerprint of this step's code covers the views it evaluates
        if shape is not None:  # an incremental materialized view
            if rebuilds.at(node, epoch):
                new = evaluate(spark, epoch, inputs, "snapshot")
            else:
                new = merge(state, evaluate(spark, epoch, inputs, "delta"), shape)
            return new, new
        parts = [evaluate(spark, epoch, inputs, mode)] if func is not None else []
        return _union(parts + [inputs[f] for f in appended])

    step.__qualname__ = step.__name__ = f"sdp_{node}"
    return step
