"""How each regime runs an epoch, persists it, comes back to a frontier and collects garbage.

One runner per pipeline node, owned by the :class:`~falkirk.spark.pipeline.run.executor.Executor`; a
runner sees the run only through its :class:`~falkirk.spark.pipeline.run.context.RunContext`:

* :class:`InputRunner` — the input reader (stateless, logs everything: the
  input log *is* the log of what it sent);
* :class:`StepRunner` — ephemeral, batch, lazy, eager (DataFrame state) and
  external-output steps (Parquet + manifests);
* :class:`DatabaseRunner` — an eager step whose state is an SQLite database
  (one transaction per epoch, recorded with the epoch it covers).

Every runner publishes its manifests only after its data is written, calls
the injector's ``mid`` point in between, and then reports to the planner.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import attrs

from falkirk.spark.errors import CorruptDataError, PipelineError
from falkirk.spark.pipeline.declare.regimes import Output
from falkirk.spark.pipeline.run import appended as _appended
from falkirk.spark.pipeline.run import incremental as _incremental
from falkirk.spark.pipeline.run import layers as _layers
from falkirk.spark.pipeline.run.guard import WriteGuard
from falkirk.spark.pipeline.run.incremental import StateCheckpoints
from falkirk.spark.pipeline.run.layers import Layers
from falkirk.spark.pipeline.run.probe import is_local_master
from falkirk.spark.pipeline.run.session import (
    detach,
    held_on_driver,
    is_connect,
    materialised,
    shares_storage,
    stored,
    takes_up,
)
from falkirk.spark.pipeline.store import inputread as _inputread
from falkirk.spark.pipeline.store.collected import collectable, empty_table
from falkirk.spark.pipeline.store.eagerdb import (
    DATABASE_COMMITS,
    database_errors,
    database_path,
    is_storage_failure,
    storage_error,
)
from falkirk.spark.pipeline.store.manifest import Manifest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from falkirk.spark.pipeline.declare.definition import Definition, Input, Step
    from falkirk.spark.pipeline.run.context import RunContext

__all__ = [
    "COLLECT_MAX_FILE_BYTES",
    "COLLECT_MAX_RESULT_BYTES",
    "COLLECT_MAX_ROWS",
    "Runner",
    "InputRunner",
    "StepRunner",
    "DatabaseRunner",
    "make_runner",
]

#: an output's data or a log of at most this many rows (counted before its write, or foretold by the write the
#: epoch before, also in at most :data:`COLLECT_MAX_FILE_BYTES` of Parquet) is collected as Arrow and written from
#: the driver (:meth:`StepRunner._collects`): for such a write Spark's writer, its file committer's protocol, costs about
#: twice the CPU of the collection (``benchmarks/README.md``, "Small outputs and logs written from the driver"). A
#: size foretold by the epoch before (the rows not counted before the write): an epoch far larger than its
#: predecessor is collected too, bounded by Spark's ``spark.driver.maxResultSize`` (at most
#: :data:`COLLECT_MAX_RESULT_BYTES`), beyond which it is written by Spark's writer
COLLECT_MAX_ROWS = 65_536
#: see :data:`COLLECT_MAX_ROWS`
COLLECT_MAX_FILE_BYTES = 1 << 20
#: a size foretold by the epoch before is collected only where Spark refuses a collection beyond this
#: (``spark.driver.maxResultSize`` set, and at most this: its default); unbounded or larger, only a counted one
COLLECT_MAX_RESULT_BYTES = 1 << 30


def result_bound(spark: Any) -> int:
    """``spark``'s ``spark.driver.maxResultSize`` in bytes (``0``: unbounded; ``-1`` where it cannot be read)."""
    try:
        return int(spark.sparkContext._jsc.sc().conf().getSizeAsBytes("spark.driver.maxResultSize", "1g"))
    except Exception:  # noqa: BLE001 - not knowable here (no JVM): as if unbounded
        return -1


@attrs.frozen
class Deferred:
    """A step's new state left to the end of its epoch (:meth:`StepRunner.write_deferred`)."""

    #: the epoch that made it
    epoch: int
    #: as the step returned it (its lineage: the state before, a local checkpoint, and the epoch's inputs)
    state: Any
    #: whether ``epoch`` is a checkpoint epoch of the step (the state is then also written)
    checkpoint: bool
    #: the epoch's inputs, held until the state is computed from them (a cached frame stays cached; an input's
    #: epoch, not cached, is read from the log again: the step's low-watermark keeps that epoch until then)
    inputs: tuple[Any, ...]
    #: the state before (a local checkpoint, or ``None``): what of its lineage lives in executor memory only
    before: Any
    #: made already (the step's output was computed from it, which made it): only its checkpoint is left to the
    #: end of the epoch
    made: bool = False
    #: made by the job of the step's consumer that computes its output (fused: :func:`~.fusion.fusions`), by the
    #: end of the epoch unless no such job ran (a consumer's committed epoch kept as it was): made there then
    by_consumer: bool = False

    @property
    def held(self) -> tuple[Any, ...]:
        """What is kept in executor memory until the state is made: the inputs and the state before (whose
        blocks its step's release would otherwise free)."""
        return (*self.inputs, self.before)


@attrs.frozen
class Attempt:
    """The new state an execution of a step detached from what the step returned, kept after the execution
    failed for a retry in place to take up (:meth:`StepRunner.drop_made`); its epoch and the state it started
    from are the runner's ``_before``."""

    #: what the step returned, as it returned it (compared with the retry's by :meth:`DataFrame.sameSemantics`)
    returned: Any
    #: :func:`~falkirk.spark.pipeline.run.session.detach` of it: the blocks the failed job computed are cached,
    #: the shuffles it completed are written, its lineage is whole (not checkpointed before a job succeeds)
    detached: Any


class Runner:
    """Common interface (see the module docstring); ``ctx`` is the run as the runner may see it."""

    kind = "runner"

    def __init__(self, ctx: RunContext, name: str) -> None:
        self.ctx = ctx
        self.name = name
        #: after a restore that rescaled keyed state: (old partitions, new partitions, old read per new)
        self.rescaled: tuple[int, int, dict[int, list[int]]] | None = None
        #: whether the last execution's output was a frame of its own, computed by the step's first job on it
        #: (a log's write would be that job); ``None``: not such a step, or not known
        self.fresh: bool | None = None
        #: the state held in executor memory between checkpoints (``None``: none; the executor checks its
        #: blocks after an executor is lost); from its step's execution to the end of its epoch, where that is
        #: left there (:attr:`deferred`), the state as the step returned it, not made yet
        self.state: DataFrame | None = None
        #: set by the executor (:func:`~falkirk.spark.pipeline.run.fusion.fusions`): ``fusable``, an unlogged
        #: step's output would be computed by its consumer's job, with no job of its own; ``fuse``: it is
        self.fusable = False
        self.fuse = False
        #: after an execution left to the consumer's job: ``pending_rows(count, cache)``, its row count once
        #: that job ran (``None``: the execution counted its rows itself)
        self.pending_rows: Any = None
        #: whether the last execution discarded what it was sent (an output epoch already committed)
        self.discarded = False
        #: when the last execution's epoch became available (an input: its cut) or was committed (an output)
        self.cut_at: float | None = None
        self.committed_at: float | None = None
        #: set by the executor (a sequential run): a new state is materialised, and checkpointed at a checkpoint
        #: epoch, at the end of its epoch, after the epoch's outputs committed, not inside the step's execution
        #: (:meth:`StepRunner.write_deferred`)
        self.defer_checkpoints = False
        #: the state left to the end of the epoch (:class:`Deferred`)
        self.deferred: Deferred | None = None
        #: what the execution under way made and has not handed out: its output, and a new state or changes it
        #: detached (``True``: a local checkpoint, its blocks freed too); let go of if it fails
        #: (:meth:`drop_made`)
        self.made: list[tuple[Any, bool]] = []

    def available(self) -> list[int]:
        """Epochs of the frontiers persisted for this node (what the planner starts from)."""
        return []

    def progress(self) -> int:
        """The last epoch this node is known to have completed, from durable storage (-1: none)."""
        return max(self.available(), default=-1)

    def execute(self, epoch: int, inputs: dict[str, DataFrame]) -> tuple[DataFrame | None, int]:
        """Run ``epoch`` on ``inputs``, persist according to the regime; ``(output, rows)``."""
        raise NotImplementedError

    def intact(self, epoch: int) -> bool:
        """After its execution of ``epoch`` raised: whether the node is as it was before that execution — its
        state in memory untouched, nothing published — so that it can run ``epoch`` again at once (a retry in
        place, :meth:`Executor.handle <falkirk.spark.pipeline.run.executor.Executor.handle>`). An input never
        is: its cut is durable."""
        return False

    def drop_made(self) -> None:
        """The execution under way failed: let go of what it made (:attr:`made`; a frame its task still holds, an
        input it returned as its output, stays until the task lets go of it)."""
        made, self.made = self.made, []
        for df, blocks in made:
            self.ctx.frames.release(df, state_of=self.name if blocks else None, read_until=-1)

    def lose(self) -> None:
        """The node failed: drop everything held in memory."""

    def reset(self, frontier: int, *, committed: set[int] | None = None) -> None:
        """Come back to ``frontier`` (``-1``: initial state) and drop durable items above it (an output keeps
        its ``committed`` epochs: :meth:`StepRunner.reset`)."""

    def replay(self, epoch: int) -> DataFrame:
        """The logged output of ``epoch`` (checked by the recovery that queued it: not verified again)."""
        raise CorruptDataError(self.name, "log", epoch, "this step does not log its output")

    def committed_frame(self, epoch: int) -> DataFrame:
        """An output's committed data of ``epoch``, read back (what its consumers take after it discarded a
        re-sent epoch)."""
        raise CorruptDataError(self.name, "output", epoch, "this step is not an output")

    def collect(self, lw: int, lw_consumers: int) -> None:
        """Garbage collection at low-watermark ``lw`` (and the lowest of its consumers')."""


