"""Recovery: from a failure to a consistent state the run can continue from.

When steps fail (or a restarted driver starts with "everything failed"),
:meth:`Rollback.recover`:

1. drops the failed steps' memory and input queues;
2. asks the planner for the rollback plan (SPEC §5: the failed steps lose
   ``⊤``, the others give their live metadata, :mod:`~falkirk.spark.pipeline.plan.live`);
3. validates it: every checkpoint to restore and every logged epoch to
   replay is verified; an unusable one is dropped (a checkpoint is forgotten,
   a lost log epoch makes its step recompute from before it) and the plan
   recomputed, until one is executable;
4. applies it (SPEC §6 reset): ``⊤`` untouched, the others restore or drop
   state, and the queues are rebuilt from the logs;

and journals what it did (:class:`~falkirk.spark.pipeline.run.journal.Recovery`).
The run loop (:mod:`~falkirk.spark.pipeline.run.executor`) then re-executes
what is missing. This module is the recovery room beside that loop: it
shares the run's per-step progress (``done``, ``high``), runners and queues,
and never runs an epoch itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import define, field

from falkirk.solver import Checkpoint
from falkirk.spark.errors import CorruptDataError, RecoveryError
from falkirk.spark.pipeline.plan.live import live_checkpoint
from falkirk.spark.pipeline.plan.planner import TOP, epoch_of
from falkirk.spark.pipeline.run.journal import Recovery
from falkirk.spark.pipeline.store.storage import Manifest

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.declare.evolution import Changes
    from falkirk.spark.pipeline.plan.planner import Planner
    from falkirk.spark.pipeline.run.journal import Journal
    from falkirk.spark.pipeline.run.progress import Progress
    from falkirk.spark.pipeline.run.queues import Queues
    from falkirk.spark.pipeline.run.runners import Runner
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["Rollback", "needed_retain", "roll_back_changed_code"]


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


@define
class Rollback:
    """Plans, validates and applies rollbacks for one run (see the module docstring).

    ``done`` and ``high`` are the run's own dictionaries (last epoch each step
    completed, highest ever completed), updated in place.
    """

    pipeline: Definition
    runners: Mapping[str, Runner]
    queues: Queues
    planner: Planner
    storage: Storage
    journal: Journal
    progress: Progress
    done: dict[str, int]
    high: dict[str, int]
    #: checkpoints found unusable during the current recovery
    _dropped: dict[str, list[int]] = field(factory=dict, init=False)

    @property
    def order(self) -> list[str]:
        """The pipeline's nodes in definition (topological) order."""
        return self.pipeline.order

    # -- live metadata ------------------------------------------------------------------------
    def live(self, name: str) -> Checkpoint:
        """Live metadata of ``name`` (not failed): :func:`~falkirk.spark.pipeline.plan.live.live_checkpoint`."""
        return live_checkpoint(self.pipeline, name, self.done[name], self.queues.last_queued(name))

    def live_all(self, failed: Iterable[str]) -> dict[str, Checkpoint]:
        """Live metadata of every stateful step not in ``failed``."""
        lost = set(failed)
        return {n: self.live(n) for n in self.order if n not in lost and not self.pipeline.stateless(n)}

    # -- failures ----------------------------------------------------------------------------------
    def lose(self, name: str) -> None:
        """``name`` failed: it loses its memory and its input queues."""
        self.runners[name].lose()
        self.queues.drop_inputs(name)

    def recover(self, failed: set[str], cause: str, *, lost: CorruptDataError | None = None, restart: bool = False) -> None:
        """Recover from the failure of ``failed`` (see the module docstring); ``restart``: a driver (re)start."""
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
            self.lose(n)
        if lost is not None:
            rec.problems.append(str(lost))
            self._lost_data(lost, failed)
        for _ in range(4 * len(self.order) + 4):
            t0 = time.perf_counter()
            plan = self.planner.plan(sorted(failed), self.live_all(failed))
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
        self.progress.line(f"recovery {rec.index}: plan in {rec.plan_seconds * 1000:.0f} ms; " + (", ".join(
            f"{n} {plan.actions[n]} to {_frontier(f)}" for n, (f, _) in lost_work.items()) or "nothing to redo"))
        if all(self.done[n] >= d for n, d in done_before.items()):
            rec.finished = time.perf_counter()

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
                self.lose(name)

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
                self.progress.line(f"  {n}: keyed checkpoint at {f} restored from {old_n} into {new_n} partitions "
                                   f"(by key group; new partition <- old: {reads})")
                runner.rescaled = None
            self.planner.truncate(n, f)
            self.done[n] = f
        for link in self.pipeline.edges:
            fq = epoch_of(plan.frontiers[link.dst])
            if fq == TOP:
                continue
            replay = range(0)
            keep_memory = False
            if self.pipeline.logs(link.src):
                fp = epoch_of(plan.frontiers[link.src])
                hi = done_before[link.src] if fp == TOP else fp
                keep_memory = fp == TOP
                replay = range(fq + 1, hi + 1)
                if hi > fq:
                    rec.replayed[link.name] = (fq + 1, hi)
            self.queues.reset(link.name, keep_upto=fq, replay=replay, keep_memory=keep_memory)
        self.queues.frames.flush()


def roll_back_changed_code(pipeline: Definition, storage: Storage, journal: Journal, evolution: Changes) -> None:
    """``code_changes={step: E}``: drop what ``step`` and everything downstream persisted after epoch ``E``.

    The restart's plan then finds nothing of theirs after ``E`` and
    recomputes it (with the new code), rolling back what depends on it.
    """
    targets = {n: e for n, e in evolution.code.items() if e != "keep"}
    if not targets:
        return
    limit: dict[str, int] = {}
    for name in pipeline.order:  # topological: a step's bound is the lowest of its own and its inputs'
        bounds = [limit[u] for u in (pipeline.steps[name].inputs if name in pipeline.steps else ()) if u in limit]
        if name in targets:
            bounds.append(int(targets[name]))
        if bounds:
            limit[name] = min(bounds)
    for name, epoch in limit.items():
        before = max(storage.epochs(name, "complete"), default=-1)
        for kind in ("checkpoint", "log", "output", "complete"):
            storage.remove_where(name, kind, lambda e, epoch=epoch: e <= epoch)
        if pipeline.stateless(name) and epoch >= 0 and before > epoch:
            storage.put(Manifest(name, "complete", epoch))
        journal.note(f"{name}: rolled back to epoch {epoch} (code_changes)")
