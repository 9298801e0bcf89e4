"""Executable plans: a rollback plan is only as good as the data it reads — check it before anyone acts on it.

A plan restores some steps to checkpoints and replays logged epochs (the
input log is a log too). :func:`check_plan` checks exactly that data under
the root: every restore point the plan picks (a DataFrame checkpoint, an
Eager database's committed epoch, an output's acknowledged epoch) and every
logged epoch it replays (a step's log, or an input epoch's cut and records).
With ``verify=True`` each data file's size and checksum are checked too; a
what-if checks presence and sizes only (cheap, no data read).

:func:`executable_plan` is the loop both a recovery and a what-if run: plan,
check, and when something is unusable take it out — a restore point is
forgotten, a lost log epoch makes its step recompute from before it — and
plan again, until the plan is executable or the data it would need is gone
(:attr:`Outcome.blocker`). It works on an in-memory planner and changes
nothing: a recovery acts on the outcome only once it is executable, so a
refused recovery leaves the root as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import define, field

from falkirk.spark.errors import CorruptDataError
from falkirk.spark.pipeline.plan.live import frontier_kind
from falkirk.spark.pipeline.plan.planner import TOP, Planner, epoch_of
from falkirk.spark.pipeline.store import delta
from falkirk.spark.pipeline.store.eagerdb import committed_epochs, database_path

if TYPE_CHECKING:
    from falkirk.solver import Checkpoint, RollbackPlan
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = [
    "Outcome",
    "check_plan",
    "check_restore",
    "check_replay",
    "executable_plan",
    "describe_blocker",
    "needed_retain",
    "verify_root",
]


def check_restore(
    pipeline: Definition, storage: Storage, name: str, frontier: int, *, verify: bool = True
) -> None:
    """Check that ``name`` can come back to ``frontier`` (``CorruptDataError`` naming what is unusable).

    A delta of incremental state needs its whole chain: an unusable
    snapshot or earlier delta makes *this* restore point unusable (the
    error names ``frontier`` and the damaged file), so the plan falls back
    to the restore point before it.
    """
    if frontier < 0 or name in pipeline.inputs or pipeline.stateless(name):
        return  # ∅ needs nothing; a stateless step restores nothing; an input is read, not restored
    kind = frontier_kind(pipeline, name)
    m = storage.get(name, kind, frontier)
    database = getattr(pipeline.steps[name].regime, "database", None)
    if database and not Path(database).is_absolute() and storage.fs.local_path(database) is None:
        # relative to a remote root: not reachable from here (a run refuses it; a plan reads manifests)
        database = None
    if database:
        path = database_path(storage.fs, name, database)
        shown = database if not Path(database).is_absolute() else str(path)
        try:
            committed = committed_epochs(path, name)
        except CorruptDataError as err:
            raise CorruptDataError(name, kind, frontier, err.detail, path=shown) from None
        if frontier not in committed:
            raise CorruptDataError(name, kind, frontier, f"has no commit of epoch {frontier}", path=shown)
        return
    check = storage.verify if verify else storage.check_sizes
    check(m)
    # incremental state: the snapshot and every delta it is restored through
    for i, e in enumerate(delta.chain(m)):
        try:
            check(storage.get(name, kind, e))
        except CorruptDataError as err:
            what = "snapshot" if i == 0 else "delta"
            raise CorruptDataError(
                name,
                kind,
                frontier,
                f"{err.detail} (the {what} at epoch {e} that epoch {frontier} is restored through)",
                path=err.path,
            ) from None


def check_replay(
    pipeline: Definition, storage: Storage, sender: str, epoch: int, *, verify: bool = True
) -> None:
    """Check that ``sender``'s output of ``epoch`` can be replayed from its log (an input's: from the input
    log)."""
    if sender in pipeline.inputs:
        pipeline.inputs[sender].log.check(epoch, verify=verify)
        return
    m = storage.get(sender, "log", epoch)
    if verify:
        storage.verify(m)
    else:
        storage.check_sizes(m)


def check_plan(
    pipeline: Definition,
    storage: Storage,
    plan: RollbackPlan,
    done: Mapping[str, int],
    *,
    verify: bool = True,
) -> CorruptDataError | None:
    """The first unusable item ``plan`` needs (see the module docstring), or ``None``: it is executable.

    ``done``: each step's last completed epoch (what a replay from a sender
    at ``⊤`` re-sends up to). Costs one manifest read per restored step and
    per replayed epoch, plus the data files' checksums with ``verify``.
    """
    for n in pipeline.order:
        f = epoch_of(plan.frontiers[n])
        if f != TOP:
            try:
                check_restore(pipeline, storage, n, f, verify=verify)
            except CorruptDataError as err:
                return err
    for r in plan.replay.values():
        fp = epoch_of(r.log_frontier)
        hi = done[r.sender] if fp == TOP else min(fp, done[r.sender])  # never past what the sender logged
        for k in range(epoch_of(r.exclude) + 1, hi + 1):
            try:
                check_replay(pipeline, storage, r.sender, k, verify=verify)
            except CorruptDataError as err:
                return err
    return None


@define
class Outcome:
    """What :func:`executable_plan` found (see the module docstring)."""

    #: the executable plan, or the last plan tried when :attr:`blocker` is set
    plan: RollbackPlan
    #: the failed steps, with those whose lost log made them recompute
    failed: set[str]
    #: every unusable item found, in the order found
    problems: list[CorruptDataError] = field(factory=list)
    #: per step, restore points found unusable (forgotten)
    forgotten: dict[str, list[int]] = field(factory=dict)
    #: per step, the frontier it was held to because a log or output epoch above it was lost
    truncated: dict[str, int] = field(factory=dict)
    #: the unusable item no fallback can replace (input data), or ``None``: the plan is executable
    blocker: CorruptDataError | None = None

    @property
    def executable(self) -> bool:
        """Whether the plan can be executed with the data under the root."""
        return self.blocker is None


def executable_plan(
    pipeline: Definition,
    planner: Planner,
    failed: Iterable[str],
    live: Callable[[set[str]], Mapping[str, Checkpoint]],
    check: Callable[[RollbackPlan, set[str]], CorruptDataError | None],
    *,
    lost: Iterable[CorruptDataError] = (),
) -> Outcome:
    """Plan, check, take out what is unusable and plan again (see the module docstring).

    ``planner`` is changed (forget/truncate): give an in-memory copy
    (:meth:`Planner.copy`). ``live(failed)`` gives the live metadata of the
    steps not in ``failed``; ``check(plan, failed)`` the first unusable item
    the plan needs. ``lost``: items already known to be unusable. Each round
    removes at least one restore point or log epoch, so the loop ends.
    """
    out = Outcome(plan=None, failed=set(failed))  # type: ignore[arg-type]
    pending = list(lost)
    for _ in range(64 * (len(pipeline.order) + 1)):
        for problem in pending:
            out.problems.append(problem)
            if not _take_out(pipeline, planner, problem, out):
                out.blocker = problem
                if out.plan is None:
                    out.plan = planner.plan(sorted(out.failed), live(out.failed))
                return out
        out.plan = planner.plan(sorted(out.failed), live(out.failed))
        found = check(out.plan, out.failed)
        if found is None:
            return out
        pending = [found]
    raise AssertionError("executable_plan: no progress")  # pragma: no cover - each round removes something


def _take_out(pipeline: Definition, planner: Planner, err: CorruptDataError, out: Outcome) -> bool:
    """Take the unusable item out of the planner's view; ``False`` when nothing can stand in for it."""
    name, kind, epoch = err.step, err.kind, err.epoch
    if name in pipeline.inputs or name not in pipeline.steps:
        return False
    if kind == "checkpoint":
        out.forgotten.setdefault(name, []).append(epoch)
        planner.forget(name, epoch)
        return True
    # a lost log or output epoch: the step recomputes from before it
    keep = epoch - 1
    out.truncated[name] = min(keep, out.truncated.get(name, keep))
    planner.truncate(name, keep)
    out.failed.add(name)
    return True


