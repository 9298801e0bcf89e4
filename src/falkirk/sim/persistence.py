"""Persisting at settled frontiers, checkpoint metadata, and garbage collection.

A checkpoint at ``f`` takes every time of ``f`` as complete. Downstream of
a non-deterministic operator that is not safe: a re-execution upstream may
send new messages at a time the checkpoint took as complete (even through
processors that keep their state), and the checkpoint would silently stop
being the state after ``H_p|f``. Taking a checkpoint acts on completeness
just as a notification does, so there ``N_p(f)`` includes ``f`` (and
``N_p(⊤)`` the latest checkpoint): C4's notification frontiers, which
propagate along every path, then keep all upstream re-execution out of it.
Exact ``M_e`` on the incoming edges would not do: C3 only constrains the
direct sender, which may keep its state and still forward new messages.
Everywhere else ``N`` and ``M_e`` are exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from falkirk.domains import Frontier
from falkirk.sim.external import SimulationError
from falkirk.sim.state import History, Proc, Record, down, nbytes
from falkirk.solver import Checkpoint

if TYPE_CHECKING:
    from falkirk.sim.engine import Simulation

__all__ = ["metadata", "live_metadata", "persist_all", "persist", "collect"]


def metadata(
    sim: Simulation, name: str, f: Frontier, hist: History, queued: dict[str, set[Any]] | None = None
) -> Checkpoint:
    """Checkpoint metadata of ``name`` at ``f`` from the history ``hist`` (plus queued times at ``⊤``)."""
    g = sim.graph
    dom = g.domain(name)
    delivered = {}
    for e in g.inputs_of[name]:
        times = set(hist.delivered.get(e, ()))
        if queued is not None:
            times |= queued.get(e, set())
        delivered[e] = down(dom, times)
    discarded = {}
    for e in g.outputs_of[name]:
        tgt = g.domain(g.links[e].dst)
        if e in sim.claimed[name]:
            discarded[e] = Frontier.empty(tgt)
        else:
            discarded[e] = down(tgt, (t for _, t in hist.discarded.get(e, ())))
    notes = hist.notifications(dom) if g.processor_decl(name)["notifications"] else None
    if notes is not None and name in g.after_choices:
        # p took every time of its checkpoint as complete; report it as notified (C4)
        notes = notes | (sim.procs[name].store.last_frontier(dom) if f.is_top else f)
    projection, logged = {}, {}
    if queued is None:  # a checkpoint: record φ_e on sequence edges (the count sent in state f)
        store = sim.procs[name].store
        for e in g.outputs_of[name]:
            if g.links[e].transform == "sequence":
                projection[e] = g.domain(g.links[e].dst).frontier({e: len(hist.numbered.get(e, ()))})  # type: ignore[attr-defined]
            if e in sim.logged[name]:  # reference to L_e(f): how many logged messages f caused
                logged[e] = sum(1 for m in [*store.logs.get(e, ()), *store.ghosts.get(e, ())] if m.cause in f)
    return Checkpoint(
        f, notifications=notes, delivered=delivered, discarded=discarded, projection=projection, logged=logged
    )


def live_metadata(sim: Simulation, name: str) -> Checkpoint:
    """The ``⊤`` metadata of a processor that has not failed (queued messages count as delivered)."""
    p = sim.procs[name]
    queued = {e: {m.time for m in q} for e, q in p.queues.items()}
    return metadata(sim, name, Frontier.top(p.domain), p.history, queued)


def persist_all(sim: Simulation, *, final: bool) -> None:
    """Let every policy persist at its processor's settled frontier if it is due."""
    for name, p in sim.procs.items():
        policy = sim.graph.nodes[name].policy
        if policy.persists is None or name in sim.failing:  # a failed processor persists nothing
            continue
        s = sim.settled[name]
        if s.is_top or not p.store.last_frontier(p.domain) < s:
            continue
        if s != p.seen:
            p.seen = s
            p.advances += 1
        if final or p.advances >= policy.every:
            points = policy.persist_points(sim, p, s)  # default [s]; schemes may move or postpone it
            for point in points:
                persist(sim, p, point)
            if points:
                p.advances = 0


def persist(sim: Simulation, p: Proc, s: Frontier) -> None:
    """Persist ``p`` at its settled frontier ``s`` according to its policy."""
    name = p.name
    kind = sim.graph.nodes[name].policy.persists
    if kind == "report":
        p.store.reported = s
        sim.planner.record(name, Checkpoint(s))
    else:
        if kind == "commit":
            prev = p.store.last_frontier(p.domain)
            sim.outputs[name].commit(s, prev, {t: v for t, v in p.op.parts.items() if t in s})
            p.history.completed = s if p.history.completed is None else p.history.completed | s
            p.op.parts = {t: v for t, v in p.op.parts.items() if t not in s}
        state = p.op.get_state(s) if kind in ("snapshot", "commit") else None
        if kind == "delta":  # the policy writes its own handle (DBSP snapshots + deltas, a store's write set)
            state = sim.graph.nodes[name].policy.save_state(p.op, p.store, s)
        if sim.measure and kind in ("snapshot", "delta"):
            sim.checkpoint_bytes += nbytes(state)
        rec = Record(s, state, p.history.restricted(s))
        p.store.records.append(rec)
        sim.planner.record(name, metadata(sim, name, s, rec.history))
    sim.checkpoints += 1
    sim.since_gc += 1
    if sim.gc_every and sim.since_gc >= sim.gc_every:
        collect(sim)


def collect(sim: Simulation) -> None:
    """Garbage-collect from the planner's low-watermarks (SPEC §6)."""
    sim.since_gc = 0
    lw = sim.planner.watermarks()
    g = sim.graph
    for name, f in lw.items():
        p = sim.procs[name]
        if p.store.floor is not None and not p.store.floor <= f:
            raise SimulationError(f"the low-watermark of {name} went down from {p.store.floor!r} to {f!r}")
        p.store.floor = f
        kept = [r for r in p.store.records if not r.frontier < f]
        if len(kept) != len(p.store.records):
            p.store.records = kept
            sim.planner.collect(name, f)
        for e in g.inputs_of[name]:
            u = sim.procs[g.links[e].src]
            log = u.store.logs.get(e)
            if log:
                u.store.ghosts.setdefault(e, []).extend(m for m in log if m.msg.time in f)
                u.store.logs[e] = [m for m in log if m.msg.time not in f]
        if name in sim.inputs:
            sim.inputs[name].acknowledge(f)
        if name in sim.outputs:
            sim.outputs[name].release(f)
