"""What-if plans: "if these steps failed now, what would roll back, and what would it cost?" — without running
anything.

:meth:`Pipeline.plan_failure <falkirk.spark.Pipeline.plan_failure>` asks falkirk's solver
for the plan the executor would execute if ``steps`` failed at an epoch
boundary, when every step has completed epoch ``at``:

* during a run (e.g. from the ``progress`` callback), from the running
  executor's own state: exactly what a failure injected there
  (``STEP@AT:after``) then does;
* on a stopped pipeline, from the manifests under the root alone (no Spark):
  the state a restarted driver reaches once it has caught up to the last
  epoch every step completed (or an earlier ``at``, with the checkpoints
  after it set aside).

The :class:`WhatIf` holds the plan (each step's frontier and action, and the
constraint that forced it through ``plan.explain``), the epochs each step
would recompute, the logged epochs that would be replayed and — when the
run's measurements are at hand — the rows and seconds that costs.
``falkirk pipeline plan ROOT --fail STEP`` prints it from the command line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from attrs import field, frozen

from falkirk.solver import Checkpoint, RollbackPlan
from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.plan.explain import plan_table, replayed_line, show_epoch, why
from falkirk.spark.pipeline.plan.feasible import check_plan, describe_blocker, executable_plan
from falkirk.spark.pipeline.plan.live import boundary_live, frontier_kind
from falkirk.spark.pipeline.plan.planner import TOP, Planner, epoch_of
from falkirk.spark.pipeline.store.storage import Storage

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.run.journal import Journal

__all__ = ["WhatIf", "what_if", "from_root", "check_steps"]


@frozen
class WhatIf:
    """A plan the executor would execute, and what it would redo (see the module docstring)."""

    failed: tuple[str, ...]
    #: the epoch boundary: every step has completed ``at`` (``done`` per step)
    at: int
    done: Mapping[str, int]
    plan: RollbackPlan
    #: per step whose frontier is below what it had done: the epochs it recomputes
    redo: Mapping[str, tuple[int, int]]
    #: per logged edge replayed: the epochs re-sent from the log
    replay: Mapping[str, tuple[int, int]]
    #: output rows of the recomputed (step, epoch) pairs, where the run measured them (``None``: unknown)
    rows: int | None
    seconds: float | None
    #: the cheapest single change that would roll back less (``log=True`` on one step), if any
    suggestion: str | None = None
    #: unusable data the plan had to do without (each a message naming the file), in the order found
    unusable: tuple[str, ...] = ()
    #: why the plan cannot be executed with the data under the root (``None``: it can)
    blocked: str | None = None
    #: the step whose ``log=True`` :attr:`suggestion` names (``None``: no suggestion)
    suggested_log: str | None = None
    #: per output rolled back below what it had committed: the committed epochs it keeps (final, not redone)
    kept: Mapping[str, tuple[int, int]] = field(factory=dict)

    @property
    def executable(self) -> bool:
        """Whether the data the plan needs is under the root (checked:
        :mod:`~falkirk.spark.pipeline.plan.feasible`)."""
        return self.blocked is None

    @property
    def frontiers(self) -> dict[str, int]:
        """Each step's rollback frontier as an epoch (``-1``: ∅, ``planner.TOP``: ⊤)."""
        return {n: epoch_of(f) for n, f in self.plan.frontiers.items()}

    def table(self) -> str:
        """The plan as a table: step, action, frontier, had done, epochs redone, why."""
        rows = [("step", "action", "frontier", "had done", "redo", "why")]
        for n, f in self.plan.frontiers.items():
            lo_hi = self.redo.get(n)
            redo = (
                "-" if lo_hi is None else f"{lo_hi[0]}" if lo_hi[0] == lo_hi[1] else f"{lo_hi[0]}–{lo_hi[1]}"
            )
            rows.append(
                (
                    n,
                    self.plan.actions[n],
                    show_epoch(f),
                    str(self.done.get(n, -1)),
                    redo,
                    why(self.plan, n) if not f.is_top else "",
                )
            )
        out = [f"what if {', '.join(self.failed)} failed after epoch {self.at}:", *plan_table(rows)]
        if self.replay:
            out.append(replayed_line(self.replay))
        for n, (lo, hi) in self.kept.items():
            span = f"{lo}" if lo == hi else f"{lo}–{hi}"
            out.append(
                f"  {n} keeps its committed epoch(s) {span} (final: what is sent again for them is discarded)"
            )
        pairs = sum(hi - lo + 1 for lo, hi in self.redo.values())
        cost = f"  cost: {pairs} (step, epoch) pair(s) recomputed"
        if self.rows is not None:
            cost += f", {self.rows} output row(s)"
        if self.seconds is not None:
            cost += f", about {self.seconds:.1f} s (their first execution's time)"
        out.append(cost)
        if self.suggestion:
            out.append(f"  suggestion: {self.suggestion}")
        out += [f"  unusable data, planned without: {u}" for u in self.unusable]
        if self.blocked is not None:
            out.append(f"  NOT EXECUTABLE: {self.blocked}")
        return "\n".join(out)

    def draw(self, path: str) -> None:
        """Draw the plan (needs ``falkirk[draw]``) to ``path``."""
        from falkirk.cli.render import render_plan

        render_plan(
            self.plan,
            path,
            title=f"what if {', '.join(self.failed)} failed after epoch {self.at}",
            subtitle="failed: " + ", ".join(self.failed),
        )


