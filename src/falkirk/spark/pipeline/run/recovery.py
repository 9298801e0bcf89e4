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

and journals what it did (:class:`~falkirk.spark.pipeline.run.journal.Recovery`), with its wall time
by phase: planning, validation (the checks of step 3), then — measured by the
run loop — replay/recompute and catch-up.
The run loop (:mod:`~falkirk.spark.pipeline.run.executor`) then re-executes
what is missing. This module is the recovery room beside that loop: it
sees the run's :class:`~falkirk.spark.pipeline.run.state.RunState` (progress,
runners, queues, planner, journal) and its context, and never runs an epoch
itself.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, ClassVar

from attrs import define, field

from falkirk.spark.errors import CorruptDataError, RecoveryError
from falkirk.spark.pipeline.plan.feasible import check_plan, describe_blocker, executable_plan
from falkirk.spark.pipeline.plan.planner import TOP, epoch_of
from falkirk.spark.pipeline.run.journal import Recovery, Startup

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.plan.planner import Planner
    from falkirk.spark.pipeline.run.context import RunContext
    from falkirk.spark.pipeline.run.cpu import TreeMeter
    from falkirk.spark.pipeline.run.progress import Progress
    from falkirk.spark.pipeline.run.state import RunState

__all__ = ["Rollback"]


