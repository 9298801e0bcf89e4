"""An SDP project run by falkirk: one update per run, refreshes, failures and changed queries, and its tables.

One ``falkirk sdp run`` (:meth:`Project.run`) is one SDP **update**, and one
falkirk epoch: each file stream's new files are that epoch's slice of its
input log, and every step runs once over it. What completed is durable
under falkirk's root (``<storage>/falkirk`` unless given), so the next run
starts where this one ended; a run interrupted mid-update resumes it.

* ``refresh=[X]`` redoes ``X``'s latest update, and what falkirk's solver
  says must follow (its consumers, and the steps that must recompute ``X``'s
  inputs); no new update runs, nothing else is touched. An incremental
  materialized view is redone from its state before that update.
* ``full_refresh=[X]``: a materialized view is recomputed from whole
  tables (its state set aside), then as ``refresh``; a streaming table is
  rebuilt from its first update (which needs its input log from there: a
  root whose garbage collection removed it refuses, naming the earliest
  epoch that works).
* A **changed query** (falkirk fingerprints each step's code) takes effect as
  SDP's would: the new code applies from this update on, and every
  incremental materialized view that reads a changed view or materialized
  view (or whose own query changed) is recomputed from whole tables at its
  next epoch (``ROOT/sdp/rebuilds.json`` keeps when).
* ``fail=[X]`` injects a failure into ``X``'s step of this run (tests,
  benchmarks); falkirk recovers selectively and the run goes on.

Tables: a streaming table's and a sink's are their committed output epochs
(``ROOT/output/<name>/``); a materialized view's is its logged output of the
latest update; :meth:`Project.table` reads any of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import frozen

from falkirk.spark.errors import PipelineError, RecoveryError
from falkirk.spark.pipeline.declare.evolution import changes
from falkirk.spark.pipeline.store.storage import Storage, as_root
from falkirk.spark.sdp.build import Rebuilds, SdpPipeline, add_steps, read_outputs
from falkirk.spark.sdp.graph import Graph, build_graph, discover
from falkirk.spark.sdp.regimes import choose, fit, text
from falkirk.spark.sdp.registry import load_definitions
from falkirk.spark.sdp.session import PipelineSession
from falkirk.spark.sdp.spec import Spec, load_spec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from falkirk.spark.pipeline.declare.regimes import Regime
    from falkirk.spark.pipeline.run.executor import RunResult

__all__ = ["Project", "Update", "Advised", "load"]


@frozen
class Advised:
    """The advisor's regimes for a project: ``regimes`` (fit for their datasets), ``dropped`` (advised but not
    fit: why), and ``text`` (the advice's table and the spec settings that apply it)."""

    advice: Any
    regimes: dict[str, Regime]
    dropped: dict[str, str]
    text: str


@frozen
class Update:
    """What one :meth:`Project.run` did: the epoch it ended at, the falkirk run's result, and the steps
    executed."""

    epoch: int
    new: bool  # whether a new update ran (else: only refreshes)
    result: RunResult
    #: (step, epoch) pairs executed by this run, in order (a recovery's redos included)
    executed: tuple[tuple[str, int], ...]
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line: what ran, what was executed again, the recoveries."""
        what = (
            f"update {self.epoch + 1} (epoch {self.epoch})" if self.new else f"refresh of epoch {self.epoch}"
        )
        steps = ", ".join(f"{s}@{e}" for s, e in self.executed) or "nothing"
        rec = f"; {self.recoveries} recovery(ies) from failures" if self.recoveries else ""
        return f"{what} done: {len(self.executed)} step execution(s): {steps}{rec}"

    @property
    def recoveries(self) -> int:
        """Recoveries from failures during the run (a driver's start is not one)."""
        return sum(1 for r in self.result.journal.recoveries if not r.restart)


def load(
    where: str | os.PathLike[str] | None = None, spark: SparkSession | None = None, **options: Any
) -> Project:
    """The SDP project whose spec ``where`` names (a file, or a directory searched as ``spark-pipelines``
    does), loaded for falkirk; ``options`` as :class:`Project`'s. ``spark``: default :func:`local_session`
    with the spec's Spark settings."""
    spec = load_spec(where)
    if spark is None:
        from falkirk.spark.pipeline.run.session import local_session

        spark = local_session(conf=spec.spark_conf)
    return Project(spec, spark, **options)


class Project:
    """An SDP project's definitions loaded into a falkirk graph (see the module docstring).

    ``root``: falkirk's root (default ``<spec storage>/falkirk``); ``regimes``:
    regimes by dataset or flow name, over the spec's and the table
    properties' (:mod:`~falkirk.spark.sdp.regimes`); ``gc``, ``retain``,
    ``storage_options``: as :class:`~falkirk.spark.Pipeline`'s.
    """

    def __init__(
        self,
        spec: Spec,
        spark: SparkSession,
        *,
        root: str | os.PathLike[str] | None = None,
        regimes: Mapping[str, str | Regime] | None = None,
        gc: bool = True,
        retain: int = 2,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.spec, self.spark = spec, spark
        self.ignored_conf = _apply_conf(spark, spec.spark_conf)
        self.session = PipelineSession(spark)
        registry = load_definitions(spec, self.session)
        self.graph: Graph = discover(
            build_graph(registry, catalog=spec.catalog, database=spec.database), spark
        )
        self.regimes = choose(self.graph, dict(regimes or {}), spec.regimes())
        self.root = os.fspath(root) if root is not None else spec.default_root()
        self.options = {"gc": gc, "retain": retain, "storage_options": dict(storage_options or {})}
        self.location = as_root(self.root, storage_options=storage_options)

    # -- the falkirk pipeline ------------------------------------------------------------------
    def pipeline(
        self,
        *,
        code_changes: Mapping[str, str | int] | None = None,
        refresh: Mapping[str, int] | None = None,
        rebuilds: Rebuilds | None = None,
    ) -> SdpPipeline:
        """The falkirk pipeline of this project (not run): every input and step declared."""
        pipe = SdpPipeline(self.root, self.spark, code_changes=code_changes, **self.options)  # type: ignore[arg-type]
        pipe.refresh = dict(refresh or {})
        add_steps(pipe, self.graph, self.regimes, self.spark, rebuilds or self.rebuilds())
        return pipe

    def node(self, name: str) -> str:
        """The step of dataset or flow ``name`` (:class:`PipelineError` naming the known ones otherwise)."""
        key = self.graph.key(name)
        if key is not None:
            return key
        flows = {n.lower(): n for n in self.graph.flows}
        if name.lower() in flows:
            return flows[name.lower()]
        raise PipelineError(
            f"{name!r} is not a dataset or flow of pipeline {self.spec.name!r} "
            f"({', '.join(self.graph.order)})"
        )

    def updates(self) -> int:
        """How many updates have completed under the root."""
        return len([n for n in self.location.listdir("sdp/updates") if n.endswith(".json")])

    def rebuilds(self) -> Rebuilds:
        """When each incremental materialized view is recomputed from whole tables
        (``ROOT/sdp/rebuilds.json``)."""
        try:
            return Rebuilds(json.loads(self.location.read_bytes("sdp/rebuilds.json")))
        except FileNotFoundError:
            return Rebuilds()

    def changed(self) -> list[str]:
        """The steps whose code changed since the root was written."""
        pipe = self.pipeline()
        recorded = pipe.recorded()
        if recorded is None:
            return []
        mine = json.loads(json.dumps(pipe.describe()))
        found = changes(recorded, mine, code_changes={n: "keep" for n in pipe.steps}, where=self.location.uri)
        return [n for n in self.graph.order if n in found.code]

    # -- running -----------------------------------------------------------------------------------
    def plan(self, *, refresh: Iterable[str] = (), full_refresh: Iterable[str] = ()) -> Any:
        """What :meth:`run` with these arguments would do, without running
        (:mod:`~falkirk.spark.sdp.show`)."""
        from falkirk.spark.sdp.show import run_plan

        return run_plan(self, *self._selection(refresh, full_refresh))

    def _selection(
        self, refresh: Iterable[str], full_refresh: Iterable[str]
    ) -> tuple[dict[str, int], Rebuilds, dict[str, str], int]:
        """(limits, rebuilds, code_changes, epochs) of a run with these arguments."""
        n = self.updates()
        refresh_nodes = [self.node(x) for x in refresh]
        full_nodes = [self.node(x) for x in full_refresh]
        selective = bool(refresh_nodes or full_nodes)
        if selective and n == 0:
            raise PipelineError(
                f"nothing to refresh: no update of pipeline {self.spec.name!r} has completed under "
                f"{self.location.uri}"
            )
        last = n - 1 if selective else n  # the epoch this run ends at
        limits = {x: n - 2 for x in refresh_nodes}
        rebuilds = self.rebuilds()
        for x in full_nodes:
            d = self.graph.datasets.get(x)
            if d is None or d.kind not in ("streaming table", "materialized view"):
                raise PipelineError(
                    f"--full-refresh {x}: a full refresh resets a streaming table or a materialized "
                    "view; refresh a view, flow or sink with --refresh"
                )
            if d.kind == "streaming table":
                limits[x] = -1
            else:
                limits[x] = n - 2
                rebuilds.add(x, n - 1)
        changed = self.changed()
        redone = {y for x in limits for y in self.graph.downstream(x)}
        for c in changed:
            d = self.graph.datasets.get(c)
            if d is None or (
                d.kind != "materialized view" and not (d.kind == "temporary view" and not d.streaming)
            ):
                continue  # a changed stream applies to new rows only, as in SDP
            for y in self.graph.downstream(c):
                if self._incremental(y):
                    rebuilds.add(y, last if (y in redone or not selective) else n)
        return limits, rebuilds, {c: "keep" for c in changed}, n if selective else n + 1

    def _incremental(self, node: str) -> bool:
        d = self.graph.datasets.get(node)
        return d is not None and d.kind == "materialized view" and not self.regimes[node].stateless

    def run(
        self,
        *,
        refresh: Iterable[str] = (),
        full_refresh: Iterable[str] = (),
        fail: Iterable[str] = (),
        progress: Callable[[str], None] | None = None,
    ) -> Update:
        """Run one update, or refresh ``refresh``/``full_refresh`` (see the module docstring)."""
        refresh, full_refresh = list(refresh), list(full_refresh)
        limits, rebuilds, code_changes, epochs = self._selection(refresh, full_refresh)
        selective = bool(refresh or full_refresh)
        epoch = epochs - 1
        if rebuilds.epochs != self.rebuilds().epochs:  # before anything runs: a crash must not forget them
            self.location.replace("sdp/rebuilds.json", json.dumps(rebuilds.epochs, sort_keys=True).encode())
        pipe = self.pipeline(code_changes=code_changes, refresh=limits, rebuilds=rebuilds)
        injections = []
        for f in fail:
            name, _, where_ = f.partition(":")
            injections.append(f"{self.node(name)}@{epoch}:{where_ or 'mid'}")
        try:
            result = pipe.run(epochs, fail=injections, progress=progress)
        except RecoveryError as exc:
            tables = [
                x for x, e in limits.items() if e < 0 and self.graph.datasets[x].kind == "streaming table"
            ]
            if not tables:
                raise
            raise RecoveryError(
                f"--full-refresh {', '.join(tables)}: rebuilding a streaming table from its first update needs its "
                "input log from there, and garbage collection has removed part of it (a root run with gc=False, "
                f"falkirk sdp run --no-gc, keeps it); nothing was changed. falkirk's reason: {exc}"
            ) from exc
        if not selective:
            doc = {"format": "falkirk-sdp-update/1", "epoch": epoch, "spec": str(self.spec.path)}
            self.location.replace(f"sdp/updates/{epoch:08d}.json", json.dumps(doc, sort_keys=True).encode())
        executed = tuple((x.step, x.epoch) for x in result.journal.executions)
        return Update(epoch, not selective, result, executed, tuple(self.ignored_conf))

    def advise(self, failure_rate: float, **options: Any) -> Advised:
        """The advisor's regimes (:meth:`falkirk.spark.Pipeline.advise`, only changes the root accepts), kept
        where they fit their dataset's kind (:func:`~falkirk.spark.sdp.regimes.fit`). Nothing is run or
        changed."""
        advice = self.pipeline().advise(failure_rate, accepted_only=True, **options)
        fitted, dropped = {}, {}
        for node, regime in advice.regimes().items():
            if node not in self.regimes:
                continue
            try:
                fitted[node] = fit(self.graph.datasets.get(node), node, regime)
            except PipelineError as exc:
                dropped[node] = str(exc)
        lines = [
            advice.table(),
            "",
            "spec settings (configuration:) that apply it:"
            if fitted
            else "the advice changes no dataset's regime",
        ]
        lines += [f'  falkirk.regime.{n}: "{text(r)}"' for n, r in fitted.items()]
        lines += [f"  not applied: {why}" for why in dropped.values()]
        return Advised(advice, fitted, dropped, "\n".join(lines))

    def apply_advice(self, failure_rate: float, **options: Any) -> Advised:
        """:meth:`advise`, and run with its regimes from now on."""
        advised = self.advise(failure_rate, **options)
        self.regimes.update(advised.regimes)
        return advised

    # -- tables --------------------------------------------------------------------------------------
    def table(self, name: str) -> DataFrame:
        """Dataset ``name``'s table as of the last update: a streaming table or sink: every committed epoch; a
        materialized view: its latest logged output."""
        node = self.node(name)
        d = self.graph.datasets.get(node)
        if d is None or d.kind == "temporary view":
            raise PipelineError(f"{name!r} is a {'flow' if d is None else d.kind}: it has no table")
        storage = Storage(self.location, fsync=False, checksums=False)
        if d.kind in ("streaming table", "sink"):
            return read_outputs(storage, self.spark, node, d.schema, 1 << 62)
        logged = storage.epochs(node, "log")
        if not logged:
            return self.spark.createDataFrame([], d.schema)
        return storage.read_frame(self.spark, storage.get(node, "log", logged[-1]))

    def tables(self) -> dict[str, DataFrame]:
        """Every table of the project, by dataset name."""
        return {
            d.name: self.table(d.name) for d in self.graph.datasets.values() if d.kind != "temporary view"
        }


def _apply_conf(spark: SparkSession, conf: Mapping[str, str]) -> list[str]:
    """Set the spec's Spark settings on the session (as ``spark-pipelines`` does); notes for those it
    refuses."""
    notes = []
    for key, value in conf.items():
        try:
            if spark.conf.get(key, None) != value:
                spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - a static setting of a running session: said, not fatal
            notes.append(
                f"spec setting {key}={value} not applied to the running session ({type(exc).__name__}); "
                "set it when the session is built"
            )
    return notes
