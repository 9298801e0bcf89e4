"""One step execution: begun on the run's thread, worked on any thread, completed (or abandoned) on the run's.

:class:`Steps` is how the executor's loops — one after another
(:mod:`~falkirk.spark.pipeline.run.executor`) or concurrently
(:mod:`~falkirk.spark.pipeline.run.concurrent`) — run a node's epoch:

1. :meth:`Steps.start` (the run's thread): the injector's ``before`` point,
   the inputs taken off the queues and held in memory for the task;
2. :meth:`Steps.work` (any thread): the runner's ``execute`` in the task's
   Spark job group — the step's jobs, its writes and manifests; a failure
   comes out as :class:`~falkirk.spark.errors.StepFailure` (or the error
   that stops the run);
3. :meth:`Steps.complete` (the run's thread): the node's progress, its output
   queued for its consumers, the journal; or :meth:`Steps.abandon`;
4. in a sequential run, :meth:`Steps.write_checkpoints` (the run's thread, at
   the end of the epoch, after the epoch's outputs committed): the new
   states the executions left there made (and checkpointed at checkpoint
   epochs), their cost added to their executions' journal records (a redo
   in a recovery, of an epoch whose end has passed, makes its state when it
   completes); those that fail are recovered from together
   (:class:`EndOfEpochFailures`).

What a runner tells the planner from a pool thread waits in
:class:`PlannerRecords` until its task completes: the planner's SQLite
database belongs to the run's thread.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import CorruptDataError, PipelineError, RecordError, StepFailure, StorageError
from falkirk.spark.pipeline.run.causes import (
    is_deterministic,
    missing_input_file,
    root_cause,
    unreadable_input,
    unreadable_item,
)
from falkirk.spark.pipeline.run.latency import upstream_inputs
from falkirk.spark.pipeline.run.session import all_failed_tasks, failed_tasks, job_group
from falkirk.spark.pipeline.run.state import Task

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.plan.planner import Planner
    from falkirk.spark.pipeline.run.cpu import TreeMeter
    from falkirk.spark.pipeline.run.failures import Injector
    from falkirk.spark.pipeline.run.frames import Frames
    from falkirk.spark.pipeline.run.fusion import FusedRecords
    from falkirk.spark.pipeline.run.progress import Progress
    from falkirk.spark.pipeline.run.state import RunState

__all__ = ["Steps", "PlannerRecords", "EndOfEpochFailures"]


class PlannerRecords:
    """``RunContext.record`` for a run: straight to the planner on the run's thread; from another thread, kept
    per thread until :meth:`drain` (on the run's thread, when the task that thread ran completes or fails: a
    record is a durable fact — a manifest was published — so a failed task's records reach the planner before
    its recovery is planned)."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.home = threading.get_ident()
        self.queued: dict[int, deque[tuple[str, int]]] = {}
        self._lock = threading.Lock()

    def record(self, step: str, epoch: int) -> None:
        """``step`` durably has a new available frontier at ``epoch``."""
        here = threading.get_ident()
        if here == self.home:
            self.planner.record(step, epoch)
            return
        with self._lock:
            self.queued.setdefault(here, deque()).append((step, epoch))

    def drain(self, thread: int | None) -> None:
        """Hand what ``thread`` recorded to the planner, in the order it was recorded."""
        if thread is None:
            return
        with self._lock:
            queued = self.queued.pop(thread, deque())
        while queued:
            self.planner.record(*queued.popleft())


class EndOfEpochFailures(Exception):
    """States left to the end of an epoch that could not be made (or written): ``failures``, each ``(step,
    epoch, error)``, what :meth:`Executor.handle <falkirk.spark.pipeline.run.executor.Executor.handle>`
    recovers from together."""

    def __init__(self, failures: list[tuple[str, int, StepFailure | CorruptDataError]]) -> None:
        super().__init__("; ".join(f"{step}@{epoch}: {error}" for step, epoch, error in failures))
        self.failures = failures