def needed_retain(dropped: Mapping[str, list[int]], available: Mapping[str, list[int]]) -> dict[str, int]:
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


def describe_blocker(
    outcome: Outcome,
    *,
    retain: int,
    gc: bool,
    available: Mapping[str, list[int]] | None = None,
) -> str:
    """Why the plan cannot be executed: the damaged file first and what is wrong with it, then what it made
    impossible, then why the data that would replace it is gone.

    ``available``: the restore points still usable (for the ``retain`` that would have kept an older one).
    """
    blocker = outcome.blocker
    assert blocker is not None
    damaged = [p for p in outcome.problems if p is not blocker]
    if not damaged:
        text = str(blocker)
    else:
        text = str(damaged[0])
        effects = [
            f"{n} cannot restore epoch(s) {', '.join(map(str, sorted(es)))} and falls back"
            for n, es in outcome.forgotten.items()
        ]
        effects += [f"{n} must recompute from epoch {k + 1}" for n, k in outcome.truncated.items()]
        where = blocker.path or f"{blocker.kind} of {blocker.step}"
        what = f"{blocker.kind} {blocker.step}, epoch {blocker.epoch}"
        text += (
            f"; so {' and '.join(effects)}, which needs {where} ({what}), but it {blocker.detail}"
            if effects
            else f"; the recovery needs {where} ({what}), but it {blocker.detail}"
        )
    if "garbage collection" in blocker.detail:
        if gc and outcome.forgotten:
            need = max(needed_retain(outcome.forgotten, available or {}).values())
            text += (
                f"; Pipeline(retain={need}) would have kept what an older restore point needs"
                if need > retain
                else f"; retain={retain} keeps the restore points lost here, so more was lost than it covers"
            )
    elif damaged:
        text += "; it was removed or damaged outside falkirk too"
    if outcome.plan is not None:
        moves = [
            f"{n} {outcome.plan.actions[n]} to {'∅' if epoch_of(f) < 0 else epoch_of(f)}"
            for n, f in outcome.plan.frontiers.items()
            if not f.is_top
        ]
        text += f" (the plan that needs it: {', '.join(moves)})"
    return text


