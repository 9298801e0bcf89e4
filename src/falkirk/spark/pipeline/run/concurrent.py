"""Running steps concurrently: each node in epoch order, different nodes on different epochs at once.

``Pipeline(..., concurrency=N)`` with ``N > 1`` runs up to ``N`` step
executions at a time, each on a thread of a pool submitting its own Spark
jobs (PySpark pins each Python thread to a JVM thread, so job groups stay
per execution; under ``spark.scheduler.mode=FAIR``, which
:func:`~falkirk.spark.pipeline.run.session.local_session` sets, small jobs are
not queued behind a large one):

* **What may run.** Node ``n`` may execute epoch ``e`` once it has completed
  ``e - 1``, is not executing already, and its input for ``e`` is queued on
  every input edge. It may run at most ``window`` epochs ahead of its slowest
  consumer — or, when ``n`` logs its output (an input, a ``Batch`` step,
  ``log=True``), of its *fastest*: a consumer lagging further behind gets a
  reference to the log instead of the DataFrame, and reads that epoch from
  the log when it gets there. Ready executions start lowest epoch first,
  then in definition order.
* **A failure.** No new execution starts; those in flight finish (their own
  failures join in); then the recovery is planned and applied exactly as in
  a sequential run — same solver, same plan, on the same quiescent state.
  Then executions start again: the nodes the plan keeps at ``⊤`` go on with
  new epochs while the rolled-back ones catch up (a logged edge never makes
  the fast branch wait for the slow one). Two kinds of failure are
  recovered from at once, without waiting for the executions in flight: one
  retried in place (a transient one that lost nothing: the plan rolls
  nothing back), and one whose plan touches no step in flight — rolls none
  back and resets none of their input edges (the executions in flight are
  then of steps the plan keeps at ``⊤``, fed by steps it keeps: what they
  took and will send is what a quiescent state would have had them take
  and send). ``falkirk.sim``'s pipelined schedule does the same.
* **Per epoch.** When every node has completed an epoch, garbage collection
  runs as in a sequential run, except the sweep of unpublished data, which
  waits for a moment with nothing in flight (or a recovery that waited
  for the executions in flight).

Everything else — the queues, the planner, the journal — is touched only by the run's own thread (but for a
runner's remarks appended to the journal's notes, ``RunContext.note``: one ``list.append``); the pool's
threads run :meth:`Steps.work <falkirk.spark.pipeline.run.steps.Steps.work>` (the runner's ``execute``, Spark
jobs, writes and manifests), and what they record for the planner waits for the task's completion. An
execution's CPU is recorded only when nothing else ran meanwhile (the process tree's CPU cannot be split).
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import CorruptDataError, RecoveryError, StepFailure
from falkirk.spark.pipeline.run.interrupt import after_interrupt
from falkirk.spark.pipeline.run.session import is_connect

if TYPE_CHECKING:
    from falkirk.spark.pipeline.run.executor import Executor
    from falkirk.spark.pipeline.run.state import Task

__all__ = ["Concurrent"]

#: seconds between looks for questions from other threads while executions run (``Pipeline.plan_failure``)
ASK_WAIT = 0.2
#: seconds an interrupted or failed run waits for the executions in flight before it closes
INTERRUPT_WAIT = 60.0

#: the step threads of each SparkContext, kept across runs: PySpark pins each Python thread to a JVM thread
#: and a py4j connection that outlive the thread, so a pool per run would leave ``concurrency`` of them behind
#: each time
_POOLS: weakref.WeakKeyDictionary[Any, dict[int, ThreadPoolExecutor]] = weakref.WeakKeyDictionary()
_POOLS_LOCK = threading.Lock()


def _pool(spark: Any, workers: int) -> ThreadPoolExecutor:
    """The pool of ``workers`` step threads of ``spark``'s context (made on first use, then reused)."""
    key = getattr(spark, "sparkContext", None) if not is_connect(spark) else spark
    with _POOLS_LOCK:
        try:
            pools = _POOLS.setdefault(key, {})
        except TypeError:  # not weakly referenceable: a pool of its own
            return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="falkirk-step")
        if workers not in pools:
            pools[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="falkirk-step")
        return pools[workers]


