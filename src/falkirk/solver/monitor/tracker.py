"""The monitor's fixed point: SPEC §5's update, re-run on regions, with derivations.

:class:`TrackingSolver` is the :class:`~falkirk.solver.fixpoint.Iteration`
of SPEC §5 (stateful steps by binary search, ``jump=True``) whose documented
hooks remember, for every processor ``p``, ``deps[p]``: the neighbours whose frontiers were
read by some step that lowered ``f(p)`` or ``n(p)`` since ``p`` was last
reset (``dependents`` is the reverse index). :meth:`TrackingSolver.region`
closes a set of processors under ``dependents``; :meth:`~TrackingSolver.reset`
puts a region back at ``max F(p)`` and ``run_queue(region)`` re-runs the
worklist on it, leaving every other processor alone. Why that is exact is
argued in :mod:`falkirk.solver.fixpoint` (item 5).

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(1), Checkpoint(2)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(3)])], [Edge("ab", "a", "b")])
>>> s = TrackingSolver(monitor_view(df))
>>> s.run_queue(["a", "b"])
>>> {p: df.domains[p].encode(f) for p, f in s.f.items()}, s.deps["b"], s.region(["a"])
({'a': 2, 'b': 'empty'}, {'a'}, ['a', 'b'])
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from falkirk.domains import Frontier
from falkirk.solver.fixpoint import Iteration, Reason
from falkirk.solver.model import Dataflow
from falkirk.solver.model.access import View

__all__ = ["monitor_view", "TrackingSolver", "Saved"]


def monitor_view(df: Dataflow) -> View:
    """The view the monitor solves over: every processor failed, chains resolved and indexed, growable."""
    return View(df, frozenset(df.processors), lazy=False, indexed=True)


@frozen
class Saved:
    """What :meth:`TrackingSolver.save` keeps to undo a region's re-run."""

    names: tuple[str, ...]
    f: tuple[Frontier, ...]
    n: tuple[Frontier, ...]
    idx: tuple[int | None, ...]
    deps: tuple[set[str], ...]
    reasons: tuple[list[Reason], ...]
    examinations: int


class TrackingSolver(Iteration):
    """The SPEC §5 iteration over ``view`` that records what each frontier was derived from.

    An :class:`~falkirk.solver.fixpoint.Iteration` with ``jump=True`` whose
    hooks (:meth:`lowered`, :meth:`notification_lowered`) record, per
    processor, the neighbours each lowering step read. The constructor only
    sets every processor at its initial frontier (``max F(p)``); call
    :meth:`run_queue` on all processors for a full solve.
    ``examinations`` counts processor updates, as in
    :class:`~falkirk.solver.fixpoint.FixedPoint`.
    """

    def __init__(self, view: View) -> None:
        super().__init__(view, jump=True)
        df = self.df
        self.deps: dict[str, set[str]] = {p: set() for p in df.processors}
        self.dependents: dict[str, set[str]] = {p: set() for p in df.processors}

    # -- derivations ------------------------------------------------------------------
    def _depend(self, p: str, q: str) -> None:
        if q != p and q not in self.deps[p]:
            self.deps[p].add(q)
            self.dependents[q].add(p)

    def lowered(
        self,
        p: str,
        constraint: str,
        before: Frontier,
        after: Frontier,
        edge: str | None = None,
        neighbour: str | None = None,
    ) -> None:
        """Record the step (a :class:`Reason`) and that ``f(p)`` now derives from ``neighbour``."""
        super().lowered(p, constraint, before, after, edge, neighbour)
        if neighbour is not None:
            self._depend(p, neighbour)

    def notification_lowered(self, p: str, edge: str, sender: str) -> None:
        """``n(p)`` now derives from ``sender``."""
        self._depend(p, sender)

    # -- regions ------------------------------------------------------------------------
    def region(self, seeds: Iterable[str]) -> list[str]:
        """``seeds`` and every processor derived from them, transitively (BFS order)."""
        out = list(dict.fromkeys(seeds))
        seen = set(out)
        i = 0
        while i < len(out):
            for q in self.dependents[out[i]]:
                if q not in seen:
                    seen.add(q)
                    out.append(q)
            i += 1
        return out

    def save(self, names: Iterable[str]) -> Saved:
        """A copy of everything :meth:`reset` and :meth:`run` may change on ``names``."""
        ns = tuple(names)
        return Saved(
            ns,
            tuple(self.f[p] for p in ns),
            tuple(self.n[p] for p in ns),
            tuple(self.idx.get(p) for p in ns),
            tuple(set(self.deps[p]) for p in ns),
            tuple(list(self.reasons[p]) for p in ns),
            self.examinations,
        )

    def restore(self, saved: Saved) -> None:
        """Undo :meth:`reset`/:meth:`run` on the processors of ``saved``."""
        for p in saved.names:
            self._forget(p)
        for p, f, n, i, deps, reasons in zip(
            saved.names, saved.f, saved.n, saved.idx, saved.deps, saved.reasons, strict=True
        ):
            self.f[p], self.n[p] = f, n
            if i is not None:
                self.idx[p] = i
            for q in deps:
                self._depend(p, q)
            self.reasons[p] = reasons
        self.examinations = saved.examinations

    def _forget(self, p: str) -> None:
        for q in self.deps[p]:
            self.dependents[q].discard(p)
        self.deps[p] = set()

    def reset(self, names: Iterable[str]) -> None:
        """Put ``names`` back at ``max F(p)`` (as the solver starts) and forget their derivations."""
        view = self.view
        for p in names:
            self._forget(p)
            f0 = view.initial(p)
            self.f[p] = self.n[p] = f0
            if not view.is_stateless(p):
                self.idx[p] = len(view.cands[p]) - 1
            self.reasons[p] = [Reason(p, "C1", None, f0)] if p in view.failed else []
