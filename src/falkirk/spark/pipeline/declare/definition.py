"""What a pipeline is: its inputs, its steps and their regimes, as a falkirk dataflow in the epoch domain.

A :class:`Definition` is the part of a :class:`~falkirk.spark.Pipeline` that
describes it, without the means to run it (:mod:`falkirk.spark.pipeline.api`
adds those). It has **inputs** (append-only logs, :mod:`falkirk.spark.pipeline.store.inputlog`)
and **steps**: Python functions from DataFrames to a DataFrame, each with a
checkpoint :mod:`regime <falkirk.spark.pipeline.declare.regimes>`. A step's inputs are the
upstream steps or inputs named by its parameters (or ``inputs=``); the
keyword-only parameters ``epoch``, ``state``, ``db`` and ``spark`` are
supplied by the executor when the function declares them. Epoch ``e`` is the
``e``-th run of every step over the next slice (cut) of the inputs.

Spark is not hidden: pass your own ``SparkSession`` (or get one with local
defaults from :func:`~falkirk.spark.pipeline.run.session.local_session`), the step
functions receive and return plain DataFrames.

>>> import tempfile
>>> from falkirk.spark import Pipeline, Ephemeral, Lazy, Output
>>> pipe = Pipeline(tempfile.mkdtemp(), spark=None)
>>> _ = pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user")
>>> @pipe.step(regime=Ephemeral())
... def big(events, *, epoch):
...     return events.where("amount > 100")
>>> @pipe.step(regime=Lazy(every=3))
... def totals(big, *, state, epoch):
...     new = big.groupBy("user").sum("amount") if state is None else state
...     return new, new
>>> _ = pipe.output("sink", inputs=["totals"])
>>> pipe.order, [e.name for e in pipe.edges]
(['events', 'big', 'totals', 'sink'], ['events->big', 'big->totals', 'totals->sink'])
>>> pipe.dataflow().processors["big"].stateless
True
"""

from __future__ import annotations

import copy as _copy
import inspect
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from attrs import evolve as _evolve
from attrs import frozen

from falkirk.solver import Dataflow, Edge, Processor
from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.evolution import Changes, changes
from falkirk.spark.pipeline.declare.fingerprint import dependencies, fingerprint
from falkirk.spark.pipeline.declare.regimes import Ephemeral, Output, Regime
from falkirk.spark.pipeline.store.fscalls import DEFAULT_TIMEOUT
from falkirk.spark.pipeline.store.inputlog import InputLog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Definition", "Step", "Input", "Link", "RESERVED"]

#: Parameter names the executor supplies instead of upstream DataFrames.
RESERVED = frozenset({"epoch", "state", "db", "spark"})
FORMAT = "falkirk-pipeline/1"


@frozen
class Input:
    """An input: its log and an optional ``source(epoch) -> data`` the executor appends before cutting."""

    name: str
    log: InputLog
    source: Callable[[int], Any] | None = None
    #: each epoch's frame persisted in executor memory by its first consumer's job (``Pipeline.input(cache=)``)
    cache: bool = False


@frozen
class Step:
    """A step: ``fn`` over the DataFrames of ``inputs``, persisted according to ``regime``."""

    name: str
    fn: Callable[..., Any] | None
    inputs: tuple[str, ...]
    regime: Regime
    wants: frozenset[str]  # reserved parameters the function declares


@frozen
class Link:
    """An edge ``src -> dst`` of the pipeline (named ``"src->dst"``)."""

    src: str
    dst: str

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"