class InputRunner(Runner):
    """Reads epoch ``e`` of an input: feeds the source once, cuts, reads the cut."""

    kind = "input"

    def __init__(self, ctx: RunContext, inp: Input) -> None:
        super().__init__(ctx, inp.name)
        self.input = inp
        self.log = inp.log

    def available(self) -> list[int]:
        return self.log.cut_epochs()

    def execute(self, epoch: int, inputs: dict[str, DataFrame]) -> tuple[DataFrame | None, int]:
        if self.log.get_cut(epoch) is None and self.input.source is not None:
            batch = f"epoch-{epoch}"
            self.log.append(self.input.source(epoch), batch=batch)
            diverted = self.log.dead_letters(batch) if self.log.dead_letter else 0
            if diverted:
                self.ctx.note(
                    f"input {self.name}@{epoch}: {diverted} record(s) did not fit the schema and went "
                    f"to the dead-letter log {self.ctx.storage.fs.describe(self.log.dead_letter_dir)}"
                )
        cut = self.log.cut(epoch)
        self.cut_at = cut.at
        read, nbytes = self._read(epoch)
        df = self.ctx.injector.wrap(self.name, epoch, read, empty=cut.records == 0)
        # read again by each job that uses it, unless the input asks to be cached (by its first consumer's
        # job); an epoch with an injected failure is cached, so that the failure fires once, not in every job
        # that reads it
        out, rows = self.ctx.frames.materialise(
            df, rows=cut.records, persist=(self.input.cache and nbytes is None) or df is not read
        )
        self.made = [(out, False)]
        self.ctx.injector.at(self.name, epoch, "mid")
        self.ctx.record(self.name, epoch)
        self.made = []
        return out, rows

    def replay(self, epoch: int) -> DataFrame:
        cut = self.log.get_cut(epoch)
        return self.ctx.frames.known_rows(self._read(epoch)[0], cut.records if cut else 0)

    def _read(self, epoch: int) -> tuple[DataFrame, int | None]:
        """Epoch ``epoch`` of the log, and its Arrow bytes where it is small and read on the driver: then marked
        held there (nothing to cache, out of an executor's reach)."""
        read = self.log.read(self.ctx.spark, epoch)
        nbytes = _inputread.on_driver(read)
        return (read if nbytes is None else held_on_driver(read, nbytes)), nbytes

    def collect(self, lw: int, lw_consumers: int) -> None:
        m = min(lw, lw_consumers)
        if m >= 0:
            self.log.acknowledge(m)


