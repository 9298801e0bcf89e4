"""Failure and recovery: lose volatile state, ask the planner, apply SPEC §6's reset.

:func:`fail_and_recover` is one failure of a set of processors:

1. each failed processor loses its operator state, its input queues, its
   pending notification requests and its live history (its persisted
   checkpoints, logs and history log survive);
2. the planner computes the rollback plan from the persisted metadata and,
   for every processor that did not fail, its live ``⊤`` metadata;
3. the reset is applied exactly as SPEC §6 says — queues are rebuilt
   (kept messages inside ``f(q)``, then logged messages of ``L_e(f(p))``
   outside ``f(q)``), state is restored from ``S_p(f(p))`` (or, for a
   processor that did not fail and whose state is partitioned by time, the
   state of times outside ``f(p)`` is discarded in place), sources rewind,
   and persisted things from the abandoned future are dropped;
4. anything the reset needs that garbage collection deleted raises
   :class:`~falkirk.sim.external.CollectedStateNeeded`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from typing import TYPE_CHECKING

from falkirk.domains import Frontier
from falkirk.sim.external import CollectedStateNeeded, SimulationError
from falkirk.sim.persistence import live_metadata
from falkirk.sim.state import History, Proc
from falkirk.solver import RollbackPlan, encode_frontier

if TYPE_CHECKING:
    from falkirk.sim.engine import Simulation

__all__ = ["fail_and_recover", "lose_volatile_state", "apply_plan"]


def fail_and_recover(sim: Simulation, names: Collection[str]) -> RollbackPlan:
    """Fail ``names`` now, plan the rollback, apply it, and return the plan."""
    failed = set(names)
    lose_volatile_state(sim, failed)
    live = {
        n: live_metadata(sim, n)
        for n in sim.procs
        if n not in failed and not sim.graph.nodes[n].policy.stateless
    }
    plan = sim.planner.plan_rollback(failed, live)
    sim.rollbacks += 1
    if sim.tracing:
        acts = ", ".join(f"{p}: {a} {encode_frontier(plan.frontiers[p])}" for p, a in plan.actions.items())
        sim.note(f"fail {sorted(failed)} -> {acts}")
    apply_plan(sim, plan, failed)
    return plan


def lose_volatile_state(sim: Simulation, names: Collection[str]) -> None:
    """``names`` fail: each loses its input queues, pending requests and live history (step 1)."""
    unknown = set(names) - set(sim.procs)
    if unknown:
        raise SimulationError(f"cannot fail unknown processor(s) {sorted(unknown)}")
    for n in names:
        p = sim.procs[n]
        for q in p.queues.values():
            q.clear()
        p.requests.clear()
        p.history = History()
        p.floor_notified = None


def apply_plan(sim: Simulation, plan: RollbackPlan, failed: Collection[str]) -> None:
    """Apply the SPEC §6 reset of ``plan`` (``failed`` lost their volatile state)."""
    f = plan.frontiers
    for n, p in sim.procs.items():
        if p.store.floor is not None and not p.store.floor <= f[n]:
            raise CollectedStateNeeded(
                f"{n} must roll back to {encode_frontier(f[n])}, below its low-watermark "
                f"{encode_frontier(p.store.floor)}: state it needs was garbage-collected"
            )
    _rebuild_queues(sim, plan, failed)
    for n, p in sim.procs.items():
        if n in failed or not f[n].is_top:
            _reset(sim, p, f[n], n in failed)


def _rebuild_queues(sim: Simulation, plan: RollbackPlan, failed: Collection[str]) -> None:
    g = sim.graph
    f = plan.frontiers
    for e, link in g.links.items():
        fq, fu = f[link.dst], f[link.src]
        claimed = e in sim.claimed[link.src]
        if claimed != (e in plan.replay) and not fq.is_top:
            raise SimulationError(f"edge {e!r}: the plan's replay list disagrees with the logging policy")
        if fq.is_top:
            continue
        u, q = sim.procs[link.src], sim.procs[link.dst]
        lost = [s for s in u.store.ghosts.get(e, ()) if s.cause in fu and s.msg.time not in fq]
        if lost:
            raise CollectedStateNeeded(
                f"edge {e!r}: replay to {link.dst} needs {len(lost)} logged message(s) "
                f"(first at {lost[0].msg.time!r}) that were garbage-collected"
            )
        kept = [m for m in q.queues[e] if m.time in fq] if link.dst not in failed else []
        replay = [s.msg for s in u.store.logs.get(e, ()) if s.cause in fu and s.msg.time not in fq]
        q.queues[e] = deque(kept + replay)


def _first_epoch_outside(f: Frontier) -> int | None:
    return None if f.is_top else int(f.antichain[0])


def _reset(sim: Simulation, p: Proc, f: Frontier, failed: bool) -> None:
    """Reset one processor to ``f`` (restore, or discard in place, or restart)."""
    name = p.name
    node = sim.graph.nodes[name]
    policy = node.policy
    store = p.store
    # persisted things from the abandoned future
    store.records = [r for r in store.records if r.frontier <= f]
    if store.reported is not None:
        store.reported = store.reported & f
    for logs in (store.logs, store.ghosts):
        for e in logs:
            logs[e] = [s for s in logs[e] if s.cause in f]
    store.events = [ev for ev in store.events if ev.time in f]
    sim.planner.truncate(name, f)
    if name in sim.outputs:
        sim.outputs[name].rollback(f)
    # operator state
    if not failed and p.op.discard_outside(f):
        p.history = p.history.restricted(f)
        p.requests = {t for t in p.requests if t in f}
        if p.floor_notified is not None:
            p.floor_notified = p.floor_notified & f
    elif policy.stateless:
        p.op = node.op.fresh()
        p.requests = set()
        p.history = History()
        p.floor_notified = f if node.op.notifications and not f.is_empty else None
    else:
        _restore(sim, p, f)
    if p.next_read is not None:
        first = _first_epoch_outside(f)
        if first is not None:
            p.next_read = first if failed else min(p.next_read, first)
    p.advances = 0
    p.seen = None


def _restore(sim: Simulation, p: Proc, f: Frontier) -> None:
    """Restore ``p`` from its checkpoint at ``f`` (replaying its history log if that is its policy)."""
    node = sim.graph.nodes[p.name]
    p.op = node.op.fresh()
    p.requests = set()
    if f.is_empty:
        p.history = History()
        return
    rec = p.store.record_at(f)
    if rec is None:
        raise SimulationError(
            f"{p.name}: the plan restores {encode_frontier(f)}, but no checkpoint exists there"
        )
    if node.policy.persists == "history":
        sim.replay(p, list(p.store.events))
    elif node.policy.persists == "delta":  # the policy rebuilds the snapshot (e.g. DBSP snapshot + deltas)
        p.op.set_state(node.policy.load_state(p.op, rec))
    else:
        p.op.set_state(rec.state)
    p.history = rec.history.copy()