class Definition:
    """The definition of a multi-regime PySpark pipeline rooted at ``root`` (see the module docstring).

    ``spark``: the ``SparkSession`` to use (``None``: :func:`local_session` on
    first run). ``fsync``/``checksums``: durability and verification of the
    durable storage; ``gc``: delete checkpoints, logs and input below the
    low-watermarks as the run goes; ``monitor``: plan with the incremental
    :class:`falkirk.solver.Monitor` persisted in ``root/meta.sqlite``
    (``False``: call the solver directly). ``durable=False`` turns falkirk
    off (no checkpoint, log, manifest or monitor; only the external outputs
    and the input log are written): the no-checkpointing baseline, which
    cannot recover from a failure. ``spark_conf``: runtime SQL settings applied
    to the session for the duration of a run and restored afterwards (e.g.
    :data:`~falkirk.spark.pipeline.run.session.SMALL_DATA`). ``code_changes``: for
    a step whose function changed since the root was written, ``"keep"`` (its
    state and outputs stand) or an epoch to roll it and everything downstream
    back to (:mod:`~falkirk.spark.pipeline.declare.evolution`). ``removed_outputs``:
    for an output the root has and this pipeline no longer does, ``"keep"``
    its files (the default) or ``"delete"`` them once the restart recovered.
    ``storage_options``: keyword arguments of the root's fsspec filesystem
    (endpoint, credentials…; ``docs/storage.md``), ``storage_timeout``: seconds
    one operation on an object-store root may take before it is a
    :class:`~falkirk.spark.errors.StorageError`.
    ``concurrency``: step executions run at a time — ``1`` (the default)
    runs one after another; more run different steps on different epochs at
    once, each in epoch order, at most ``window`` epochs ahead of their
    consumers (:mod:`~falkirk.spark.pipeline.run.concurrent`).
    ``retry_in_place``: a step whose Spark job fails for a transient cause,
    having lost nothing (no executor, no state, nothing published), runs the
    epoch again at once instead of being rolled back; a second failure at
    that epoch is recovered from by the plan (``False``: every failure is,
    :meth:`Executor._in_place <falkirk.spark.pipeline.run.executor.Executor._in_place>`).
    ``regimes``: regimes that replace the ones the steps declare (e.g. what
    :meth:`~falkirk.spark.Pipeline.advise` advised), by step name; checked
    like a declared regime, and like any change against the root's
    ``pipeline.json`` when the run starts.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        spark: SparkSession | None = None,
        *,
        fsync: bool = True,
        checksums: bool = True,
        gc: bool = True,
        monitor: bool = True,
        durable: bool = True,
        spark_conf: Mapping[str, str] | None = None,
        retain: int = 2,
        code_changes: Mapping[str, str | int] | None = None,
        removed_outputs: Mapping[str, str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
        storage_timeout: float = DEFAULT_TIMEOUT,
        regimes: Mapping[str, Regime] | None = None,
        concurrency: int = 1,
        window: int = 2,
        retry_in_place: bool = True,
    ) -> None:
        from falkirk.spark.pipeline.store.storage import as_root

        for name, value in (("concurrency", concurrency), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PipelineError(f"{name}={value!r}: expected an integer >= 1")
        #: step executions run at a time (1: one after another, in epoch and definition order); see
        #: :mod:`~falkirk.spark.pipeline.run.concurrent`
        self.concurrency = concurrency
        #: how many epochs a node may run ahead of its consumers in a concurrent run
        self.window = window
        if not isinstance(retry_in_place, bool):
            raise PipelineError(f"retry_in_place={retry_in_place!r}: expected True or False")
        #: a transient failure of a step's Spark job that lost nothing runs the epoch again at once
        self.retry_in_place = retry_in_place

        if isinstance(retain, bool) or not isinstance(retain, int) or retain < 1:
            raise PipelineError(
                f"retain={retain!r}: the number of checkpoints kept per step must be an integer >= 1"
            )
        #: garbage collection keeps each stateful step's ``retain`` latest checkpoints and everything needed
        #: to recover from the oldest of them (input, logs), so a corrupt latest checkpoint falls back
        self.retain = retain
        #: The root's storage (driver side); ``root`` is a local ``Path`` or the URI.
        self.location = as_root(root, fsync=fsync, storage_options=storage_options, timeout=storage_timeout)
        self.root: Path | str = self.location.local_path() or self.location.uri
        self.spark_conf = dict(spark_conf or {})
        #: what to do with steps whose function changed since the root was written (see evolution.py)
        self.code_changes = dict(code_changes or {})
        #: what to do with the files of outputs this pipeline no longer has: "keep" (the default) or "delete"
        self.removed_outputs = dict(removed_outputs or {})
        for name, choice in self.removed_outputs.items():
            if choice not in ("keep", "delete"):
                raise PipelineError(f"removed_outputs[{name!r}]={choice!r}: expected 'keep' or 'delete'")
        #: regimes replacing the declared ones, by step name (checked when each step is declared)
        self.regimes = dict(regimes or {})
        for name, r in self.regimes.items():
            if not isinstance(r, Regime):
                raise PipelineError(
                    f"regimes[{name!r}]={r!r}: expected a falkirk.spark regime (Lazy(every=2), ...)"
                )
        self.spark = spark
        self.durable = durable
        self.fsync = fsync
        self.checksums = checksums
        self.gc = gc
        self.monitor = monitor
        self.inputs: dict[str, Input] = {}
        self.steps: dict[str, Step] = {}
        self.order: list[str] = []

    # -- definition ------------------------------------------------------------------
    def _check_new(self, name: str) -> None:
        if not name.isidentifier():
            raise PipelineError(
                f"step name {name!r} must be a Python identifier (it names function parameters)"
            )
        if name in self.order:
            raise PipelineError(f"{name!r} is defined twice in the pipeline")
        if name in RESERVED:
            raise PipelineError(f"{name!r} is reserved for an executor-supplied parameter; rename the step")

    def input(
        self,
        name: str,
        schema: str,
        *,
        partitions: int = 1,
        key: str | None = None,
        source: Callable[[int], Any] | None = None,
        dead_letter: bool = False,
        cache: bool = False,
    ) -> InputLog:
        """Declare input ``name``: a log of records with Spark DDL ``schema``; returns the log.

        ``source(epoch)``, if given, is called once per epoch before the epoch
        is cut to append that epoch's records (idempotently, batch ``epoch-<e>``):
        anything :meth:`InputLog.append <falkirk.spark.pipeline.store.inputlog.InputLog.append>`
        takes — mappings, a pyarrow Table, a pandas or Spark DataFrame, Parquet paths.
        Records are checked against ``schema`` when appended; a bad one stops
        the run with :class:`~falkirk.spark.errors.RecordError`, or with
        ``dead_letter=True`` it goes to the input's dead-letter log
        (``root/input/<name>/dead-letter/``) and the run's notes count it.

        Each epoch's frame is read from the log by every job that uses it:
        on local disk at 10^6 events per epoch, scanning Parquet cost less CPU
        than filling Spark's in-memory cache (44 % of YSB's CPU per epoch and
        22 % of the flagship's, whose input has two consumers:
        ``benchmarks/input_cache.py``).
        ``cache=True`` persists it instead, filled by its first consumer's job:
        for an input that many steps read from slow storage.
        """
        if not isinstance(cache, bool):
            raise PipelineError(f"input {name!r}: cache must be True or False, got {cache!r}")
        self._check_new(name)
        log = InputLog(
            self.location,
            name,
            schema,
            partitions=partitions,
            key=key,
            fsync=self.fsync,
            dead_letter=dead_letter,
            checksums=self.checksums,
            spark=self.spark,
        )
        self.inputs[name] = Input(name, log, source, cache)
        self.order.append(name)
        return log

    def step(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        inputs: Iterable[str] | None = None,
        regime: Regime | None = None,
    ) -> Any:
        """Add a step; usable as ``pipe.step(fn, ...)`` or as a decorator ``@pipe.step(regime=...)``.

        ``inputs`` defaults to the function's parameters that are not
        reserved (``epoch``, ``state``, ``db``, ``spark``). Steps must be
        added after their inputs (the definition order is the run order).
        """
        if fn is None:
            return lambda f: self.step(f, name=name, inputs=inputs, regime=regime)
        self._add(name or fn.__name__, fn, inputs, regime or Ephemeral())
        return fn

    def output(
        self, name: str, fn: Callable[..., Any] | None = None, *, inputs: Iterable[str] | None = None
    ) -> Step:
        """Add an external output step (:class:`~falkirk.spark.pipeline.declare.regimes.Output`); without
        ``fn`` it writes its single input."""
        return self._add(name, fn, inputs, Output())

    def _add(
        self, name: str, fn: Callable[..., Any] | None, inputs: Iterable[str] | None, regime: Regime
    ) -> Step:
        self._check_new(name)
        regime = self.regimes.get(name, regime)
        signature = list(inspect.signature(fn).parameters.values()) if fn is not None else []
        params = [p.name for p in signature if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        takes_any = any(p.kind == p.VAR_KEYWORD for p in signature)
        wants = frozenset(params) & RESERVED
        names = tuple(inputs) if inputs is not None else tuple(p for p in params if p not in RESERVED)
        if fn is None and len(names) != 1:
            raise PipelineError(
                f"step {name!r}: without a function it needs exactly one input, got {list(names)}"
            )
        if not names:
            raise PipelineError(f"step {name!r}: it has no inputs (name them as parameters or with inputs=)")
        for u in names:
            if u not in self.order:
                raise PipelineError(f"step {name!r}: input {u!r} is not an input or an earlier step")
        missing = [u for u in names if u not in params]
        if fn is not None and missing and not takes_any:
            raise PipelineError(f"step {name!r}: its function has no parameter for input(s) {missing}")
        step = Step(name, fn, names, regime, wants)
        self._check_regime(step, regime)
        self.steps[name] = step
        self.order.append(name)
        return step

    def _check_regime(self, step: Step, regime: Any) -> None:
        """``regime`` can run ``step``'s function (``PipelineError`` naming the step otherwise)."""
        name = step.name
        if not isinstance(regime, Regime):
            raise PipelineError(f"step {name!r}: regime must be a falkirk.spark regime, got {regime!r}")
        need = {"state"} if regime.takes_state else {"db"} if getattr(regime, "database", None) else set()
        if step.fn is not None and not need <= step.wants:
            raise PipelineError(
                f"step {name!r}: regime {regime.kind} passes {sorted(need)}; add the keyword parameter(s) to its function"
            )
        was = self.steps.get(name)
        if was is not None and isinstance(was.regime, Output) != isinstance(regime, Output):
            raise PipelineError(
                f"step {name!r}: an output's regime is Output, and only an output's "
                f"(it was {was.regime.kind}, now {regime.kind})"
            )

    def with_regimes(self, regimes: Mapping[str, Regime]) -> Self:
        """A copy of this pipeline (same root, inputs and functions) whose steps in ``regimes`` have those
        regimes.

        Each is checked as a declared regime is; nothing is written.
        """
        copy = _copy.copy(self)
        copy.steps = dict(self.steps)
        for name, regime in regimes.items():
            if name not in self.steps:
                raise PipelineError(
                    f"regimes: {name!r} is not a step of this pipeline (steps: {', '.join(self.steps)})"
                )
            self._check_regime(self.steps[name], regime)
            copy.steps[name] = _evolve(self.steps[name], regime=regime)
        copy.regimes = {**self.regimes, **regimes}
        return copy

    # -- derived ------------------------------------------------------------------------
    @property
    def edges(self) -> list[Link]:
        """Every edge, in step order."""
        return [Link(u, s) for s in self.order if s in self.steps for u in self.steps[s].inputs]

    def consumers(self, name: str) -> list[str]:
        """The steps reading ``name``'s output."""
        return [e.dst for e in self.edges if e.src == name]

    def logs(self, name: str) -> bool:
        """Whether ``name``'s output edges are logged (inputs always are: the input log)."""
        return name in self.inputs or self.steps[name].regime.logs

    def stateless(self, name: str) -> bool:
        """Whether ``name`` is a stateless processor (inputs, ephemeral and batch steps)."""
        return name in self.inputs or self.steps[name].regime.stateless

    @property
    def external_outputs(self) -> list[str]:
        """The steps with the :class:`~falkirk.spark.pipeline.declare.regimes.Output` regime."""
        return [n for n, s in self.steps.items() if isinstance(s.regime, Output)]

    def dataflow(self, *, also_logging: Iterable[str] = ()) -> Dataflow:
        """The pipeline as a falkirk dataflow (epoch domain, identity projections, no checkpoints yet).

        ``also_logging``: steps treated as logging their output (what-if plans of ``log=True``).
        """
        edges = self.edges
        extra = set(also_logging)
        procs = [
            Processor(
                n,
                "epoch",
                stateless=self.stateless(n),
                logs=[e.name for e in edges if e.src == n] if self.logs(n) or n in extra else [],
            )
            for n in self.order
        ]
        return Dataflow(procs, [Edge(e.name, e.src, e.dst) for e in edges])

    def describe(self) -> dict[str, Any]:
        """The pipeline's shape as JSON (stored in ``root/pipeline.json``)."""
        return {
            "format": FORMAT,
            "inputs": {
                n: {"schema": i.log.schema, "partitions": i.log.partitions, "key": i.log.key}
                for n, i in self.inputs.items()
            },
            "steps": {
                n: {
                    "inputs": list(s.inputs),
                    "regime": s.regime.describe(),
                    "code": fingerprint(s.fn),
                    **({"code_deps": dependencies(s.fn)} if s.fn is not None else {}),
                }
                for n, s in self.steps.items()
            },
            "order": list(self.order),
        }

    @classmethod
    def from_root(cls, root: str | os.PathLike[str], **options: Any) -> Self:
        """The pipeline recorded in ``root/pipeline.json``, without its step functions (for plans, not runs).

        Enough for :meth:`plan_failure` and ``falkirk pipeline plan``: the
        shape, the regimes and the inputs come from the root; running it
        needs the real definition. ``options`` are the constructor's
        (``storage_options=`` for an object-store root).
        """
        bare = cls(root, None, **options)
        doc = bare.recorded()
        if doc is None:
            raise PipelineError(f"{bare.location.uri} holds no pipeline (no pipeline.json)")
        return cls.described(root, doc, **options)

    @classmethod
    def described(cls, root: str | os.PathLike[str], doc: Mapping[str, Any], **options: Any) -> Self:
        """The pipeline a :meth:`describe` document describes, rooted at ``root``, without step functions."""
        from falkirk.spark.pipeline.declare.regimes import from_description

        pipe = cls(root, None, **options)
        try:
            for name in doc["order"]:
                if name in doc["inputs"]:
                    i = doc["inputs"][name]
                    pipe.input(name, i["schema"], partitions=i["partitions"], key=i["key"])
                else:
                    s = doc["steps"][name]
                    pipe.steps[name] = Step(
                        name, None, tuple(s["inputs"]), from_description(name, s["regime"]), frozenset()
                    )
                    pipe.order.append(name)
        except (KeyError, TypeError, AttributeError) as exc:
            raise PipelineError(
                f"pipeline.json does not describe a pipeline ({type(exc).__name__}: {exc}) "
                f"under {pipe.location.uri}"
            ) from None
        return pipe

    def recorded(self) -> dict[str, Any] | None:
        """The pipeline description ``root/pipeline.json`` holds (``None``: there is none yet).

        :class:`PipelineError` naming the file when it cannot be read as one
        (falkirk rewrites it only after a restart's recovery succeeded, so a
        damaged one was damaged outside falkirk).
        """
        try:
            data = self.location.read_bytes("pipeline.json")
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise PipelineError(
                f"pipeline.json is not valid JSON ({type(exc).__name__}: {exc}); it records the pipeline that wrote "
                f"{self.location.uri}: restore it from a copy, or start on a new root"
            ) from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
            raise PipelineError(
                f"pipeline.json has format {found!r}, expected {FORMAT!r} (under {self.location.uri})"
            )
        return doc

    def check_root(self, *, write: bool = True) -> Changes:
        """Write ``root/pipeline.json``, or check the one there against this pipeline; the accepted changes.

        A changed pipeline is accepted where falkirk can prove it safe
        (:mod:`~falkirk.spark.pipeline.declare.evolution`) and refused with a
        :class:`PipelineError` naming the difference otherwise. With
        ``write=False`` an accepted change is not recorded yet (the executor
        records it with :meth:`write_root` once the restart's recovery worked).
        """
        unknown = [n for n in self.regimes if n not in self.steps]
        if unknown:
            raise PipelineError(
                f"regimes= names {', '.join(map(repr, unknown))}, not (a) step(s) of this pipeline "
                f"(steps: {', '.join(self.steps)})"
            )
        mine = json.loads(json.dumps(self.describe()))
        theirs = self.recorded()
        if theirs is None:
            self.write_root()
            return Changes((), {})
        if theirs == mine:
            return Changes((), {})
        try:
            found = changes(
                theirs,
                mine,
                code_changes=self.code_changes,
                where=self.location.uri,
                persisted=lambda step: bool(self.location.listdir(f"manifests/{step}/checkpoint")),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise PipelineError(
                f"pipeline.json does not describe a pipeline ({type(exc).__name__}: {exc}) "
                f"under {self.location.uri}"
            ) from None
        if write:
            self.write_root()
        return found

    def write_root(self) -> None:
        """Record this pipeline's shape in ``root/pipeline.json``."""
        self.location.replace(
            "pipeline.json", json.dumps(json.loads(json.dumps(self.describe())), sort_keys=True).encode()
        )

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {str(self.root)!r}: {len(self.inputs)} inputs, {len(self.steps)} steps>"
        )