class Steps:
    """The step executions of one run (see the module docstring)."""

    def __init__(
        self,
        pipeline: Definition,
        spark: Any,
        state: RunState,
        *,
        frames: Frames,
        fused: FusedRecords,
        injector: Injector,
        progress: Progress,
        cpu: TreeMeter | None,
        records: PlannerRecords,
        run_id: str,
    ) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.state = state
        self.frames = frames
        self.fused = fused
        self.injector = injector
        self.progress = progress
        self.say = progress.line
        self.cpu = cpu
        self.records = records
        self.run_id = run_id
        #: executions run on a pool of threads (Pipeline(concurrency > 1))
        self.concurrent = False
        self._tasks = itertools.count()
        #: the application's failed task attempts when the last execution ended (None: read no baseline yet)
        self._failed_seen: int | None = None
        #: each output's inputs (response latency)
        self.upstream: dict[str, set[str]] = {}
        #: the last epoch whose end the run has passed (a sequential run's; a redo of an epoch up to it, in a
        #: recovery, makes its state, and writes its checkpoint, at once)
        self.ended = -1
        #: each node with every node downstream of it (:meth:`_settled`)
        self._downstream: dict[str, frozenset[str]] | None = None

    def execute(self, name: str, epoch: int) -> None:
        """Execute ``name`` at ``epoch`` on this thread (the sequential run)."""
        task = self.start(name, epoch)
        try:
            self.work(task, quiet=True)
        except BaseException:
            self.abandon(task)
            raise
        self.complete(task)

    def start(self, name: str, epoch: int) -> Task:
        """Begin ``name``'s execution of ``epoch`` on the run's thread: the injector's ``before`` point, the
        inputs taken off the queues (held in memory until the task ends)."""
        state = self.state
        state.running = f"{name}@{epoch}"
        self.injector.at(name, epoch, "before")
        self.progress.step_started(name, epoch, redo=epoch <= state.high[name])
        group = state.group = f"falkirk-{self.run_id}:{name}@{epoch}:{next(self._tasks)}"
        state.groups.add(group)
        task = Task(
            name, epoch, group, time.perf_counter(), self.cpu.read() if self.cpu is not None else None
        )
        try:
            for link in self.pipeline.edges:
                if link.dst == name:
                    item = task.taken[link.name] = self.state.queues.take(link.name, epoch)
                    # ``None``: read it from the sender's log (what a replay queues)
                    df = item.df if item.df is not None else self._replayed(name, item.src, epoch)
                    task.inputs[link.src] = df
        except BaseException:  # nothing began: what was taken is still queued (SPEC §3)
            for edge, item in task.taken.items():
                self.state.queues.put_back(edge, item)
            state.groups.discard(group)
            raise
        self.frames.hold(task.inputs.values())  # not unpersisted under a job that reads them
        return task

    def _replayed(self, name: str, src: str, epoch: int) -> DataFrame:
        """``src``'s logged epoch, read for ``name``. Spark looks at the files as it plans the read, so a file
        gone since the recovery checked the item fails here, before any job. It is classified as the same
        failure inside ``name``'s job would be (:meth:`_failure`: the item named as unreadable, so that the
        recovery recomputes it), not raised raw out of the run."""
        try:
            return self.state.runners[src].replay(epoch)
        except (StepFailure, CorruptDataError, RecordError, PipelineError):
            raise
        except Exception as exc:
            raise self._failure(name, epoch, exc, {}, f"reading {src}'s logged epoch {epoch}") from exc

    def _still_there(self, cause: str, source: str) -> str | None:
        """When an executor found a file of input ``source`` missing: what the driver's own look at it says,
        if that contradicts the executor (the file is there, or the storage did not answer: the S3 soak at
        seed 58 lost a driver on an input segment its executors' FUSE mount could not see just after the
        server came back); ``None`` when the driver finds it missing too, or the cause names no such file."""
        rel = missing_input_file(cause, source)
        if rel is None:
            return None
        root = self.pipeline.location
        try:
            info = root.info(rel)
        except FileNotFoundError:
            return None
        except StorageError as err:
            return f"the driver could not look at {root.describe(rel)} either: {err}"
        return (
            f"the driver sees {root.describe(rel)} ({info.get('size', '?')} bytes): the executors' read of it "
            "failed, not the input"
        )

    def _failure(
        self, name: str, epoch: int, exc: Exception, inputs: dict[str, DataFrame], doing: str = ""
    ) -> StepFailure | CorruptDataError:
        """What ``exc``, raised by ``name``'s work at ``epoch`` (``doing``: what, where not its execution), is:
        an input that cannot be read (stop: :class:`CorruptDataError`), or the step's failure — or that of a
        fused input computed inside its job — naming a damaged item it could not read, if any."""
        cause = root_cause(exc)
        source = unreadable_input(cause, self.pipeline.location.uri, self.pipeline.inputs)
        if source is not None:
            seen = self._still_there(f"{cause}\n{exc}", source)  # the cause may be cut short
            if seen is not None:  # the executors' view of the storage failed, not the input: tried again
                culprit = self.fused.culprit(inputs)
                return StepFailure(
                    culprit or name,
                    epoch,
                    f"{type(exc).__name__}: {cause} ({seen})"
                    + (f" (computed inside {name}'s job)" if culprit else ""),
                )
            # the input's fault, not the step's: no recovery reads it back
            return CorruptDataError(source, "input", epoch, f"unreadable while {name} read it: {cause}")
        culprit = self.fused.culprit(inputs)
        item = unreadable_item(cause, self.pipeline.steps)
        return StepFailure(
            culprit or name,
            epoch,
            f"{type(exc).__name__}: {cause}"
            + (f" (computed inside {name}'s job)" if culprit else "")
            + (f" ({doing})" if doing else ""),
            deterministic=item is None and is_deterministic(exc, cause),
            unreadable=None
            if item is None
            else CorruptDataError(*item[:3], f"could not be read by {name} ({cause})", path=item[3]),
        )

    def work(self, task: Task, *, quiet: bool = False) -> None:
        """Run the task's Spark work (any thread); a failure is raised as :class:`StepFailure` (or the error
        that stops the run). ``quiet``: the run is sequential, so the application's failed-task count tells
        whether this task's jobs retried anything."""
        name, epoch, inputs, runner = task.name, task.epoch, task.inputs, self.state.runners[task.name]
        task.thread = threading.get_ident()
        # a concurrent run gives each step a scheduler pool of its own: a small step's jobs share the cores
        # with a heavy one's instead of queueing behind them (FAIR mode, which local_session sets)
        with job_group(self.spark, task.group, pool=f"falkirk-{name}" if self.concurrent else None):
            try:
                task.out, task.rows = runner.execute(epoch, inputs)
            # bad input or definition: stop
            except (StepFailure, CorruptDataError, RecordError, PipelineError):
                runner.drop_made()
                raise
            except Exception as exc:
                runner.drop_made()  # not handed out: nothing else holds it
                raise self._failure(name, epoch, exc, inputs) from exc
            task.discarded, task.fresh, task.pending = runner.discarded, runner.fresh, runner.pending_rows
            task.cut_at, task.committed_at = runner.cut_at, runner.committed_at
            runner.cut_at = runner.committed_at = None
            if quiet:
                # the next one's baseline
                failed, self._failed_seen = self._failed_seen, all_failed_tasks(self.spark)
                # no attempt failed since the last one
                quiet = failed is not None and failed == self._failed_seen
            task.jobs, task.retried = failed_tasks(self.spark, task.group, quiet=quiet) or (0, 0)
            # a committed output epoch: its consumers read it
            if task.discarded and self.pipeline.consumers(name):
                try:
                    task.out = runner.committed_frame(epoch)
                except Exception as exc:  # noqa: BLE001 - a committed epoch that cannot be read back is damaged
                    raise CorruptDataError(
                        name,
                        "output",
                        epoch,
                        f"cannot be read back ({type(exc).__name__}: {root_cause(exc)})",
                        path=f"output/{name}/epoch={epoch}",
                    ) from exc

    def abandon(self, task: Task) -> None:
        """The task failed (run's thread): what it took off its input queues is queued again, before its inputs
        are let go (a step that has not lost its memory keeps its queues, SPEC §3: a recovery that says it
        failed drops them, a retry in place reads them again). The fused steps it was to compute stay waiting,
        with what they read held in memory, for the next execution of this step that succeeds (the retry in
        place reads them as this one would have; after a rollback their records are superseded:
        :meth:`FusedRecords.finish <falkirk.spark.pipeline.run.fusion.FusedRecords.finish>`)."""
        for edge, item in task.taken.items():
            self.state.queues.put_back(edge, item)
        self.state.groups.discard(task.group)
        self.records.drain(task.thread)
        self.frames.unhold(task.inputs.values())

    def complete(self, task: Task, *, lagging: Iterable[str] = ()) -> None:
        """The task succeeded (run's thread): progress, queues (``lagging``: edges whose consumer reads the
        log instead), journal."""
        state, name, epoch = self.state, task.name, task.epoch
        state.groups.discard(task.group)
        self.records.drain(task.thread)
        # fused itself: the job that computes it computes the fused steps it reads, whose records wait for its
        # own (FusedRecords.defer)
        fused = task.rows < 0 and task.pending is not None
        # a kept output epoch ran no job: the fused steps it reads wait for another consumer
        if not task.discarded and not fused:
            self.fused.finish(task.inputs, epoch, count=True, cache=not task.retried)
        self.frames.unhold(task.inputs.values())
        if task.retried:
            state.journal.note(
                f"{name}@{epoch}: Spark retried {task.retried} failed task attempt(s) itself; falkirk "
                "not involved"
            )
            self.say(
                f"  {name}@{epoch}: Spark retried {task.retried} failed task(s) on its own (no falkirk recovery "
                "needed)"
            )
        redo = state.completed(name, epoch)
        for edge in task.taken:
            state.queues.finished(edge, epoch)
        if name in self.pipeline.inputs:
            state.cut_at[(name, epoch)] = task.cut_at
        elif task.committed_at is not None:
            try:
                self._latency(name, epoch, task.committed_at)
            # a measurement: an unreadable cut costs this epoch's latency, nothing else
            except CorruptDataError:
                pass
        rows = task.rows
        state.queues.put(name, epoch, task.out, rows if rows >= 0 else None, from_log=lagging)
        if task.out is not None:
            self.frames.release(task.out)  # unpersisted once every consumer took it
        seconds = time.perf_counter() - task.t0
        c0, c1 = task.cpu0, self.cpu.read() if self.cpu is not None else None
        if task.overlapped:  # other executions ran meanwhile: the process tree's CPU is not this task's alone
            c0 = None
        rec = state.journal.open_recoveries()
        recovery = rec[-1].index if rec and redo else None
        cpu = None if c0 is None or c1 is None else max(0.0, c1[0] - c0[0])
        jit = None if c0 is None or c1 is None else min(cpu or 0.0, max(0.0, c1[1] - c0[1]))

        def finish(rows: int, fresh: bool | None = task.fresh) -> None:
            state.journal.executed(
                name,
                epoch,
                rows=rows,
                seconds=seconds,
                redo=redo,
                jobs=task.jobs,
                recovery=recovery,
                cpu=cpu,
                fresh=fresh,
                jit=jit,
                discarded=task.discarded,
                started=task.t0,
            )
            self.progress.step_finished(
                name, epoch, rows=rows if rows >= 0 else None, seconds=seconds, redo=redo
            )
            if task.discarded:
                self.say(
                    f"  {name}@{epoch}: committed before, kept as it was (what was sent again is discarded)"
                )
            elif redo:
                self.say(f"  redo {name}@{epoch}: {rows if rows >= 0 else 'unknown'} rows ({seconds:.2f} s)")

        if fused:  # its consumer's job counts it (the journal waits)
            self.fused.defer(name, epoch, finish, task.pending, list(task.inputs.values()), task.inputs)
        else:
            finish(rows)
        # a redo of an epoch whose end has passed (a recovery) makes its state (and checkpoint) at once
        if state.runners[name].deferred is not None and epoch <= self.ended:
            self._write_checkpoint(name)
        for r in state.journal.progressed(state.done, c1):
            self.say(f"recovery {r.index} complete: every step is back where it was ({r.seconds:.2f} s)")
        self.frames.progress(self._settled(), max(state.done.values(), default=-1))
        self.frames.flush()

    def _settled(self) -> dict[str, int]:
        """Per node, the last epoch it and every node downstream of it completed, and whose end the run passed
        (its states made): a state let go of at that epoch or before is read by no frame still to be computed
        (:meth:`Frames.progress <falkirk.spark.pipeline.run.frames.Frames.progress>`)."""
        if self._downstream is None:
            below: dict[str, frozenset[str]] = {}
            for n in reversed(self.pipeline.order):  # consumers first
                below[n] = frozenset({n}).union(*(below[c] for c in self.pipeline.consumers(n)))
            self._downstream = below
        done = self.state.done
        # a sequential run makes new states at an epoch's end (a concurrent run's are made in their executions)
        cap = [] if self.concurrent else [self.ended]
        return {n: min([*cap, *(done[m] for m in nodes)]) for n, nodes in self._downstream.items()}

    def write_checkpoints(self, epoch: int) -> None:
        """Every node completed ``epoch`` (a sequential run): materialise the new states its executions left
        to this point, and write those of checkpoint epochs (:meth:`StepRunner.write_deferred
        <falkirk.spark.pipeline.run.runners.StepRunner.write_deferred>`), in the pipeline's order, each in a
        job group of its own, its time and CPU added to its execution's journal record. One that fails is
        the step's failure at ``epoch`` (:class:`~falkirk.spark.errors.StepFailure`, or
        :class:`~falkirk.spark.errors.CorruptDataError` for an input that cannot be read), as it was inside
        the step; all are raised together once the others were made (:class:`EndOfEpochFailures`)."""
        self.ended = max(self.ended, epoch)
        failures: list[tuple[str, int, StepFailure | CorruptDataError]] = []
        for name in self.pipeline.order:
            deferred = self.state.runners[name].deferred
            if deferred is None:
                continue
            try:
                self._write_checkpoint(name)
            except (StepFailure, CorruptDataError) as exc:  # raised below, after the other steps' states
                failures.append((name, deferred.epoch, exc))
        if failures:
            raise EndOfEpochFailures(failures)

    def _write_checkpoint(self, name: str) -> None:
        state, runner = self.state, self.state.runners[name]
        deferred = runner.deferred
        if deferred is None:  # nothing left to the end of its epoch
            return
        epoch, what = deferred.epoch, "checkpoint" if deferred.checkpoint else "state"
        t0, c0 = time.perf_counter(), self.cpu.read() if self.cpu is not None else None
        group = state.group = f"falkirk-{self.run_id}:{name}@{epoch}:{what}"
        state.groups.add(group)  # cancelled by an interrupt, as a step's jobs are
        state.running = f"{name}@{epoch} (its {what})"
        try:
            with job_group(self.spark, group):
                runner.write_deferred()  # type: ignore[attr-defined]
        except (StepFailure, CorruptDataError, RecordError, PipelineError):
            raise
        except Exception as exc:
            doing = "writing its state checkpoint" if what == "checkpoint" else "materialising its new state"
            # its inputs are computed by now (a fused one's own failure was its consumer's job's)
            raise self._failure(name, epoch, exc, {}, doing) from exc
        finally:
            state.groups.discard(group)
            self.records.drain(threading.get_ident())
            c1 = self.cpu.read() if self.cpu is not None else None
            cpu = None if c0 is None or c1 is None else max(0.0, c1[0] - c0[0])
            jit = None if c0 is None or c1 is None else max(0.0, c1[1] - c0[1])
            state.journal.add_cost(name, epoch, time.perf_counter() - t0, cpu, jit)

    def _latency(self, output: str, epoch: int, committed: float) -> None:
        """The response latency of ``output`` at ``epoch``: its commit time less the latest cut time of the
        inputs it depends on (read from the cut where this run did not make it; left out where no time is
        recorded)."""
        state, times = self.state, []
        for i in self.upstream.setdefault(output, upstream_inputs(self.pipeline, output)):
            if (i, epoch) not in state.cut_at:
                c = self.pipeline.inputs[i].log.get_cut(epoch)
                state.cut_at[(i, epoch)] = c.at if c is not None else None
            times.append(state.cut_at[(i, epoch)])
        if times and all(t is not None for t in times):
            state.latency.setdefault(output, {})[epoch] = max(
                0.0, committed - max(t for t in times if t is not None)
            )
