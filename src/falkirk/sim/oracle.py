"""The oracle: a run with failures must be indistinguishable from one without.

:func:`check_run` runs the graph with the failure schedule, then a
failure-free **reference** run (with another scheduler seed), and compares
what the outside world saw:

* the run raised no :class:`~falkirk.sim.external.SimulationError` (nothing
  garbage-collected was needed, no message arrived after its time was
  notified complete, released output never changed, the run terminated) and
  no other :class:`~falkirk.errors.FalkirkError` (e.g. the solver rejecting
  metadata);
* the **acknowledged output** at the end — the records of every time, per
  output processor — equals the reference's, time by time;
* everything released downstream is part of that output;
* a **final** output (``Commit(final=True)``) never retracted or rewrote a
  time it had committed, and what a re-execution re-sent for such a time
  equals what it kept (:func:`final_output_changes`).

**Non-deterministic operators.** An operator declared
``deterministic = False`` draws its choices with ``ctx.choose(label, n)``,
at most one value per (processor, time, label) per legal run (e.g.
:class:`~falkirk.sim.operators.Salt` draws one salt per time and keeps it in
that time's state). A legal failure-free run is then fixed by a choice
table ``σ: (processor, time, label) → value``. The simulator records, for
every key, the value **in effect at the end** of the faulty run (a
re-executed time overwrites its old choice); the reference run uses exactly
that table. This is sound — the faulty run passes only if its output equals
the output of a legal run, the one with choices ``σ`` — and it is what a
correct rollback guarantees: whatever consumed an abandoned choice must
itself have rolled back and re-executed with the new one (if the output had
already been released, :class:`~falkirk.sim.external.ReleasedOutputChanged`
fires instead). It may reject a correct run only if an operator draws
several values for one key in a single execution, which the ``choose``
contract forbids.

>>> from falkirk.sim import Node, Link, SimGraph, Source, Salt, Sum, Output, Ephemeral, Lazy, Commit, Failure
>>> g = SimGraph([Node("src", Source(), Ephemeral()), Node("salt", Salt(), Ephemeral()),
...               Node("sum", Sum(), Lazy()), Node("out", Output(), Commit())],
...              [Link("a", "src", "salt"), Link("b", "salt", "sum"), Link("c", "sum", "out")],
...              inputs={"src": [[1, 2], [3]]})
>>> check_run(g, [Failure(3, {"salt"}), Failure(9, {"sum"})], seed=2).ok
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from attrs import define

from falkirk.errors import FalkirkError
from falkirk.sim.engine import Failure, Result, Simulation
from falkirk.sim.graph import SimGraph
from falkirk.sim.planner import Planner, SolverPlanner

__all__ = ["Verdict", "check_run", "reference_run", "compare_outputs", "final_output_changes"]


@define
class Verdict:
    """The oracle's answer: ``ok``, and if not, a readable ``problem``."""

    ok: bool
    problem: str
    result: Result | None
    reference: Result | None

    def __bool__(self) -> bool:
        return self.ok


def reference_run(
    graph: SimGraph, *, seed: int = 0, choices: dict[tuple[str, Any, str], int] | None = None
) -> Result:
    """A failure-free run (with the given non-deterministic choices; no garbage collection needed)."""
    return Simulation(graph, seed=seed, choices=choices, planner=SolverPlanner(graph), gc_every=0).run()


def compare_outputs(
    got: dict[str, dict[Any, tuple[Any, ...]]], want: dict[str, dict[Any, tuple[Any, ...]]]
) -> list[str]:
    """Readable differences between two outputs (empty when equal)."""
    diffs = []
    for out in sorted(set(got) | set(want)):
        g, w = got.get(out, {}), want.get(out, {})
        for t in sorted(set(g) | set(w), key=repr):
            if g.get(t, ()) != w.get(t, ()):
                diffs.append(f"{out} at time {t!r}: got {list(g.get(t, ()))}, expected {list(w.get(t, ()))}")
    return diffs


def check_run(
    graph: SimGraph,
    failures: Iterable[Failure],
    *,
    seed: int = 0,
    reference: Result | None = None,
    planner: Callable[[SimGraph], Planner] | None = None,
    gc_every: int = 1,
    max_steps: int = 50_000,
    schedule: str = "sequential",
    window: int = 1,
) -> Verdict:
    """Run ``graph`` with ``failures`` and compare with a failure-free run (module docstring).

    ``reference`` may be given for a graph of deterministic operators (it
    does not depend on the choices); ``planner`` builds the planner to test.
    ``schedule`` and ``window`` choose the faulty run's scheduler
    (:mod:`falkirk.sim.schedule`); the reference run is sequential.
    """
    try:
        result = Simulation(
            graph,
            seed=seed,
            failures=failures,
            planner=planner(graph) if planner is not None else None,
            gc_every=gc_every,
            max_steps=max_steps,
            schedule=schedule,
            window=window,
        ).run()
    except FalkirkError as exc:
        return Verdict(False, f"{type(exc).__name__}: {exc}", None, reference)
    nondeterministic = any(not n.op.deterministic for n in graph.nodes.values())
    if reference is None or nondeterministic:
        reference = reference_run(graph, seed=seed + 1, choices=result.choices)
    diffs = compare_outputs(result.output, reference.output)
    for out, rel in result.released.items():
        for t, recs in rel.items():
            if result.output[out].get(t, ()) != recs:
                diffs.append(
                    f"{out} released {list(recs)} at {t!r} but ended with {list(result.output[out].get(t, ()))}"
                )
    if diffs:
        return Verdict(
            False, "output differs from the failure-free run:\n  " + "\n  ".join(diffs), result, reference
        )
    changed = final_output_changes(graph, result)
    if changed:
        return Verdict(
            False, "committed output changed at a final output:\n  " + "\n  ".join(changed), result, reference
        )
    return Verdict(True, "", result, reference)


def final_output_changes(graph: SimGraph, result: Result) -> list[str]:
    """What a final output (``Commit(final=True)``) did to times it had committed (empty when nothing).

    From what its service was told (``Result.journal``): a time written
    twice or retracted; and a committed time whose re-sent records differed
    from the kept ones (``Result.divergent``: a rewrite would have changed
    it). Every such time is a broken promise, whatever the final output holds.
    """
    out = []
    for name in graph.outputs:
        if not getattr(graph.nodes[name].policy, "final", False):
            continue
        written: set[Any] = set()
        for kind, t, recs in result.journal.get(name, ()):
            if kind == "retract":
                out.append(f"{name} retracted {list(recs)} at committed time {t!r}")
            elif t in written:
                out.append(f"{name} wrote committed time {t!r} again, with {list(recs)}")
            written.add(t)
        for t, kept, again in result.divergent.get(name, ()):
            out.append(f"{name} kept {list(kept)} at {t!r}, but the re-execution sent {list(again)}")
    return out
