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

import tempfile
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from attrs import define, field

from falkirk.errors import FalkirkError
from falkirk.spark.errors import CorruptDataError, RecoveryError, StepError, StepFailure
from falkirk.spark.pipeline.plan.planner import Planner
from falkirk.spark.pipeline.plan.shape import fanout_notes
from falkirk.spark.pipeline.run.asks import RunThread
from falkirk.spark.pipeline.run.concurrent import Concurrent
from falkirk.spark.pipeline.run.context import RunContext
from falkirk.spark.pipeline.run.cpu import meter
from falkirk.spark.pipeline.run.failures import Injection, Injector, sweep_markers
from falkirk.spark.pipeline.run.frames import Frames
from falkirk.spark.pipeline.run.fusion import FusedRecords, fusions
from falkirk.spark.pipeline.run.journal import Journal, Startup
from falkirk.spark.pipeline.run.latency import Latency
from falkirk.spark.pipeline.run.probe import check_shared, is_local_master
from falkirk.spark.pipeline.run.progress import Progress
from falkirk.spark.pipeline.run.queues import Queues
from falkirk.spark.pipeline.run.recovery import Rollback
from falkirk.spark.pipeline.run.retention import collect, settle
from falkirk.spark.pipeline.run.runners import make_runner
from falkirk.spark.pipeline.run.session import (
    is_connect,
    local_session,
    session_pages_note,
    take_start_seconds,
)
from falkirk.spark.pipeline.run.start import record_changes, recover_root
from falkirk.spark.pipeline.run.state import RunState
from falkirk.spark.pipeline.run.steps import EndOfEpochFailures, PlannerRecords, Steps
from falkirk.spark.pipeline.run.watch import CodegenWatch, ExecutorWatch
from falkirk.spark.pipeline.store.rootfs import metadata_cache
from falkirk.spark.pipeline.store.storage import Storage

if TYPE_CHECKING:
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
    #: each output's response latency over the epochs this run committed
    #: (:mod:`~falkirk.spark.pipeline.run.latency`)
    latency: dict[str, Latency] = field(factory=dict)
    #: the injected failures that did not fire: their epoch not reached, or a ``task``/``job``/``executor``
    #: failure at an epoch whose output had no rows by its plan, or at an input epoch of no records, or (on a
    #: local master, not through Spark Connect) a ``task``/``job`` failure whose job ran with no task seeing a
    #: row (:mod:`~falkirk.spark.pipeline.run.failures`)
    unfired: list[Injection] = field(factory=list)


