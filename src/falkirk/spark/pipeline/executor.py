"""The executor: runs a pipeline epoch by epoch, detects failures and applies falkirk's plans.

Each pipeline node is a falkirk processor. Outputs travel on **queues**, one
per edge, owned by the receiver (SPEC §3: a receiver that has not failed
keeps what is queued for it); an item is a materialised DataFrame or a
reference to a logged epoch, read when it is consumed.

* **Run.** The next task is the lowest epoch some node has not completed,
  at the first such node in definition (topological) order.
* **Failure.** A step that raises (including a failed Spark job), an
  injected failure, or unusable data: the step loses its memory and input
  queues; the planner solves SPEC §5 with the failed steps and the live
  metadata of the others; the plan is validated (every checkpoint to
  restore and every logged epoch to replay is verified; an unusable one is
  dropped and the plan recomputed) and applied (SPEC §6 reset: ``⊤``
  untouched, the others restore or drop state, queues are rebuilt from the
  logs), then the run continues and re-executes what is missing.
* **Start.** A new executor (a restarted driver) starts with the plan for
  "everything failed", computed from the manifests alone.
* **Garbage collection.** After each epoch, everything below the
  low-watermarks is deleted (checkpoints, logs, acknowledged input).
"""

from __future__ import annotations

import logging
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import define, field

from falkirk.solver import Checkpoint
from falkirk.spark.errors import (
    CorruptDataError,
    PipelineError,
    RecordError,
    RecoveryError,
    StepError,
    StepFailure,
)
from falkirk.spark.pipeline.causes import is_deterministic, root_cause, unreadable_input
from falkirk.spark.pipeline.failures import Injection, Injector
from falkirk.spark.pipeline.journal import Journal, Recovery
from falkirk.spark.pipeline.planner import TOP, Planner, epoch_of
from falkirk.spark.pipeline.probe import check_shared, is_local_master
from falkirk.spark.pipeline.progress import Progress
from falkirk.spark.pipeline.runners import Runner, make_runner
from falkirk.spark.pipeline.session import executors, failed_tasks, job_group, local_session
from falkirk.spark.pipeline.storage import Manifest, Storage
from falkirk.spark.pipeline.whatif import WhatIf, live_checkpoint, what_if

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from falkirk.spark.pipeline.definition import Pipeline
    from falkirk.spark.pipeline.rootfs import Root

__all__ = ["Executor", "RunResult", "metadata_cache"]

#: Recoveries per step and epoch before giving up: transient failures (lost executors, fetch failures,
#: killed tasks, injections) and deterministic ones (an error in the step's own code or query: one
#: recovery, in case rolled-back state was the cause, then :class:`~falkirk.spark.errors.StepError`).
MAX_ATTEMPTS = 3
MAX_DETERMINISTIC = 1


@define
class _Item:
    """An epoch's output waiting on an edge: a DataFrame, or ``None`` = read it from ``src``'s log."""

    src: str
    epoch: int
    df: Any = None
    rows: int | None = None


@define
class RunResult:
    """What :meth:`Pipeline.run` returns: the journal, final progress and storage size."""

    journal: Journal
    done: dict[str, int]
    root_bytes: int
    planner_rebuilds: int
    fired: list[Injection] = field(factory=list)


def metadata_cache(root: Root) -> Path:
    """Where the monitor's SQLite database lives for ``root``.

    It is a cache: a starting executor rebuilds it from the manifests under
    the root (the source of truth), so a driver restarted on another machine
    with only the root URI resumes correctly. On a local (or mounted) root it
    is ``root/meta.sqlite`` (``falkirk monitor --db`` reads it there); for any
    other root, a per-root directory under ``$FALKIRK_CACHE`` (default: the
    system's temporary directory).
    """
    local = root.local_path("meta.sqlite")
    if local is not None:
        return local
    import hashlib
    import os
    import tempfile

    base = Path(os.environ.get("FALKIRK_CACHE") or Path(tempfile.gettempdir()) / "falkirk-cache")
    where = base / hashlib.sha256(root.uri.encode()).hexdigest()[:16]
    where.mkdir(parents=True, exist_ok=True)
    return where / "meta.sqlite"