def what_if(
    pipeline: Definition,
    planner: Planner,
    failed: Iterable[str],
    done: Mapping[str, int],
    *,
    live: Mapping[str, Checkpoint] | None = None,
    journal: Journal | None = None,
    storage: Storage | None = None,
) -> WhatIf:
    """The plan for ``failed`` from ``planner``'s available frontiers, with everyone at ``done``.

    With ``storage`` the plan is checked against the data under the root
    (presence and sizes: :func:`~falkirk.spark.pipeline.plan.feasible.check_plan`)
    the way a recovery checks it: an unusable restore point or log epoch is
    planned without, as the executor would, and a plan whose data is gone is
    marked not executable (:attr:`WhatIf.blocked`). ``planner`` is not changed.
    """
    failed = tuple(n for n in pipeline.order if n in set(failed))

    def live_for(lost: set[str]) -> dict[str, Checkpoint]:
        if live is not None:
            return {n: c for n, c in live.items() if n not in lost}
        return boundary_live(pipeline, done, lost)

    unusable: tuple[str, ...] = ()
    blocked = None
    if storage is None:
        plan = planner.plan(sorted(failed), live_for(set(failed)))
    else:
        outcome = executable_plan(
            pipeline,
            planner.copy(),
            failed,
            live_for,
            lambda plan, _: check_plan(pipeline, storage, plan, done, verify=False),
        )
        plan = outcome.plan
        unusable = tuple(str(p) for p in outcome.problems if p is not outcome.blocker)
        if not outcome.executable:
            blocked = describe_blocker(
                outcome, retain=pipeline.retain, gc=pipeline.gc, available=planner.available
            )
    redo: dict[str, tuple[int, int]] = {}
    kept: dict[str, tuple[int, int]] = {}
    outputs = set(pipeline.external_outputs)
    for n, f in plan.frontiers.items():
        e = epoch_of(f)
        if e != TOP and e < done[n]:
            committed = max(planner.available.get(n, ()), default=-1) if n in outputs else -1
            if committed > e:  # an output's committed epochs are final: kept, not redone
                kept[n] = (e + 1, min(committed, done[n]))
                if done[n] > committed:
                    redo[n] = (committed + 1, done[n])
            else:
                redo[n] = (e + 1, done[n])
    replay: dict[str, tuple[int, int]] = {}
    for edge, r in plan.replay.items():
        fp = epoch_of(r.log_frontier)
        hi = min(done[r.sender] if fp == TOP else fp, done[r.receiver])
        lo = epoch_of(r.exclude) + 1
        if lo <= hi:
            replay[edge] = (lo, hi)
    suggested = _suggest(pipeline, planner, failed, done, live, redo)
    rows = seconds = None
    if journal is not None:
        pairs = [(n, k) for n, (lo, hi) in redo.items() if n in pipeline.steps for k in range(lo, hi + 1)]
        rows = sum(journal.rows(n, k) or 0 for n, k in pairs)
        seconds = sum(journal.seconds(n, k) or 0.0 for n, k in pairs)
    return WhatIf(
        failed,
        min(done.values(), default=-1),
        dict(done),
        plan,
        redo,
        replay,
        rows,
        seconds,
        suggested and suggested[1],
        unusable,
        blocked,
        suggested and suggested[0],
        kept,
    )


