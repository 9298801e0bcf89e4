"""The worklist iteration of SPEC §5, driven by dirty constraints.

Same update as :meth:`falkirk.solver.fixpoint._Solver.examine` (the
round-robin reference), but each examination only re-checks the
constraints whose inputs changed since the processor was last examined:

* every constraint of a stateful processor holds on a **prefix** of its
  chain (``N``, ``M_e``, ``D_e`` are monotone), and neighbours' frontiers
  only shrink, so a constraint that held at ``f(p)`` still holds at any
  lower candidate until the neighbour it reads changes;
* at the start every processor that has not failed sits at ``⊤`` with
  ``⊤`` neighbours, where C1–C4 hold, so only the failed processors (and,
  through them, their neighbours) need looking at.

The new candidate is found by binary search over the chain (one comparison
when nothing changed), and the :class:`~falkirk.solver.fixpoint.Reason` of
every step down is the first violated constraint in the reference's order
(C4, then C2 by output edge, then C3 by input edge), exactly as the
reference records it. Per-edge data (endpoints, logging, current projection)
is precomputed; the cyclic garbage collector is paused during the run (the
solver allocates many short-lived, acyclic objects).

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> from falkirk.solver.access import View
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
from typing import Callable

from falkirk.domains import Domain, Frontier
from falkirk.errors import SolverError
from falkirk.solver.access import View
from falkirk.solver.fixpoint import FixedPoint, Reason
from falkirk.solver.model import Meta

__all__ = ["run_worklist"]


def _subset(domain: Domain) -> Callable[[Frontier, Frontier], bool]:
    """``⊆`` for frontiers of ``domain``; in a total domain one bound comparison (no checks)."""
    if not domain.is_total:
        return Frontier.issubset
    le = domain.less_equal

    def subset(a: Frontier, b: Frontier) -> bool:
        return not b.antichain or (bool(a.antichain) and le(a.antichain[0], b.antichain[0]))

    return subset


def _last_true(ok: Callable[[int], bool], hi: int) -> int:
    """Largest ``j <= hi`` with ``ok(j)``, for ``ok`` true on a prefix; ``-1`` if none."""
    if ok(hi):
        return hi
    lo, hi = 0, hi - 1  # answer in [lo - 1, hi]
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid + 1
        else:
            hi = mid - 1
    return hi


class _Worklist:
    def __init__(self, view: View) -> None:
        df = view.df
        self.view, self.df = view, df
        names = list(df.processors)
        self.names = names
        index = {p: i for i, p in enumerate(names)}
        self.edge_name = list(df.edges)
        eidx = {e: k for k, e in enumerate(self.edge_name)}
        self.esrc = [index[df.edges[e].src] for e in self.edge_name]
        self.edst = [index[df.edges[e].dst] for e in self.edge_name]
        self.outs = [[eidx[e] for e in df.outputs[p]] for p in names]
        self.ins = [[eidx[e] for e in df.inputs[p]] for p in names]
        # position of each edge in its sender's output list / receiver's input list
        self.out_pos = [0] * len(self.edge_name)
        self.in_pos = [0] * len(self.edge_name)
        for lst, pos in ((self.outs, self.out_pos), (self.ins, self.in_pos)):
            for es in lst:
                for k, e in enumerate(es):
                    pos[e] = k
        self.stateless = [df.processors[p].stateless for p in names]
        self.notes = [df.receives_notifications[p] for p in names]
        subsets: dict[Domain, Callable[[Frontier, Frontier], bool]] = {}
        for d in df.domains.values():
            if d not in subsets:
                subsets[d] = _subset(d)
        self.sub = [subsets[df.domains[p]] for p in names]
        self.unlogged = [df.edges[e].name not in df.processors[df.edges[e].src].logs for e in self.edge_name]
        self.cands: list[list[Meta]] = [view.cands[p] for p in names]
        self.f: list[Frontier] = [view.initial(p) for p in names]
        self.n: list[Frontier] = list(self.f)
        self.idx = [len(c) - 1 for c in self.cands]
        self.reasons: dict[str, list[Reason]] = {p: [] for p in names}
        self.examinations = 0
        # dirty constraints since the last examination
        self.full = [False] * len(names)  # everything (failed processors, first time)
        self.dirty_n = [False] * len(names)  # n(p) changed: C4
        self.dirty_out: list[set[int]] = [set() for _ in names]  # C2: receiver's f changed
        self.dirty_in: list[set[int]] = [set() for _ in names]  # C3: sender's f changed
        self.dirty_nin: list[set[int]] = [set() for _ in names]  # n: sender's n changed
        self.queue: deque[int] = deque()
        self.queued = [False] * len(names)
        for p in names:
            if p in view.failed:
                i = index[p]
                self.reasons[p].append(Reason(p, "C1", None, self.f[i]))
                self.full[i] = True
                self._push(i)
                self._changed(i, True, True)

    # -- bookkeeping ----------------------------------------------------------------
    def _push(self, i: int) -> None:
        if not self.queued[i]:
            self.queued[i] = True
            self.queue.append(i)

    def _changed(self, i: int, f_changed: bool, n_changed: bool) -> None:
        """Mark the constraints that read ``f(i)`` / ``n(i)`` dirty and queue their owners."""
        if f_changed:
            for e in self.ins[i]:
                u = self.esrc[e]
                self.dirty_out[u].add(e)
                self._push(u)
        if f_changed or n_changed:
            for e in self.outs[i]:
                q = self.edst[e]
                if f_changed:
                    self.dirty_in[q].add(e)
                if n_changed:
                    self.dirty_nin[q].add(e)
                self._push(q)
        if n_changed:
            self.dirty_n[i] = True
            self._push(i)

    def _dirty(self, i: int) -> tuple[bool, list[int], list[int], list[int]]:
        """Take (and clear) the dirty constraints of ``i``, edges in the reference's order."""
        if self.full[i]:
            self.full[i] = False
            c4, outs, ins, nins = True, self.outs[i], self.ins[i], self.ins[i]
        else:
            c4 = self.dirty_n[i]
            outs = sorted(self.dirty_out[i], key=self.out_pos.__getitem__)
            ins = sorted(self.dirty_in[i], key=self.in_pos.__getitem__)
            nins = sorted(self.dirty_nin[i], key=self.in_pos.__getitem__)
        self.dirty_n[i] = False
        self.dirty_out[i].clear()
        self.dirty_in[i].clear()
        self.dirty_nin[i].clear()
        return c4, outs, ins, nins

    def _phi_f(self, e: int) -> Frontier:
        """``incoming(φ_e(f(u)))`` for the sender ``u`` of ``e`` at its current frontier."""
        u, q = self.esrc[e], self.edst[e]
        name = self.edge_name[e]
        if self.stateless[u]:
            phi = self.view.projection(self.names[u], name, self.f[u])
        else:  # f(u) is a chain element: its resolved projection (SPEC §3)
            phi = self.cands[u][self.idx[u]].projection[name]
        return self.view.incoming(self.names[q], name, phi)

    def _phi_n(self, e: int) -> Frontier:
        u, q = self.esrc[e], self.edst[e]
        name = self.edge_name[e]
        phi = self.view.projection(self.names[u], name, self.n[u])
        return self.view.incoming(self.names[q], name, phi)

    def _note(self, i: int, constraint: str, before: Frontier, after: Frontier, e: int | None, nb: int | None) -> None:
        p = self.names[i]
        self.reasons[p].append(
            Reason(
                p,
                constraint,
                before,
                after,
                None if e is None else self.edge_name[e],
                None if nb is None else self.names[nb],
                None if nb is None else self.f[nb],
            )
        )

    # -- one examination ---------------------------------------------------------------
    def examine(self, i: int) -> None:
        self.examinations += 1
        c4, outs, ins, nins = self._dirty(i)
        old_f, old_n = self.f[i], self.n[i]
        if self.stateless[i]:
            new_f = self._stateless_f(i, c4, outs, ins)
        else:
            new_f = self._stateful_f(i, c4, outs, ins)
        self.f[i] = new_f
        f_changed = new_f != old_f
        new_n = old_n & new_f if f_changed else old_n
        for e in nins:
            new_n = new_n & self._phi_n(e)
        self.n[i] = new_n
        n_changed = new_n != old_n
        if f_changed or n_changed:
            self._changed(i, f_changed, n_changed)

    def _stateless_f(self, i: int, c4: bool, outs: list[int], ins: list[int]) -> Frontier:
        view, p = self.view, self.names[i]
        cur = self.f[i]
        if c4 and self.notes[i]:
            nxt = cur & self.n[i]
            if nxt != cur:
                self._note(i, "C4", cur, nxt, None, None)
                cur = nxt
        for e in outs:
            if not self.unlogged[e]:
                continue
            q = self.edst[e]
            nxt = cur & view.residual(p, self.edge_name[e], self.f[q])
            if nxt != cur:
                self._note(i, "C2", cur, nxt, e, q)
                cur = nxt
        for e in ins:
            nxt = cur & self._phi_f(e)
            if nxt != cur:
                self._note(i, "C3", cur, nxt, e, self.esrc[e])
                cur = nxt
        return cur

    def _stateful_f(self, i: int, c4: bool, outs: list[int], ins: list[int]) -> Frontier:
        cands, top = self.cands[i], self.idx[i]
        # (bound, constraint, edge, neighbour) per dirty constraint, in the reference's order
        checks: list[tuple[int, str, int | None, int | None]] = []
        sub, subs = self.sub[i], self.sub
        if c4 and self.notes[i]:
            n = self.n[i]
            b = _last_true(lambda j: sub(cands[j].notifications, n), top)
            checks.append((b, "C4", None, None))
        for e in outs:
            q, name = self.edst[e], self.edge_name[e]
            fq, subq = self.f[q], subs[q]
            b = _last_true(lambda j: subq(cands[j].discarded[name], fq), top)
            checks.append((b, "C2", e, q))
        for e in ins:
            name, x = self.edge_name[e], self._phi_f(e)
            b = _last_true(lambda j: sub(cands[j].delivered[name], x), top)
            checks.append((b, "C3", e, self.esrc[e]))
        new = min((c[0] for c in checks), default=top)
        for k in range(top, max(new, 0), -1):
            _, why, e, nb = next(c for c in checks if c[0] < k)
            self._note(i, why, cands[k].frontier, cands[k - 1].frontier, e, nb)
        if new < 0:
            _, why, e, _nb = next(c for c in checks if c[0] < 0)
            where = f" on {self.edge_name[e]}" if e is not None else ""
            raise SolverError(
                f"processor {self.names[i]!r} cannot roll back far enough: its lowest available frontier "
                f"{cands[0].frontier!r} violates {why}{where} and it is not restartable (∅ ∉ F(p))"
            )
        self.idx[i] = new
        return cands[new].frontier

    def run(self) -> FixedPoint:
        queue, queued = self.queue, self.queued
        while queue:
            i = queue.popleft()
            queued[i] = False
            self.examine(i)
        names = self.names
        return FixedPoint(dict(zip(names, self.f)), dict(zip(names, self.n)), self.reasons, self.examinations)


def run_worklist(view: View) -> FixedPoint:
    """The fixed point of SPEC §5 over ``view``, worklist-driven (see the module docstring)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Worklist(view).run()
    finally:
        if enabled:
            gc.enable()