@define
class Rollback:
    """Plans, validates and applies rollbacks for one run (see the module docstring).

    It sees the run through its ``context`` (storage, the root) and its
    ``state`` (:class:`~falkirk.spark.pipeline.run.state.RunState`: progress,
    runners, queues, planner, journal), whose ``done`` it lowers through
    :meth:`RunState.rolled_back <falkirk.spark.pipeline.run.state.RunState.rolled_back>`.
    """

    context: RunContext
    state: RunState
    progress: Progress
    #: CPU seconds of the process tree and of its JIT compilers
    #: (:func:`~falkirk.spark.pipeline.run.cpu.meter`), where that is the whole job
    cpu: TreeMeter | None = None
    #: the random draw of the older output epochs a restart checks
    _draw: random.Random = field(factory=random.Random, init=False, repr=False)

    #: at most this many output epochs older than an output's restore points are checked at a restart (per output)
    SCRUB: ClassVar[int] = 1000

    @property
    def pipeline(self) -> Definition:
        """The pipeline's definition."""
        return self.state.pipeline

    @property
    def order(self) -> list[str]:
        """The pipeline's nodes in definition (topological) order."""
        return self.state.order

    # -- failures ----------------------------------------------------------------------------------
    def lose(self, name: str) -> None:
        """``name`` failed: it loses its memory and its input queues."""
        self.state.runners[name].lose()
        self.state.queues.drop_inputs(name)

    def recover(
        self,
        failed: set[str],
        cause: str,
        *,
        lost: CorruptDataError | None = None,
        restart: bool = False,
        limits: Mapping[str, int] | None = None,
        startup: Startup | None = None,
        in_place: tuple[str, int] | None = None,
    ) -> None:
        """Recover from the failure of ``failed`` (see the module docstring).

        ``restart``: a driver (re)start (everything failed; the output
        epochs it can write again are verified too, and a sample of the
        older ones: :meth:`_damaged_outputs`). ``limits``: steps held to a
        frontier at or below an epoch (``code_changes``: their later work
        was done by old code). ``startup``: what a restarted driver spent
        before (counted in the recovery's phases). Nothing under the root
        changes until the plan is known to be executable; otherwise
        :class:`RecoveryError` names the damaged or missing file and what it
        made impossible. ``in_place``: the step whose job failed at that epoch
        runs it again at once (``failed`` is empty: the plan rolls nothing
        back, and says so in the journal).
        """
        done_before = dict(self.state.done) if not restart else dict(self.state.high)
        rec = Recovery(
            len(self.state.journal.recoveries) + 1,
            cause,
            tuple(sorted(failed, key=self.order.index)),
            done_before,
            {n: list(v) for n, v in self.state.planner.available.items()},
            restart=restart,
            in_place=in_place,
            planner="falkirk.solver.Monitor (meta.sqlite)"
            if self.pipeline.monitor
            else "falkirk.solver.solve_frontiers",
        )
        if not restart:
            self.progress.line(f"FAILURE: {cause}", level=logging.WARNING)
        reading = self.cpu.read() if self.cpu is not None else None  # a restart's: once its session is up
        rec.cpu_started, rec.jit_started = reading if reading is not None else (None, None)
        t0 = time.perf_counter()
        if startup is not None:
            rec.started_up(startup, t0)
        checking = 0.0  # seconds spent validating (checks against the manifests), apart from planning

        def check(plan: Any, _: Any) -> CorruptDataError | None:
            nonlocal checking
            t = time.perf_counter()
            try:
                return check_plan(self.pipeline, self.context.storage, plan, done_before)
            finally:
                checking += time.perf_counter() - t

        known = [lost] if lost is not None else []
        if restart:
            t = time.perf_counter()
            known += self._damaged_outputs(rec)
            checking += time.perf_counter() - t
        trial, outcome = self._outcome(failed, limits, known, check)
        rec.problems.extend(str(p) for p in outcome.problems)
        for p in outcome.problems:
            if p is not outcome.blocker:
                self.progress.line(f"  unusable data: {p}; planning without it", level=logging.WARNING)
        if not outcome.executable:
            why = describe_blocker(
                outcome, retain=self.pipeline.retain, gc=self.pipeline.gc, available=trial.available
            )
            raise RecoveryError(
                f"{why}; no recovery is possible, and nothing under {self.pipeline.location.uri} was changed"
            )
        # executable: from here on the run and the root change
        for n in outcome.failed:
            self.lose(n)
        for n, epochs in outcome.forgotten.items():
            for e in epochs:
                self.state.planner.forget(n, e)
        for n, keep in {**dict(limits or {}), **outcome.truncated}.items():
            self.state.planner.truncate(n, keep)
        plan = self.state.planner.plan(sorted(outcome.failed), self.state.live_all(outcome.failed))
        rec.validated = time.perf_counter()
        rec.validation_seconds += checking
        rec.plan_seconds += rec.validated - t0 - checking
        rec.rebuild_seconds += rec.validated - t0 - checking
        if plan.frontiers != outcome.plan.frontiers:  # the monitor and the solver answer alike (tested)
            raise RecoveryError(
                f"internal error: the monitor planned {dict(plan.frontiers)}, the solver "
                f"{dict(outcome.plan.frontiers)}"
            )
        rec.plan = plan
        rec.failed = tuple(n for n in self.order if n in outcome.failed)
        damaged = {(p.step, p.epoch) for p in outcome.problems if p.kind == "output"}
        self._apply(plan, done_before, rec, damaged=damaged, rewrite=self._downstream(limits or {}))
        for n, e in (limits or {}).items():
            self.state.journal.note(f"{n}: rolled back to epoch {e} (code_changes)")
        if restart and all(d < 0 for d in done_before.values()):
            return  # a fresh start, nothing to report
        # the epochs its report prices: what it executed again or replayed, and the global rollback's after
        # the last checkpoint every stateful step had (one of those available then, or none)
        first = min(
            [epoch_of(f) + 1 for f in plan.frontiers.values()]
            + [min(v) + 1 for v in rec.available_at_failure.values() if v]
            + [lo for lo, _ in rec.replayed.values()],
            default=0,
        )
        self.state.journal.recovered(rec, first)
        if not restart:
            self.progress.more(sum(max(0, done_before[n] - self.state.done[n]) for n in self.order))
        lost_work = {
            n: (epoch_of(f), done_before[n])
            for n, f in plan.frontiers.items()
            if epoch_of(f) < done_before[n]
        }
        if in_place is not None:  # nothing rolled back (the plan for "nothing failed")
            moves = (
                f"nothing rolled back: {in_place[0]} runs epoch {in_place[1]} again in place (its state in memory "
                "and its queued input are intact)"
            )
        else:
            moves = ", ".join(
                self._move(n, plan.actions[n], f, rec.discarded.get(n, [])) for n, (f, _) in lost_work.items()
            )
        self.progress.line(
            f"recovery {rec.index}: plan in {rec.plan_seconds * 1000:.0f} ms; {moves or 'nothing to redo'}"
        )
        if rec.back(self.state.done):
            rec.finished = time.perf_counter()
            now = self.cpu.read() if self.cpu is not None else None
            if rec.cpu_started is not None and now is not None:
                rec.cpu_seconds = max(0.0, now[0] - rec.cpu_started)
                if rec.jit_started is not None:
                    rec.jit_seconds = min(rec.cpu_seconds, max(0.0, now[1] - rec.jit_started))
            if all(self.state.done[n] >= rec.in_flight for n in self.order):
                rec.caught_up = rec.finished

    def _outcome(
        self,
        failed: set[str],
        limits: Mapping[str, int] | None,
        known: list[CorruptDataError],
        check: Any,
    ) -> tuple[Planner, Any]:
        """The executable plan for ``failed`` with ``limits`` (or why there is none), on a copy of the
        planner."""
        trial = self.state.planner.copy()
        for n, e in (limits or {}).items():
            trial.truncate(n, e)  # held to E: what it did after E was done by the old code
        return trial, executable_plan(self.pipeline, trial, failed, self.state.live_all, check, lost=known)

    def _checker(self, done_before: dict[str, int]) -> Any:
        """The storage check of a trial plan (:func:`check_plan`) against what each step had done."""

        def check(plan: Any, _: Any) -> CorruptDataError | None:
            return check_plan(self.pipeline, self.context.storage, plan, done_before)

        return check

    def touched(self, failed: set[str]) -> set[str] | None:
        """The steps a recovery of ``failed`` would roll back or restart now (``failed`` and every step its
        executable plan moves off ``⊤``), solved on a copy of the planner with the same checks; ``None``: no
        executable plan. Nothing changes."""
        _, outcome = self._outcome(failed, None, [], self._checker(dict(self.state.done)))
        if not outcome.executable:
            return None
        return set(outcome.failed) | {n for n, f in outcome.plan.frontiers.items() if epoch_of(f) != TOP}

    def earliest_limits(self, failed: set[str], limits: Mapping[str, int]) -> dict[str, int]:
        """For each step of ``limits`` (``code_changes`` epochs a restart could not honour): the earliest
        epoch, at or after the one asked, from which the data to redo it is all there (the others held as
        asked); a step none works for is left out. Nothing changes: each trial is planned and checked on a
        copy."""
        check = self._checker(dict(self.state.high))
        found: dict[str, int] = {}
        for n, e in limits.items():
            for later in range(e + 1, self.state.high.get(n, e) + 1):
                _, outcome = self._outcome(failed, {**limits, n: later}, [], check)
                if outcome.executable:
                    found[n] = later
                    break
        return found

    def _move(self, name: str, action: str, frontier: int, kept: list[int]) -> str:
        """What a step does in a plan, in its regime's words (``cc restores its checkpoint at 5``)."""
        again = f"from epoch {frontier + 1}"
        if name in self.pipeline.inputs:
            return f"{name} re-reads {again}"
        regime = self.pipeline.steps[name].regime
        if regime.stateless:
            return f"{name} recomputes {again}"
        if regime.kind == "output":
            if not kept:
                return f"{name} writes {again}"
            redo = [e for e in range(frontier + 1, kept[-1]) if e not in kept]
            return (
                f"{name} keeps its committed epochs {_span(kept)} (final: what is sent again for them is "
                "discarded)"
                + (f", writes the damaged {_span(redo)} again" if redo else "")
                + f" and writes from epoch {kept[-1] + 1}"
            )
        if getattr(regime, "database", None):
            return (
                f"{name} returns its database to epoch {frontier}"
                if frontier >= 0
                else f"{name} empties its database"
            )
        if frontier < 0:
            return f"{name} restarts from empty state"
        return f"{name} {'restores' if action == 'restore' else 'rolls back to'} its checkpoint at {frontier}"

    def _damaged_outputs(self, rec: Recovery) -> list[CorruptDataError]:
        """The acknowledged output epochs a recovery can still write again, and at most :attr:`SCRUB` older
        ones drawn at random, checked against their manifests: each damaged one.

        The epochs from an output's oldest restore point on (what its
        planner kept at the start: every epoch without garbage collection)
        are checked at every restart: a damaged one is written again. An
        older one cannot be recomputed (its input was collected); checking
        them all made a restart's cost grow with the run's history (~0.2 to
        2 ms per epoch and output on a local disk), so a restart checks a
        random sample of them (recorded in ``rec.sampled``), and ``falkirk
        pipeline verify ROOT`` every one.
        """
        found = []
        for n in self.pipeline.external_outputs:
            kept = self.state.planner.available.get(n) or []

            def pick(epochs: list[int], n: str = n, lo: int = kept[0] if kept else -1) -> list[int]:
                older = [e for e in epochs if e < lo]
                if len(older) > self.SCRUB:
                    self.state.journal.note(
                        f"{n}: checked its {len(epochs) - len(older)} committed epochs from {lo} and {self.SCRUB} "
                        f"of the {len(older)} older ones (drawn at random); `falkirk pipeline verify` checks every one"
                    )
                    rec.sampled[n] = lo
                    older = self._draw.sample(older, self.SCRUB)
                return [*older, *(e for e in epochs if e >= lo)]

            # each damaged epoch is written again (or, older than its restore points, named); the others stay
            found += self.context.storage.verify_all(n, "output", select=pick)[1]
        return found

    def _downstream(self, steps: Mapping[str, int]) -> dict[str, int]:
        """The outputs ``steps`` reach, each with the lowest epoch ``E`` named for a step upstream of it:
        ``code_changes`` asks to redo their epochs after ``E`` (the one chosen rewrite; those up to ``E``
        stand)."""
        out: dict[str, int] = {}
        for step, limit in steps.items():
            reached, todo = {step}, [step]
            while todo:
                for c in self.pipeline.consumers(todo.pop()):
                    if c not in reached:
                        reached.add(c)
                        todo.append(c)
            for n in reached & set(self.pipeline.external_outputs):
                out[n] = min(limit, out.get(n, limit))
        return out

    def _apply(
        self,
        plan: Any,
        done_before: dict[str, int],
        rec: Recovery,
        *,
        damaged: AbstractSet[tuple[str, int]] = frozenset(),
        rewrite: Mapping[str, int] | None = None,
    ) -> None:
        """SPEC §6 reset. An output keeps its committed epochs above its frontier (final: what is sent again
        for them is discarded), except those found ``damaged`` and, for an output in ``rewrite``, those after
        the epoch it names."""
        outputs = set(self.pipeline.external_outputs)
        failed = set(rec.failed)
        for n in self.order:
            f = epoch_of(plan.frontiers[n])
            if f == TOP or (n not in failed and f >= self.state.done[n]):
                # kept; or behind its frontier (a concurrent run): nothing of it to undo, it goes on from done
                continue
            runner = self.state.runners[n]
            if n in outputs:
                upto = (rewrite or {}).get(n, TOP)
                kept = {
                    e
                    for e in self.context.storage.epochs(n, "output")
                    if f < e <= upto and (n, e) not in damaged
                }
                runner.reset(f, committed=kept)
                if kept:
                    rec.discarded[n] = sorted(kept)
            else:
                runner.reset(f)
            rescaled = runner.rescaled
            if rescaled is not None:
                old_n, new_n, reads = rescaled
                rec.rescaled[n] = (old_n, new_n)
                self.progress.line(
                    f"  {n}: keyed checkpoint at {f} restored from {old_n} into {new_n} partitions "
                    f"(by key group; new partition <- old: {reads})"
                )
                runner.rescaled = None
            self.state.planner.truncate(n, f)
            self.state.rolled_back(n, f)
        for link in self.pipeline.edges:
            fq = epoch_of(plan.frontiers[link.dst])
            if fq == TOP:
                continue
            replay = range(0)
            keep_memory = False
            if self.pipeline.logs(link.src):
                fp = epoch_of(plan.frontiers[link.src])
                # never past what it logged
                hi = done_before[link.src] if fp == TOP else min(fp, done_before[link.src])
                keep_memory = fp == TOP
                replay = range(fq + 1, hi + 1)
                if hi > fq:
                    rec.replayed[link.name] = (fq + 1, hi)
            self.state.queues.reset(link.name, keep_upto=fq, replay=replay, keep_memory=keep_memory)
        self.state.queues.frames.rolled_back()
        self.state.queues.frames.flush()


def _span(epochs: list[int]) -> str:
    """``5..9`` for a run of epochs, ``5, 7`` otherwise."""
    if epochs == list(range(epochs[0], epochs[-1] + 1)):
        return str(epochs[0]) if len(epochs) == 1 else f"{epochs[0]}..{epochs[-1]}"
    return ", ".join(map(str, epochs))
