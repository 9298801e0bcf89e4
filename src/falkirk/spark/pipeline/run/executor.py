"""The executor: runs a pipeline epoch by epoch and hands failures to recovery.

Each pipeline node is a falkirk processor with a runner
(:mod:`~falkirk.spark.pipeline.run.runners`, seeing the run through a
:class:`~falkirk.spark.pipeline.run.context.RunContext`). Outputs travel on
per-edge queues owned by the receivers (:mod:`~falkirk.spark.pipeline.run.queues`).

* **Run.** The next task is the lowest epoch some node has not completed,
  at the first such node in definition (topological) order.
* **Failure.** A step that raises (including a failed Spark job), an
  injected failure, unusable data, or an executor lost with in-memory
  state: :class:`~falkirk.spark.pipeline.run.recovery.Rollback` plans,
  validates and applies the rollback, then the run continues and
  re-executes what is missing.
* **Start.** A new executor (a restarted driver) starts with the plan for
  "everything failed", computed from the manifests alone. What it executes
  again is known from the execution records under the root
  (:class:`~falkirk.spark.pipeline.run.journal.Journal`); an input counts as
  having read the epochs its records, its consumers' progress and its log's
  acknowledgement say — not every epoch a producer cut ahead.
* **Garbage collection.** After each epoch, everything below the
  low-watermarks (with retention) is deleted (:mod:`~falkirk.spark.pipeline.run.retention`);
  data directories no manifest names are swept once at start-up (a crashed
  driver's) and, without reading manifests, at each collection (this
  driver's failed steps').
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from attrs import define, field

from falkirk.spark.errors import (
    CorruptDataError,
    PipelineError,
    RecordError,
    RecoveryError,
    StepError,
    StepFailure,
)
from falkirk.spark.pipeline.declare.regimes import Output
from falkirk.spark.pipeline.plan.planner import Planner
from falkirk.spark.pipeline.plan.shape import fanout_notes
from falkirk.spark.pipeline.run.causes import is_deterministic, root_cause, unreadable_input
from falkirk.spark.pipeline.run.context import RunContext
from falkirk.spark.pipeline.run.cpu import meter
from falkirk.spark.pipeline.run.failures import Injection, Injector
from falkirk.spark.pipeline.run.frames import Frames
from falkirk.spark.pipeline.run.journal import Journal, Startup
from falkirk.spark.pipeline.run.probe import check_shared, is_local_master
from falkirk.spark.pipeline.run.progress import Progress
from falkirk.spark.pipeline.run.queues import Queues
from falkirk.spark.pipeline.run.recovery import Rollback
from falkirk.spark.pipeline.run.retention import collect
from falkirk.spark.pipeline.run.runners import Runner, make_runner
from falkirk.spark.pipeline.run.session import (
    CODEGEN_CACHE,
    RECOMPILING_EPOCHS,
    all_failed_tasks,
    codegen_compilations,
    executors,
    failed_tasks,
    job_group,
    local_session,
    missing_blocks,
    recompiling,
    take_start_seconds,
)
from falkirk.spark.pipeline.store.rootfs import metadata_cache
from falkirk.spark.pipeline.store.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = ["Executor", "RunResult", "MAX_ATTEMPTS", "MAX_DETERMINISTIC"]

#: Recoveries per step and epoch before giving up: transient failures (lost executors, fetch failures,
#: killed tasks, injections) and deterministic ones (an error in the step's own code or query: one
#: recovery, in case rolled-back state was the cause, then :class:`~falkirk.spark.errors.StepError`).
MAX_ATTEMPTS = 3
MAX_DETERMINISTIC = 1


@define
class RunResult:
    """What :meth:`Pipeline.run` returns: the journal, final progress and storage size."""

    journal: Journal
    done: dict[str, int]
    root_bytes: int
    planner_rebuilds: int
    fired: list[Injection] = field(factory=list)


class Executor:
    """Runs ``pipeline`` (see the module docstring); one instance = one driver process's memory."""

    def __init__(
        self, pipeline: Definition, *, fail: Iterable[Injection | str] | str | Injection = (),
        progress: Callable[[str], None] | None = None, bar: bool = False,
    ) -> None:
        self.pipeline = pipeline
        self.spark = pipeline.spark if pipeline.spark is not None else local_session()
        pipeline.spark = self.spark
        session_seconds = take_start_seconds(self.spark)
        t0 = time.perf_counter()
        self.injector = Injector(fail)  # type: ignore[arg-type]
        self.injector.validate(pipeline.order, local=is_local_master(self.spark))
        pipeline.location.check_write_once()  # refuse a store where manifests cannot be write-once, before any write
        if check_shared(self.spark, pipeline.location):  # before anything is written under the root
            self.probed = f"storage probe: the driver and the executors share {pipeline.location.uri}"
        else:
            self.probed = ""
        probe = time.perf_counter() - t0
        #: accepted changes of the pipeline since the root was written (recorded once the restart recovered)
        self.evolution = pipeline.check_root(write=False)
        self.storage = Storage(pipeline.location, fsync=pipeline.fsync, checksums=pipeline.checksums)
        self.journal = Journal(pipeline.location if pipeline.durable else None)
        self.cpu = meter(self.spark)  # CPU of the process tree per step execution, where that is the whole job
        #: the application's failed task attempts when the last execution ended (None: read no baseline yet)
        self._failed_seen: int | None = None
        #: generated classes the driver's JVM had compiled at the end of the latest epochs (None once noted or
        #: unknown); as many as :func:`recompiling` looks at
        self._compiled: deque[int] | None = deque(maxlen=RECOMPILING_EPOCHS + 2)
        self.progress = Progress(progress, bar=bar)
        self.say = self.progress.line
        self.order = list(pipeline.order)
        self.frames = Frames()
        self.queues = Queues(pipeline.edges, self.frames)
        self.planner = Planner(
            pipeline.dataflow(), outputs=pipeline.external_outputs,
            path=metadata_cache(pipeline.location) if pipeline.monitor and pipeline.durable else None,
            monitor=pipeline.monitor and pipeline.durable, root=pipeline.location.uri,
        )
        durable = pipeline.durable
        self.context = RunContext(
            spark=self.spark, storage=self.storage, durable=durable, fsync=pipeline.fsync, retain=pipeline.retain,
            frames=self.frames,
            injector=self.injector, record=self.planner.record if durable else _ignore,
            prune=self.planner.prune, note=self.journal.note,
        )
        self.runners: dict[str, Runner] = {n: make_runner(self.context, pipeline, n) for n in self.order}
        #: unlogged steps their consumer's job computes (:func:`fusions`)
        for n in fusions(pipeline, logged=True):
            self.runners[n].fusable = True  # type: ignore[attr-defined]
            self.runners[n].fuse = not pipeline.steps[n].regime.logs  # type: ignore[attr-defined]
        #: the journal records of fused executions, by step: (epoch, finish, inputs), finished by a consumer's
        #: execution (``finish(count)``: the rows observed by the consumer's job; ``count``: else counted by a job);
        #: the step's input frames are held in memory until then (that job reads them)
        self._deferred: dict[str, list[tuple[int, Callable[[bool, bool], None], list[DataFrame]]]] = {}
        self.done = {n: -1 for n in self.order}
        recorded = self.journal.load(self.order)  # what earlier drivers completed (Lazy steps: after their checkpoint)
        self.high = {n: max(r.progress(), recorded[n]) for n, r in self.runners.items()}  # highest ever completed
        available = {n: r.available() for n, r in self.runners.items()}
        for n in pipeline.inputs:  # cut ahead is not read: an input has read what its records and consumers say
            self.high[n] = self._inputs_read(n, recorded[n])
            available[n] = [e for e in available[n] if e <= self.high[n]]
        self.planner.know(available)
        self.rollback = Rollback(pipeline, self.runners, self.queues, self.planner, self.storage, self.journal,
                                 self.progress, self.done, self.high, self.cpu)
        self.executors = executors(self.spark)
        #: unique per executor: its Spark job groups (tags) never collide with another pipeline's in one session
        self.run_id = uuid.uuid4().hex[:12]
        #: what this driver spent before its first plan (a restart's first phases)
        self.startup = Startup(t0, session_seconds, probe)
        #: the step execution under way or last started (``"cc@7"``), for a report of an interrupt
        self.running: str | None = None
        #: its Spark job group (a tag through Spark Connect)
        self.group: str | None = None

    def _inputs_read(self, name: str, recorded: int) -> int:
        """The last epoch input ``name`` is known to have read: its execution records, its consumers' durable
        progress and its log's acknowledgement, within the epochs cut (a producer may cut epochs ahead)."""
        cut = self.runners[name].progress()
        consumers = [self.runners[c].progress() for c in self.pipeline.consumers(name)]
        return min(cut, max([recorded, self.pipeline.inputs[name].log.acknowledged(), *consumers]))

    # -- the run loop ---------------------------------------------------------------------------
    def run(self, epochs: int) -> RunResult:
        """Recover persisted state, then run until every node completed epochs ``0..epochs-1``."""
        limits = {n: int(e) for n, e in self.evolution.code.items() if e != "keep"}
        try:
            self.rollback.recover(set(self.order), "driver (re)start: every step resumes from what the root holds",
                                  restart=True, limits=limits, startup=self.startup)
        except RecoveryError as exc:
            needs = [f"its new step(s) {', '.join(self.evolution.new_steps)} start at ∅"] if self.evolution.new_steps else []
            needs += [f"code_changes={{{n!r}: {e}}} redoes {n} and everything downstream from epoch {e + 1}"
                      for n, e in limits.items()]
            if not needs:
                raise
            if limits:
                earliest = self.rollback.earliest_limits(set(self.order), limits)
                needs += [f"the earliest epoch code_changes can name for {n} here is {e} "
                          f"(code_changes={{{n!r}: {e}}}: the old code's epochs up to {e} stand)"
                          for n, e in earliest.items()]
                needs += [f"no epoch code_changes can name for {n} has its data here: code_changes={{{n!r}: 'keep'}} "
                          "keeps what the old code computed" for n in limits if n not in earliest]
            raise RecoveryError(
                f"{exc}; that is data the changed pipeline needs ({'; '.join(needs)}): the root still holds the "
                "previous pipeline, which resumes as it was (or start the changed one on a new root)") from exc
        if self.pipeline.durable:  # a crashed driver's unpublished data: once, after the start's recovery worked
            self.storage.sweep_orphans()
        if self.evolution or self.evolution.record:
            self.pipeline.write_root()
            for change in self.evolution.accepted:
                self.journal.note(f"pipeline changed: {change}")
                self.say(f"pipeline changed: {change}")
            for name in self.evolution.removed_outputs:
                if self.pipeline.removed_outputs.get(name) == "delete":
                    for where in (f"manifests/{name}", f"output/{name}", f"journal/{name}"):
                        self.storage.fs.delete(where, recursive=True)
                    self.journal.note(f"removed output {name!r}: its files were deleted (removed_outputs)")
            self.evolution = type(self.evolution)((), {})
        for note in fanout_notes(self.pipeline):
            self.journal.note(note)
            self.say(f"note: {note}")
        # the monitor's writes of an epoch (recorded frontiers, garbage collection's discards) are one SQLite
        # transaction, committed at its end (_end_of_epoch), not one each: meta.sqlite is rebuilt from the manifests
        # at every start, so what a crash loses of an epoch's batch costs nothing (Planner.batch)
        with self.progress.running(sum(max(0, epochs - 1 - d) for d in self.done.values())), self.planner.batch():
            return self._loop(epochs)

    def _loop(self, epochs: int) -> RunResult:
        attempts: dict[tuple[str, int], int] = {}
        finished = min(self.done.values())
        while True:
            lo = min(self.done.values()) + 1
            failed_between = False
            while finished < lo - 1:
                finished += 1
                self._end_of_epoch(finished)
                due = self.injector.after(finished)
                if due:  # every step has completed ``finished``: these fail between epochs
                    names = sorted({i.step for i in due}, key=self.order.index)
                    self.rollback.recover(set(names), f"step(s) {', '.join(names)} failed after epoch {finished}: "
                                          "injected failure (after)")
                    failed_between = True
                    break
            if failed_between:
                continue
            if lo >= epochs:
                break
            step = next(n for n in self.order if self.done[n] < lo)
            failure: StepFailure | CorruptDataError | None = None
            try:
                self._execute(step, lo)
            except (StepFailure, CorruptDataError) as exc:
                failure = exc
            failed = {step} if failure is not None else set()
            if isinstance(failure, StepFailure) and failure.step != step and failure.step in self.runners:
                failed.add(failure.step)  # a fused input's own computation failed inside this step's job
                step = failure.step
            lost, why = self._lost_state(step, lo)
            if lost:
                failed |= set(lost)
                if failure is None:
                    failure = StepFailure(lost[0], lo, why)
            if failure is None:
                continue
            if not self.pipeline.durable:
                raise RecoveryError(f"{failure}; the pipeline runs with durable=False and cannot recover") from failure
            key = (step, lo)
            attempts[key] = attempts.get(key, 0) + 1
            if getattr(failure, "deterministic", False) and attempts[key] > MAX_DETERMINISTIC:
                raise StepError(failure, attempts[key]) from failure  # type: ignore[arg-type]
            if attempts[key] > MAX_ATTEMPTS:
                raise RecoveryError(f"step {step} failed {attempts[key]} times at epoch {lo}; giving up: {failure}") from failure
            cause = str(failure) if not lost or why in str(failure) else f"{failure} ({why})"
            self.rollback.recover(failed, cause, lost=failure if isinstance(failure, CorruptDataError) else None)
        return RunResult(self.journal, dict(self.done), self.storage.size(), self.planner.rebuilds, list(self.injector.fired))

    def _lost_state(self, step: str, epoch: int) -> tuple[list[str], str]:
        """Steps whose in-memory state went with executors lost since the last look, and why (noted in the journal).

        Between checkpoints a Lazy or Eager DataFrame state lives in executor
        memory (a local checkpoint, its lineage cut). An executor killed, or
        lost with its worker, takes its blocks with it; Spark may even finish
        the running step (it reruns the lost tasks elsewhere), but a state
        missing a block cannot be read again. Each state is checked
        (:func:`~falkirk.spark.pipeline.run.session.missing_blocks`): one whose
        blocks all survive on the remaining executors — replicated,
        ``replicas=2`` by default on a cluster — is kept and its step does
        not roll back; one missing a block (or whose blocks cannot be
        checked, e.g. through Spark Connect) is treated as failed: falkirk
        rolls it back to its last checkpoint.
        """
        if self.executors is None:
            return [], ""
        now = executors(self.spark)
        if now is None:
            return [], ""
        gone, self.executors = self.executors - now, now
        if not gone:
            return [], ""
        lost: list[str] = []
        kept: list[str] = []
        for n in self.order:
            state = getattr(self.runners[n], "state", None)
            if state is None:
                continue
            missing = missing_blocks(state)
            (lost if missing is None or missing else kept).append(n)
        what = []
        if lost:
            what.append(f"the in-memory state of {', '.join(lost)} (kept on executors between checkpoints) went with "
                        "it and is rolled back to its last checkpoint")
        if kept:
            what.append(f"the in-memory state of {', '.join(kept)} survived (every block is on a remaining executor: "
                        "replicated) and is kept")
        note = (f"executor(s) {', '.join(sorted(gone))} lost during {step}@{epoch}; "
                + ("; ".join(what) if what else "no step kept state in executor memory"))
        self.journal.note(note)
        self.say(f"  {note}")
        return lost, note

    def _end_of_epoch(self, epoch: int) -> None:
        if self.pipeline.gc and self.pipeline.durable:
            collect(self.pipeline, self.planner, self.runners, self.storage, self.journal)
        self.planner.commit()  # the epoch's monitor writes: one transaction
        self._watch_codegen()
        runs = [x for x in self.journal.executions if x.epoch == epoch and not x.redo]
        if runs:
            total = sum(x.seconds for x in runs)
            # a fused step whose consumer failed has no count in its first record: its redo's counts
            rows = {x.step: x.rows for x in self.journal.executions if x.epoch == epoch and x.rows >= 0}
            parts = " · ".join(f"{x.step} {rows.get(x.step, '?')}" for x in runs)
            self.say(f"epoch {epoch:>3}  {parts}  ({total:.1f} s)")

    def _watch_codegen(self) -> None:
        """Note once when Spark compiles its generated code anew every epoch (a codegen cache too small for one
        epoch's classes: ``docs/spark.md``, "Spark settings")."""
        if self._compiled is None:
            return
        n = codegen_compilations(self.spark)
        if n is None:
            self._compiled = None
            return
        self._compiled.append(n)
        classes = recompiling(list(self._compiled), epochs=RECOMPILING_EPOCHS)
        if classes is None:
            return
        self._compiled = None
        (key, suggested), = CODEGEN_CACHE.items()
        size = self.spark.sparkContext.getConf().get(key, "100")
        note = (f"Spark compiled {classes} or more generated classes in each of the last epochs: its codegen cache "
                f"({key}={size}) is smaller than one epoch's classes, so every epoch compiles them again (and the "
                f"JVM's JIT after it); build the session with a larger {key} (e.g. {suggested}; it cannot be "
                "changed once the session runs): docs/spark.md, 'Spark settings'")
        self.journal.note(note)
        self.say(f"  {note}")

    def _execute(self, name: str, epoch: int) -> None:
        runner = self.runners[name]
        self.running = f"{name}@{epoch}"
        self.injector.at(name, epoch, "before")
        t0 = time.perf_counter()
        c0 = self.cpu.read() if self.cpu is not None else None  # (tree, of which the JIT compilers)
        self.progress.step_started(name, epoch, redo=epoch <= self.high[name])
        group = self.group = f"falkirk-{self.run_id}:{name}@{epoch}:{len(self.journal.executions)}"
        with job_group(self.spark, group):
            inputs = {link.src: self._take(link.name, epoch) for link in self.pipeline.edges if link.dst == name}
            try:
                out, rows = runner.execute(epoch, inputs)
            except (StepFailure, CorruptDataError, RecordError, PipelineError):  # bad input or definition: stop
                self._finish_fused(inputs, epoch, count=False, cache=False)
                raise
            except Exception as exc:
                cause = root_cause(exc)
                source = unreadable_input(cause, self.pipeline.location.uri, self.pipeline.inputs)
                culprit = None if source is not None else self._fused_culprit(inputs)
                self._finish_fused(inputs, epoch, count=False, cache=False)  # failed attempts' rows went uncounted
                if source is not None:  # the input's fault, not the step's: no recovery reads it back
                    raise CorruptDataError(source, "input", epoch, f"unreadable while {name} read it: {cause}") from exc
                raise StepFailure(culprit or name, epoch, f"{type(exc).__name__}: {cause}"
                                  + (f" (computed inside {name}'s job)" if culprit else ""),
                                  deterministic=is_deterministic(exc, cause)) from exc
            failed, self._failed_seen = self._failed_seen, all_failed_tasks(self.spark)  # and the next one's baseline
            quiet = failed is not None and failed == self._failed_seen  # no attempt failed since the last execution
            jobs, retried = failed_tasks(self.spark, group, quiet=quiet) or (0, 0)
            self._finish_fused(inputs, epoch, count=True, cache=not retried)
        if retried:
            self.journal.note(f"{name}@{epoch}: Spark retried {retried} failed task attempt(s) itself; falkirk not involved")
            self.say(f"  {name}@{epoch}: Spark retried {retried} failed task(s) on its own (no falkirk recovery needed)")
        self.done[name] = epoch
        self.queues.put(name, epoch, out, rows if rows >= 0 else None)
        if out is not None:
            self.frames.release(out)  # unpersisted once every consumer took it
        redo = epoch <= self.high[name]
        self.high[name] = max(self.high[name], epoch)
        seconds = time.perf_counter() - t0
        c1 = self.cpu.read() if self.cpu is not None else None
        rec = self.journal.open_recoveries()
        recovery = rec[-1].index if rec and redo else None
        cpu = None if c0 is None or c1 is None else max(0.0, c1[0] - c0[0])
        jit = None if c0 is None or c1 is None else min(cpu or 0.0, max(0.0, c1[1] - c0[1]))

        def finish(rows: int, fresh: bool | None = runner.fresh) -> None:
            self.journal.executed(name, epoch, rows=rows, seconds=seconds, redo=redo, jobs=jobs, recovery=recovery,
                                  cpu=cpu, fresh=fresh, jit=jit)
            self.progress.step_finished(name, epoch, rows=rows if rows >= 0 else None, seconds=seconds, redo=redo)
            if redo:
                self.say(f"  redo {name}@{epoch}: {rows if rows >= 0 else 'unknown'} rows ({seconds:.2f} s)")

        pending = getattr(runner, "pending_rows", None)
        if rows < 0 and pending is not None:  # fused: its consumer's job counts it (the journal waits for that)
            held = list(inputs.values())
            self.frames.hold(held)  # that job computes this step from them: kept in memory until it ran
            self._deferred.setdefault(name, []).append(
                (epoch, lambda count, cache: finish(_rows_or_unknown(pending, count, cache)), held))
        else:
            finish(rows)
        for r in rec:
            if all(self.done[n] >= d for n, d in r.done_at_failure.items()):
                r.finished = time.perf_counter()
                if r.cpu_started is not None and c1 is not None:
                    r.cpu_seconds = max(0.0, c1[0] - r.cpu_started)
                    if r.jit_started is not None:
                        r.jit_seconds = min(r.cpu_seconds, max(0.0, c1[1] - r.jit_started))
                self.say(f"recovery {r.index} complete: every step is back where it was ({r.seconds:.2f} s)")
        for r in self.journal.recoveries:
            if r.finished is not None and r.caught_up is None and all(d >= r.in_flight for d in self.done.values()):
                r.caught_up = time.perf_counter()
        self.frames.flush()

    def _finish_fused(self, inputs: dict[str, DataFrame], epoch: int, *, count: bool, cache: bool) -> None:
        """Journal the fused executions among ``inputs`` a consumer's job (of ``epoch``) computed: their rows are
        known now — the cache's count (``cache``: no task attempt of that job was retried, see
        :meth:`Frames.fused <falkirk.spark.pipeline.run.frames.Frames.fused>`), else with ``count`` a count job;
        records of other epochs, superseded by a recovery, take only what the cache counted."""
        for src in inputs:
            for e, finish, held in self._deferred.pop(src, []):
                finish(count and e == epoch, cache)
                self.frames.unhold(held)

    def _fused_culprit(self, inputs: dict[str, DataFrame]) -> str | None:
        """After a consumer's job failed: the fused input whose own computation fails (computed alone), if any —
        the failure is that step's, not the consumer's."""
        for src, df in inputs.items():
            if src not in self._deferred:
                continue
            try:
                df.write.format("noop").mode("overwrite").save()  # every column computed (a count would prune them)
            except Exception:  # noqa: BLE001 - any failure of the input alone is the input step's
                return src
        return None

    def _take(self, edge: str, epoch: int) -> DataFrame:
        item = self.queues.take(edge, epoch)
        if item.df is not None:
            return item.df
        return self.runners[item.src].replay(epoch)

    def close(self) -> None:
        """Release the database connections, the monitor and cached DataFrames."""
        for r in self.runners.values():
            r.lose()
        self.queues.clear()
        for entries in self._deferred.values():  # a run that ended before a fused step's consumer ran
            for _, _, held in entries:
                self.frames.unhold(held)
        self._deferred.clear()
        self.frames.flush()
        self.planner.close()