class StepRunner(Runner):
    """Ephemeral, batch, lazy, eager-with-DataFrame-state and output steps."""

    kind = "step"

    def __init__(self, ctx: RunContext, step: Step) -> None:
        super().__init__(ctx, step.name)
        self.step = step
        self.regime = step.regime
        self.storage = ctx.storage
        #: an output's committed epochs above its frontier, after a rollback (final: re-sent results are
        #: discarded)
        self.committed: set[int] = set()
        #: copies of the state's blocks kept on executors between checkpoints (one on a local master)
        self.replicas = 1 if is_local_master(ctx.spark) else getattr(self.regime, "replicas", 1)
        #: how the state is checkpointed and read back (plain, keyed, or keyed snapshots and deltas)
        self.checkpoints = StateCheckpoints(ctx, step.name, step.regime)
        #: an execution under way or failed: its epoch, and the state, checkpoint chain and differential base it
        #: started from (``None`` once it succeeded or published anything: :meth:`intact`)
        self._before: tuple[int, Any, tuple[int, ...] | None, Any] | None = None
        #: a ``changes=True`` step's state as layers (:class:`Layers`); its ``view`` is :attr:`state`
        self.layers: Layers | None = None
        #: an ``append=True`` step's state as the parts appended (:class:`~.appended.Parts`); its ``view`` is
        #: :attr:`state`
        self.parts = _appended.Parts()
        #: the layers an execution under way made (let go of if it fails: :meth:`_drop_unused_layers`)
        self._made: Layers | None = None
        #: a ``changes=True`` step's changes at its last execution, their rows (``None``: none yet in this
        #: driver): :meth:`_apply` broadcasts the next epoch's keys without counting them first only below
        #: :func:`~falkirk.spark.pipeline.run.layers.merge_blind`'s bound
        self._changes_rows: int | None = None
        #: whether an execution of this step succeeded in this driver (a restore before any is a start's)
        self._executed = False
        #: the epoch's changes collected by :meth:`_changes_collected` (Arrow), for its delta; ``None``: not
        self._changes_table: Any = None
        #: the Arrow bytes per row of the last changes with rows :meth:`_changes_collected` collected (``None``:
        #: none yet)
        self._changes_row_bytes: float | None = None
        #: the execution under way's detached new state (:class:`Attempt`)
        self._attempt: Attempt | None = None
        #: a failed execution's, kept for its retry in place (:meth:`drop_made`, :meth:`_detached`)
        self._salvage: Attempt | None = None
        #: per kind (``output``, ``log``), the rows and Parquet bytes of this step's last write in this driver:
        #: whether the next is written from the driver (:meth:`_collects`)
        self._written: dict[str, tuple[int, int]] = {}
        #: off for the rest of the run once a collection outgrew ``spark.driver.maxResultSize``
        self._collect_off = False
        #: whether the session collects strings to Arrow as large strings (``toArrow``), once asked
        self._large_strings: bool | None = None
        #: the session's ``spark.driver.maxResultSize`` in bytes (``0``: none, ``-1``: unknown), once asked
        self._result_bound: int | None = None

    # -- what exists ------------------------------------------------------------------
    @property
    def _frontier_kind(self) -> str:
        if self.regime.stateless:
            return "complete"
        return "output" if isinstance(self.regime, Output) else "checkpoint"

    def available(self) -> list[int]:
        return self.storage.epochs(self.name, self._frontier_kind)

    # -- running ---------------------------------------------------------------------------
    def call(self, epoch: int, inputs: dict[str, DataFrame], **extra: Any) -> Any:
        """Call the step function with its inputs and the reserved parameters it declares."""
        supplied = {"epoch": epoch, "spark": self.ctx.spark, "state": self.state, **extra}
        kwargs = {k: v for k, v in supplied.items() if k in self.step.wants}
        if self.step.fn is None:
            return next(iter(inputs.values()))
        return self.step.fn(**inputs, **kwargs)

    def execute(self, epoch: int, inputs: dict[str, DataFrame]) -> tuple[DataFrame | None, int]:
        ctx, storage, regime = self.ctx, self.storage, self.regime
        failed, self._before = self._before, None
        self.discarded = epoch in self.committed
        if self.discarded:  # committed before a rollback: final, what was sent again is dropped unread
            self.committed.discard(epoch)
            self.fresh = None
            ctx.record(self.name, epoch)  # acknowledged again, in order: the planner catches up with the root
            return None, storage.get(self.name, "output", epoch).rows
        if self.deferred is not None and self.deferred.state is self.state:
            self.write_deferred()  # not reached in a sequential run (its epoch ended first): never left unmade
        self._drop_deferred()  # what an execution that failed left
        self._drop_unused_layers()
        if failed is not None and failed[1] is self.state:  # and the checkpoint it wrote but did not publish
            self.checkpoints.chain, self.checkpoints.base = failed[2], failed[3]
        if failed is None or failed[0] != epoch or failed[1] is not self.state:
            self._drop_salvage()  # not a retry of the execution that made it
        self._before = (epoch, self.state, self.checkpoints.chain, self.checkpoints.base)
        self.made = []
        self._changes_table = None
        result = self.call(epoch, inputs)
        new_state = None
        defer = late_checkpoint = False
        changes: DataFrame | None = None
        layers: Layers | None = None
        append = bool(getattr(regime, "append", False))
        parts: _appended.Parts | None = None
        dropped: list[Any] = []
        if regime.takes_state:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise TypeError(f"step {self.name}: a {regime.kind} step must return (output, new_state)")
            result, returned = result
            key = getattr(regime, "key", None)
            if returned is not None and key is not None and key not in returned.columns:
                raise PipelineError(
                    f"step {self.name!r}: key={key!r} is not a column of the state it returned "
                    f"(columns: {', '.join(returned.columns)}); fix the regime's key= or the state"
                )
            if returned is None and self.state is not None and getattr(regime, "changes", False):
                raise PipelineError(
                    f"step {self.name!r} (changes=True) returned None as its changes: that would empty its "
                    "state; return its changes (a DataFrame with the state's columns, empty for none)"
                )
            if returned is not None and getattr(regime, "changes", False):
                # the step returned its changes: the new state is the old one with them applied (layers), made
                # now, small
                changes = detach(returned, eager=False, replicas=self.replicas)
                self.made.append((changes, True))
                result = changes if result is returned else result
                horizon = self.checkpoints.snapshot_horizon(epoch, self.state) if ctx.durable else None
                returned, layers = self._apply(changes, horizon)
                self._made = layers
            if append:
                # the rows to append, made by a job over them alone; the state is the parts' union. An output
                # that is those rows is read as made
                parts, dropped, part = self._append(returned, durable=ctx.durable)
                if result is returned and part is not None:
                    result = part
                returned = parts.view
            # a state checkpointed every epoch (Eager, Lazy(every=1)) is so that no committed epoch is ever
            # computed again: it is made and published before its consumers run. Others are materialised, and
            # checkpointed, at the end of the epoch, after its outputs committed (write_deferred; a delta compares
            # with the state before it: made at once), unless the step's output is its state (or a function of it:
            # then only the checkpoint is written there, late_checkpoint)
            deferrable = (
                self.defer_checkpoints
                and returned is not None
                and result is not returned
                and getattr(regime, "every", 1) > 1
                and not getattr(regime, "incremental", False)
                and changes is None
                and not append
            )
            # an output computed from the state makes the state first; its checkpoint is still written after the
            # epoch's outputs commit (write_deferred), where the state's would have been
            late_checkpoint = deferrable and callable(result)
            defer = deferrable and not late_checkpoint
            # materialised by its first job below, which cuts the lineage to earlier epochs
            if changes is not None or append:
                new_state = returned  # the layers' or the parts' view (of local checkpoints, made)
            elif returned is not None and not defer:
                new_state = self._detached(returned)
                self.made.append((new_state, True))
                result = new_state if result is returned else result
            if callable(result):
                result = self._output_of(result, new_state)
        elif callable(result):
            raise PipelineError(
                f"step {self.name!r}: it returned its output as a function of its new state, but its regime "
                f"({regime.kind}) keeps no state; return the output DataFrame itself"
            )
        # a frame its plan says is empty (``df.limit(0)``: a step with nothing this epoch) is known to have no
        # rows: no job persists or counts it, and its log or output is written from the driver with no collection;
        # an injected task or job failure, which needs that job, does not fire (failures.py)
        empty = ctx.frames.planned_empty(result)
        wrapped = ctx.injector.wrap(self.name, epoch, result, empty=empty)
        durable = ctx.durable
        output = isinstance(regime, Output)
        if output and any(c.lower() == "epoch" for c in wrapped.columns):
            raise PipelineError(
                f"output step {self.name!r}: its rows have a column named 'epoch', the output's partition column "
                f"(output/{self.name}/epoch=E/); rename it, e.g. .withColumnRenamed('epoch', 'epoch_')"
            )
        # an output whose first use is a write (its log, or an output's data) is computed, cached and counted
        # by that write's job (Frames.observing): no count job before it. ``fresh``: this epoch's output was
        # such a frame, logged or not (a log's write is then the job computing it; the journal keeps it for
        # the advisor)
        own = wrapped is not new_state and ctx.frames.observable(wrapped)
        # the advisor prices a log of such a step as a write less a count; not where the unlogged step has no
        # job
        # a stateful step is fused where its output is a function of its new state, which that job makes as it
        # reads it (fusions)
        fusable = self.fusable and (regime.stateless or late_checkpoint)
        self.fresh = own and not fusable
        # an unlogged step its consumer's job computes (not under an injected failure: that stays the step's
        # own)
        fused = ctx.frames.fused(wrapped) if self.fuse and fusable and own and wrapped is result else None
        self.pending_rows = None
        observing = (
            ctx.frames.observing(wrapped)
            if fused is None and durable and own and (regime.logs or output)
            else None
        )
        if fused is not None:
            out, self.pending_rows = fused
            rows = -1  # counted by the consumer's job
        elif observing is not None:
            out, observed, count = observing
            rows = -1  # known after the first write
        else:
            out, rows = ctx.frames.materialise(wrapped, persist=wrapped is not new_state)
        self.made.append((out, False))
        pending: list[Manifest] = []

        table: Any = None  # the rows collected by a first write from the driver, for a second one

        def write(kind: str, location: str | None = None) -> None:
            nonlocal observing, rows, table
            if table is not None or self._collects(kind, epoch, out, rows):
                got = self._write_collected(out, kind, epoch, location, table)
                if got is not None:
                    m, table = got
                    rows = m.rows
                    if observing is not None:  # the collection computed and cached it, as the observed write
                        ctx.frames.known_rows(out, rows)
                        observing = None
                    pending.append(m)
                    return
            if observing is None:
                pending.append(storage.write_frame(out, self.name, kind, epoch, rows, location=location))
                return
            m = storage.write_frame(observed, self.name, kind, epoch, 0, location=location)
            rows, observing = count(), None
            pending.append(attrs.evolve(m, rows=rows))

        if regime.logs and durable:
            write("log")
        if defer:
            # off the epoch's critical path: its outputs commit first. The epoch's inputs are held until then
            # (a cached step output stays cached: unpersisted, it would be computed again; an input's epoch is
            # read from its log again, kept while this step's low-watermark is below it); the state before is a
            # local checkpoint its lineage refers to
            new_state = returned
            checkpoint = durable and regime.checkpoints_at(epoch)
            self.deferred = Deferred(epoch, returned, checkpoint, tuple(inputs.values()), self.state)
            ctx.frames.hold(self.deferred.held)
        elif late_checkpoint and new_state is not None and fused is not None:
            # made by the consumer's job that computes the output (or at the end of the epoch, where no such job
            # ran): what its lineage reads is held until then, and its checkpoint, if any, written then
            checkpoint = durable and regime.checkpoints_at(epoch)
            self.deferred = Deferred(
                epoch, new_state, checkpoint, tuple(inputs.values()), self.state, made=True, by_consumer=True
            )
            ctx.frames.hold(self.deferred.held)
        elif late_checkpoint and new_state is not None and durable and regime.checkpoints_at(epoch):
            # made now (by the output's job above, or here where that job did not read all of it): nothing of its
            # lineage is held for the write
            if not materialised(new_state):
                new_state.count()
            self.deferred = Deferred(epoch, new_state, True, (), None, made=True)
        elif regime.takes_state and regime.checkpoints_at(epoch) and durable:
            if new_state is None:
                pending.append(Manifest(self.name, "checkpoint", epoch, 0, extra={"empty": True}))
            else:
                pending.append(
                    self.checkpoints.write(
                        new_state,
                        self.state,
                        epoch,
                        parts.total if parts is not None else rows if new_state is out else None,
                        changes=None if layers is None else layers.changes,
                        changes_held=changes,
                        changes_table=self._changes_table,
                        layers=None if layers is None else (layers.base, layers.overlay),
                        appended=None if parts is None else (*parts.pending(), parts.chain),
                    )
                )
                if parts is not None:
                    parts = parts.written(self.checkpoints.chain)
                # a base compacted for this snapshot: counted by its write
                if layers is not None and layers.base_rows < 0:
                    layers = self._made = attrs.evolve(layers, base_rows=pending[-1].rows)
        elif changes is not None or append:
            pass  # its layers, or its parts, are made
        elif new_state is not None and new_state is not out and not materialised(new_state):
            new_state.count()  # held in executor memory from now on, not recomputed from the previous state
        if output:
            write("output", f"output/{self.name}/epoch={epoch}")
        ctx.injector.at(self.name, epoch, "mid")
        for m in pending:
            if m.kind in ("output", "log"):  # what the next epoch's write predicts its size from (_collects)
                self._written[m.kind] = (m.rows, sum(f.size for f in m.files))
        if durable:
            if pending or regime.stateless:  # published: never run again as if it had not been
                self._before = None
            for m in pending:
                # when readers could first see it: an output's response latency ends here
                if m.kind == "output":
                    self.committed_at = time.time()
                    m = attrs.evolve(m, extra={**m.extra, "committed_at": self.committed_at})
                storage.put(m)
            if regime.stateless:
                storage.put(Manifest(self.name, "complete", epoch, max(rows, 0)))
        elif output:
            # written (falkirk off: nothing is published, the latency still counts)
            self.committed_at = time.time()
        recorded = regime.stateless or regime.checkpoints_at(epoch) or isinstance(regime, Output)
        if recorded and self.deferred is None:
            ctx.record(self.name, epoch)
        if regime.takes_state:
            # its blocks freed once the epoch that read it settled (a deferred state holds it until made), unless
            # the new layers keep it as their base (a state not held as layers)
            kept = (layers is not None and self.state is layers.base) or parts is not None
            if parts is None or new_state is not self.state:  # (an append=True step that appended nothing)
                ctx.frames.release(self.state, state_of=None if kept else self.name, read_until=epoch)
            if layers is not None:
                # registered before it is the state: the executor-loss check finds the parts of whichever view
                # it sees (state_parts)
                _layers.register(layers)
                self.state = new_state
                self._release_layers(keep=layers, read_until=epoch)
                self.layers, self._made = layers, None
                if changes is not layers.base:  # applied: its checkpoint, if any, is written
                    if changes is out:  # its blocks freed once its consumers took it
                        ctx.frames.free_when_released(changes, self.name, read_until=epoch)
                    else:
                        ctx.frames.release(changes, state_of=self.name, read_until=epoch)
            elif parts is not None:
                # the parts it kept are the new state's; those compacted into one are freed once read
                for df in dropped:
                    ctx.frames.release(df, state_of=self.name, read_until=epoch)
                self.parts, self.state = parts, new_state
            else:
                self._release_layers(read_until=epoch)
                self.state = new_state
        self._before, self.made, self._attempt = None, [], None  # it succeeded
        self._executed = True
        self._drop_salvage()  # a retry whose step returned something else
        return out, rows

    def _append(
        self, rows: DataFrame | None, *, durable: bool
    ) -> tuple[_appended.Parts, list[Any], DataFrame | None]:
        """An ``append=True`` step's state after it returned ``rows`` to append (``None``: none): its parts with
        ``rows`` made as a new one (one job over them), compacted where too many are held
        (:func:`~.appended.compacted`); the parts compaction replaced; the new part. The step's own parts are
        not changed (done once the epoch succeeded); what this makes is let go of if the execution fails."""
        parts = self.parts
        if rows is not None:

            def detached(df: DataFrame) -> DataFrame:
                out = detach(df, eager=False, replicas=self.replicas)
                self.made.append((out, True))
                return out

            part, n = _appended.made(rows, detached)
            self.ctx.frames.known_rows(part, n)  # made and counted: an output that is these rows is not again
            frames = (*parts.frames, part)
            parts = _appended.Parts(
                frames,
                (*parts.rows, n),
                parts.unwritten + 1 if durable else 0,
                _appended.union(frames, self.name),
                parts.chain,
            )
            return (*_appended.compacted(parts, detached, self.name), part)
        return parts, [], None

    def _release_parts(self) -> None:
        """Let go of an ``append=True`` state's parts (its blocks freed once nothing reads them)."""
        parts, self.parts = self.parts, _appended.Parts()
        for df in parts.frames:
            self.ctx.frames.release(df, state_of=self.name)

    def _collects(self, kind: str, epoch: int, df: DataFrame, rows: int) -> bool:
        """Whether ``epoch``'s ``kind`` (an output's data, a log) of ``rows`` rows (``-1``: not counted yet) is
        collected and written from the driver (:meth:`~falkirk.spark.pipeline.store.storage.Storage.write_collected`)
        rather than by Spark's writer: at most :data:`COLLECT_MAX_ROWS` rows, counted or foretold by this step's
        write of the epoch before (in this driver, else its manifest; also at most :data:`COLLECT_MAX_FILE_BYTES`
        of Parquet), a foretold size only where Spark bounds the collection (``spark.driver.maxResultSize`` set,
        at most :data:`COLLECT_MAX_RESULT_BYTES`); the driver sees the root as the executors do; the session
        writes Parquet as pyarrow does (asked once); every column is of a type both write alike. The first epoch
        a driver writes with no manifest before it is Spark's."""
        ctx = self.ctx
        # not with falkirk off (durable=False): such a run is the reference a recovered run is compared with
        # (compare_runs, the demo), so its outputs stay Spark's own writes, which check the driver-side ones
        if (
            self._collect_off
            or not ctx.durable
            or not shares_storage(ctx.spark, self.storage.fs.object_store)
        ):
            return False
        if not self.checkpoints.session_allows():
            return False
        if rows >= 0:  # counted already: no foretelling
            return rows <= COLLECT_MAX_ROWS and collectable(df.schema, None)
        if not self._collections_bounded():
            return False
        last = self._written.get(kind)
        if last is None:
            if epoch < 1:
                return False
            try:
                m = self.storage.get(self.name, kind, epoch - 1)
            except Exception:  # noqa: BLE001 - none, or unreadable now: only a hint, Spark's writer tells the size
                return False
            last = self._written[kind] = (m.rows, sum(f.size for f in m.files))
        before, size = last
        return (
            0 <= before <= COLLECT_MAX_ROWS
            and size <= COLLECT_MAX_FILE_BYTES
            and collectable(df.schema, None)
        )

    def _collections_bounded(self) -> bool:
        """Whether Spark refuses a collection beyond :data:`COLLECT_MAX_RESULT_BYTES` here
        (``spark.driver.maxResultSize`` set, at most that; asked once): a size foretold by the epoch before is
        collected only then."""
        if self._result_bound is None:
            self._result_bound = result_bound(self.ctx.spark)
        return 0 < self._result_bound <= COLLECT_MAX_RESULT_BYTES

    def _write_collected(
        self, df: DataFrame, kind: str, epoch: int, location: str | None, table: Any
    ) -> tuple[Manifest, Any] | None:
        """``df``'s ``kind`` of ``epoch`` written from the driver (``table``: its rows, collected by the epoch's
        first write), and the rows collected; ``None`` where it is left to Spark's writer after all (a collection
        beyond ``spark.driver.maxResultSize``: an epoch far larger than the one before; off for the rest of the
        run, noted)."""
        try:
            if table is None:
                # collected already (a ``changes=True`` step's delta brought its changes, this output, along)
                table = self.ctx.frames.take_collected(df)
            if table is None:
                # no rows (known exactly: counted, planned empty, or a replayed log's): nothing to collect
                if self.ctx.frames.rows_of(df) == 0:
                    if self._large_strings is None:  # asked once, as toArrow asks it every time
                        conf = self.ctx.spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
                        self._large_strings = str(conf).lower() == "true"
                    table = empty_table(df.schema, large=self._large_strings)
                else:
                    table = df.toArrow()
        except Exception as exc:
            if "maxResultSize" not in str(exc):
                raise  # the job's own failure, as Spark's write would have met it
            self._collect_off = True
            self.ctx.note(
                f"step {self.name}@{epoch}: its {kind} outgrew spark.driver.maxResultSize when collected; written "
                "by Spark's writer from now on in this run"
            )
            return None
        m = self.storage.write_collected(
            df, self.name, kind, epoch, location=location, table=table, vouched=True
        )
        return None if m is None else (m, table)

    def _detached(self, returned: DataFrame) -> DataFrame:
        """:func:`~falkirk.spark.pipeline.run.session.detach` of the new state the step returned.

        A retry in place (the same epoch, from the same state) whose step returned what the failed execution's
        returned — the same plan, by :meth:`DataFrame.sameSemantics` — takes up that execution's detached copy
        instead of making another: Spark then reads the blocks the failed job cached and skips the shuffles it
        completed, instead of computing the epoch's state from the start. Spark computes the copy's missing
        partitions again from its lineage, whole until a job over it succeeds (its local checkpoint is taken
        then; a copy checkpointed already is taken up only while every block is held). Not taken up: a plan
        that differs or cannot be compared, and a lineage with an indeterminate stage (``repartition(n)``
        without keys, say), whose partitions computed again could disagree with the ones cached — Spark
        refuses to mix them within one job, and nothing would across two. Not done for a ``changes=True``
        step's changes, which its layers may already have let go of.
        """
        salvage = self._salvage
        if salvage is not None and _same_plan(returned, salvage.returned) and takes_up(salvage.detached):
            detached, self._salvage = salvage.detached, None
        else:
            detached = detach(returned, eager=False, replicas=self.replicas)
        self._attempt = Attempt(returned, detached)
        return detached

    def _drop_salvage(self) -> None:
        """Free a failed execution's detached copy that no retry took up."""
        salvage, self._salvage = self._salvage, None
        if salvage is not None:
            self.ctx.frames.release(salvage.detached, state_of=self.name, read_until=-1)

    def drop_made(self) -> None:
        """See :meth:`Runner.drop_made`; the detached new state of an execution that may be retried in place
        (it published nothing: ``_before`` is still set) is kept for the retry (:meth:`_detached`), let go of
        by the next execution if that is no such retry, or by a rollback."""
        attempt, self._attempt = self._attempt, None
        self._drop_salvage()  # one no retry took up
        if attempt is not None and self._before is not None:
            self.made = [(df, blocks) for df, blocks in self.made if df is not attempt.detached]
            self._salvage = attempt
        super().drop_made()

    def _output_of(self, output: Any, state: DataFrame | None) -> DataFrame:
        """The output a stateful step returned as a function of its new state (``(lambda made: ..., new)``),
        computed from ``state``, the state to be made (a lazy local checkpoint, which the output's job fills as
        it reads it, or the layers' view): the work that made the state is done once, where an output built on
        the returned DataFrame computes it again from its lineage, beside the job that makes the state."""
        from pyspark.sql import DataFrame as AnyFrame  # classic and Spark Connect alike

        if state is None:
            raise PipelineError(
                f"step {self.name!r}: it returned its output as a function of its new state, and None as that "
                "state; return the output DataFrame itself"
            )
        out = output(state)
        if not isinstance(out, AnyFrame):
            raise PipelineError(
                f"step {self.name!r}: the function it returned as its output gave {type(out).__name__}, not a "
                "DataFrame"
            )
        return out

    def _apply(self, changes: DataFrame, snapshot: int | None) -> tuple[DataFrame, Layers]:
        """The state after ``changes`` (a ``changes=True`` step's return), as layers: the base, and every
        change since in one small local checkpoint (the previous one's rows of other keys, and ``changes``) or,
        where every one was collected and they are few, held on the driver (:meth:`_overlay_table`); compacted
        into a new base once those pass :data:`~falkirk.spark.pipeline.run.layers.COMPACT_AT` of the base, or,
        where the epoch's checkpoint is a snapshot and the next one ``snapshot`` epochs later, once they would
        pass it before then at this epoch's rate of changes (with ``differential=True``, at every snapshot: the
        snapshot is then the base the next deltas are the changes since). The changes are counted by the job that
        applies them, or first, by a job of their own, where their keys might be too many to broadcast
        (:func:`~falkirk.spark.pipeline.run.layers.merge_blind`). Nothing of the step's is changed (done by
        :meth:`execute` once the epoch succeeded) but :attr:`_changes_rows`, which only guides the next merge.
        If it raises, ``changes`` and every frame it detached are released: none of them is kept referenced
        while the epoch runs again."""
        made: list[DataFrame] = [changes]
        try:
            return self._applied(changes, made, snapshot)
        except BaseException:
            for df in made:
                self.ctx.frames.release(df, state_of=self.name, read_until=-1)
            raise

    def _applied(
        self, changes: DataFrame, made: list[DataFrame], snapshot: int | None
    ) -> tuple[DataFrame, Layers]:
        """:meth:`_apply`, each frame it detaches added to ``made``."""
        from falkirk.spark.pipeline.store.delta import DELETED

        def detached(df: DataFrame) -> DataFrame:
            made.append(detach(df, eager=False, replicas=self.replicas))
            return made[-1]

        key = self.regime.key  # type: ignore[attr-defined]
        marked = _layers.marked(changes, self.name)
        layers = self.layers if self.layers is not None and self.layers.view is self.state else None
        if layers is None and self.state is None:  # the first state: the changes' rows
            if DELETED in changes.columns:  # its live rows, the changes counted beside them
                first = detached(_layers.live(marked))
                rows, returned_rows = _layers.counted_with(first, changes, key, self.name)
            else:
                first = changes
                rows = returned_rows = _layers.counted(first, key, self.name)
            self.ctx.frames.known_rows(changes, returned_rows)
            self._changes_rows = returned_rows  # the next epoch's guide (:meth:`_changes_collected`)
            return first, Layers(first, first, None, marked, 0, rows, key)
        base: DataFrame
        overlay: DataFrame | None
        if layers is None:  # a state not held as layers (a restore makes layers): the base, no changes since
            assert self.state is not None
            base, overlay, base_rows = self.state, None, -1
        else:
            base, overlay, base_rows = layers.base, layers.overlay, layers.base_rows
        _layers.check_changes(marked, base, self.name)
        known: int | None = None
        # small changes (by the epoch before) are collected first: the job that makes them, whose rows then serve
        # the merge's keys (a local relation: no job), the delta and the step's output (written from the driver)
        got = self._changes_collected(changes, marked, key)
        named = changed_keys = None
        if got is not None:
            known, changed_keys = got.num_rows, _layers.keys_of(got, key)
            named = _layers.among(changed_keys, key)
        # the overlay's keys after the merge, where the driver knows them all
        if changed_keys is None or (overlay is not None and (layers is None or layers.overlay_keys is None)):
            overlay_keys = None
        elif overlay is None:
            overlay_keys = changed_keys
        else:
            assert layers is not None and layers.overlay_keys is not None
            overlay_keys = layers.overlay_keys | changed_keys
        if overlay_keys is not None and len(overlay_keys) > _layers.AMONG_MAX:
            overlay_keys = (
                None  # too many to name in a plan: not kept (nor copied every epoch) until a compaction
            )
        # few changes since the base, every one collected: merged on the driver (no job), held there
        table = self._overlay_table(got, layers, overlay, marked, key)
        if table is not None or overlay is None:
            merged = marked
        else:
            # the overlay's rows of keys the changes do not name: the changes' keys are broadcast (collected on
            # the driver), so they are counted first unless the last epoch's were far under the bound (forgotten
            # until this merge succeeds: an attempt that fails, a blind broadcast too big among the causes, is
            # followed by one that counts first)
            last, self._changes_rows = self._changes_rows, None
            if known is None and not _layers.merge_blind(last):
                known = _layers.counted(changes, key, self.name)
            # kept in the state's partitions (a union adds its sides' partitions up)
            parallelism = self.regime.parallelism  # type: ignore[attr-defined]
            merged = _layers.merge(overlay, marked, key, known, named).coalesce(parallelism)
        if base_rows < 0:  # not known: counted here (its first use reads it anyway)
            base_rows = _layers.counted(base, key, self.name)
        if table is not None:  # its rows and the changes' known: no job
            assert known is not None
            new_overlay = _layers.on_driver(table, marked)
            n, rows = table.num_rows, known
        else:
            new_overlay = detached(merged)
            if known is None:
                # one job: the step's changes computed, both cached; the changes' rows counted on the way (the
                # step's output, when it is its changes, then needs no count job: Frames.materialise with the
                # rows known)
                n, rows = _layers.counted_with(new_overlay, changes, key, self.name)
                if overlay is not None and rows > _layers.BROADCAST_MAX:
                    self.ctx.note(
                        f"{self.name}: its changes had {rows} rows, {last} the epoch before; their keys "
                        f"were collected on the driver to merge them (from now on they are counted first, and "
                        f"broadcast only up to {_layers.BROADCAST_MAX})"
                    )
            else:
                n, rows = _layers.counted(new_overlay, key, self.name), known
        self.ctx.frames.known_rows(changes, rows)
        view = _layers.view(base, new_overlay, key, n, _layers.among(overlay_keys, key))
        bound = _layers.COMPACT_AT * max(base_rows, 1)
        # a snapshot written from the compacted base scans a cache, where one written from the view computes the
        # view (the base and the overlay joined): compacted now, the compaction the bound would call for before
        # the next snapshot is not made besides (10^7 keys, 1 % changed per epoch, a snapshot every 10: the two
        # epochs of a cycle that did both cost 8.0 and 6.4 CPU-s against 1.1 for a delta's)
        # differential deltas hold the changes since a base that is the snapshot: at a snapshot epoch always compacted
        differential = bool(getattr(self.regime, "differential", False))
        if n > bound or (snapshot is not None and (differential or n + rows * (snapshot - 1) > bound)):
            compacted = detached(view)
            # at a snapshot epoch the snapshot's write is the job that computes the compacted base, fills its cache
            # and counts it (:meth:`execute` takes its rows from the manifest): no job of its own, which would scan
            # the base, then the write the cache (10^7 keys: 5.8 against 5.5 CPU-s, benchmarks/README.md). Its keys
            # need no check for nulls: the base's and the overlay's were checked
            whole = -1 if snapshot is not None else _layers.counted(compacted, key, self.name)
            # the compacted base, made, reads it no more
            self.ctx.frames.release(new_overlay, state_of=self.name, read_until=-1)
            self._changes_rows = rows  # the merge succeeded
            return compacted, Layers(compacted, compacted, None, marked, 0, whole, key)
        self._changes_rows = rows  # the merge succeeded
        return view, Layers(view, base, new_overlay, marked, n, base_rows, key, overlay_keys, table)

    def _overlay_table(
        self, got: Any, layers: Layers | None, overlay: DataFrame | None, marked: DataFrame, key: str
    ) -> Any:
        """The changes since the base once the epoch's (``got``, collected by :meth:`_changes_collected`) are
        applied, as Arrow (:func:`~falkirk.spark.pipeline.run.layers.merged_table`), where the overlay is held on
        the driver (or there is none) and the result stays within
        :data:`~falkirk.spark.pipeline.run.layers.DRIVER_MAX_ROWS` rows and ``DRIVER_MAX_BYTES``; else ``None``
        (merged by a Spark job, held on the executors), and for a key that is no integer
        (:func:`~falkirk.spark.pipeline.run.layers.driver_keyed`)."""
        if got is None or not _layers.driver_keyed(marked.schema[key].dataType):
            return None
        before = None if overlay is None or layers is None else layers.overlay_table
        if overlay is not None and before is None:
            return None
        if got.num_rows + (0 if before is None else before.num_rows) > _layers.DRIVER_MAX_ROWS:
            return None
        table = _layers.merged_table(before, got.select(marked.columns), key, self.name)
        return table if table.nbytes <= _layers.DRIVER_MAX_BYTES else None

    def _changes_collected(self, changes: DataFrame, marked: DataFrame, key: str) -> Any:
        """``marked`` (``changes`` with ``_deleted``) tagged with each row's partition (:func:`~.keyed.tagged`),
        collected as Arrow by the job that makes ``changes``, where the step's changes the epoch before were at
        most :data:`COLLECT_MAX_ROWS` rows and Spark bounds a collection (``spark.driver.maxResultSize`` at most
        :data:`COLLECT_MAX_RESULT_BYTES`), through classic Spark, the run durable, every column collectable: kept
        for the epoch's delta (:attr:`_changes_table`) and ``changes``' rows for the step's output's write
        (:meth:`~.frames.Frames.collected`) where they are at most :data:`COLLECT_MAX_ROWS` rows (the delta:
        and at most ``COLLECT_MAX_BYTES`` in Arrow). Not where the changes the epoch before foretell more than
        ``COLLECT_MAX_BYTES`` (their rows by :meth:`_foretold_row_bytes`). ``None`` otherwise, or where the
        collection outgrew ``spark.driver.maxResultSize`` (then off for the rest of the run, noted)."""
        from falkirk.spark.pipeline.store import keyed

        self._changes_table = None
        last, ctx = self._changes_rows, self.ctx
        if (
            self._collect_off
            or not ctx.durable
            or last is None
            or last > COLLECT_MAX_ROWS
            or last * self._foretold_row_bytes(marked) > _incremental.COLLECT_MAX_BYTES
        ):
            return None
        if is_connect(ctx.spark):
            return None
        if not self._collections_bounded():
            return None
        regime = self.regime
        tagged = keyed.tagged(marked, key, regime.parallelism, regime.max_parallelism)  # type: ignore[attr-defined]
        if not collectable(tagged.schema, keyed.SUBTASK):
            return None
        # forgotten until the merge succeeds: an attempt that fails (the collection among the causes) is followed
        # by one that counts the changes first, uncollected
        self._changes_rows = None
        try:
            got = tagged.toArrow()
        except Exception as exc:
            if "maxResultSize" not in str(exc):
                raise  # the job's own failure, as the merge's would have met it
            self._collect_off = True
            ctx.note(
                f"step {self.name}: its changes outgrew spark.driver.maxResultSize when collected; merged and "
                "written by Spark's jobs from now on in this run"
            )
            return None
        if got.num_rows:
            self._changes_row_bytes = got.nbytes / got.num_rows
        if got.num_rows <= COLLECT_MAX_ROWS:  # else: its count and keys only
            # the output collects as many rows itself (a counted one is not bounded by its bytes)
            ctx.frames.collected(changes, got.select(changes.columns))
            if got.nbytes <= _incremental.COLLECT_MAX_BYTES:  # the delta is written from it only then
                self._changes_table = got
        return got

    def _foretold_row_bytes(self, marked: DataFrame) -> float:
        """The Arrow bytes per row the epoch's changes are foretold to take: the last collected changes' (with
        rows), else, none collected yet, 9 per column where every column is of a fixed width, and 8 KiB per row
        otherwise (strings, binaries: only the first collection of a run goes by that guess)."""
        if self._changes_row_bytes is not None:
            return self._changes_row_bytes
        from pyspark.sql.types import BinaryType, StringType

        fields = marked.schema.fields
        if any(isinstance(f.dataType, (StringType, BinaryType)) for f in fields):
            return 8192.0
        return 9.0 * len(fields)

    def _restore_layers(self, m: Manifest) -> None:
        """A ``changes=True`` step's state from its checkpoint ``m``, as layers: the chain's snapshot as the
        base, as a full checkpoint's restore reads it, and its deltas resolved into one overlay; both read by
        the step's next job (no job of their own), but an overlay of few rows, collected by one job and held on
        the driver (:meth:`_restored_table`). The whole state is not rebuilt from the chain: the view
        applies the overlay where the step reads it (:func:`~falkirk.spark.pipeline.run.layers.lookup`: by
        its keys). Its keys are not checked for nulls again: they were when the state was made (a
        ``changes=True`` state refuses them; turning ``changes`` on over a checkpoint written without it is
        refused on restart by the pipeline-evolution check)."""
        base, overlay, base_rows, bound = self.checkpoints.read_layers(m)
        key = self.regime.key  # type: ignore[attr-defined]
        base = detach(base, eager=False, replicas=self.replicas)
        chain = self.checkpoints.chain
        assert chain is not None
        # the chain's snapshot: the next delta is the changes since it
        self.checkpoints.base = (base, chain[0])
        table = None if overlay is None else self._restored_table(overlay, bound)
        if overlay is None:  # a snapshot alone
            layers = Layers(base, base, None, None, 0, base_rows, key)
        elif table is not None:  # held on the driver, as the merges after it keep it
            overlay, n, keys = _layers.on_driver(table, overlay), table.num_rows, _layers.keys_of(table, key)
            view = _layers.view(base, overlay, key, n, _layers.among(keys, key))
            layers = Layers(view, base, overlay, None, n, base_rows, key, keys, table)
        else:
            overlay = detach(overlay, eager=False, replicas=self.replicas)
            layers = Layers(
                _layers.view(base, overlay, key, bound), base, overlay, None, bound, base_rows, key
            )
        _layers.register(layers)
        self.layers, self.state = layers, layers.view
        if not self._executed and m.extra.get("delta") is not None and m.rows >= 0:
            # a start's: the first merge goes by the delta's rows, the step's changes at its epoch (a differential
            # delta's: every change since its snapshot, more), as by the changes the epoch before
            # (:meth:`_changes_collected`); after a recovery in a driver that ran the step it counts first
            self._changes_rows = m.rows

    def _restored_table(self, overlay: DataFrame, bound: int) -> Any:
        """The changes since the base a restore resolved from its deltas (``overlay``, at most ``bound`` rows)
        collected as Arrow, to be held on the driver (:func:`~falkirk.spark.pipeline.run.layers.on_driver`),
        where they fit :data:`~falkirk.spark.pipeline.run.layers.DRIVER_MAX_ROWS` and ``DRIVER_MAX_BYTES``, the
        run is durable, through classic Spark, Spark bounds a collection and every column is collectable: one
        job, where the step's first job would otherwise cache them; an integer key
        (:func:`~falkirk.spark.pipeline.run.layers.driver_keyed`). ``None`` otherwise, or where the collection
        failed (a damaged delta, say: the step's job then reads them and meets the failure, as before)."""
        ctx = self.ctx
        if (
            bound > _layers.DRIVER_MAX_ROWS
            or not _layers.driver_keyed(overlay.schema[self.regime.key].dataType)  # type: ignore[attr-defined]
            or not ctx.durable
            or is_connect(ctx.spark)
            or not self._collections_bounded()
            or not collectable(overlay.schema, None)
        ):
            return None
        try:
            table = overlay.toArrow()
        except Exception:  # noqa: BLE001 - read again by the step's job, which meets the failure as before
            logging.getLogger(__name__).debug(
                "the changes since a restored base were not collected", exc_info=True
            )
            return None
        return table if table.nbytes <= _layers.DRIVER_MAX_BYTES else None

    def _drop_unused_layers(self) -> None:
        """Let go of the parts of layers a failed execution made that the state does not hold."""
        made, self._made = self._made, None
        if made is not None and made is not self.layers:
            # a restored state is the base of the layers made from it; nothing read what a failed execution made
            self._let_go(made, self.layers, self.state, read_until=-1)

    def _release_layers(self, keep: Layers | None = None, *, read_until: int | None = None) -> None:
        """Let go of the layers' parts that ``keep`` (the new layers) does not hold (their blocks freed once the
        step and every node downstream of it completed ``read_until``: :meth:`Frames.release`)."""
        old, self.layers = self.layers, None
        if old is not None:
            self._let_go(old, keep, read_until=read_until)

    def _let_go(self, layers: Layers, keep: Layers | None, *held: Any, read_until: int | None = None) -> None:
        """Release the parts of ``layers`` that are neither parts of ``keep`` nor among ``held``."""
        kept = {id(x) for x in (*held, *((keep.base, keep.overlay) if keep is not None else ()))}
        for part in (layers.base, layers.overlay):
            if part is not None and id(part) not in kept:
                self.ctx.frames.release(part, state_of=self.name, read_until=read_until)

    def _own_state(self) -> bool:
        """Whether :attr:`state` is a local checkpoint of this step's (not, before its epoch's end, a state as
        the step returned it, which may be a frame of another step's: its blocks are not this step's to free)."""
        return self.deferred is None or self.deferred.made or self.deferred.state is not self.state

    def state_parts(self) -> list[Any]:
        """The frames the state lives in (its layers' base and changes — local checkpoints, or changes held on the
        driver — or the state itself)."""
        state = self.state
        layers = _layers.layers_of(state)
        if layers is not None:
            return [p for p in (layers.base, layers.overlay) if p is not None]
        if getattr(self.regime, "append", False):
            return list(self.parts.frames)  # (not compared with the state: the two are not set at once)
        return [state] if state is not None else []

    def write_deferred(self) -> None:
        """Materialise the state :meth:`execute` left to the end of its epoch, if any (one job: the state is
        then held in executor memory, its lineage cut); at a checkpoint epoch, write it from memory, publish
        its manifest and record the epoch as the step's frontier. Dropped, not made, where the state is no
        longer the step's (a recovery reset the step): the frontier then stays at the checkpoint before, as
        after a crash before the write."""
        deferred = self.deferred
        if deferred is None:
            return
        try:
            if self.state is None or deferred.state is not self.state:
                return
            state = (
                deferred.state
                if deferred.made
                else detach(deferred.state, eager=False, replicas=self.replicas)
            )
            try:
                # a state made already (execute made it) is not counted apart: its checkpoint's write counts it
                # (StateCheckpoints.write, which counts first one that is not made)
                rows = None if deferred.made else state.count()
                if deferred.by_consumer and not deferred.checkpoint and not materialised(state):
                    state.count()  # no job of its consumer's computed the output that makes it
            except BaseException:
                self.ctx.frames.release(state, state_of=self.name, read_until=-1)  # nothing read it
                # the state as the step returned it, not made (perhaps another step's frame): not this step's to
                # free; the recovery restores a checkpoint
                self.state = None
                raise
            self.state = state
            if deferred.checkpoint:
                self.storage.put(self.checkpoints.write(state, None, deferred.epoch, rows))
                self.ctx.record(self.name, deferred.epoch)
        finally:
            self._drop_deferred()

    def _drop_deferred(self) -> None:
        """Forget the state left to the end of its epoch, letting go of its inputs."""
        deferred, self.deferred = self.deferred, None
        if deferred is not None:
            self.ctx.frames.unhold(deferred.held)

    # -- failures and rollback ----------------------------------------------------------------
    def intact(self, epoch: int) -> bool:
        """See :meth:`Runner.intact` (what the failed execution left — a state left to the end of its epoch, a
        checkpoint written but not published — the next one drops)."""
        before = self._before
        return before is not None and before[0] == epoch and before[1] is self.state

    def lose(self) -> None:
        self._before = None
        self._drop_salvage()
        self.ctx.frames.release(self.state, state_of=self.name if self._own_state() else None)
        self._drop_unused_layers()
        self._release_layers()
        self._release_parts()
        self.state = None
        self._drop_deferred()
        self.checkpoints.lose()
        self.committed = set()
        self._changes_rows = None

    def reset(self, frontier: int, *, committed: set[int] | None = None) -> None:
        """``committed`` (outputs): the acknowledged epochs above ``frontier`` to keep as they are — they are
        final; an acknowledged epoch not among them (damaged, or asked to be redone) is removed and written
        again."""
        storage = self.storage
        keep = {e for e in committed or () if e > frontier} if isinstance(self.regime, Output) else set()
        self.committed, self._before = keep, None
        self._drop_salvage()
        own = self._own_state()
        self._drop_deferred()
        self._changes_rows = None  # the epoch after the frontier is not the one last run
        if self.regime.takes_state:
            self.ctx.frames.release(self.state, state_of=self.name if own else None)
            self._drop_unused_layers()
            self._release_layers()
            self._release_parts()
            self.state = None
            if frontier >= 0:
                m = storage.get(self.name, "checkpoint", frontier)
                if getattr(self.regime, "changes", False) and m.extra.get("keyed") is not None:
                    self._restore_layers(m)
                    self.rescaled, self.checkpoints.rescaled = self.checkpoints.rescaled, None
                elif not m.extra.get("empty"):  # read by the step's next job: no job of its own
                    self.state = self._restored(self.checkpoints.read(m))
                    self.rescaled, self.checkpoints.rescaled = self.checkpoints.rescaled, None
                    if getattr(self.regime, "append", False):  # the restored chain is its first part
                        told = (m.extra.get("delta") or {}).get("state_rows", m.rows)
                        self.parts = _appended.Parts(
                            (self.state,), (told,), 0, self.state, self.checkpoints.chain
                        )
                else:  # an empty state: no chain in memory (the next checkpoint is whole)
                    self.checkpoints.lose()
            else:
                self.checkpoints.lose()
        for kind in ("checkpoint", "complete"):
            storage.remove_where(self.name, kind, lambda e: e <= frontier, sync=True)
        for kind in ("log", "output"):  # an output's kept epochs keep their log (Output(log=True)) too
            storage.remove_where(self.name, kind, lambda e: e <= frontier or e in keep, sync=True)
        if self.regime.stateless and frontier >= 0 and frontier not in storage.epochs(self.name, "complete"):
            storage.put(Manifest(self.name, "complete", frontier))

    def _restored(self, read: DataFrame) -> DataFrame:
        """The state a restore holds: the checkpoint's files as read, where they were read as written and only
        the next execution reads them; else a copy detached into executor memory, made by its first job.

        The next execution always makes a new state from it, detached (:meth:`_detached`, or at its epoch's end:
        :meth:`write_deferred`), so the files are read by that execution alone (and a retry of it), while the
        restore point they belong to is kept. A copy in memory would convert the rows into cached column
        batches for that execution's jobs: in a driver just restarted (YSB, benchmarks/README.md, "A restored
        state read as written") holding the read instead shortened the recovery by about 0.2 s and 0.26 CPU-s, and
        the first output came about as soon (its job then reads the files itself). Where the execution reads the
        state in more than one job — an output that is not the new state, then the new state's own job — each
        decodes the files, where the copy was read from memory after the first. Detached still: a chain resolved
        per key or redistributed into other partitions (a shuffle each of its readers would repeat), and a state
        kept across epochs as read — an ``append=True`` step's first part, a ``changes=True`` step's base —, or
        read through Spark Connect."""
        regime = self.regime
        if (
            self.checkpoints.as_written
            and not getattr(regime, "append", False)
            and not getattr(regime, "changes", False)
            and not is_connect(read.sparkSession)
        ):
            return stored(read)
        return detach(read, eager=False, replicas=self.replicas)

    def committed_frame(self, epoch: int) -> DataFrame:
        """An output's committed data of ``epoch`` (what its consumers read when it discarded a re-sent
        epoch)."""
        m = self.storage.get(self.name, "output", epoch)
        return self.ctx.frames.known_rows(self.storage.read_frame(self.ctx.spark, m, verify=False), m.rows)

    def replay(self, epoch: int) -> DataFrame:
        if not self.regime.logs:
            return super().replay(epoch)
        m = self.storage.get(self.name, "log", epoch)
        return self.ctx.frames.known_rows(self.storage.read_frame(self.ctx.spark, m, verify=False), m.rows)

    def collect(self, lw: int, lw_consumers: int) -> None:
        storage = self.storage
        kind = self._frontier_kind
        if kind == "complete":  # the newest ``retain`` markers: losing one falls back to the next
            kept = storage.epochs(self.name, kind)[-self.ctx.retain :]
            storage.remove_where(self.name, kind, lambda e: e >= kept[0] if kept else True)
        elif lw >= 0:
            if kind != "output":  # an output's manifests stay: they prove its acknowledged epochs
                # lw's snapshot and deltas stay
                floor = self.checkpoints.floor(lw) if kind == "checkpoint" else lw
                storage.remove_where(self.name, kind, lambda e: e >= floor)
            self.ctx.prune(self.name, lw)
        if self.regime.logs and lw_consumers >= 0:
            storage.remove_where(self.name, "log", lambda e: e > lw_consumers)