def needed_retain(dropped: dict[str, list[int]], available: dict[str, list[int]]) -> dict[str, int]:
    """Per step, the ``Pipeline(retain=…)`` that survives losing its ``dropped`` checkpoint epochs.

    ``available``: the step's checkpoints still usable. Losing the ``k``-th
    newest checkpoint needs ``k + 1`` kept.

    >>> needed_retain({"cc": [3]}, {"cc": []}), needed_retain({"cc": [5, 3]}, {"cc": [1]})
    ({'cc': 2}, {'cc': 3})
    """
    out = {}
    for step, lost in dropped.items():
        every = set(lost) | set(available.get(step, ()))
        out[step] = max(sum(1 for c in every if c >= e) for e in lost) + 1
    return out


def _frontier(epoch: int) -> Any:
    return "empty" if epoch < 0 else epoch


class Executor:
    """Runs ``pipeline`` (see the module docstring); one instance = one driver process's memory."""

    def __init__(
        self, pipeline: Pipeline, *, fail: Iterable[Injection | str] | str | Injection = (),
        progress: Callable[[str], None] | None = None, bar: bool = False,
    ) -> None:
        self.pipeline = pipeline
        self.spark = pipeline.spark if pipeline.spark is not None else local_session()
        pipeline.spark = self.spark
        self.injector = Injector(fail)  # type: ignore[arg-type]
        self.injector.validate(pipeline.order, local=is_local_master(self.spark))
        if check_shared(self.spark, pipeline.location):  # before anything is written under the root
            self.probed = f"storage probe: the driver and the executors share {pipeline.location.uri}"
        else:
            self.probed = ""
        #: accepted changes of the pipeline since the root was written (recorded once the restart recovered)
        self.evolution = pipeline.check_root(write=False)
        self.storage = Storage(pipeline.location, fsync=pipeline.fsync, checksums=pipeline.checksums)
        self.journal = Journal()
        self._roll_back_changed_code()
        self.progress = Progress(progress, bar=bar)
        self.say = self.progress.line
        self.order = list(pipeline.order)
        self.links = pipeline.edges
        self.queues: dict[str, dict[int, _Item]] = {e.name: {} for e in self.links}
        self.runners: dict[str, Runner] = {n: make_runner(self, n) for n in self.order}
        self.done = {n: -1 for n in self.order}
        self.high = {n: r.progress() for n, r in self.runners.items()}  # highest epoch ever completed
        self.planner = Planner(
            pipeline.dataflow(), outputs=pipeline.external_outputs,
            known={n: r.available() for n, r in self.runners.items()},
            path=metadata_cache(pipeline.location) if pipeline.monitor and pipeline.durable else None,
            monitor=pipeline.monitor and pipeline.durable,
        )
        self.executors = executors(self.spark)
        #: unique per executor: its Spark job groups (tags) never collide with another pipeline's in one session
        self.run_id = uuid.uuid4().hex[:12]
        self._pins: dict[int, list[Any]] = {}
        self._counts: dict[int, tuple[weakref.ref[Any], int]] = {}
        self._released: list[Any] = []
        self._dropped: dict[str, list[int]] = {}  # checkpoints found unusable during the current recovery

    # -- DataFrame lifetime ------------------------------------------------------------------
    def materialise(self, df: DataFrame, *, cached: bool = False, rows: int | None = None) -> tuple[DataFrame, int]:
        """Persist ``df`` (unless ``cached``) and count it (one Spark job); ``(df, rows)``.

        A DataFrame whose row count is already known (``rows``, or one this
        executor materialised or replayed) is not counted again.
        """
        from pyspark import StorageLevel

        known = self._counts.get(id(df))
        if known is not None and known[0]() is df:
            return df, known[1]
        if not cached:
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
        n = df.count() if rows is None else rows
        return self.known_rows(df, n), n

    def known_rows(self, df: DataFrame, rows: int) -> DataFrame:
        """Remember that ``df`` has ``rows`` rows (e.g. a replayed log, whose manifest says so)."""
        self._counts[id(df)] = (weakref.ref(df), rows)
        return df

    def release(self, df: Any) -> None:
        """``df`` is no longer needed by this executor (unpersisted once nothing queued holds it)."""
        if df is not None and id(df) not in self._pins:
            self._released.append(df)

    def _pin(self, item: _Item) -> None:
        if item.df is not None:
            self._pins.setdefault(id(item.df), [item.df, 0])[1] += 1

    def _unpin(self, item: _Item) -> None:
        if item.df is None or id(item.df) not in self._pins:
            return
        entry = self._pins[id(item.df)]
        entry[1] -= 1
        if entry[1] <= 0:
            del self._pins[id(item.df)]
            self._released.append(item.df)

    def _flush(self) -> None:
        for df in self._released:
            if id(df) not in self._pins:
                self._counts.pop(id(df), None)
                df.unpersist(blocking=False)
        self._released.clear()
        if len(self._counts) > 256:
            self._counts = {k: v for k, v in self._counts.items() if v[0]() is not None}

    def record(self, name: str, epoch: int) -> None:
        """``name`` durably completed (or checkpointed) ``epoch``: tell the planner (if falkirk is on)."""
        if self.pipeline.durable:
            self.planner.record(name, epoch)

    # -- the run loop ---------------------------------------------------------------------------
    def run(self, epochs: int) -> RunResult:
        """Recover persisted state, then run until every node completed epochs ``0..epochs-1``."""
        try:
            self._recover(set(self.order), "driver (re)start: resume from persisted state", restart=True)
        except RecoveryError as exc:
            if not self.evolution.new_steps:
                raise
            raise RecoveryError(
                f"the changed pipeline cannot start on {self.pipeline.location.uri}: its new step(s) "
                f"{', '.join(self.evolution.new_steps)} start at ∅ and need data that is gone ({exc}); the root "
                "still holds the previous pipeline (run that, or start the new one on a new root)") from exc
        if self.evolution:
            self.pipeline.write_root()
            for change in self.evolution.accepted:
                self.journal.note(f"pipeline changed: {change}")
                self.say(f"pipeline changed: {change}")
            self.evolution = type(self.evolution)((), {})
        with self.progress.running(sum(max(0, epochs - 1 - d) for d in self.done.values())):
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
                    self._recover(set(names), f"step(s) {', '.join(names)} failed after epoch {finished}: "
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
            self._recover(failed, cause, lost=failure if isinstance(failure, CorruptDataError) else None)
        return RunResult(self.journal, dict(self.done), self.storage.size(), self.planner.rebuilds, list(self.injector.fired))

    def plan_failure(self, failed: Iterable[str]) -> WhatIf:
        """The plan a failure of ``failed`` now would execute, from this executor's state; nothing is applied."""
        lost = set(failed)
        live = {n: self._live(n) for n in self.order if n not in lost and not self.pipeline.stateless(n)}
        return what_if(self.pipeline, self.planner, lost, dict(self.done), live=live, journal=self.journal)

    def _roll_back_changed_code(self) -> None:
        """``code_changes={step: E}``: drop what ``step`` and everything downstream persisted after epoch ``E``.

        The restart's plan then finds nothing of theirs after ``E`` and
        recomputes it (with the new code), rolling back what depends on it.
        """
        targets = {n: e for n, e in self.evolution.code.items() if e != "keep"}
        if not targets:
            return
        limit: dict[str, int] = {}
        for name in self.pipeline.order:  # topological: a step's bound is the lowest of its own and its inputs'
            bounds = [limit[u] for u in (self.pipeline.steps[name].inputs if name in self.pipeline.steps else ())
                      if u in limit]
            if name in targets:
                bounds.append(int(targets[name]))
            if bounds:
                limit[name] = min(bounds)
        for name, epoch in limit.items():
            before = max(self.storage.epochs(name, "complete"), default=-1)
            for kind in ("checkpoint", "log", "output", "complete"):
                self.storage.remove_where(name, kind, lambda e, epoch=epoch: e <= epoch)
            if self.pipeline.stateless(name) and epoch >= 0 and before > epoch:
                self.storage.put(Manifest(name, "complete", epoch))
            self.journal.note(f"{name}: rolled back to epoch {epoch} (code_changes)")

    def _memory_state(self) -> list[str]:
        """Steps holding state in executor memory now (Lazy/Eager DataFrame state between checkpoints)."""
        return [n for n in self.order if getattr(self.runners[n], "state", None) is not None]

    def _lost_state(self, step: str, epoch: int) -> tuple[list[str], str]:
        """Steps whose in-memory state went with executors lost since the last look, and why (noted in the journal).

        An executor killed, or lost with its worker, takes the blocks of every
        state kept in executor memory between checkpoints (a Lazy or Eager
        DataFrame state, ``localCheckpoint``-ed) with it. Spark may even
        finish the running step (it reruns the lost tasks elsewhere), but such
        a state cannot be read again, so every step holding one is treated as
        failed: falkirk rolls it back to its last checkpoint.
        """
        if self.executors is None:
            return [], ""
        now = executors(self.spark)
        if now is None:
            return [], ""
        gone, self.executors = self.executors - now, now
        if not gone:
            return [], ""
        lost = [n for n in self.order if getattr(self.runners[n], "state", None) is not None]
        what = (f"the in-memory state of {', '.join(lost)} (kept on executors between checkpoints) went with it "
                "and is rolled back to its last checkpoint" if lost else "no step kept state in executor memory")
        note = f"executor(s) {', '.join(sorted(gone))} lost during {step}@{epoch}; {what}"
        self.journal.note(note)
        self.say(f"  {note}")
        return lost, note

    def _end_of_epoch(self, epoch: int) -> None:
        if self.pipeline.gc and self.pipeline.durable:
            self.collect()
        runs = [x for x in self.journal.executions if x.epoch == epoch and not x.redo]
        if runs:
            total = sum(x.seconds for x in runs)
            parts = " · ".join(f"{x.step} {x.rows}" for x in runs)
            self.say(f"epoch {epoch:>3}  {parts}  ({total:.1f} s)")

    def _execute(self, name: str, epoch: int) -> None:
        runner = self.runners[name]
        self.injector.at(name, epoch, "before")
        t0 = time.perf_counter()
        self.progress.step_started(name, epoch, redo=epoch <= self.high[name])
        group = f"falkirk-{self.run_id}:{name}@{epoch}:{len(self.journal.executions)}"
        with job_group(self.spark, group):
            inputs = {link.src: self._take(link.name, epoch) for link in self.links if link.dst == name}
            try:
                out, rows = runner.execute(epoch, inputs)
            except (StepFailure, CorruptDataError, RecordError, PipelineError):  # bad input or definition: stop
                raise
            except Exception as exc:
                cause = root_cause(exc)
                source = unreadable_input(cause, self.pipeline.location.uri, self.pipeline.inputs)
                if source is not None:  # the input's fault, not the step's: no recovery reads it back
                    raise CorruptDataError(source, "input", epoch, f"unreadable while {name} read it: {cause}") from exc
                raise StepFailure(name, epoch, f"{type(exc).__name__}: {cause}",
                                  deterministic=is_deterministic(exc, cause)) from exc
            jobs, retried = failed_tasks(self.spark, group) or (0, 0)
        if retried:
            self.journal.note(f"{name}@{epoch}: Spark retried {retried} failed task attempt(s) itself; falkirk not involved")
            self.say(f"  {name}@{epoch}: Spark retried {retried} failed task(s) on its own (no falkirk recovery needed)")
        self.done[name] = epoch
        for link in self.links:
            if link.src == name:
                item = _Item(name, epoch, out, rows)
                self.queues[link.name][epoch] = item
                self._pin(item)
        if out is not None:
            self.release(out)  # unpersisted once every consumer took it
        redo = epoch <= self.high[name]
        self.high[name] = max(self.high[name], epoch)
        seconds = time.perf_counter() - t0
        rec = self.journal.open_recoveries()
        self.journal.executed(name, epoch, rows=rows, seconds=seconds, redo=redo, jobs=jobs,
                              recovery=rec[-1].index if rec and redo else None)
        self.progress.step_finished(name, epoch, rows=rows, seconds=seconds, redo=redo)
        if redo:
            self.say(f"  redo {name}@{epoch}: {rows} rows ({seconds:.2f} s)")
        for r in rec:
            if all(self.done[n] >= d for n, d in r.done_at_failure.items()):
                r.finished = time.perf_counter()
                self.say(f"recovery {r.index} complete: every step is back where it was ({r.seconds:.2f} s)")
        self._flush()

    def _take(self, edge: str, epoch: int) -> DataFrame:
        item = self.queues[edge].pop(epoch, None)
        if item is None:
            raise RecoveryError(f"edge {edge}: nothing queued for epoch {epoch} (executor bug: the plan should provide it)")
        self._unpin(item)
        if item.df is not None:
            return item.df
        return self.runners[item.src].replay(epoch)

    # -- failures ----------------------------------------------------------------------------------
    def _lose(self, name: str) -> None:
        self.runners[name].lose()
        for link in self.links:
            if link.dst == name:
                for item in self.queues[link.name].values():
                    self._unpin(item)
                self.queues[link.name].clear()

    def _lost_data(self, err: CorruptDataError, failed: set[str]) -> None:
        """React to unusable durable data found while recovering or replaying."""
        name, kind, epoch = err.step, err.kind, err.epoch
        if name in self.pipeline.inputs or name not in self.runners:
            hint = (f"; garbage collection keeps {self.pipeline.retain} checkpoint(s) per step and the input they "
                    "need (Pipeline(retain=...)): a larger retain would have kept older ones" if self.pipeline.gc else "")
            if self.pipeline.gc and self._dropped:
                lost = "; ".join(f"{n} lost its checkpoint(s) at epoch(s) {sorted(es)}" for n, es in self._dropped.items())
                need = max(needed_retain(self._dropped, self.planner.available).values())
                hint += (f" ({lost}: Pipeline(retain={need}) would have kept an older one)" if need > self.pipeline.retain
                         else f" ({lost}; retain={self.pipeline.retain} covers that, so the older data was removed "
                              "or damaged outside falkirk)")
            raise RecoveryError(f"cannot recover: {err}; the input data is gone{hint}") from err
        if kind == "checkpoint":
            self._dropped.setdefault(name, []).append(epoch)
            self.planner.forget(name, epoch)
            self.storage.remove(name, kind, epoch)
        else:  # a lost log (or output) epoch: the step must recompute from before it
            self.planner.truncate(name, epoch - 1)
            self.storage.remove_where(name, kind, lambda e: e < epoch)
            if name not in failed:
                failed.add(name)
                self._lose(name)

    def _live(self, name: str) -> Checkpoint:
        """Live metadata of ``name`` (not failed): :func:`~falkirk.spark.pipeline.whatif.live_checkpoint`."""
        queued = {link.name: max(self.queues[link.name], default=-1) for link in self.links if link.dst == name}
        return live_checkpoint(self.pipeline, name, self.done[name], queued)

    def _recover(self, failed: set[str], cause: str, *, lost: CorruptDataError | None = None, restart: bool = False) -> None:
        done_before = dict(self.done) if not restart else dict(self.high)
        self._dropped = {}
        rec = Recovery(
            len(self.journal.recoveries) + 1, cause, tuple(sorted(failed, key=self.order.index)), done_before,
            {n: list(v) for n, v in self.planner.available.items()}, restart=restart,
            planner="falkirk.solver.Monitor (meta.sqlite)" if self.pipeline.monitor else "falkirk.solver.solve_frontiers",
        )
        if not restart:
            self.progress.line(f"FAILURE: {cause}", level=logging.WARNING)
        for n in failed:
            self._lose(n)
        if lost is not None:
            rec.problems.append(str(lost))
            self._lost_data(lost, failed)
        for _ in range(4 * len(self.order) + 4):
            t0 = time.perf_counter()
            live = {n: self._live(n) for n in self.order if n not in failed and not self.pipeline.stateless(n)}
            plan = self.planner.plan(sorted(failed), live)
            rec.plan_seconds += time.perf_counter() - t0
            problem = self._validate(plan, done_before)
            if problem is None:
                break
            rec.problems.append(str(problem))
            self.progress.line(f"  unusable data: {problem}; planning again without it", level=logging.WARNING)
            self._lost_data(problem, failed)
        else:
            raise RecoveryError(f"no executable rollback plan after {cause}")
        rec.plan = plan
        rec.failed = tuple(n for n in self.order if n in failed)
        self._apply(plan, done_before, rec)
        if restart and all(d < 0 for d in done_before.values()):
            return  # a fresh start, nothing to report
        self.journal.recoveries.append(rec)
        if not restart:
            self.progress.more(sum(max(0, done_before[n] - self.done[n]) for n in self.order))
        lost_work = {n: (epoch_of(f), done_before[n]) for n, f in plan.frontiers.items() if epoch_of(f) < done_before[n]}
        self.say(f"recovery {rec.index}: plan in {rec.plan_seconds * 1000:.0f} ms; " + (", ".join(
            f"{n} {plan.actions[n]} to {_frontier(f)}" for n, (f, _) in lost_work.items()) or "nothing to redo"))
        if all(self.done[n] >= d for n, d in done_before.items()):
            rec.finished = time.perf_counter()

    def _validate(self, plan: Any, done_before: dict[str, int]) -> CorruptDataError | None:
        for n in self.order:
            f = epoch_of(plan.frontiers[n])
            if f != TOP:
                try:
                    self.runners[n].verify(f)
                except CorruptDataError as err:
                    return err
        for r in plan.replay.values():
            fp = epoch_of(r.log_frontier)
            hi = done_before[r.sender] if fp == TOP else fp
            for k in range(epoch_of(r.exclude) + 1, hi + 1):
                try:
                    self.runners[r.sender].check_replay(k)
                except CorruptDataError as err:
                    return err
        return None

    def _apply(self, plan: Any, done_before: dict[str, int], rec: Recovery) -> None:
        for n in self.order:
            f = epoch_of(plan.frontiers[n])
            if f == TOP:
                continue
            runner = self.runners[n]
            runner.reset(f)
            rescaled = runner.rescaled
            if rescaled is not None:
                old_n, new_n, reads = rescaled
                rec.rescaled[n] = (old_n, new_n)
                self.say(f"  {n}: keyed checkpoint at {f} restored from {old_n} into {new_n} partitions "
                         f"(by key group; new partition <- old: {reads})")
                runner.rescaled = None
            self.planner.truncate(n, f)
            self.done[n] = f
        for link in self.links:
            fq = epoch_of(plan.frontiers[link.dst])
            if fq == TOP:
                continue
            old = self.queues[link.name]
            new = {k: it for k, it in old.items() if k <= fq}
            if self.pipeline.logs(link.src):
                fp = epoch_of(plan.frontiers[link.src])
                hi = done_before[link.src] if fp == TOP else fp
                keep_memory = fp == TOP
                for k in range(fq + 1, hi + 1):
                    new[k] = old[k] if keep_memory and k in old else _Item(link.src, k)
                if hi > fq:
                    rec.replayed[link.name] = (fq + 1, hi)
            for k, it in old.items():
                if new.get(k) is not it:
                    self._unpin(it)
            self.queues[link.name] = new
        self._flush()

    # -- garbage collection ----------------------------------------------------------------------------
    def retained_watermarks(self) -> dict[str, int]:
        """The low-watermarks with retention: as if each stateful step's newest ``retain - 1`` checkpoints were lost.

        What a recovery would need if those checkpoints turned out corrupt or
        deleted: garbage collection keeps it (``Pipeline(retain=1)``: the
        plain low-watermarks).
        """
        lw = self.planner.watermarks()
        extra = self.pipeline.retain - 1
        if extra <= 0:
            return lw
        from falkirk.solver import solve_frontiers

        saved = self.planner.available
        stateful = {n for n, r in self.runners.items() if getattr(getattr(r, "regime", None), "takes_state", False)}
        restricted = {n: (es[:-extra] if n in stateful else es) for n, es in saved.items()}
        if restricted == saved:
            return lw
        self.planner.available = restricted
        try:
            marks = solve_frontiers(self.planner.dataflow(), "all").frontiers
        finally:
            self.planner.available = saved
        return {n: min(lw[n], epoch_of(marks[n])) for n in lw}

    def collect(self) -> None:
        """Delete what the low-watermarks allow (with retention): old checkpoints, consumed logs, acknowledged input."""
        lw = self.retained_watermarks()
        for n in self.order:
            consumers = self.pipeline.consumers(n)
            self.runners[n].collect(lw[n], min((lw[q] for q in consumers), default=lw[n]))
        self.storage.sweep_orphans()
        self.planner.compact()

    def close(self) -> None:
        """Release the database connections, the monitor and cached DataFrames."""
        for r in self.runners.values():
            r.lose()
        for q in self.queues.values():
            for it in q.values():
                self._unpin(it)
        self._flush()
        self.planner.close()