def verify_root(pipeline: Definition, storage: Storage) -> tuple[int, list[CorruptDataError]]:
    """Every item under the root checked against what records it; ``(items checked, problems)``. Nothing
    changes.

    Checkpoints, logs, complete markers and outputs against their manifests
    (files, sizes, checksums), an Eager database's committed epochs against
    its checkpoint manifests, and every input epoch not yet acknowledged
    (its cut and records). What :meth:`Pipeline.run <falkirk.spark.Pipeline.run>`
    does with a problem depends on the plan: a restore point or log epoch is
    done without, an output epoch rewritten, input is irreplaceable.
    """
    from falkirk.spark.pipeline.store.manifest import KINDS

    checked, problems = 0, []
    for n in pipeline.order:
        if n in pipeline.inputs:
            log = pipeline.inputs[n].log
            acked = log.acknowledged()
            for e in log.cut_epochs():
                checked += 1
                try:
                    log.check(e) if e > acked else log.get_cut(e)
                except CorruptDataError as err:
                    problems.append(err)
            continue
        for kind in KINDS:
            count, found = storage.verify_all(n, kind)  # one listing and the manifests read together
            checked += count
            problems += found
            if kind == "checkpoint" and getattr(pipeline.steps[n].regime, "database", None):
                bad = {p.epoch for p in found}
                for e in (e for e in storage.epochs(n, kind) if e not in bad):
                    try:
                        check_restore(pipeline, storage, n, e)
                    except CorruptDataError as err:
                        problems.append(err)
    return checked, problems
