"""Garbage collection with retention: what a run may delete after each epoch.

SPEC §6 gives each step a low-watermark below which it never rolls back;
everything below it — checkpoints, consumed logs, acknowledged input — can
go. falkirk keeps more than that: :func:`retained_watermarks` computes the
low-watermarks as if each stateful step's newest ``retain - 1`` checkpoints
were lost, so a corrupt or deleted latest checkpoint can still fall back to
an older one with everything it needs (``Pipeline(retain=1)``: the plain
low-watermarks). :func:`collect` then asks every runner to delete what lies
below. :func:`settle` drops, at a new driver's start, the output epochs no
recovery that can be carried out would choose (their manifests stay: they
prove what was acknowledged).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from falkirk.spark.pipeline.plan.planner import epoch_of

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.plan.planner import Planner
    from falkirk.spark.pipeline.run.runners import Runner
    from falkirk.spark.pipeline.run.state import RunState
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["retained_watermarks", "collect", "settle"]


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


def settle(
    pipeline: Definition,
    planner: Planner,
    runners: Mapping[str, Runner],
    found: Mapping[str, Sequence[int]],
    logged: Mapping[str, Sequence[int]],
) -> dict[str, int]:
    """A new driver's start (with garbage collection): drop each output's epochs no recovery that can be
    carried out would choose, from ``planner`` (not from storage). ``found``: each node's frontiers the new
    driver found in storage; ``logged``: each logging step's log epochs in storage. Returns, per output
    settled, the epoch below which it was dropped.

    An output's manifests are never collected (they prove what it
    acknowledged), so a new driver finds every epoch an output committed in
    the whole run; given them all, its planner rebuilt the monitor's
    database with a row per epoch of the run (which garbage collection
    then discarded), so ``meta.sqlite``, its write-ahead log, the journal's
    record of each recovery and the restart's plan grew with the run's
    length. A running driver drops them from its planner at each garbage
    collection (below the output's low-watermark with retention); this does
    the same at a start, and keeps more:

    * every epoch at or above the oldest epoch storage still holds data
      to re-run from — an input's oldest cut, the epoch before a logging
      step's oldest logged epoch (with ``concurrency > 1`` a slow consumer
      keeps a log far behind the input's cuts), a stateful step's oldest
      restore point — and the newest one below it. An output put back to
      epoch ``e`` re-runs the epochs after ``e`` (their results for epochs
      it committed are discarded, but they are computed), and their data
      comes from an input's cuts or a step's log: a restored checkpoint
      gives state, not data. So a plan that puts an output below every
      input's and log's oldest epoch needs deleted data and is refused with
      or without this; every plan that can be carried out finds its epoch
      kept. (A refusal may then name an earlier deleted epoch than it would
      have: the planner falls back further before the check finds the
      data gone.) The restore points are a margin the argument does not
      need;
    * every epoch at or above its low-watermark with retention.

    Without garbage collection (``Pipeline(gc=False)``) nothing is dropped:
    a running driver keeps every frontier, and storage every restore point.
    The low-watermarks with retention are solved on an in-memory copy (two
    solves with ``retain >= 2``, and a listing of each stateless node's
    markers), so the database is built once, from what is kept.
    """
    if not (pipeline.gc and pipeline.durable):
        return {}
    available = planner.available
    outputs = [n for n in sorted(planner.outputs) if len(available.get(n, ())) > 1]
    if not outputs:
        return {}
    points = [
        es[0]
        for n, es in found.items()
        if es and n not in planner.outputs and (n in pipeline.inputs or not pipeline.stateless(n))
    ]
    points += [es[0] - 1 for es in logged.values() if es]
    lw = retained_watermarks(pipeline, planner.copy(), runners)
    settled = {}
    for n in outputs:
        below = lw[n]
        if points:
            below = min(below, max((e for e in available[n] if e < min(points)), default=-1))
        if below > available[n][0]:
            planner.prune(n, below)
            settled[n] = below
    return settled
