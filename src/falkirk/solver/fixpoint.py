"""Choosing frontiers: the reference driver of SPEC §5 (paper Figure 6), and why every driver is exact.

One update of one processor (:meth:`Iteration.examine`) lowers ``f(p)`` to
the largest candidate meeting C2–C4 against the neighbours' current values
(:mod:`falkirk.solver.constraints`) and then ``n(p)`` to
``n(p) ∩ f(p) ∩ ⋂ φ_e(n(u))``. The drivers differ only in which processor
they update next:

* :func:`round_robin` (here): the literal round-robin of Figure 6, the
  reference and benchmark baseline;
* :meth:`Iteration.run_queue` (here): FIFO over the processors whose
  neighbours changed (when ``f(p)`` shrinks, its senders and receivers;
  when ``n(p)`` shrinks, p and its receivers);
* :func:`falkirk.solver.worklist.run_worklist`: the same, re-checking only
  the constraints whose inputs changed (the default);
* :class:`~falkirk.solver.monitor.tracker.TrackingSolver`: the worklist
  re-run on a region, for the monitor's incremental low-watermarks;
* :mod:`falkirk.solver.vectorised.engine`: the same update on arrays.

Tie-breaking: there is none to make. The visiting order only changes how
much work is done, never the answer, for the reasons below.

Why the iteration is right
--------------------------
Write ``x = (f, n)`` for an assignment, ``x ≤ y`` pointwise, and ``G(x)``
for one update of every processor against ``x``: ``G(x)(p)`` is the
largest ``f ∈ F(p)`` below ``max F(p)`` meeting C2–C4 against ``x``, and
``n' = f ∩ ⋂ φ_e(n(u))``.

1. *Termination.* Neither ``f`` nor ``n`` ever grows. A stateful
   processor's candidates are a finite chain; a stateless processor's
   frontier only becomes ``current ∩ X`` for bounds ``X`` computed from its
   neighbours' values (residuals, projections), finitely many for the
   built-in domains. So every update that changes something moves a value
   down a finite set, and the iteration stops. A stateful processor with
   ``∅ ∉ F(p)`` whose lowest candidate still fails a constraint is reported
   (:func:`~falkirk.solver.constraints.cannot_roll_back`), never looped on.
2. *Soundness.* It stops only when no update changes anything: every
   processor's ``f(p)`` meets C2–C4 against its neighbours and ``n(p)`` is
   inside its bounds, which is C1–C4.
3. *The greatest answer, unique for chains.* A stateful ``F(p)`` is a chain
   (SPEC §5; the model rejects other input) and the metadata are monotone in
   ``f`` (rejected otherwise), and a checkpoint cannot give a projection on
   a functional edge (SPEC §9), so ``φ_e`` is one monotone function. Then
   ``G`` is monotone, the consistent assignments are its post-fixed points
   ``x ≤ G(x)``, and they are closed under pointwise max
   (``x ∨ y ≤ G(x) ∨ G(y) ≤ G(x ∨ y)``): there is a greatest one, ``z``. The
   start ``max F`` is ``≥ z``, and an update keeps ``x ≥ z``
   (``x(p) ∧ G(x)(p) ≥ z(p) ∧ G(z)(p) = z(p)``), so the end, consistent by 2,
   is ``≤ z`` and ``≥ z``: it is ``z``, whatever the order of updates. For a
   stateless processor the best frontier under bounds ``f ⊆ X`` is
   ``current ∩ X`` (its projections preserve unions, so the residual is the
   greatest frontier meeting C2), again a greatest element.
4. *Why the worklist is exact.* An update of ``p`` reads only ``p``'s own
   metadata and its neighbours' values; if none of those changed since
   ``p``'s last update, it changes nothing, so only the processors next to
   a change need re-examination. Every constraint of a stateful processor
   holds on a *prefix* of its chain (monotone metadata), and neighbours only
   shrink, so a constraint that held at ``f(p)`` still holds at any lower
   candidate until the neighbour it reads changes: re-checking the dirty
   constraints alone, each by binary search
   (:func:`~falkirk.solver.constraints.last_holding`), and taking the
   smallest bound is the full update. At the start every processor that has
   not failed sits at ``⊤`` with ``⊤`` neighbours, where C1–C4 hold, so only
   the failed processors are queued.
5. *Why the monitor's incremental reset is exact* (low-watermarks: every
   processor failed, checkpoints arriving one at a time).

   a. *A checkpoint only raises G.* A new checkpoint at ``a`` strictly
      contains every frontier ``a`` had, so ``F(a)`` grows, no earlier
      metadata changes, and ``φ`` on ``a``'s edges is unchanged on every
      frontier inside the old ``max F(a)``, the only values ``a`` ever took.
      So ``G_new ≥ G_old`` and ``z_new ≥ z_old``: watermarks never fall
      (the monitor checks anyway and refuses a fall).
   b. *Derivations.* Each step lowering a value of ``p`` reads the current
      values of some neighbours (recorded in ``deps[p]`` by the tracker)
      and ``p``'s own metadata, and proves "every consistent ``x`` has
      ``x(p) ≤`` the new value" from the same statement for those
      neighbours (metadata and ``φ`` are monotone); the axioms are
      ``x(p) ≤ max F(p)``. A step only reads values set by earlier steps,
      so these proofs are well founded.
   c. *The region.* ``R`` is ``a`` plus every processor whose ``deps``
      reach ``a``, transitively. A processor outside ``R`` has a proof of
      ``x(p) ≤ z_old(p)`` that mentions only processors outside ``R``,
      whose axioms and metadata did not change: it holds for ``G_new``, so
      ``z_new(p) ≤ z_old(p)``, hence ``z_new(p) = z_old(p)`` by a.
   d. *The re-run.* Let ``y`` be ``z_old`` outside ``R`` and ``max F_new(p)``
      inside. By c, ``y ≥ z_new``, and by 3 iterating from any ``y ≥ z_new``
      ends at ``z_new``. Processors outside ``R`` already hold ``z_new`` and
      satisfy their constraints at any ``x ≥ z_new``, so the worklist visits
      ``R`` only, and the derivations it records for ``R`` read values of
      this run or unchanged ones outside ``R``: b holds again for the next
      event.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> from falkirk.solver.model.access import View
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1), Checkpoint(5)])], [Edge("ab", "a", "b")])
>>> fp = round_robin(View(df, frozenset({"a"})))
>>> {p: df.domains[p].encode(f) for p, f in fp.frontiers.items()}, [r.constraint for r in fp.reasons["b"]]
({'a': 3, 'b': 1}, ['C3', 'C3'])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from attrs import frozen

from falkirk.domains import Frontier
from falkirk.solver.constraints import cannot_roll_back, first_violation, lower_stateless, sent, violated
from falkirk.solver.model.access import View

__all__ = ["Reason", "FixedPoint", "Iteration", "round_robin"]


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
    """The result of the iteration: ``f``, ``n``, the reasons, and how much work it took.

    ``examinations`` counts processor updates; ``checks`` counts constraint
    checks (one constraint of one processor, C2/C3 on one edge, C4, or one
    bound of ``n(p)``, checked against its neighbour's current value; for a
    stateful processor a binary search over its chain), where the driver
    counts them (the worklist does), ``None`` otherwise.
    """

    frontiers: dict[str, Frontier]
    notification_frontiers: dict[str, Frontier]
    reasons: dict[str, list[Reason]]
    examinations: int
    checks: int | None = None


class Iteration:
    """The state of one run of SPEC §5 over a :class:`~falkirk.solver.model.access.View`, and its update.

    Every processor starts at ``max F(p)`` (``f = n``); :meth:`examine`
    applies the update to one processor; :meth:`run_round_robin` and
    :meth:`run_queue` are the two orders of updates (see the module
    docstring). ``f``, ``n``, ``idx`` (a stateful processor's position in
    its chain), ``reasons`` and ``examinations`` are the state, readable by
    anyone.

    Hooks, for drivers that build on the iteration (the monitor's
    :class:`~falkirk.solver.monitor.tracker.TrackingSolver` does):

    * :meth:`lowered` is called for every step that lowers ``f(p)``, with
      the constraint, the edge and the neighbour whose value forced it (by
      default it records a :class:`Reason`);
    * :meth:`notification_lowered` is called for every input edge whose
      sender's ``n`` lowered ``n(p)`` (by default nothing);
    * ``jump=True`` finds a stateful processor's new candidate by binary
      search and reports one step for the whole descent, whose witness is
      the constraint the lowest failing candidate violates (by monotonicity
      every higher one fails it too); the default reports every step down,
      as Figure 6 takes them. Both reach the same frontiers.

    Cost: :meth:`examine` reads every edge of ``p`` once
    (``O(edges of p)`` frontier operations), times the candidates it steps
    down (default) or their logarithm (``jump=True``).

    >>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
    >>> from falkirk.solver.model.access import View
    >>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
    ...                Processor("b", "epoch", checkpoints=[Checkpoint(1), Checkpoint(5)])], [Edge("ab", "a", "b")])
    >>> it = Iteration(View(df, frozenset({"a"})), jump=True)
    >>> it.run_queue()
    >>> {p: df.domains[p].encode(f) for p, f in it.f.items()}, [r.describe() for r in it.reasons["b"]]
    ({'a': 3, 'b': 1}, ['b top → 1 by C3 on ab: it had received messages that a at 3 will send again'])
    """

    def __init__(self, view: View, *, jump: bool = False) -> None:
        self.view = view
        df = view.df
        self.df = df
        self.jump = jump
        self.f: dict[str, Frontier] = {}
        self.n: dict[str, Frontier] = {}
        self.idx: dict[str, int] = {}
        self.reasons: dict[str, list[Reason]] = {p: [] for p in df.processors}
        self.examinations = 0
        self._in = {p: tuple((e, df.edges[e].src) for e in df.inputs[p]) for p in df.processors}
        self._out = {p: tuple((e, df.edges[e].dst) for e in df.outputs[p]) for p in df.processors}
        self._senders = {p: tuple(u for _, u in self._in[p]) for p in df.processors}
        self._receivers = {p: tuple(q for _, q in self._out[p]) for p in df.processors}
        for p in df.processors:
            f0 = view.initial(p)
            self.f[p] = f0
            self.n[p] = f0
            if not view.is_stateless(p):
                self.idx[p] = len(view.cands[p]) - 1
            if p in view.failed:
                self.reasons[p].append(Reason(p, "C1", None, f0))

    # -- hooks ------------------------------------------------------------------------------
    def lowered(
        self,
        p: str,
        constraint: str,
        before: Frontier,
        after: Frontier,
        edge: str | None = None,
        neighbour: str | None = None,
    ) -> None:
        """``f(p)`` went from ``before`` to ``after`` by ``constraint`` (on ``edge``, read from
        ``neighbour``)."""
        self.reasons[p].append(
            Reason(
                p,
                constraint,
                before,
                after,
                edge,
                neighbour,
                self.f[neighbour] if neighbour is not None else None,
            )
        )

    def notification_lowered(self, p: str, edge: str, sender: str) -> None:
        """``n(p)`` was lowered by ``φ_edge(n(sender))``."""

    # -- one update of Figure 6 -------------------------------------------------------
    def examine(self, p: str) -> tuple[bool, bool]:
        """Update ``f(p)`` then ``n(p)``; return which of them changed."""
        self.examinations += 1
        old_f, old_n = self.f[p], self.n[p]
        new_f = self._stateless_f(p) if self.view.is_stateless(p) else self._stateful_f(p)
        self.f[p] = new_f
        n = old_n & new_f
        view = self.view
        for e, u in self._in[p]:
            lowered = n & sent(view, p, e, u, self.n[u])
            if lowered != n:
                self.notification_lowered(p, e, u)
                n = lowered
        self.n[p] = n
        return new_f != old_f, n != old_n

    def _stateless_f(self, p: str) -> Frontier:
        view, f = self.view, self.f
        logs = self.df.processors[p].logs
        return lower_stateless(
            f[p],
            self.n[p] if self.df.receives_notifications[p] else None,
            ((e, q, view.residual(p, e, f[q])) for e, q in self._out[p] if e not in logs),
            ((e, u, sent(view, p, e, u, f[u])) for e, u in self._in[p]),
            lambda constraint, before, after, edge, nb: self.lowered(p, constraint, before, after, edge, nb),
        )

    def _stateful_f(self, p: str) -> Frontier:
        view, f = self.view, self.f
        cands = view.cands[p]
        i = self.idx[p]
        notes = self.n[p] if self.df.receives_notifications[p] else None
        outs = [(e, q, f[q]) for e, q in self._out[p]]
        ins = [(e, u, sent(view, p, e, u, f[u])) for e, u in self._in[p]]
        why = first_violation(cands[i], notes, outs, ins)
        if why is None:
            return cands[i].frontier
        if self.jump:  # binary search: cands[hi] fails with `why`; everything <= lo meets the constraints
            lo, hi = -1, i
            while hi - lo > 1:
                mid = (lo + hi) // 2
                w = first_violation(cands[mid], notes, outs, ins)
                if w is None:
                    lo = mid
                else:
                    hi, why = mid, w
            if lo < 0:
                raise cannot_roll_back(
                    p, f"its lowest available frontier {cands[0].frontier!r}", violated(why)
                )
            self.lowered(p, why[0], cands[i].frontier, cands[lo].frontier, why[1], why[2])
            self.idx[p] = lo
            return cands[lo].frontier
        while why is not None:
            if i == 0:
                raise cannot_roll_back(
                    p, f"its lowest available frontier {cands[0].frontier!r}", violated(why)
                )
            self.lowered(p, why[0], cands[i].frontier, cands[i - 1].frontier, why[1], why[2])
            i -= 1
            why = first_violation(cands[i], notes, outs, ins)
        self.idx[p] = i
        return cands[i].frontier

    # -- drivers ------------------------------------------------------------------------
    def neighbours(self) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
        """``(senders, receivers)`` of every processor (the processors its constraints read)."""
        return self._senders, self._receivers

    def run_queue(self, names: Iterable[str] | None = None) -> None:
        """The plain worklist over ``names`` (default: every processor); every other processor stays fixed."""
        order = list(dict.fromkeys(self.df.processors if names is None else names))
        inside = set(order)
        queue = deque(order)
        queued = set(order)
        senders, receivers = self._senders, self._receivers
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
        """Figure 6 literally: update every processor in declaration order until nothing changes."""
        names = list(self.df.processors)
        changed = True
        while changed:
            changed = False
            for p in names:
                f_changed, n_changed = self.examine(p)
                changed = changed or f_changed or n_changed


def round_robin(view: View) -> FixedPoint:
    """Run the iteration of SPEC §5 over ``view`` round-robin (the reference driver) and return the fixed
    point."""
    s = Iteration(view)
    s.run_round_robin()
    return FixedPoint(dict(s.f), dict(s.n), s.reasons, s.examinations)
