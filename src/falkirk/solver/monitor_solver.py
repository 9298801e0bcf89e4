"""The monitor's fixed point: SPEC §5's update, re-run on regions, with derivations.

:class:`TrackingSolver` applies the update of :mod:`falkirk.solver.fixpoint`
(the stateless ``f(p)`` step is inherited; the stateful one finds the same
candidate by binary search, and the ``n(p)`` step is repeated so as to see
which input lowered it) and remembers,
for every processor ``p``, ``deps[p]``: the neighbours whose frontiers were
read by some step that lowered ``f(p)`` or ``n(p)`` since ``p`` was last
reset (``dependents`` is the reverse index). :meth:`TrackingSolver.region`
closes a set of processors under ``dependents``; :meth:`~TrackingSolver.reset`
puts a region back at ``max F(p)`` and ``run_worklist(region)`` re-runs the
worklist on it, leaving every other processor alone. Why that is exact is
argued in :mod:`falkirk.solver.fixpoint` (item 5).

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(1), Checkpoint(2)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(3)])], [Edge("ab", "a", "b")])
>>> s = TrackingSolver(MonitorView(df))
>>> s.run_worklist(["a", "b"])
>>> {p: df.domains[p].encode(f) for p, f in s.f.items()}, s.deps["b"], s.region(["a"])
({'a': 2, 'b': 'empty'}, {'a'}, ['a', 'b'])
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from falkirk.domains import Frontier
from falkirk.solver.access import View
from falkirk.solver.constraints import cannot_roll_back, first_violation, sent, violated
from falkirk.solver.fixpoint import Reason, _Solver
from falkirk.solver.model import Dataflow, Meta

__all__ = ["MonitorView", "TrackingSolver", "Saved"]


class MonitorView(View):
    """:class:`~falkirk.solver.access.View` with every processor failed, whose chains can grow.

    :meth:`push` appends a resolved checkpoint to a processor's ``F(p)``,
    :meth:`pop` withdraws it. ``φ_e`` at a frontier of a stateful
    processor's chain is found by a dictionary lookup instead of a scan.
    """

    def __init__(self, df: Dataflow) -> None:
        super().__init__(df, frozenset(df.processors), lazy=False)
        self._index: dict[str, dict[Frontier, Meta]] = {
            p: {m.frontier: m for m in cands} for p, cands in self.cands.items() if not self.is_stateless(p)
        }

    def push(self, name: str, meta: Meta) -> None:
        """Append ``meta`` (strictly above the current chain) to ``F(name)``."""
        self.cands[name].append(meta)
        if name in self._index:
            self._index[name][meta.frontier] = meta
        for e, metas in self.recorded.get(name, {}).items():
            if e in meta.recorded:
                metas.append(meta)

    def pop(self, name: str) -> None:
        """Withdraw the last :meth:`push` on ``name``."""
        meta = self.cands[name].pop()
        if name in self._index:
            del self._index[name][meta.frontier]
        for metas in self.recorded.get(name, {}).values():
            if metas and metas[-1] is meta:
                metas.pop()

    def projection(self, name: str, edge: str, f: Frontier) -> Frontier:
        if not f.is_top and name in self._index:
            m = self._index[name].get(f)
            if m is not None:
                return m.projection[edge]
        return super().projection(name, edge, f)


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


class TrackingSolver(_Solver):
    """The SPEC §5 iteration over ``view`` that records what each frontier was derived from.

    The constructor only sets every processor at its initial frontier
    (``max F(p)``); call :meth:`run` on all processors for a full solve.
    ``examinations`` counts processor updates, as in
    :class:`~falkirk.solver.fixpoint.FixedPoint`.
    """

    def __init__(self, view: View) -> None:
        super().__init__(view)
        df = self.df
        self.deps: dict[str, set[str]] = {p: set() for p in df.processors}
        self.dependents: dict[str, set[str]] = {p: set() for p in df.processors}
        self._in = {p: tuple((e, df.edges[e].src) for e in df.inputs[p]) for p in df.processors}
        self._receivers = {p: tuple(df.edges[e].dst for e in df.outputs[p]) for p in df.processors}
        self._out = {p: tuple((e, df.edges[e].dst) for e in df.outputs[p]) for p in df.processors}
        self._senders = {p: tuple(u for _, u in self._in[p]) for p in df.processors}

    # -- derivations ------------------------------------------------------------------
    def _depend(self, p: str, q: str) -> None:
        if q != p and q not in self.deps[p]:
            self.deps[p].add(q)
            self.dependents[q].add(p)

    def _note(
        self,
        p: str,
        constraint: str,
        before: Frontier,
        after: Frontier,
        edge: str | None = None,
        nb: str | None = None,
    ) -> None:
        super()._note(p, constraint, before, after, edge, nb)
        if nb is not None:
            self._depend(p, nb)

    def _stateful_f(self, p: str) -> Frontier:
        """The largest candidate meeting C2–C4, by binary search down the chain.

        Metadata are monotone, so the candidates meeting the constraints form
        a prefix of the chain; the first one above it fails some constraint
        and so does every higher one: that constraint's neighbour is the one
        witness the step needs (recorded by :meth:`_note`).
        """
        view, df = self.view, self.df
        cands = view.cands[p]
        i = self.idx[p]
        notes = self.n[p] if df.receives_notifications[p] else None
        outs = [(e, q, self.f[q]) for e, q in self._out[p]]
        ins = [(e, u, sent(view, p, e, u, self.f[u])) for e, u in self._in[p]]
        why = first_violation(cands[i], notes, outs, ins)
        if why is None:
            return cands[i].frontier
        lo, hi = -1, i  # cands[hi] fails with `why`; everything <= lo meets the constraints
        while hi - lo > 1:
            mid = (lo + hi) // 2
            w = first_violation(cands[mid], notes, outs, ins)
            if w is None:
                lo = mid
            else:
                hi, why = mid, w
        if lo < 0:
            raise cannot_roll_back(p, f"its lowest available frontier {cands[0].frontier!r}", violated(why))
        self._note(p, why[0], cands[i].frontier, cands[lo].frontier, why[1], why[2])
        self.idx[p] = lo
        return cands[lo].frontier

    def examine(self, p: str) -> tuple[bool, bool]:
        """The update of :meth:`_Solver.examine`, noting which input lowered ``n(p)``."""
        self.examinations += 1
        old_f, old_n = self.f[p], self.n[p]
        view = self.view
        new_f = self._stateless_f(p) if view.is_stateless(p) else self._stateful_f(p)
        self.f[p] = new_f
        n = old_n & new_f
        for e, u in self._in[p]:
            lowered = n & sent(view, p, e, u, self.n[u])
            if lowered != n:
                self._depend(p, u)
                n = lowered
        self.n[p] = n
        return new_f != old_f, n != old_n

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

    def neighbours(self) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:  # type: ignore[override]
        """``(senders, receivers)``, built once for the monitor's many runs."""
        return self._senders, self._receivers
