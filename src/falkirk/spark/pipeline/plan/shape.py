"""What a pipeline's shape means for its recoveries, said before it runs.

An unlogged step whose output two or more branches consume is re-sent to
*all* of them when one branch's stateful step rolls back (C2: it cannot
keep output it discarded), so a failure in one branch can roll back the
others (C3). Where their checkpoints fall on different epochs, the rollback
cascades — the domino effect: the branch dragged back restores an older
checkpoint, which drags the failed step back past its own, and so on down to
a checkpoint all of them share (up to the least common multiple of their
spacings; *empty* early in a run, before the first). :func:`fanout_notes`
finds such steps and prices the cheapest ``log=True`` with the what-if
solver on a synthetic history: every step has completed epoch ``at`` (those
before the failing step in the run order ``at + 1``) and has the restore
points its regime takes, for each ``at`` over two checkpoint intervals of
the slowest Lazy step.

Each note is a :class:`Note`: a ``str`` to print, with the regimes that act
on it (``fix``), so ``pipe.apply(pipe.check())`` accepts every note that has
one.

>>> from falkirk.spark import Eager, Ephemeral, Lazy, Pipeline
>>> pipe = Pipeline("memory://falkirk-doc/shape")
>>> _ = pipe.input("readings", "device BIGINT, value BIGINT")
>>> @pipe.step(regime=Ephemeral())
... def clean(readings): return readings
>>> @pipe.step(regime=Lazy(every=3))
... def rolling(clean, *, state): return clean, clean
>>> @pipe.step(regime=Eager())
... def alerts(clean, *, state): return clean, clean
>>> note = fanout_notes(pipe)[0]
>>> print(note)  # doctest: +ELLIPSIS
step 'clean' is not logged and feeds rolling, alerts: when a stateful step fails, all of them roll back with it ...
>>> note.fix
{'clean': Ephemeral(log=True)}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import evolve

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.plan.live import live_checkpoint
from falkirk.spark.pipeline.plan.planner import TOP, Planner, epoch_of

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.declare.regimes import Regime

__all__ = ["Note", "fanout_notes", "output_notes", "synthetic_available", "fixes"]


class Note(str):
    """A note on a pipeline's shape: its text (a ``str``: print it, compare it), its ``kind`` (``"fanout"``,
    ``"output"``) and ``fix``, the regimes that act on it by step (empty: the note is yours to judge, e.g.
    whether a step is deterministic). ``pipe.apply(note)``, or ``pipe.apply(pipe.check())`` for every note at
    once, runs with the fixes (:func:`fixes`)."""

    kind: str
    fix: dict[str, Regime]

    def __new__(cls, text: str, *, kind: str, fix: Mapping[str, Regime] | None = None) -> Note:
        self = super().__new__(cls, text)
        self.kind = kind
        self.fix = dict(fix or {})
        return self

    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, Any]]:
        return (str(self),), {"kind": self.kind, "fix": self.fix}


def fixes(notes: Note | Iterable[Note]) -> dict[str, Regime]:
    """The regimes of every note's ``fix`` together (notes without one are skipped); :class:`PipelineError`
    when two notes fix one step differently, or an item is not a :class:`Note` (a plain string has no fix)."""
    out: dict[str, Regime] = {}
    for note in [notes] if isinstance(notes, str) else list(notes):
        if not isinstance(note, Note):
            raise PipelineError(
                f"apply: {str(note)[:60]!r} is not a note of pipe.check() (a Note), so it names no "
                "fix; pass an Advice, a Note, a list of Notes or {step: regime}"
            )
        for step, regime in note.fix.items():
            if out.get(step, regime) != regime:
                raise PipelineError(
                    f"apply: two notes fix step {step!r} differently ({out[step]!r}, {regime!r})"
                )
            out[step] = regime
    return out


def synthetic_available(pipeline: Definition, done: Mapping[str, int]) -> dict[str, list[int]]:
    """The restore points each node would have after completing epochs ``0..done[n]`` as its regime
    prescribes."""
    out: dict[str, list[int]] = {}
    for n in pipeline.order:
        if n in pipeline.inputs or pipeline.stateless(n):
            out[n] = [done[n]]
        else:
            regime = pipeline.steps[n].regime
            out[n] = [e for e in range(done[n] + 1) if regime.checkpoints_at(e) or regime.kind == "output"]
    return out


def _replan(pipeline: Definition, failed: str, at: int, also_logging: list[str]) -> tuple[int, list[str]]:
    """When ``failed`` fails while working on epoch ``at + 1`` — the steps before it in the run order have
    completed ``at + 1``, the others ``at`` — with ``also_logging`` logged: the (step, epoch) pairs
    recomputed, and the stateful steps neither ``failed`` nor above or below it that roll back to empty (a
    domino)."""
    rank = pipeline.order.index(failed)
    done = {n: at + 1 if i < rank else at for i, n in enumerate(pipeline.order)}
    planner = Planner(
        pipeline.dataflow(also_logging=also_logging),
        outputs=pipeline.external_outputs,
        known=synthetic_available(pipeline, done),
        monitor=False,
    )
    live = {}
    for n in pipeline.order:
        if n != failed and not pipeline.stateless(n):
            queued = {e.name: done[e.src] for e in pipeline.edges if e.dst == n and done[e.src] > done[n]}
            live[n] = live_checkpoint(pipeline, n, done[n], queued)
    plan = planner.plan([failed], live)
    at_of = {n: epoch_of(f) for n, f in plan.frontiers.items()}
    related = _related(pipeline, failed)
    empty = [
        n
        for n in pipeline.order
        if n not in related and not pipeline.stateless(n) and at_of.get(n) == -1 and done[n] >= 0
    ]
    redo = sum(done[n] - e for n, e in at_of.items() if e != TOP and e < done[n])
    return redo, empty


def _related(pipeline: Definition, step: str) -> set[str]:
    """``step`` and every node above or below it."""
    out = {step}
    for nxt in (lambda n: pipeline.consumers(n), lambda n: [e.src for e in pipeline.edges if e.dst == n]):
        todo = [step]
        while todo:
            for m in nxt(todo.pop()):
                if m not in out:
                    out.add(m)
                    todo.append(m)
    return out


def fanout_notes(pipeline: Definition) -> list[Note]:
    """A note per unlogged step with two or more consumers whose ``log=True`` would make recoveries smaller;
    its ``fix`` is that ``log=True``.

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
        before = after = 0
        # unrelated step -> (the failed step, the epoch) that empties it
        emptied: dict[str, tuple[str, int]] = {}
        for t in stateful:
            for at in boundaries:
                redo, empty = _replan(pipeline, t, at, [])
                before += redo
                after += _replan(pipeline, t, at, [s])[0]
                for n in empty:
                    emptied.setdefault(n, (t, at + 1))
        if after < before:
            regime = pipeline.steps[s].regime if s in pipeline.steps else None
            domino = ""
            if emptied:
                domino = (
                    " — a domino: "
                    + "; ".join(
                        f"a failure of {t} in epoch {e} rolls {n}, on another branch, back to empty"
                        for n, (t, e) in emptied.items()
                    )
                    + " (later in a run, to the last checkpoint they all share)"
                )
            notes.append(
                Note(
                    f"step {s!r} is not logged and feeds {', '.join(consumers)}: when a stateful step fails, all of them "
                    f"roll back with it (in a history of two checkpoint intervals of the slowest stateful step, "
                    f"{slowest} epoch(s) each, failing each stateful step at each epoch recomputes {before} (step, epoch) "
                    f"pairs in all{domino}); "
                    f"log=True on {s!r} would make that {after}, for writing its output every epoch "
                    "(pipe.plan_failure(...) shows one failure's plan; pipe.apply(pipe.check()) accepts it)",
                    kind="fanout",
                    fix={s: evolve(regime, log=True)} if regime is not None else None,
                )
            )
    return notes


def output_notes(pipeline: Definition) -> list[Note]:
    """A note per output fed (directly or not) by a stateful step that does not checkpoint every epoch (no
    ``fix``: whether those steps compute the same rows again is for you to judge).

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
                Note(
                    f"output {out!r} is fed by {names}, which can roll back up to {lag} epoch(s) behind what it committed: "
                    "a committed output epoch is final, so what they compute again for those epochs is discarded and "
                    "the output's later epochs come from the state they computed again — the same as the first run "
                    "only if they compute the same rows again; if one is not deterministic (rand(), "
                    "current_timestamp(), an unordered first(), floating-point sums in another order), checkpoint it "
                    "every epoch (Lazy(every=1) or incremental=True)",
                    kind="output",
                )
            )
    return notes
