"""Choosing frontiers: the fixed point of SPEC §5 (paper Figure 6).

:func:`falkirk.solver.dispatch.fixed_point` runs the iteration either worklist-driven (default:
when ``f(p)`` shrinks only p's senders, receivers and p itself are
re-examined; when ``n(p)`` shrinks, p and its receivers) or as the literal
round-robin of Figure 6 (kept as the reference and benchmark baseline).
Both apply the same update to one processor (:meth:`_Solver.examine`), so
they reach the same fixed point (:func:`round_robin` here is the reference
driver). ``fixed_point(strategy="worklist")`` runs
the faster driver of :mod:`falkirk.solver.worklist`, which applies that
update to the constraints whose inputs changed only (same answer; every
step down gets a reason found as here); :meth:`_Solver.run_worklist` is the
plain version of it.

Tie-breaking: there is none to make. A stateful processor's ``F(p)`` is a
chain, so the largest candidate satisfying the constraints is unique; a
stateless processor's best frontier is ``current ∩ X`` for each constraint
``f ⊆ X``, also unique. The visiting order (declaration order, FIFO) only
changes how much work is done, never the answer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from attrs import frozen

from falkirk.domains import Frontier
from falkirk.errors import SolverError
from falkirk.solver.access import View

__all__ = ["Reason", "FixedPoint", "round_robin"]


@frozen
class Reason:
    """One step that lowered ``f(processor)``: which constraint, edge and neighbour forced it."""

    processor: str
    constraint: str  # "C1" failed, "C2" discarded, "C3" delivered, "C4" notifications
    before: Frontier | None
    after: Frontier
    edge: str | None = None
    neighbour: str | None = None
    neighbour_frontier: Frontier | None = None

    def describe(self) -> str:
        """A one-line human explanation."""
        if self.constraint == "C1":
            return f"{self.processor} failed: ⊤ is gone, its best available frontier is {_fmt(self.after)}"
        tail = f"{_fmt(self.before)} → {_fmt(self.after)}"
        if self.constraint == "C2":
            return (
                f"{self.processor} {tail} by C2 on {self.edge}: it discarded messages to {self.neighbour}, "
                f"which keeps only {_fmt(self.neighbour_frontier)}"
            )
        if self.constraint == "C3":
            return (
                f"{self.processor} {tail} by C3 on {self.edge}: it had received messages that "
                f"{self.neighbour} at {_fmt(self.neighbour_frontier)} will send again"
            )
        who = f" from {self.neighbour} on {self.edge}" if self.neighbour else ""
        return f"{self.processor} {tail} by C4: notifications delivered outside n(p){who}"


def _fmt(f: Frontier | None) -> str:
    if f is None:
        return "?"
    from falkirk.domains.encoding import frontier_text

    return frontier_text(f)


@frozen
class FixedPoint:
    """The result of the iteration: ``f``, ``n``, the reasons, and how much work it took."""

    frontiers: dict[str, Frontier]
    notification_frontiers: dict[str, Frontier]
    reasons: dict[str, list[Reason]]
    examinations: int


class _Solver:
    def __init__(self, view: View) -> None:
        self.view = view
        df = view.df
        self.df = df
        self.f: dict[str, Frontier] = {}
        self.n: dict[str, Frontier] = {}
        self.idx: dict[str, int] = {}
        self.reasons: dict[str, list[Reason]] = {p: [] for p in df.processors}
        self.examinations = 0
        for p in df.processors:
            f0 = view.initial(p)
            self.f[p] = f0
            self.n[p] = f0
            if not view.is_stateless(p):
                self.idx[p] = len(view.cands[p]) - 1
            if p in view.failed:
                self.reasons[p].append(Reason(p, "C1", None, f0))

    # -- one update of Figure 6 -------------------------------------------------------
    def examine(self, p: str) -> tuple[bool, bool]:
        """Update ``f(p)`` then ``n(p)``; return which of them changed."""
        self.examinations += 1
        old_f, old_n = self.f[p], self.n[p]
        new_f = self._stateless_f(p) if self.view.is_stateless(p) else self._stateful_f(p)
        self.f[p] = new_f
        new_n = old_n & new_f
        view, df = self.view, self.df
        for e in df.inputs[p]:
            u = df.edges[e].src
            new_n = new_n & view.incoming(p, e, view.projection(u, e, self.n[u]))
        self.n[p] = new_n
        return new_f != old_f, new_n != old_n

    def _note(
        self,
        p: str,
        constraint: str,
        before: Frontier,
        after: Frontier,
        edge: str | None = None,
        nb: str | None = None,
    ) -> None:
        self.reasons[p].append(
            Reason(p, constraint, before, after, edge, nb, self.f[nb] if nb is not None else None)
        )

    def _stateless_f(self, p: str) -> Frontier:
        view, df = self.view, self.df
        cur = self.f[p]
        if df.receives_notifications[p]:
            nxt = cur & self.n[p]
            if nxt != cur:
                self._note(p, "C4", cur, nxt)
                cur = nxt
        logs = df.processors[p].logs
        for e in df.outputs[p]:
            if e in logs:
                continue
            q = df.edges[e].dst
            nxt = cur & view.residual(p, e, self.f[q])
            if nxt != cur:
                self._note(p, "C2", cur, nxt, e, q)
                cur = nxt
        for e in df.inputs[p]:
            u = df.edges[e].src
            nxt = cur & view.incoming(p, e, view.projection(u, e, self.f[u]))
            if nxt != cur:
                self._note(p, "C3", cur, nxt, e, u)
                cur = nxt
        return cur

    def _stateful_f(self, p: str) -> Frontier:
        view, df = self.view, self.df
        cands = view.cands[p]
        i = self.idx[p]
        notes = df.receives_notifications[p]
        while True:
            m = cands[i]
            why: tuple[str, str | None, str | None] | None = None
            if notes and not m.notifications <= self.n[p]:
                why = ("C4", None, None)
            if why is None:
                for e in df.outputs[p]:
                    q = df.edges[e].dst
                    if not m.discarded[e] <= self.f[q]:
                        why = ("C2", e, q)
                        break
            if why is None:
                for e in df.inputs[p]:
                    u = df.edges[e].src
                    if not m.delivered[e] <= view.incoming(p, e, view.projection(u, e, self.f[u])):
                        why = ("C3", e, u)
                        break
            if why is None:
                break
            if i == 0:
                raise SolverError(
                    f"processor {p!r} cannot roll back far enough: its lowest available frontier "
                    f"{m.frontier!r} violates {why[0]}{' on ' + why[1] if why[1] else ''} and it is "
                    "not restartable (∅ ∉ F(p))"
                )
            self._note(p, why[0], m.frontier, cands[i - 1].frontier, why[1], why[2])
            i -= 1
        self.idx[p] = i
        return cands[i].frontier

    # -- drivers ------------------------------------------------------------------------
    def neighbours(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """``(senders, receivers)`` of every processor (the processors its constraints read)."""
        df = self.df
        senders = {p: [df.edges[e].src for e in df.inputs[p]] for p in df.processors}
        receivers = {p: [df.edges[e].dst for e in df.outputs[p]] for p in df.processors}
        return senders, receivers

    def run_worklist(self, names: Iterable[str] | None = None) -> None:
        """The plain worklist over ``names`` (default: every processor); every other processor stays fixed."""
        order = list(dict.fromkeys(self.df.processors if names is None else names))
        inside = set(order)
        queue = deque(order)
        queued = set(order)
        senders, receivers = self.neighbours()
        while queue:
            p = queue.popleft()
            queued.discard(p)
            f_changed, n_changed = self.examine(p)
            if not (f_changed or n_changed):
                continue
            todo = list(receivers[p])
            if f_changed:
                todo.extend(senders[p])
            if n_changed:
                todo.append(p)
            for q in todo:
                if q in inside and q not in queued:
                    queued.add(q)
                    queue.append(q)

    def run_round_robin(self) -> None:
        names = list(self.df.processors)
        changed = True
        while changed:
            changed = False
            for p in names:
                f_changed, n_changed = self.examine(p)
                changed = changed or f_changed or n_changed


def round_robin(view: View) -> FixedPoint:
    """Run the iteration of SPEC §5 over ``view`` round-robin (the reference driver) and return the fixed point."""
    s = _Solver(view)
    s.run_round_robin()
    return FixedPoint(dict(s.f), dict(s.n), s.reasons, s.examinations)
