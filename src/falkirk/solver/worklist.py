"""The worklist iteration of SPEC §5, driven by dirty constraints.

Same update as :meth:`falkirk.solver.fixpoint.Iteration.examine` (the
round-robin reference), but each examination only re-checks the
constraints whose inputs changed since the processor was last examined;
why that is the full update, and why only the failed processors start
queued, is argued in :mod:`falkirk.solver.fixpoint` (item 4).

When ``f(p)`` or ``n(p)`` shrinks, every constraint reading it (C2 at the
senders, C3 and the bound of ``n`` at the receivers, C4 at ``p``) is
checked at once against the owner's current candidate, and only the owners
of violated ones are queued: a constraint that holds keeps holding while
its owner moves down its chain, until the value it reads shrinks again and
it is checked again (the same argument). A processor is thus examined only
when it has to move, not once more to find that it need not; its
examination reuses the bound ``φ_e`` computed for the check. ``checks``
counts the constraints checked, at a change or in an examination.

The new candidate is found by binary search over the chain (one comparison
when nothing changed), and the :class:`~falkirk.solver.fixpoint.Reason` of
every step down is the first violated constraint in the reference's order
(C4, then C2 by output edge, then C3 by input edge), exactly as the
reference records it. The cyclic garbage collector is paused during the run
(the solver allocates many short-lived, acyclic objects).

Cost: a value that shrinks costs one check per constraint reading it
(``O(edges of p)`` frontier comparisons); an examination costs its dirty
constraints, each a binary search over the chain (``O(log k)``), plus one
:class:`~falkirk.solver.fixpoint.Reason` per step down; state is created
only for the processors reached, and the result holds every processor
(``O(V)``, by C-level copies). Below, 8 checks: C3 and ``n`` at ``b`` when
``a`` fails, C4 and C2 in ``a``'s first examination, C3 and ``n`` in
``b``'s, then C2 at ``a`` and C4 at ``b`` when ``b`` moves.

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
>>> fp.examinations, fp.checks
(2, 8)
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable
from itertools import repeat
from operator import is_

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
        self.notified = df.receives_notifications
        self.cands: dict[str, list[ResolvedCheckpoint]] = view.cands
        # f, n, chain positions and reasons of a processor are created when the
        # run first reaches it: the part of the graph that keeps ⊤ costs nothing
        self.f: dict[str, Frontier] = Lazy(view.initial)
        self.n: dict[str, Frontier] = Lazy(self.f.__getitem__)
        self.idx: dict[str, int] = Lazy(lambda p: len(self.cands[p]) - 1)
        self.reasons: dict[str, list[Reason]] = Lazy(lambda p: [])
        self.examinations = 0
        self.checks = 0  # constraints evaluated, at a push or in an examination (FixedPoint.checks)
        self._subsets: dict[int, Callable[[Frontier, Frontier], bool]] = {}
        self.sub: dict[str, Callable[[Frontier, Frontier], bool]] = Lazy(self._subset_of)
        # violated constraints since the last examination (created on demand)
        self.full: set[str] = set()  # everything (failed processors, first time)
        self.dirty_n: set[str] = set()  # C4: N_p(f(p)) ⊄ n(p)
        self.dirty_out: dict[str, set[str]] = {}  # C2 by output edge: the receiver's f changed
        # C3 by input edge: the sender's f changed, with φ_e(f(u)) as the receiver sees it
        self.dirty_in: dict[str, dict[str, Frontier]] = {}
        # n by input edge: the sender's n changed, with φ_e(n(u)) as the receiver sees it
        self.dirty_nin: dict[str, dict[str, Frontier]] = {}
        self.queue: deque[str] = deque()
        self.queued: set[str] = set()
        for p in filter(view.failed.__contains__, df.processors):  # in declaration order
            self.reasons[p].append(Reason(p, "C1", None, self.f[p]))
            self.full.add(p)
            self._push(p)
            self._changed(p, True, True)

    # -- bookkeeping ----------------------------------------------------------------
    def _push(self, p: str) -> None:
        if p not in self.queued:
            self.queued.add(p)
            self.queue.append(p)

    def _subset_of(self, p: str) -> Callable[[Frontier, Frontier], bool]:
        """``⊆`` for frontiers of ``p``'s domain (one function per domain; read through ``self.sub[p]``)."""
        d = self.df.domains[p]
        fn = self._subsets.get(id(d))  # by identity: processors share their domain objects
        if fn is None:
            fn = self._subsets[id(d)] = _subset(d)
        return fn

    def _current(self, p: str) -> ResolvedCheckpoint:
        """The candidate a stateful ``p`` sits at (its metadata at ``f(p)``)."""
        return self.cands[p][self.idx[p]]

    def _changed(self, p: str, f_changed: bool, n_changed: bool) -> None:
        """Check, at once, every constraint that reads ``f(p)`` / ``n(p)``; queue the owners of violated ones.

        A constraint that holds against the new value is not marked: its owner
        only moves down its chain, where it keeps holding (a prefix, see
        :mod:`falkirk.solver.fixpoint` item 4), until the value it reads
        changes again and it is checked again here. A violated one is marked
        dirty (with the bound it was checked against, C3 and ``n``) and its
        owner queued. ``A ∩ B = A`` is tested as ``A ⊆ B``.
        """
        edges, procs, cands, idx, sub_of = self.edges, self.procs, self.cands, self.idx, self.sub
        f, n, push = self.f, self.n, self._push
        fp = f[p]
        checks = 0
        if f_changed:
            dirty_out = self.dirty_out
            sub = sub_of[p]
            for e in self.inputs[p]:  # C2 at the senders: D_e(f(u)) ⊆ f(p)
                u = edges[e].src
                marked = dirty_out.get(u)
                if marked is not None and e in marked:
                    continue
                pu = procs[u]
                if pu.stateless:
                    if e in pu.logs:  # D_e = ∅: C2 holds
                        continue
                else:
                    checks += 1
                    if sub(cands[u][idx[u]].discarded[e], fp):
                        continue
                if marked is None:
                    dirty_out[u] = {e}
                else:
                    marked.add(e)
                push(u)
        if f_changed or n_changed:
            dirty_in, dirty_nin, incoming = self.dirty_in, self.dirty_nin, self.view.incoming
            np_ = n[p]
            same = np_ is fp or np_ == fp  # then φ_e(n(p)) = φ_e(f(p))
            sent_f = None if procs[p].stateless else cands[p][idx[p]].projection  # φ at a chain element
            for e in self.outputs[p]:
                q = edges[e].dst
                sub = sub_of[q]
                phi = None
                if f_changed:  # C3 at the receivers: M_e(f(q)) ⊆ φ_e(f(p))
                    phi = self._phi_f(e) if sent_f is None else incoming(q, e, sent_f[e])
                    marked_in = dirty_in.get(q)
                    if marked_in is not None and e in marked_in:
                        marked_in[e] = phi  # the newer bound is the smaller
                    else:
                        checks += 1
                        pq = procs[q]
                        held = sub(f[q] if pq.stateless else cands[q][idx[q]].delivered[e], phi)
                        if not held:
                            if marked_in is None:
                                dirty_in[q] = {e: phi}
                            else:
                                marked_in[e] = phi
                            push(q)
                if n_changed:  # n(q) ⊆ φ_e(n(p))
                    phi = phi if same and phi is not None else self._phi_n(e)
                    marked_in = dirty_nin.get(q)
                    if marked_in is not None and e in marked_in:
                        marked_in[e] = phi
                    else:
                        checks += 1
                        if not sub(n[q], phi):
                            if marked_in is None:
                                dirty_nin[q] = {e: phi}
                            else:
                                marked_in[e] = phi
                            push(q)
        if n_changed and self.notified[p] and p not in self.dirty_n and p not in self.full:
            checks += 1  # C4 at p: N_p(f(p)) ⊆ n(p)
            pp = procs[p]
            if not sub_of[p](fp if pp.stateless else cands[p][idx[p]].notifications, n[p]):
                self.dirty_n.add(p)
                push(p)
        self.checks += checks

    def _phi_f(self, e: str) -> Frontier:
        """``incoming(φ_e(f(u)))`` for the sender ``u`` of ``e`` at its current frontier."""
        edge = self.edges[e]
        u = edge.src
        if self.procs[u].stateless:
            phi = self.view.projection(u, e, self.f[u])
        else:  # f(u) is a chain element: its resolved projection (SPEC §3)
            phi = self._current(u).projection[e]
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
        """Update ``f(p)`` and ``n(p)`` against the constraints marked dirty (all of them the first time)."""
        self.examinations += 1
        # take (and clear) the dirty constraints, edges in the reference's order: C4, C2 by output
        # edge, (edge, φ_e(f(u))) by input edge for C3, the bounds φ_e(n(u)) of n(p)
        c4 = p in self.dirty_n
        if c4:
            self.dirty_n.discard(p)
        dirty_out, dirty_in, dirty_nin = (
            self.dirty_out.pop(p, None),
            self.dirty_in.pop(p, None),
            self.dirty_nin.pop(p, None),
        )
        outs: list[str]
        ins: list[tuple[str, Frontier]]
        if p in self.full:
            self.full.discard(p)
            c4, outs, inputs = True, self.outputs[p], self.inputs[p]
            ins = [(e, self._phi_f(e)) for e in inputs]
            nins = [self._phi_n(e) for e in inputs]
        else:
            if not dirty_out:
                outs = []
            elif len(dirty_out) == 1:
                outs = list(dirty_out)
            else:
                outs = [e for e in self.outputs[p] if e in dirty_out]
            if not dirty_in:
                ins = []
            elif len(dirty_in) == 1:
                ins = list(dirty_in.items())
            else:
                ins = [(e, dirty_in[e]) for e in self.inputs[p] if e in dirty_in]
            nins = list(dirty_nin.values()) if dirty_nin else []
        f, n = self.f, self.n
        old_f, old_n = f[p], n[p]
        if self.procs[p].stateless:
            new_f = self._stateless_f(p, c4, outs, ins)
        else:
            new_f = self._stateful_f(p, c4, outs, ins)
        sub = self.sub[p]
        # n(p) ∩ f(p) ∩ ⋂ φ_e(n(u)); a meet is built only when neither side contains the other
        f_changed = new_f is not old_f and new_f != old_f
        new_n = old_n
        if f_changed:
            f[p] = new_f
            if old_n is old_f:  # n(p) = f(p) (as it starts): their meet is the new f(p)
                new_n = new_f
            elif not sub(new_n, new_f):
                new_n = new_f if sub(new_f, new_n) else new_n & new_f
        for phi in nins:
            if not sub(new_n, phi):
                new_n = phi if sub(phi, new_n) else new_n & phi
        self.checks += len(nins)
        n_changed = new_n is not old_n
        if n_changed:
            n[p] = new_n
        if f_changed or n_changed:
            self._changed(p, f_changed, n_changed)

    def _stateless_f(self, p: str, c4: bool, outs: list[str], ins: list[tuple[str, Frontier]]) -> Frontier:
        view, edges, f = self.view, self.edges, self.f
        logs = self.procs[p].logs
        notes = c4 and self.notified[p]
        outs = [e for e in outs if e not in logs]
        self.checks += notes + len(outs) + len(ins)
        return lower_stateless(
            f[p],
            self.n[p] if notes else None,
            ((e, q, view.residual(p, e, f[q])) for e in outs for q in (edges[e].dst,)),
            ((e, edges[e].src, phi) for e, phi in ins),
            lambda constraint, before, after, edge, nb: self._note(p, constraint, before, after, edge, nb),
        )

    def _stateful_f(self, p: str, c4: bool, outs: list[str], ins: list[tuple[str, Frontier]]) -> Frontier:
        cands, top = self.cands[p], self.idx[p]
        # (bound, constraint, edge, neighbour) per dirty constraint, in the reference's order
        checks: list[tuple[int, str, str | None, str | None]] = []
        sub = self.sub[p]
        if c4 and self.notified[p]:
            n = self.n[p]
            checks.append((last_holding(cands, "C4", None, n, top, sub), "C4", None, None))
        for e in outs:
            q = self.edges[e].dst
            checks.append((last_holding(cands, "C2", e, self.f[q], top, self.sub[q]), "C2", e, q))
        for e, phi in ins:
            checks.append((last_holding(cands, "C3", e, phi, top, sub), "C3", e, self.edges[e].src))
        self.checks += len(checks)
        if not checks:
            return cands[top].frontier
        new = min(c[0] for c in checks)
        if new == top:
            return cands[top].frontier
        if new < 0:
            _, why, edge, nb = next(c for c in checks if c[0] < 0)
            raise cannot_roll_back(
                p, f"its lowest available frontier {cands[0].frontier!r}", violated((why, edge, nb))
            )
        # one reason per step down, as the reference records: the first constraint failing there
        steps = self.reasons[p]
        f = self.f
        if len(checks) == 1:
            _, why, edge, nb = checks[0]
            nb_f = None if nb is None else f[nb]
            for k in range(top, new, -1):
                steps.append(Reason(p, why, cands[k].frontier, cands[k - 1].frontier, edge, nb, nb_f))
        else:
            for k in range(top, new, -1):
                _, why, edge, nb = next(c for c in checks if c[0] < k)
                nb_f = None if nb is None else f[nb]
                steps.append(Reason(p, why, cands[k].frontier, cands[k - 1].frontier, edge, nb, nb_f))
        self.idx[p] = new
        return cands[new].frontier

    def run(self) -> FixedPoint:
        queue, queued, examine = self.queue, self.queued, self.examine
        while queue:
            p = queue.popleft()
            queued.discard(p)
            examine(p)
        # a processor never reached has not failed: it keeps ⊤ (its live frontier); the
        # dictionaries over every processor are built by C-level copies, in declaration order
        domains = self.df.domains
        kinds = list(domains.values())
        if kinds and all(map(is_, kinds, repeat(kinds[0]))):  # one domain object (the usual case)
            frontiers = dict.fromkeys(domains, Frontier.top(kinds[0]))
        else:
            by_id = dict(zip(map(id, kinds), kinds, strict=True))  # the distinct domain objects
            tops = {i: Frontier.top(d) for i, d in by_id.items()}
            frontiers = dict(zip(domains, map(tops.__getitem__, map(id, kinds)), strict=True))
        frontiers.update(self.f)
        notes = frontiers.copy()
        notes.update(self.n)
        reasons: dict[str, list[Reason]] = {p: [] for p in domains}
        reasons.update(self.reasons)
        return FixedPoint(frontiers, notes, reasons, self.examinations, self.checks)


def run_worklist(view: View) -> FixedPoint:
    """The fixed point of SPEC §5 over ``view``, worklist-driven (see the module docstring)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Worklist(view).run()
    finally:
        if enabled:
            gc.enable()
