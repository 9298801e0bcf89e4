"""What a pipeline's shape means for its recoveries, said before it runs.

An unlogged step whose output two or more branches consume is re-sent to
*all* of them when one branch's stateful step rolls back (C2: it cannot
keep output it discarded), so a failure in one branch can roll back the
others (C3). :func:`fanout_notes` finds such steps and prices the cheapest
``log=True`` with the what-if solver on a synthetic history: every step has
completed epoch ``at`` (those before the failing step in the run order
``at + 1``) and has the restore points its regime takes, for each ``at`` over
two checkpoint intervals of the slowest Lazy step.

>>> from falkirk.spark import Eager, Ephemeral, Lazy, Pipeline
>>> pipe = Pipeline("memory://falkirk-doc/shape")
>>> _ = pipe.input("readings", "device BIGINT, value BIGINT")
>>> @pipe.step(regime=Ephemeral())
... def clean(readings): return readings
>>> @pipe.step(regime=Lazy(every=3))
... def rolling(clean, *, state): return clean, clean
>>> @pipe.step(regime=Eager())
... def alerts(clean, *, state): return clean, clean
>>> print(fanout_notes(pipe)[0])  # doctest: +ELLIPSIS
step 'clean' is not logged and feeds rolling, alerts: when a stateful step fails, all of them roll back with it ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from falkirk.spark.pipeline.plan.live import live_checkpoint
from falkirk.spark.pipeline.plan.planner import TOP, Planner, epoch_of

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = ["fanout_notes", "output_notes", "synthetic_available"]


def synthetic_available(pipeline: Definition, done: Mapping[str, int]) -> dict[str, list[int]]:
    """The restore points each node would have after completing epochs ``0..done[n]`` as its regime prescribes."""
    out: dict[str, list[int]] = {}
    for n in pipeline.order:
        if n in pipeline.inputs or pipeline.stateless(n):
            out[n] = [done[n]]
        else:
            regime = pipeline.steps[n].regime
            out[n] = [e for e in range(done[n] + 1) if regime.checkpoints_at(e) or regime.kind == "output"]
    return out


def _redo(pipeline: Definition, failed: str, at: int, also_logging: list[str]) -> int:
    """(step, epoch) pairs recomputed when ``failed`` fails while working on epoch ``at + 1`` — the steps before it
    in the run order have completed ``at + 1``, the others ``at`` — with ``also_logging`` logged."""
    rank = pipeline.order.index(failed)
    done = {n: at + 1 if i < rank else at for i, n in enumerate(pipeline.order)}
    planner = Planner(pipeline.dataflow(also_logging=also_logging), outputs=pipeline.external_outputs,
                      known=synthetic_available(pipeline, done), monitor=False)
    live = {}
    for n in pipeline.order:
        if n != failed and not pipeline.stateless(n):
            queued = {e.name: done[e.src] for e in pipeline.edges if e.dst == n and done[e.src] > done[n]}
            live[n] = live_checkpoint(pipeline, n, done[n], queued)
    plan = planner.plan([failed], live)
    return sum(done[n] - epoch_of(f) for n, f in plan.frontiers.items() if epoch_of(f) != TOP and epoch_of(f) < done[n])


def fanout_notes(pipeline: Definition) -> list[str]:
    """A note per unlogged step with two or more consumers whose ``log=True`` would make recoveries smaller.

    Costs two solves per (candidate step, stateful step, boundary) on the
    pipeline's dataflow: milliseconds for a pipeline of tens of steps.
    """
    stateful = [n for n in pipeline.steps if not pipeline.stateless(n)]
    slowest = max((getattr(pipeline.steps[n].regime, "every", 1) for n in stateful), default=1)
    boundaries = range(slowest, 3 * slowest)
    notes = []
    for s in pipeline.order:
        consumers = pipeline.consumers(s)
        if pipeline.logs(s) or len(consumers) < 2:
            continue
        before = sum(_redo(pipeline, t, at, []) for t in stateful for at in boundaries)
        after = sum(_redo(pipeline, t, at, [s]) for t in stateful for at in boundaries)
        if after < before:
            notes.append(
                f"step {s!r} is not logged and feeds {', '.join(consumers)}: when a stateful step fails, all of them "
                f"roll back with it (in a history of two checkpoint intervals of the slowest stateful step, "
                f"{slowest} epoch(s) each, failing each stateful step at each epoch recomputes {before} (step, epoch) "
                "pairs in all); "
                f"log=True on {s!r} would make that {after}, for writing its output every epoch "
                "(pipe.plan_failure(...) shows one failure's plan)")
    return notes


def output_notes(pipeline: Definition) -> list[str]:
    """A note per output fed (directly or not) by a stateful step that does not checkpoint every epoch.

    A committed output epoch is final (a recovery never rewrites it), so
    when such a step rolls back to a checkpoint before what the output has
    committed, it re-executes those epochs, their results are discarded, and
    the output's later epochs are computed from the re-executed state: the
    same as the first run only if the step computes the same rows again.
    Cost: one walk of the graph per output.

    >>> from falkirk.spark import Ephemeral, Lazy, Pipeline
    >>> pipe = Pipeline("memory://falkirk-doc/output-notes")
    >>> _ = pipe.input("events", "k BIGINT")
    >>> @pipe.step(regime=Lazy(every=3))
    ... def counts(events, *, state): return events, events
    >>> _ = pipe.output("windows", inputs=["counts"])
    >>> print(output_notes(pipe)[0])  # doctest: +ELLIPSIS
    output 'windows' is fed by counts (Lazy(every=3)), which can roll back up to 2 epoch(s) behind what it committed: ...
    """
    notes = []
    for out in pipeline.external_outputs:
        upstream, todo = [], list(pipeline.steps[out].inputs)
        seen = set(todo)
        while todo:
            n = todo.pop()
            if n in pipeline.steps:
                regime = pipeline.steps[n].regime
                every = getattr(regime, "every", 1)
                if regime.takes_state and not getattr(regime, "incremental", False) and every > 1:
                    upstream.append((n, every))
                for u in pipeline.steps[n].inputs:
                    if u not in seen:
                        seen.add(u)
                        todo.append(u)
        if upstream:
            upstream.sort(key=lambda x: pipeline.order.index(x[0]))
            names = ", ".join(f"{n} (Lazy(every={k}))" for n, k in upstream)
            lag = max(k for _, k in upstream) - 1
            notes.append(
                f"output {out!r} is fed by {names}, which can roll back up to {lag} epoch(s) behind what it committed: "
                "a committed output epoch is final, so what they compute again for those epochs is discarded and "
                "the output's later epochs come from the state they computed again — the same as the first run "
                "only if they compute the same rows again; if one is not deterministic (rand(), "
                "current_timestamp(), an unordered first(), floating-point sums in another order), checkpoint it "
                "every epoch (Lazy(every=1) or incremental=True)")
    return notes
