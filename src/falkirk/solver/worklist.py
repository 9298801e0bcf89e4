"""The worklist iteration of SPEC §5, driven by dirty constraints.

Same update as :meth:`falkirk.solver.fixpoint.Iteration.examine` (the
round-robin reference), but each examination only re-checks the
constraints whose inputs changed since the processor was last examined;
why that is the full update, and why only the failed processors start
queued, is argued in :mod:`falkirk.solver.fixpoint` (item 4).

The new candidate is found by binary search over the chain (one comparison
when nothing changed), and the :class:`~falkirk.solver.fixpoint.Reason` of
every step down is the first violated constraint in the reference's order
(C4, then C2 by output edge, then C3 by input edge), exactly as the
reference records it. Per-edge data (endpoints, logging, current projection)
is precomputed; the cyclic garbage collector is paused during the run (the
solver allocates many short-lived, acyclic objects).

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> from falkirk.solver.model.access import View
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1), Checkpoint(5)])],
...               [Edge("ab", "a", "b")])
>>> fp = run_worklist(View(df, frozenset({"a"})))
>>> {p: str(f) for p, f in fp.frontiers.items()}
{'a': 'Frontier(epoch, 3)', 'b': 'Frontier(epoch, 1)'}
>>> [r.describe() for r in fp.reasons["b"]]
['b top → 5 by C3 on ab: it had received messages that a at 3 will send again', 'b 5 → 1 by C3 on ab: it had received messages that a at 3 will send again']
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable

from falkirk.domains import Domain, Frontier
from falkirk.solver.constraints import cannot_roll_back, last_holding, lower_stateless, sent, violated
from falkirk.solver.fixpoint import FixedPoint, Reason
from falkirk.solver.model import ResolvedCheckpoint
from falkirk.solver.model.access import Lazy, View

__all__ = ["run_worklist"]


def _subset(domain: Domain) -> Callable[[Frontier, Frontier], bool]:
    """``⊆`` for frontiers of ``domain``; in a total domain one bound comparison (no checks)."""
    if not domain.is_total:
        return Frontier.issubset
    le = domain.less_equal

    def subset(a: Frontier, b: Frontier) -> bool:
        return not b.antichain or (bool(a.antichain) and le(a.antichain[0], b.antichain[0]))

    return subset


class _Worklist:
    """State of one run, keyed by processor and edge names like the reference."""

    def __init__(self, view: View) -> None:
        df = view.df
        self.view, self.df = view, df
        self.edges, self.outputs, self.inputs = df.edges, df.outputs, df.inputs
        self.procs = df.processors
        self.cands: dict[str, list[ResolvedCheckpoint]] = view.cands
        # f, n, chain positions and reasons of a processor are created when the
        # run first reaches it: the part of the graph that keeps ⊤ costs nothing
        self.f: dict[str, Frontier] = Lazy(view.initial)
        self.n: dict[str, Frontier] = Lazy(self.f.__getitem__)
        self.idx: dict[str, int] = Lazy(lambda p: len(self.cands[p]) - 1)
        self.reasons: dict[str, list[Reason]] = Lazy(lambda p: [])
        self.examinations = 0
        self._subsets: dict[Domain, Callable[[Frontier, Frontier], bool]] = {}
        self._by_proc: dict[str, Callable[[Frontier, Frontier], bool]] = {}
        # dirty constraints since the last examination (created on demand)
        self.full: set[str] = set()  # everything (failed processors, first time)
        self.dirty_n: set[str] = set()  # n(p) changed: C4
        self.dirty_out: dict[str, set[str]] = {}  # C2: the receiver's f changed
        self.dirty_in: dict[str, set[str]] = {}  # C3: the sender's f changed
        self.dirty_nin: dict[str, set[str]] = {}  # n: the sender's n changed
        self.queue: deque[str] = deque()
        self.queued: set[str] = set()
        for p in df.processors:
            if p in view.failed:
                self.reasons[p].append(Reason(p, "C1", None, self.f[p]))
                self.full.add(p)
                self._push(p)
                self._changed(p, True, True)

    # -- bookkeeping ----------------------------------------------------------------
    def _push(self, p: str) -> None:
        if p not in self.queued:
            self.queued.add(p)
            self.queue.append(p)

    def _sub(self, p: str) -> Callable[[Frontier, Frontier], bool]:
        """``⊆`` for frontiers of ``p``'s domain (cached per processor and per domain)."""
        fn = self._by_proc.get(p)
        if fn is None:
            d = self.df.domains[p]
            fn = self._subsets.get(d)
            if fn is None:
                fn = self._subsets[d] = _subset(d)
            self._by_proc[p] = fn
        return fn

    def _changed(self, p: str, f_changed: bool, n_changed: bool) -> None:
        """Mark the constraints that read ``f(p)`` / ``n(p)`` dirty and queue their owners."""
        edges = self.edges
        if f_changed:
            for e in self.inputs[p]:
                u = edges[e].src
                self.dirty_out.setdefault(u, set()).add(e)
                self._push(u)
        if f_changed or n_changed:
            for e in self.outputs[p]:
                q = edges[e].dst
                if f_changed:
                    self.dirty_in.setdefault(q, set()).add(e)
                if n_changed:
                    self.dirty_nin.setdefault(q, set()).add(e)
                self._push(q)
        if n_changed:
            self.dirty_n.add(p)
            self._push(p)

    @staticmethod
    def _ordered(dirty: set[str] | None, order: list[str]) -> list[str]:
        """The edges of ``dirty`` in the order of ``order`` (the processor's edge list)."""
        if not dirty:
            return []
        if len(dirty) == 1:
            return list(dirty)
        return [e for e in order if e in dirty]

    def _dirty(self, p: str) -> tuple[bool, list[str], list[str], list[str]]:
        """Take (and clear) the dirty constraints of ``p``, edges in the reference's order."""
        c4 = p in self.dirty_n
        self.dirty_n.discard(p)
        outs, ins, nins = self.dirty_out.pop(p, None), self.dirty_in.pop(p, None), self.dirty_nin.pop(p, None)
        if p in self.full:
            self.full.discard(p)
            return True, self.outputs[p], self.inputs[p], self.inputs[p]
        return (
            c4,
            self._ordered(outs, self.outputs[p]),
            self._ordered(ins, self.inputs[p]),
            self._ordered(nins, self.inputs[p]),
        )

    def _phi_f(self, e: str) -> Frontier:
        """``incoming(φ_e(f(u)))`` for the sender ``u`` of ``e`` at its current frontier."""
        edge = self.edges[e]
        u = edge.src
        if self.procs[u].stateless:
            phi = self.view.projection(u, e, self.f[u])
        else:  # f(u) is a chain element: its resolved projection (SPEC §3)
            phi = self.cands[u][self.idx[u]].projection[e]
        return self.view.incoming(edge.dst, e, phi)

    def _phi_n(self, e: str) -> Frontier:
        edge = self.edges[e]
        return sent(self.view, edge.dst, e, edge.src, self.n[edge.src])

    def _note(
        self, p: str, constraint: str, before: Frontier, after: Frontier, e: str | None, nb: str | None
    ) -> None:
        self.reasons[p].append(
            Reason(p, constraint, before, after, e, nb, None if nb is None else self.f[nb])
        )

    # -- one examination ---------------------------------------------------------------
    def examine(self, p: str) -> None:
        self.examinations += 1
        c4, outs, ins, nins = self._dirty(p)
        old_f, old_n = self.f[p], self.n[p]
        if self.procs[p].stateless:
            new_f = self._stateless_f(p, c4, outs, ins)
        else:
            new_f = self._stateful_f(p, c4, outs, ins)
        self.f[p] = new_f
        f_changed = new_f != old_f
        new_n = old_n & new_f if f_changed else old_n
        for e in nins:
            new_n = new_n & self._phi_n(e)
        self.n[p] = new_n
        n_changed = new_n != old_n
        if f_changed or n_changed:
            self._changed(p, f_changed, n_changed)

    def _stateless_f(self, p: str, c4: bool, outs: list[str], ins: list[str]) -> Frontier:
        view, edges, f = self.view, self.edges, self.f
        logs = self.procs[p].logs
        return lower_stateless(
            f[p],
            self.n[p] if c4 and self.df.receives_notifications[p] else None,
            ((e, q, view.residual(p, e, f[q])) for e in outs if e not in logs for q in (edges[e].dst,)),
            ((e, edges[e].src, self._phi_f(e)) for e in ins),
            lambda constraint, before, after, edge, nb: self._note(p, constraint, before, after, edge, nb),
        )

    def _stateful_f(self, p: str, c4: bool, outs: list[str], ins: list[str]) -> Frontier:
        cands, top = self.cands[p], self.idx[p]
        # (bound, constraint, edge, neighbour) per dirty constraint, in the reference's order
        checks: list[tuple[int, str, str | None, str | None]] = []
        sub = self._sub(p)
        if c4 and self.df.receives_notifications[p]:
            n = self.n[p]
            checks.append((last_holding(cands, "C4", None, n, top, sub), "C4", None, None))
        for e in outs:
            q = self.edges[e].dst
            checks.append((last_holding(cands, "C2", e, self.f[q], top, self._sub(q)), "C2", e, q))
        for e in ins:
            checks.append(
                (last_holding(cands, "C3", e, self._phi_f(e), top, sub), "C3", e, self.edges[e].src)
            )
        new = min((c[0] for c in checks), default=top)
        for k in range(top, max(new, 0), -1):  # one reason per step down, as the reference records
            _, why, edge, nb = checks[0] if len(checks) == 1 else next(c for c in checks if c[0] < k)
            self._note(p, why, cands[k].frontier, cands[k - 1].frontier, edge, nb)
        if new < 0:
            _, why, edge, nb = next(c for c in checks if c[0] < 0)
            raise cannot_roll_back(
                p, f"its lowest available frontier {cands[0].frontier!r}", violated((why, edge, nb))
            )
        self.idx[p] = new
        return cands[new].frontier

    def run(self) -> FixedPoint:
        queue, queued = self.queue, self.queued
        while queue:
            p = queue.popleft()
            queued.discard(p)
            self.examine(p)
        f, n, reasons = self.f, self.n, self.reasons
        live = self.df.live_meta  # a processor never reached has not failed: it keeps ⊤
        frontiers = {p: f[p] if p in f else live(p).frontier for p in self.procs}
        return FixedPoint(
            frontiers,
            {p: n[p] if p in n else frontiers[p] for p in self.procs},
            {p: reasons[p] if p in reasons else [] for p in self.procs},
            self.examinations,
        )


def run_worklist(view: View) -> FixedPoint:
    """The fixed point of SPEC §5 over ``view``, worklist-driven (see the module docstring)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Worklist(view).run()
    finally:
        if enabled:
            gc.enable()