class Concurrent:
    """The concurrent run loop of one :class:`~falkirk.spark.pipeline.run.executor.Executor` (module
    docstring)."""

    def __init__(self, ex: Executor, workers: int, window: int) -> None:
        self.ex = ex
        self.workers = workers
        self.window = window
        self.inflight: dict[Future[None], Task] = {}
        self.failures: list[tuple[str, int, StepFailure | CorruptDataError]] = []
        self.after: list[tuple[list, int]] = []  # injected "after" failures: (due injections, epoch)
        self.stop: BaseException | None = None
        self.attempts: dict[tuple[str, int], int] = {}
        self.last: tuple[str, int] = ("", -1)

    def run(self, epochs: int) -> None:
        """Run until every node has completed epochs ``0..epochs-1`` (or a failure stops the run)."""
        ex, state = self.ex, self.ex.state
        ex.steps.concurrent = True
        pool = _pool(ex.spark, self.workers)
        finished = state.lowest()
        try:
            while True:
                ex.asks.serve()
                lo = state.lowest() + 1
                while finished < lo - 1 and not self._failing():
                    finished += 1
                    ex.end_of_epoch(finished, busy={t.name for t in self.inflight.values()})
                    due = ex.injector.after(finished)
                    if due:
                        self.after.append((due, finished))
                if self.inflight and self._recover_now():
                    continue
                if not self._failing():
                    self._dispatch(epochs, pool)
                if not self.inflight:
                    if self.stop is not None:
                        raise self.stop
                    if self._failing():
                        self._recover()
                        continue
                    if state.lowest() + 1 >= epochs:
                        break
                    raise RecoveryError(
                        f"internal error: nothing can run and nothing runs (done: {dict(state.done)}, "
                        f"queued: {state.queues.on}, taken: {state.queues.taken})"
                    )
                self._collect()
        except BaseException as exc:
            # the executions in flight end before the run's parts are closed; an interrupt first cancels their
            # jobs
            if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "Interrupt":
                for task in self.inflight.values():
                    after_interrupt(ex.spark, task.group)
            wait(list(self.inflight), timeout=INTERRUPT_WAIT)
            raise
        finally:
            ex.steps.concurrent = False

    def _failing(self) -> bool:
        return bool(self.failures or self.after or self.stop is not None)

    # -- starting executions
    # ------------------------------------------------------------------------------------------
    def _ready(self, name: str, epochs: int, busy: set[str]) -> int | None:
        """The epoch ``name`` may start now, if any (see the module docstring)."""
        state, pipeline = self.ex.state, self.ex.pipeline
        if name in busy:
            return None
        e = state.done[name] + 1
        if e >= epochs:
            return None
        if any(e not in state.queues.on[link.name] for link in pipeline.edges if link.dst == name):
            return None
        consumers = [state.done[c] for c in pipeline.consumers(name)]
        if consumers:
            logged = name in pipeline.inputs or pipeline.steps[name].regime.logs
            ahead = e - (max(consumers) if logged else min(consumers))
            if ahead > self.window:
                return None
        return e

    def _dispatch(self, epochs: int, pool: ThreadPoolExecutor) -> None:
        ex, state = self.ex, self.ex.state
        busy = {t.name for t in self.inflight.values()}
        ready = [
            (e, i, n) for i, n in enumerate(state.order) if (e := self._ready(n, epochs, busy)) is not None
        ]
        for e, _, name in sorted(ready)[: max(0, self.workers - len(self.inflight))]:
            try:
                task = ex.steps.start(name, e)
            except (StepFailure, CorruptDataError) as exc:  # an injected failure before the step
                self.failures.append((name, e, exc))
                return
            if self.inflight:
                task.overlapped = True
                for other in self.inflight.values():
                    other.overlapped = True
            self.inflight[pool.submit(ex.steps.work, task)] = task

    # -- finishing them
    # -----------------------------------------------------------------------------------------------
    def _collect(self) -> None:
        """Wait for an execution to end; complete or abandon each that did, then look for lost executors."""
        ex, state = self.ex, self.ex.state
        while True:  # questions from other threads answered meanwhile
            done, _ = wait(list(self.inflight), timeout=ASK_WAIT, return_when=FIRST_COMPLETED)
            if done:
                break
            ex.asks.serve()
        ended = sorted(done, key=lambda f: (self.inflight[f].epoch, state.order.index(self.inflight[f].name)))
        for fut in ended:
            task = self.inflight.pop(fut)
            self.last = (task.name, task.epoch)
            error = fut.exception()
            if error is None:
                ex.steps.complete(task, lagging=self._lagging(task))
                continue
            ex.steps.abandon(task)
            if isinstance(error, (StepFailure, CorruptDataError)):
                self.failures.append((task.name, task.epoch, error))
            elif self.stop is None:
                # bad input or definition, or an interrupt: the run ends once the others did
                self.stop = error
        lost, why = ex.lost.lost_state(state.runners, *self.last)  # executors lost since the last look
        for name in lost:  # their steps' in-memory state is gone: recovered once nothing is in flight
            self.failures.append((name, self.last[1], StepFailure(name, self.last[1], why, lost=True)))

    def _lagging(self, task: Task) -> list[str]:
        """The edges out of ``task``'s node whose consumer is more than the window behind (they read the
        log)."""
        pipeline, state = self.ex.pipeline, self.ex.state
        if task.name not in pipeline.inputs and not pipeline.steps[task.name].regime.logs:
            return []
        return [
            link.name
            for link in pipeline.edges
            if link.src == task.name and task.epoch - state.done[link.dst] > self.window
        ]

    def _recover_now(self) -> bool:
        """Failures recovered from at once, the executions in flight going on (one may be an input waiting
        for its data): those all retried in place (:meth:`Executor.retries_in_place
        <falkirk.spark.pipeline.run.executor.Executor.retries_in_place>`: nothing rolls back), and those whose
        plan touches no step in flight (:meth:`Executor.recovers_apart
        <falkirk.spark.pipeline.run.executor.Executor.recovers_apart>`: none rolled back, no input edge of
        one reset). What they leave unpublished is swept at a later epoch's end with nothing in flight."""
        if not self.failures or self.after or self.stop is not None:
            return False
        busy = {t.name for t in self.inflight.values()}
        if not (
            self.ex.retries_in_place(self.failures, self.attempts)
            or self.ex.recovers_apart(self.failures, self.attempts, busy)
        ):
            return False
        failures, self.failures = self.failures, []
        self.ex.handle(failures, *self.last, self.attempts, look=False)
        return True

    def _recover(self) -> None:
        """Nothing in flight: recover from what failed meanwhile (as a sequential run would), then sweep."""
        ex = self.ex
        after, failures, self.after, self.failures = self.after, self.failures, [], []
        for due, epoch in after:
            ex.recover_after(due, epoch)
        if failures:
            ex.handle(failures, *self.last, self.attempts, look=False)
        ex.storage.sweep_unpublished()