def fusions(pipeline: Definition, *, logged: bool = False) -> list[str]:
    """The steps computed by their consumer's job instead of a job of their own (``logged``: and the logged steps
    that would be, unlogged).

    Such a step is unlogged and stateless (``Ephemeral()``), not an output,
    and read by some step; its first consumer (in the pipeline's order) is
    not such a step. Its output is persisted with no job; the job of the
    first consumer to run computes it inside its own query and fills the
    cache, counting the rows on the way (:meth:`Frames.fused
    <falkirk.spark.pipeline.run.frames.Frames.fused>`); any other consumer
    reads the cache. A job of its own would only compute, cache and count
    it first. The frames the step read stay in memory until that job ran
    (:meth:`Frames.hold <falkirk.spark.pipeline.run.frames.Frames.hold>`),
    which reads them there rather than computing them again from their
    lineage. In a chain of such steps every other one keeps its job (from
    the last): a fused step's consumer that is fused too runs no job in
    which to compute it.

    >>> from falkirk.spark.pipeline.tools.flagship import build
    >>> fusions(build("memory://falkirk-doc/fusions"))
    ['parse_batch', 'parse_graph', 'answer']
    """
    def candidate(n: str) -> bool:
        step = pipeline.steps.get(n)
        return (step is not None and step.regime.stateless and not isinstance(step.regime, Output)
                and step.fn is not None and bool(pipeline.consumers(n)))

    def first(n: str) -> str:
        return min(pipeline.consumers(n), key=pipeline.order.index)

    fused: set[str] = set()
    for n in reversed(list(pipeline.order)):  # consumers first
        if candidate(n) and not pipeline.steps[n].regime.logs and first(n) not in fused:
            fused.add(n)
    would = {n for n in pipeline.steps if logged and candidate(n) and pipeline.steps[n].regime.logs
             and first(n) not in fused}
    return [n for n in pipeline.order if n in fused or n in would]


def _rows_or_unknown(rows: Callable[[bool, bool], int | None], count: bool, cache: bool) -> int:
    """``rows(count, cache)``, or ``-1`` (unknown) where it is not known or counting fails (e.g. the consumer failed
    on the same rows)."""
    try:
        n = rows(count, cache)
    except Exception:  # noqa: BLE001 - a row count for the journal: the failure itself is handled elsewhere
        return -1
    return -1 if n is None else n


def _ignore(step: str, epoch: int) -> None:
    """``record`` of a run with falkirk off (``durable=False``): nothing is planned."""