class DatabaseRunner(StepRunner):
    """An eager step whose state is an SQLite database (see
    :class:`~falkirk.spark.pipeline.declare.regimes.Eager`)."""

    kind = "database"
    COMMITS = DATABASE_COMMITS

    def __init__(self, ctx: RunContext, step: Step) -> None:
        super().__init__(ctx, step)
        db = getattr(step.regime, "database", None)
        assert db is not None
        self.path = database_path(ctx.storage.fs, step.name, db)
        self.tables: dict[str, str] = dict(getattr(step.regime, "tables", {}))
        self.db: sqlite3.Connection | None = None
        self.guard: WriteGuard | None = None

    def connect(self) -> sqlite3.Connection:
        """The open connection (autocommit mode; transactions are explicit)."""
        if self.db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # a concurrent run executes its epochs on pool threads (one at a time) and resets it on the run's
            # thread
            db: sqlite3.Connection | None = None
            try:
                with database_errors(self.name, self.path, "opening it"):
                    db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute(f"PRAGMA synchronous={'FULL' if self.ctx.fsync else 'NORMAL'}")
                    db.execute(
                        f"CREATE TABLE IF NOT EXISTS {self.COMMITS} (step TEXT NOT NULL, epoch INTEGER NOT NULL, "
                        "rows INTEGER NOT NULL, PRIMARY KEY (step, epoch))"
                    )
                    self.guard = WriteGuard(db, self.name, self.tables, own=(self.COMMITS,))
            except BaseException:
                if db is not None:
                    db.close()
                raise
            self.db = db
        return self.db

    def _existing(self, db: sqlite3.Connection) -> dict[str, str]:
        have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {t: c for t, c in self.tables.items() if t in have}

    def execute(self, epoch: int, inputs: dict[str, DataFrame]) -> tuple[DataFrame | None, int]:
        # an execution run again at once deletes the epoch's rows first (as a redo does): only a published
        # manifest makes it not intact
        self._before = (epoch, None, None, None)
        db = self.connect()
        guard = self.guard
        assert guard is not None
        users = False  # the step's own code runs: its SQLite errors are its own, unless storage failed
        try:
            guard.install()  # refuses writes a rollback could not undo (falkirk.spark.pipeline.run.guard)
            db.execute("BEGIN IMMEDIATE")
            for t, col in self._existing(db).items():
                db.execute(f'DELETE FROM "{t}" WHERE "{col}" = ?', (epoch,))
            users = True
            with guard.watch(epoch):
                result = self.call(epoch, inputs, db=db)
            users = False
            if callable(result):  # refused before the epoch's transaction commits
                raise PipelineError(
                    f"step {self.name!r}: it returned its output as a function of its new state, but its "
                    "state is a database, not a DataFrame; return the output DataFrame itself"
                )
            rows = sum(
                db.execute(f'SELECT count(*) FROM "{t}" WHERE "{c}" = ?', (epoch,)).fetchone()[0]
                for t, c in self._existing(db).items()
            )
            db.execute(
                f"INSERT OR REPLACE INTO {self.COMMITS} (step, epoch, rows) VALUES (?, ?, ?)",
                (self.name, epoch, rows),
            )
            db.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, sqlite3.Error) and is_storage_failure(exc):
                what = (
                    f"a statement of the step's own at epoch {epoch}"
                    if users
                    else f"committing epoch {epoch}"
                )
                raise storage_error(self.name, self.path, what, exc) from exc
            raise
        out = None
        if result is not None:
            out, _ = self.ctx.frames.materialise(result)
            self.made = [(out, False)]
        self.ctx.injector.at(self.name, epoch, "mid")
        if self.ctx.durable:
            self._before = None  # published
            self.storage.put(
                Manifest(self.name, "checkpoint", epoch, rows, extra={"database": str(self.path)})
            )
        self.ctx.record(self.name, epoch)
        self._before, self.made = None, []  # it succeeded
        return out, rows

    def intact(self, epoch: int) -> bool:
        before = self._before
        return before is not None and before[0] == epoch and self.db is not None

    def lose(self) -> None:
        if self.db is not None:
            self.db.close()  # an open transaction is rolled back
            self.db = None

    def _rollback(self) -> None:
        """Roll back an open transaction; a connection that cannot is closed (which rolls it back)."""
        db = self.db
        try:
            if db is not None and db.in_transaction:
                db.execute("ROLLBACK")
        except sqlite3.Error:
            self.lose()

    def reset(self, frontier: int, *, committed: set[int] | None = None) -> None:
        with database_errors(self.name, self.path, f"resetting it to epoch {frontier}"):
            db = self.connect()
            try:
                db.execute("BEGIN IMMEDIATE")
                for t, col in self._existing(db).items():
                    db.execute(f'DELETE FROM "{t}" WHERE "{col}" > ?', (frontier,))
                db.execute(f"DELETE FROM {self.COMMITS} WHERE step = ? AND epoch > ?", (self.name, frontier))
                db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        self.storage.remove_where(self.name, "checkpoint", lambda e: e <= frontier, sync=True)

    def collect(self, lw: int, lw_consumers: int) -> None:
        super().collect(lw, lw_consumers)
        with database_errors(self.name, self.path, "checkpointing its write-ahead log"):
            self.connect().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # keep the database's WAL small


def _same_plan(a: DataFrame, b: DataFrame) -> bool:
    """Whether ``a`` and ``b`` compute the same rows by Spark's own test (their canonical plans are equal);
    ``False`` where it cannot say."""
    try:
        return a is b or bool(a.sameSemantics(b))
    except Exception:  # noqa: BLE001 - not comparable (another kind of frame): detached anew
        return False


def make_runner(ctx: RunContext, pipeline: Definition, name: str) -> Runner:
    """The runner for pipeline node ``name``."""
    if name in pipeline.inputs:
        return InputRunner(ctx, pipeline.inputs[name])
    step = pipeline.steps[name]
    if getattr(step.regime, "database", None):
        return DatabaseRunner(ctx, step)
    return StepRunner(ctx, step)