def _redo_pairs(plan: RollbackPlan, done: Mapping[str, int]) -> tuple[int, int]:
    """(step, epoch) pairs recomputed by ``plan``, and steps it keeps at ⊤."""
    pairs = kept = 0
    for n, f in plan.frontiers.items():
        e = epoch_of(f)
        if e == TOP:
            kept += 1
        elif e < done[n]:
            pairs += done[n] - e
    return pairs, kept


def _suggest(
    pipeline: Definition,
    planner: Planner,
    failed: tuple[str, ...],
    done: Mapping[str, int],
    live: Mapping[str, Checkpoint] | None,
    redo: Mapping[str, tuple[int, int]],
) -> tuple[str, str] | None:
    """The single ``log=True`` that would recompute the least, if it beats the plan as declared: ``(step,
    why)``.

    Each step that does not log its output and whose consumers roll back is
    tried in turn: the same failure is planned with that step's output edges
    logged (as if it had logged them all along). Cost: one solve per candidate.
    """
    if not redo:
        return None
    base = sum(hi - lo + 1 for lo, hi in redo.values())
    best: tuple[int, int, str] | None = None
    for n in pipeline.order:
        if n in pipeline.inputs or pipeline.logs(n) or n in failed or not pipeline.consumers(n):
            continue
        if not any(c in redo for c in pipeline.consumers(n)) and n not in redo:
            continue
        what = Planner(
            pipeline.dataflow(also_logging=[n]),
            outputs=pipeline.external_outputs,
            known=planner.available,
            monitor=False,
        )
        plan = what.plan(
            sorted(failed), dict(live) if live is not None else boundary_live(pipeline, done, failed)
        )
        pairs, kept = _redo_pairs(plan, done)
        if pairs < base and (best is None or (pairs, -kept) < best[:2]):
            best = (pairs, -kept, n)
    if best is None:
        return None
    pairs, _, n = best
    edges = ", ".join(e.name for e in pipeline.edges if e.src == n)
    return n, (
        f"log=True on step {n!r} (logging {edges}) would recompute {pairs} (step, epoch) pair(s) instead of "
        f"{base}: its consumers would replay its log instead of rolling it back"
    )


def from_root(pipeline: Definition, failed: Iterable[str], *, at: int | None = None) -> WhatIf:
    """The what-if plan from the manifests under ``pipeline``'s root (no Spark, nothing written), checked
    against the data there."""
    storage = Storage(pipeline.location, fsync=False, checksums=False)
    available: dict[str, list[int]] = {}
    for n in pipeline.order:
        if n in pipeline.inputs:
            available[n] = pipeline.inputs[n].log.cut_epochs()[-1:]
        else:
            available[n] = storage.epochs(n, frontier_kind(pipeline, n))
    # nodes that persist a frontier every epoch (Lazy steps catch up from their checkpoint on a restart)
    every_epoch = [
        n
        for n in pipeline.order
        if n in pipeline.inputs or pipeline.steps[n].regime.kind in ("ephemeral", "batch", "eager", "output")
    ]
    latest = min((max(available[n], default=-1) for n in every_epoch), default=-1)
    if latest < 0:
        raise PipelineError(
            f"{pipeline.location.uri}: no epoch has completed yet; there is nothing to roll back"
        )
    if at is None:
        at = latest
    if not -1 < at <= latest:
        raise PipelineError(
            f"at={at}: the pipeline at {pipeline.location.uri} has completed epochs 0..{latest}"
        )
    # a stateless step (or an input) that completed a later epoch completed ``at`` too
    known = {
        n: (
            [at]
            if (n in pipeline.inputs or pipeline.stateless(n)) and max(es, default=-1) >= at
            else [e for e in es if e <= at]
        )
        for n, es in available.items()
    }
    planner = Planner(pipeline.dataflow(), outputs=pipeline.external_outputs, known=known, monitor=False)
    return what_if(pipeline, planner, failed, {n: at for n in pipeline.order}, storage=storage)


def check_steps(pipeline: Definition, steps: Iterable[str] | str) -> tuple[str, ...]:
    """``steps`` as a tuple of known node names (one name may be given as a string)."""
    names = (steps,) if isinstance(steps, str) else tuple(steps)
    if not names:
        raise PipelineError("plan_failure: name at least one step that fails")
    for n in names:
        if n not in pipeline.order:
            raise PipelineError(f"plan_failure: unknown step {n!r} (steps: {', '.join(pipeline.order)})")
    return names