class Executor:
    """Runs ``pipeline`` (see the module docstring); one instance = one driver process's memory.

    Its parts: the run's read-only :attr:`context` (what runners see), its
    mutable :attr:`state` (:class:`~falkirk.spark.pipeline.run.state.RunState`:
    progress, runners, queues, planner, journal) and the :attr:`rollback`
    built from both.
    """

    def __init__(
        self,
        pipeline: Definition,
        *,
        fail: Iterable[Injection | str] | str | Injection = (),
        progress: Callable[[str], None] | None = None,
        bar: bool = False,
    ) -> None:
        self.pipeline = pipeline
        self.spark = pipeline.spark if pipeline.spark is not None else local_session()
        pipeline.spark = self.spark
        session_seconds = take_start_seconds(self.spark)
        t0 = time.perf_counter()
        self.injector = Injector(fail)  # type: ignore[arg-type]
        local = is_local_master(self.spark)
        self.injector.validate(pipeline.order, local=local)
        # the executors' tasks write the driver's temporary directory: injected failures leave their marks there,
        # and what killed drivers left there is swept first
        if local and not is_connect(self.spark):
            self.injector.here = tempfile.gettempdir()
            if any(i.where in ("task", "job") for i in self.injector.pending):
                sweep_markers(self.injector.here)
        # refuse a store where manifests cannot be write-once, before any write
        pipeline.location.check_write_once()
        check_shared(self.spark, pipeline.location)  # before anything is written under the root
        probe = time.perf_counter() - t0
        #: accepted changes of the pipeline since the root was written (recorded once the restart recovered)
        self.evolution = pipeline.check_root(write=False)
        self.storage = Storage(pipeline.location, fsync=pipeline.fsync, checksums=pipeline.checksums)
        journal = Journal(pipeline.location if pipeline.durable else None)
        # CPU of the process tree per step execution, where that is the whole job
        self.cpu = meter(self.spark)
        self.progress = Progress(progress, bar=bar)
        #: step executions at a time, and how far ahead of its consumers a node may run (pipeline.concurrency)
        self.workers, self.window = pipeline.concurrency, pipeline.window
        self.say = self.progress.line
        self.frames = Frames()
        durable = pipeline.durable
        planner = Planner(
            pipeline.dataflow(),
            outputs=pipeline.external_outputs,
            path=metadata_cache(pipeline.location) if pipeline.monitor and durable else None,
            monitor=pipeline.monitor and durable,
            root=pipeline.location.uri,
        )
        records = PlannerRecords(planner)
        self.context = RunContext(
            spark=self.spark,
            storage=self.storage,
            durable=durable,
            fsync=pipeline.fsync,
            retain=pipeline.retain,
            frames=self.frames,
            injector=self.injector,
            record=records.record if durable else _ignore,
            prune=planner.prune,
            note=journal.note,
        )
        runners = {n: make_runner(self.context, pipeline, n) for n in pipeline.order}
        # unlogged steps their consumer's job computes (a stateful one's output: a sequential run's, whose states
        # are made at the end of their epoch)
        for n in fusions(pipeline, logged=True, stateful=self.workers == 1):
            runners[n].fusable = True
            runners[n].fuse = not pipeline.steps[n].regime.logs
        if self.workers == 1:  # a new state (and its checkpoint) waits for its epoch's outputs
            for r in runners.values():
                r.defer_checkpoints = True
        self.fused = FusedRecords(self.frames)
        self.state = state = RunState(
            pipeline, runners, Queues(pipeline.edges, self.frames), planner, journal
        )
        # what earlier drivers completed (Lazy steps: after their checkpoint)
        recorded = journal.load(pipeline.order)
        state.done = {n: -1 for n in pipeline.order}
        # listed once (an output's manifests are kept for ever: a listing grows with the history)
        available = {n: r.available() for n, r in runners.items()}
        # highest ever completed (a runner's progress() is the highest of its available())
        state.high = {n: max(max(available[n], default=-1), recorded[n]) for n in runners}
        # cut ahead is not read: an input has read what its records and consumers say
        for n in pipeline.inputs:
            state.high[n] = self._inputs_read(n, recorded[n], available)
            available[n] = [e for e in available[n] if e <= state.high[n]]
        planner.know(available)
        # output epochs no recovery that can be carried out would choose: not rebuilt into meta.sqlite
        logged = {n: self.storage.epochs(n, "log") for n, s in pipeline.steps.items() if s.regime.logs}
        settle(pipeline, planner, runners, available, logged)
        self.rollback = Rollback(self.context, state, self.progress, self.cpu)
        self.lost = ExecutorWatch(self.spark, self._note)
        self.codegen = CodegenWatch(self.spark, self._note)
        #: unique per executor: its Spark job groups (tags) never collide with another pipeline's in one
        #: session
        self.run_id = uuid.uuid4().hex[:12]
        #: (step, epoch) retried in place (:meth:`_in_place`)
        self.retried: set[tuple[str, int]] = set()
        #: what this driver spent before its first plan (a restart's first phases)
        self.startup = Startup(t0, session_seconds, probe)
        #: questions other threads ask during the run (``Pipeline.plan_failure``), answered on this one
        self.asks = RunThread()
        self.steps = Steps(
            pipeline,
            self.spark,
            state,
            frames=self.frames,
            fused=self.fused,
            injector=self.injector,
            progress=self.progress,
            cpu=self.cpu,
            records=records,
            run_id=self.run_id,
        )

    def _note(self, text: str) -> None:
        self.state.journal.note(text)
        self.say(f"  {text}")

    def _inputs_read(self, name: str, recorded: int, available: Mapping[str, list[int]]) -> int:
        """The last epoch input ``name`` is known to have read: its execution records, its consumers' durable
        progress and its log's acknowledgement, within the epochs cut (a producer may cut epochs ahead);
        ``available``: every node's persisted frontiers, as listed at the start."""
        cut = max(available[name], default=-1)
        consumers = [max(available[c], default=-1) for c in self.pipeline.consumers(name)]
        return min(cut, max([recorded, self.pipeline.inputs[name].log.acknowledged(), *consumers]))

    # -- the run loop ---------------------------------------------------------------------------
    def run(self, epochs: int) -> RunResult:
        """Recover persisted state, then run until every node completed epochs ``0..epochs-1``."""
        recover_root(self.rollback, self.evolution, self.startup)
        # a crashed driver's unpublished data: once, after the start's recovery worked
        if self.pipeline.durable:
            self.storage.sweep_orphans()
        record_changes(self.rollback, self.evolution, self.storage, self.say)
        self.evolution = type(self.evolution)((), {})
        for note in [*fanout_notes(self.pipeline), *filter(None, [session_pages_note(self.spark)])]:
            self.state.journal.note(note)
            self.say(f"note: {note}")
        # the monitor's writes of an epoch (recorded frontiers, garbage collection's discards) are one SQLite
        # transaction, committed at its end (_end_of_epoch), not one each: meta.sqlite is rebuilt from the
        # manifests at every start, so what a crash loses of an epoch's batch costs nothing (Planner.batch)
        todo = sum(max(0, epochs - 1 - d) for d in self.state.done.values())
        try:
            with self.progress.running(todo), self.state.planner.batch():
                return self._loop(epochs)
        except BaseException:
            self.injector.settle()  # the markers this machine holds (a run that ends settles in _loop)
            raise

    def _loop(self, epochs: int) -> RunResult:
        state = self.state
        if self.workers > 1:
            Concurrent(self, self.workers, self.window).run(epochs)
        else:
            self._sequential(epochs)
        self.injector.settle()  # a task or job injection no task ran is unfired, not fired
        latency = {
            n: Latency(n, dict(sorted(state.latency.get(n, {}).items())))
            for n in self.pipeline.external_outputs
        }
        return RunResult(
            state.journal,
            dict(state.done),
            self.storage.size(),
            state.planner.rebuilds,
            list(self.injector.fired),
            latency,
            list(self.injector.pending),
        )

    def _sequential(self, epochs: int) -> None:
        """The next task is the lowest epoch some node has not completed, at the first such node."""
        state = self.state
        attempts: dict[tuple[str, int], int] = {}
        finished = self.steps.ended = state.lowest()
        while True:
            self.asks.serve()
            lo = state.lowest() + 1
            failed_between = False
            while finished < lo - 1:
                finished += 1
                try:
                    self.end_of_epoch(finished)
                except EndOfEpochFailures as exc:  # states left to the epoch's end not made (or not written)
                    self.handle(exc.failures, exc.failures[0][0], exc.failures[0][1], attempts)
                    finished -= 1  # its end (garbage collection, its ``after`` injections) comes again
                    failed_between = True
                    break
                due = self.injector.after(finished)
                if due:  # every step has completed ``finished``: these fail between epochs
                    self.recover_after(due, finished)
                    failed_between = True
                    break
            if failed_between:
                continue
            if lo >= epochs:
                break
            step = next(n for n in state.order if state.done[n] < lo)
            failure: StepFailure | CorruptDataError | None = None
            try:
                self.steps.execute(step, lo)
            except (StepFailure, CorruptDataError) as exc:
                failure = exc
            self.handle([(step, lo, failure)] if failure is not None else [], step, lo, attempts)

    def recover_after(self, due: list[Injection], epoch: int) -> None:
        """Injected failures between epochs (``STEP@E:after``): recover the steps they name."""
        names = sorted({i.step for i in due}, key=self.state.order.index)
        self.rollback.recover(
            set(names), f"step(s) {', '.join(names)} failed after epoch {epoch}: injected failure (after)"
        )

    def handle(
        self,
        failures: list[tuple[str, int, StepFailure | CorruptDataError]],
        last: str,
        epoch: int,
        attempts: dict[tuple[str, int], int],
        *,
        look: bool = True,
    ) -> None:
        """After executions (``last`` at ``epoch`` the latest): recover from ``failures`` — each ``(step,
        epoch, error)`` — and (``look``) from executors lost since the last look, or stop when a step keeps
        failing."""
        state = self.state
        failed, first, key, others = self._grouped(failures)
        key = key or (last, epoch)
        lost, why = self.lost.lost_state(state.runners, key[0], key[1]) if look else ([], "")
        if lost:
            failed |= set(lost)
            if first is None:
                first = StepFailure(lost[0], key[1], why, lost=True)
        if first is None:
            return
        if not self.pipeline.durable:
            raise RecoveryError(
                f"{first}; the pipeline runs with durable=False and cannot recover"
            ) from first
        # every failure recovered from together counts as an attempt of its own (steps whose states failed at
        # the same epoch's end, a concurrent run's executions that failed apart); the recovery's cause names
        # each of them, the first one first
        for k, failure in [(key, first), *others]:
            attempts[k] = attempts.get(k, 0) + 1
            # a retry in place is not one of the recoveries counted (it restored nothing)
            spent = attempts[k] - (k in self.retried)
            if getattr(failure, "deterministic", False) and spent > MAX_DETERMINISTIC:
                raise StepError(failure, attempts[k]) from failure  # type: ignore[arg-type]
            if spent > MAX_ATTEMPTS:
                raise RecoveryError(
                    f"step {k[0]} failed {attempts[k]} times at epoch {k[1]}; giving up: {failure}"
                ) from failure
        cause = str(first) if not lost or why in str(first) else f"{first} ({why})"
        cause = "; together with: ".join([cause, *(str(f) for _, f in others)])
        together = [(key, first), *others]
        if (
            not lost
            # an executor lost with a step's state (a concurrent run's look, merged into that step's failure)
            and not any(getattr(f, "lost", False) for _, _, f in failures)
            and failed == {k[0] for k, _ in together}
            and all(self._in_place(k, failure, attempts[k]) for k, failure in together)
        ):
            for k, failure in together:  # each its own (a concurrent run's executions in flight fail apart)
                self.retried.add(k)
                self.rollback.recover(set(), str(failure), in_place=k)
            return
        # a stored item unreadable on a second attempt (not one transient error): lost, its step recomputes it
        again = first.unreadable if isinstance(first, StepFailure) and attempts[key] > 1 else None
        self.rollback.recover(failed, cause, lost=first if isinstance(first, CorruptDataError) else again)

    def _grouped(
        self, failures: list[tuple[str, int, StepFailure | CorruptDataError]]
    ) -> tuple[
        set[str],
        StepFailure | CorruptDataError | None,
        tuple[str, int] | None,
        list[tuple[tuple[str, int], StepFailure | CorruptDataError]],
    ]:
        """:meth:`handle`'s view of ``failures``: the steps that failed (with a fused input whose own
        computation failed inside its consumer's job), the first failure and its (step, epoch), and the others
        at another (step, epoch)."""
        failed: set[str] = set()
        first: StepFailure | CorruptDataError | None = None
        key: tuple[str, int] | None = None
        others: list[tuple[tuple[str, int], StepFailure | CorruptDataError]] = []
        for step, e, failure in failures:
            failed.add(step)
            if (
                isinstance(failure, StepFailure)
                and failure.step != step
                and failure.step in self.state.runners
            ):
                failed.add(failure.step)  # a fused input's own computation failed inside this step's job
                step = failure.step
            if first is None:
                first, key = failure, (step, e)
            elif (step, e) != key:
                others.append(((step, e), failure))
        return failed, first, key, others

    def recovers_apart(
        self,
        failures: list[tuple[str, int, StepFailure | CorruptDataError]],
        attempts: Mapping[tuple[str, int], int],
        busy: Collection[str],
    ) -> bool:
        """Whether :meth:`handle` may recover from ``failures`` while ``busy`` steps are executing: its plan
        (solved now on a copy, as :meth:`Rollback.touched
        <falkirk.spark.pipeline.run.recovery.Rollback.touched>` says) rolls none of them back and resets
        none of their input edges — no step it touches is busy or feeds a busy one. Only plain step failures
        (no executor lost, no damaged item, no attempt limit reached: those wait for the executions in flight,
        as before). Changes nothing."""
        if not failures or not busy or not self.pipeline.durable:
            return False
        failed, first, key, others = self._grouped(failures)
        if len({(s, e) for s, e, _ in failures}) != len(failures):
            return False
        for k, f in [(key, first), *others]:
            if not isinstance(f, StepFailure) or f.lost or f.unreadable is not None or k is None:
                return False
            spent = attempts.get(k, 0) + 1 - (k in self.retried)
            if spent > MAX_ATTEMPTS or (f.deterministic and spent > MAX_DETERMINISTIC):
                return False  # handle gives up: the run ends once the others did
        try:
            touched = self.rollback.touched(failed)
        except FalkirkError:
            return False  # the dry run failed (a storage error, a refused plan): the recovery waits, then decides
        if touched is None:
            return False
        fed = {c for n in touched for c in self.pipeline.consumers(n)}
        return not (touched | fed) & set(busy)

    def retries_in_place(
        self,
        failures: list[tuple[str, int, StepFailure | CorruptDataError]],
        attempts: Mapping[tuple[str, int], int],
    ) -> bool:
        """Whether :meth:`handle` would retry every one of ``failures`` in place (no executor lost, no fused
        input's computation to blame, each its step's first failure at that epoch, :meth:`_in_place`).
        Nothing rolls back then, so a concurrent run recovers at once, its other executions going on
        (:mod:`~falkirk.spark.pipeline.run.concurrent`). Changes nothing."""
        keys = [(step, e) for step, e, _ in failures]
        return (
            bool(failures)
            and self.pipeline.durable
            and len(set(keys)) == len(keys)  # a key twice: handle counts two attempts, and rolls back
            and all(
                not (isinstance(f, StepFailure) and (f.step != step or f.lost))
                and self._in_place((step, e), f, attempts.get((step, e), 0) + 1)
                for step, e, f in failures
            )
        )

    def _in_place(self, key: tuple[str, int], failure: StepFailure | CorruptDataError, attempt: int) -> bool:
        """Whether step ``key[0]``'s first ``failure`` at epoch ``key[1]`` is retried in place: the epoch run
        again at once, nothing rolled back.

        Its Spark job failed (a transient cause, not an injected loss of the
        step, not a damaged item) and it lost nothing: no executor went, its
        state in memory is the one it started the epoch from and the
        execution published nothing (:meth:`Runner.intact
        <falkirk.spark.pipeline.run.runners.Runner.intact>`), and what it
        took off its queues is queued again (:meth:`Steps.abandon
        <falkirk.spark.pipeline.run.steps.Steps.abandon>`). So the step has not
        failed in SPEC §3's sense: it keeps ``⊤``, the epoch's input counts as
        queued, and the plan for "nothing failed" rolls nothing back
        (``Pipeline(retry_in_place=False)``: a rollback as for any failure).
        A second failure at the same epoch is recovered from by the plan.
        """
        return (
            self.pipeline.retry_in_place
            and attempt == 1
            and isinstance(failure, StepFailure)
            and failure.step == key[0]
            and not failure.injected
            and not failure.deterministic
            and failure.unreadable is None
            and self.state.runners[key[0]].intact(key[1])
        )

    def end_of_epoch(self, epoch: int, *, busy: Collection[str] = ()) -> None:
        """Every node completed ``epoch``: garbage collection (of the nodes not ``busy`` executing on another
        thread; and of what this driver wrote and never published only when none is), the planner's commit,
        the epoch's line."""
        journal = self.state.journal
        self.steps.write_checkpoints(epoch)  # before garbage collection: they are the steps' new frontiers
        if self.pipeline.gc and self.pipeline.durable:
            collect(self.state, self.storage, sweep=not busy, busy=busy)
        # every output committed it
        self.state.cut_at = {k: t for k, t in self.state.cut_at.items() if k[1] > epoch}
        self.state.planner.commit()  # the epoch's monitor writes: one transaction
        self.codegen.end_of_epoch()
        at = journal.at(epoch)
        runs = [x for x in at if not x.redo]
        if runs:
            total = sum(x.seconds for x in runs)
            # a fused step whose consumer failed has no count in its first record: its redo's counts
            rows = {x.step: x.rows for x in at if x.rows >= 0}
            parts = " · ".join(f"{x.step} {rows.get(x.step, '?')}" for x in runs)
            self.say(f"epoch {epoch:>3}  {parts}  ({total:.1f} s)")
        # a long run's memory stays flat: what is kept of its history (docs/spark.md, "Long runs")
        keep = journal.trim(epoch)
        if keep is not None:
            for n, series in self.state.latency.items():
                self.state.latency[n] = {e: t for e, t in series.items() if e >= keep}

    def close(self) -> None:
        """Release the database connections, the monitor and cached DataFrames."""
        for r in self.state.runners.values():
            r.drop_made()  # an execution the run did not wait for (interrupted)
            r.lose()
        self.state.queues.clear()
        self.fused.clear()
        self.frames.flush(final=True)
        self.state.planner.close()


def _ignore(step: str, epoch: int) -> None:
    """``record`` of a run with falkirk off (``durable=False``): nothing is planned."""
