"""Garbage collection with retention: what a run may delete after each epoch.

SPEC §6 gives each step a low-watermark below which it never rolls back;
everything below it — checkpoints, consumed logs, acknowledged input — can
go. falkirk keeps more than that: :func:`retained_watermarks` computes the
low-watermarks as if each stateful step's newest ``retain - 1`` checkpoints
were lost, so a corrupt or deleted latest checkpoint can still fall back to
an older one with everything it needs (``Pipeline(retain=1)``: the plain
low-watermarks). :func:`collect` then asks every runner to delete what lies
below.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from falkirk.spark.pipeline.plan.planner import epoch_of

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.plan.planner import Planner
    from falkirk.spark.pipeline.run.runners import Runner
    from falkirk.spark.pipeline.run.state import RunState
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["retained_watermarks", "collect"]


def retained_watermarks(
    pipeline: Definition, planner: Planner, runners: Mapping[str, Runner]
) -> dict[str, int]:
    """The low-watermarks with retention: as if each step's newest ``retain - 1`` restore points were lost.

    Restore points are the checkpoints of stateful steps (DataFrame state or
    an Eager database), the acknowledged epochs of outputs, and the complete
    markers of stateless steps and inputs' cuts (losing the newest drags
    their consumers back as far as the one before). Costs one listing per
    stateless node and one solve.
    """
    lw = planner.watermarks()
    extra = pipeline.retain - 1
    if extra <= 0:
        return lw
    from falkirk.solver import solve_frontiers

    saved = planner.available
    restricted = {}
    for n, es in saved.items():
        if pipeline.stateless(n):
            points = runners[n].available()
            restricted[n] = points[-pipeline.retain : -extra] if len(points) >= pipeline.retain else []
        else:
            restricted[n] = es[:-extra]
    if restricted == saved:
        return lw
    planner.available = restricted
    try:
        marks = solve_frontiers(planner.dataflow(), "all").frontiers
    finally:
        planner.available = saved
    return {n: min(lw[n], epoch_of(marks[n])) for n in lw}


def collect(
    state: RunState,
    storage: Storage,
    *,
    sweep: bool = True,
    busy: Collection[str] = (),
) -> None:
    """Delete what the low-watermarks allow (with retention): old checkpoints, consumed logs, acknowledged
    input, execution records no retained epoch needs, and (``sweep``) data directories this driver wrote but
    never published — not while step executions run on other threads, which may be writing theirs. The nodes
    in ``busy`` (executing on another thread now: an input appending, a database step inside its transaction)
    are collected at a later epoch's end."""
    pipeline, planner, runners = state.pipeline, state.planner, state.runners
    lw = retained_watermarks(pipeline, planner, runners)
    for n in pipeline.order:
        if n in busy:
            continue
        consumers = pipeline.consumers(n)
        runners[n].collect(lw[n], min((lw[q] for q in consumers), default=lw[n]))
    oldest = min(lw.values(), default=-1)
    for n in pipeline.order:
        state.journal.collect(n, oldest)
    if sweep:
        storage.sweep_unpublished()  # what failed steps of this driver wrote; a crashed driver's: at start-up
    planner.compact()
