"""A brute-force reference for the solver: enumerate, check C1–C4, keep what passes.

For small dataflows only (a handful of processors, a few candidates each).
Everything here is written from the text of SPEC §3–§4, independently of
:mod:`falkirk.solver`'s access, fixpoint and consistency modules: only the
validated :class:`~falkirk.solver.Dataflow` (its resolved checkpoint
metadata) and the domain operations are shared.

* Candidates (C1): a stateful processor's chain ``F(p)`` (``∅``, its
  checkpoints, and ``⊤`` unless it failed). A stateless processor may take
  any frontier ``⊆ c`` (``c = ⊤`` unless it failed); the enumeration uses
  the frontiers of its domain that the dataflow mentions, closed under meet
  (and, in sequence domains, under taking one edge's count): every
  constraint compares against such frontiers, so any consistent assignment
  can be rounded up to one made of them.
* Metadata of a stateless processor (SPEC §3): ``M_e(f) = f``,
  ``N(f) = f`` (``∅`` without notifications), ``D_e(f) = ∅`` on logged
  edges, else the exact image of ``φ_e`` (``BoundProjection.discarded``,
  ``φ_e(f)`` itself unless p sends "into the future"). For a recorded
  projection ``φ_e`` is only exact at a recorded frontier, so ``D_e(f)`` is
  ``φ_e(r)`` for the smallest recorded ``r ⊇ f`` (unknown — nothing fits —
  when there is none), which is what SPEC §3's residual assumes.
* ``φ_e`` outside ``F(p)``: functional projections are applied, recorded
  ones take the union of the records at frontiers ``⊆ f``.
* In a sequence domain, C2, C3 and C4's edge condition compare edge ``e``'s
  count only (SPEC §7).
* C4 uses the greatest notification frontiers ``n``, found by iterating
  ``n(q) := n(q) ∩ φ_e(n(p))`` down from ``n = f``.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])],
...               [Edge("ab", "a", "b")])
>>> [{p: str(f) for p, f in s.items()} for s in brute_force_solve(df, ["a"], maximal=True)]
[{'a': 'Frontier(epoch, 3)', 'b': 'Frontier(epoch, 1)'}]
>>> len(brute_force_solve(df, ["a"]))  # (∅, ∅), (3, ∅), (3, 1)
3
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from falkirk.domains import Domain, Frontier, Sequence
from falkirk.solver import Dataflow, ResolvedCheckpoint

__all__ = ["brute_force_solve", "candidate_frontiers", "is_consistent"]

#: Largest universe of candidate frontiers per domain before giving up.
MAX_UNIVERSE = 600


class _Unknown:
    """A discarded frontier that is not known: it fits inside nothing."""


_UNKNOWN = _Unknown()


def _inside(dom: Domain, x: Frontier | _Unknown, y: Frontier, edge: str | None = None) -> bool:
    """``x ⊆ y``; in a sequence domain, when ``edge`` is given, on that edge's count only."""
    if isinstance(x, _Unknown):
        return False
    if edge is not None and isinstance(dom, Sequence):
        cx, cy = dom.count(x, edge), dom.count(y, edge)
        return cy is None or (cx is not None and cx <= cy)
    return x <= y


class _Model:
    """``F(p)`` and ``N``, ``M``, ``D``, ``φ`` of SPEC §3 for one failed set."""

    def __init__(self, df: Dataflow, failed: frozenset[str]) -> None:
        self.df = df
        self.failed = failed
        self.metas: dict[str, list[ResolvedCheckpoint]] = {}
        self.initial: dict[str, Frontier] = {}
        self.records: dict[tuple[str, str], list[tuple[Frontier, Frontier]]] = {}
        for p, proc in df.processors.items():
            metas = df.candidates(p, failed=p in failed)
            self.metas[p] = metas
            self.initial[p] = metas[-1].frontier
            if proc.stateless:
                for e in df.outputs[p]:
                    self.records[p, e] = [
                        (m.frontier, m.projection[e])
                        for m in metas
                        if m.frontier.is_empty or m.frontier.is_top or e in m.recorded
                    ]

    def stateless(self, p: str) -> bool:
        return self.df.processors[p].stateless

    def meta(self, p: str, f: Frontier) -> ResolvedCheckpoint | None:
        for m in self.metas[p]:
            if m.frontier == f:
                return m
        return None

    def notifications(self, p: str, f: Frontier) -> Frontier:
        if not self.df.receives_notifications[p]:
            return Frontier.empty(f.domain)
        m = None if self.stateless(p) else self.meta(p, f)
        return f if m is None else m.notifications

    def delivered(self, q: str, e: str, f: Frontier) -> Frontier:
        m = None if self.stateless(q) else self.meta(q, f)
        return f if m is None else m.delivered[e]

    def projection(self, p: str, e: str, f: Frontier) -> Frontier:
        b = self.df.bound[e]
        if f.is_top:
            return Frontier.top(b.target)
        if not self.stateless(p):
            m = self.meta(p, f)
            if m is not None:
                return m.projection[e]
            pairs = [(m.frontier, m.projection[e]) for m in self.metas[p]]
        elif b.recorded:
            pairs = self.records[p, e]
        else:
            pairs = []
        if not b.recorded:
            return b.apply(f)
        out = Frontier.empty(b.target)
        for r, phi in pairs:
            if r <= f:
                out = out | phi
        return out

    def discarded(self, p: str, e: str, f: Frontier) -> Frontier | _Unknown:
        b = self.df.bound[e]
        if not self.stateless(p):
            m = self.meta(p, f)
            assert m is not None, f"{p}: {f!r} is not in F(p)"
            return m.discarded[e]
        if e in self.df.processors[p].logs:
            return Frontier.empty(b.target)
        if not b.recorded:
            return b.discarded(f)  # the exact image (SPEC §2)
        for r, phi in self.records[p, e]:  # a chain, ascending: the first r ⊇ f is the smallest
            if f <= r:
                return phi
        return _UNKNOWN

    def available(self, p: str, f: Frontier) -> bool:
        if not self.df.processors[p].restartable and f.is_empty:
            return False
        if self.stateless(p):
            return f <= self.initial[p]
        return self.meta(p, f) is not None

    # -- the constraints ------------------------------------------------------------------
    def edge_ok(self, e: str, f: Mapping[str, Frontier]) -> bool:
        """C2, C3 and the consequence ``N(f(q)) ⊆ φ_e(f(p))`` of C4 on edge ``e``."""
        edge = self.df.edges[e]
        p, q = edge.src, edge.dst
        dq = self.df.domains[q]
        if not _inside(dq, self.discarded(p, e, f[p]), f[q], e):
            return False
        phi = self.projection(p, e, f[p])
        if not _inside(dq, self.delivered(q, e, f[q]), phi, e):
            return False
        return _inside(dq, self.notifications(q, f[q]), phi, e)

    def greatest_n(
        self, f: Mapping[str, Frontier], edges: Iterable[str] | None = None
    ) -> dict[str, Frontier]:
        """The largest ``n ⊆ f`` with ``n(q) ⊆ φ_e(n(p))`` on every edge (of ``edges``)."""
        n = dict(f)
        todo = list(self.df.edges if edges is None else edges)
        changed = True
        while changed:
            changed = False
            for e in todo:
                edge = self.df.edges[e]
                p, q = edge.src, edge.dst
                dq = self.df.domains[q]
                phi = self.projection(p, e, n[p])
                bound = dq.only(phi, e) if isinstance(dq, Sequence) else phi
                new = n[q] & bound
                if new != n[q]:
                    n[q] = new
                    changed = True
        return n

    def consistent(self, f: Mapping[str, Frontier]) -> bool:
        if not all(self.available(p, f[p]) for p in self.df.processors):
            return False
        if not all(self.edge_ok(e, f) for e in self.df.edges):
            return False
        n = self.greatest_n(f)
        return all(self.notifications(p, f[p]) <= n[p] for p in self.df.processors)


def _failed(df: Dataflow, failed: Iterable[str] | str) -> frozenset[str]:
    if failed == "all":
        return frozenset(df.processors)
    names = frozenset([failed] if isinstance(failed, str) else failed)
    unknown = sorted(names - set(df.processors))
    if unknown:
        raise ValueError(f"failed names unknown processor(s) {unknown}")
    return names


def _universes(model: _Model) -> dict[Domain, list[Frontier]]:
    """Per domain, the frontiers the dataflow mentions, closed under the operations constraints use.

    Mentioned: ``∅``, ``⊤``, checkpoint frontiers and metadata. Closed under
    functional projections, their exact discarded images and both residuals
    (two rounds: the built-in projections reach a fixed point at once), then
    under one-edge views in sequence domains, then under meet.
    """
    df = model.df
    found: dict[Domain, set[Frontier]] = {
        d: {Frontier.top(d), Frontier.empty(d)} for d in df.domains.values()
    }
    for p in df.processors:
        metas = df.candidates(p, failed=False)
        for m in metas:
            found[df.domains[p]].update((m.frontier, m.notifications, *m.delivered.values()))
        for e in df.outputs[p]:
            target = found[df.bound[e].target]
            for m in metas:
                target.update((m.discarded[e], m.projection[e]))
    functional = [b for b in df.bound.values() if not b.recorded]
    for _ in range(2):
        for b in functional:
            src, tgt = found[b.source], found[b.target]
            tgt.update(g(x) for x in list(src) for g in (b.apply, b.discarded))
            if b.has_residual:
                src.update(
                    r for y in list(tgt) for r in (b.residual(y), b.discarded_residual(y)) if r is not None
                )
    return {d: _closed(d, xs) for d, xs in found.items()}


def _closed(dom: Domain, found: set[Frontier]) -> list[Frontier]:
    if isinstance(dom, Sequence):
        found.update(dom.only(x, e) for x in list(found) for e in dom.edges)
    items = list(found)
    i = 0
    while i < len(items):  # meet closure: each new item is met with every earlier one
        for j in range(i):
            x = items[i] & items[j]
            if x not in found:
                found.add(x)
                items.append(x)
                if len(items) > MAX_UNIVERSE:
                    raise ValueError(f"brute force: more than {MAX_UNIVERSE} candidate frontiers of {dom}")
        i += 1
    return sorted(items, key=lambda f: (f.is_top, [dom.sort_key(a) for a in f.antichain]))


def candidate_frontiers(dataflow: Dataflow, failed: Iterable[str] | str = ()) -> dict[str, list[Frontier]]:
    """The frontiers :func:`brute_force_solve` tries for each processor.

    >>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
    >>> df = Dataflow([Processor("s", "epoch", stateless=True, checkpoints=[Checkpoint(2)]),
    ...                Processor("t", "epoch", checkpoints=[Checkpoint(1)])], [Edge("st", "s", "t")])
    >>> {p: [str(f.domain.encode(f)) for f in fs] for p, fs in candidate_frontiers(df, ["s"]).items()}
    {'s': ['empty', '1', '2'], 't': ['empty', '1', 'top']}
    """
    model = _Model(dataflow, _failed(dataflow, failed))
    return _candidates(model)


def _candidates(model: _Model) -> dict[str, list[Frontier]]:
    df = model.df
    universes = _universes(model) if any(p.stateless for p in df.processors.values()) else {}
    out: dict[str, list[Frontier]] = {}
    for p, proc in df.processors.items():
        if proc.stateless:
            cands = [x for x in universes[df.domains[p]] if x <= model.initial[p]]
        else:
            cands = [m.frontier for m in model.metas[p]]
        out[p] = [x for x in cands if model.available(p, x)]
    return out


def is_consistent(
    dataflow: Dataflow, frontiers: Mapping[str, Frontier], failed: Iterable[str] | str = ()
) -> bool:
    """Whether the assignment satisfies C1–C4 for some notification frontiers (independent check)."""
    model = _Model(dataflow, _failed(dataflow, failed))
    return model.consistent(frontiers)


def brute_force_solve(
    dataflow: Dataflow,
    failed: Iterable[str] | str = (),
    *,
    maximal: bool = False,
    max_nodes: int = 200_000,
) -> list[dict[str, Frontier]]:
    """Every consistent assignment of ``dataflow`` for ``failed`` (only the maximal ones if ``maximal``).

    A depth-first enumeration over :func:`candidate_frontiers`, one weakly
    connected component at a time (the constraints never cross components),
    that prunes on C2/C3 as soon as both ends of an edge are assigned and
    checks C4 on complete assignments. The answer is the product of the
    components' answers. Raises ``ValueError`` when the search visits more
    than ``max_nodes`` partial assignments (it is meant for small graphs).
    """
    model = _Model(dataflow, _failed(dataflow, failed))
    cands = _candidates(model)
    budget = [max_nodes]
    parts = []
    for names in _components(dataflow):
        found = _enumerate(model, names, cands, budget)
        parts.append(_maxima(found) if maximal else found)
    results: list[dict[str, Frontier]] = []
    for combo in itertools.product(*parts):
        merged: dict[str, Frontier] = {}
        for part in combo:
            merged.update(part)
        results.append({p: merged[p] for p in dataflow.processors})
    return results


def _enumerate(
    model: _Model, order: list[str], cands: Mapping[str, list[Frontier]], budget: list[int]
) -> list[dict[str, Frontier]]:
    """Consistent assignments of one component, whose processors are ``order`` (neighbours close)."""
    df = model.df
    pos = {p: i for i, p in enumerate(order)}
    checks: dict[str, list[str]] = {p: [] for p in order}
    edges = [e for e, edge in df.edges.items() if edge.src in pos]
    for e in edges:
        edge = df.edges[e]
        checks[max(edge.src, edge.dst, key=pos.__getitem__)].append(e)
    results: list[dict[str, Frontier]] = []
    f: dict[str, Frontier] = {}

    def visit(i: int) -> None:
        if i == len(order):
            n = model.greatest_n(f, edges)
            if all(model.notifications(p, f[p]) <= n[p] for p in order):
                results.append(dict(f))
            return
        p = order[i]
        for x in cands[p]:
            budget[0] -= 1
            if budget[0] < 0:
                raise ValueError("brute force: too many partial assignments; use a smaller dataflow")
            f[p] = x
            if model.notifications(p, x) <= x and all(model.edge_ok(e, f) for e in checks[p]):
                visit(i + 1)
        f.pop(p, None)

    visit(0)
    return results


def _maxima(found: list[dict[str, Frontier]]) -> list[dict[str, Frontier]]:
    """The pointwise-maximal assignments of ``found``, in the order first seen."""
    out: list[dict[str, Frontier]] = []
    for r in found:
        if any(_below(r, m) for m in out):
            continue
        out = [m for m in out if not _below(m, r)]
        out.append(r)
    return out


def _below(a: Mapping[str, Frontier], b: Mapping[str, Frontier]) -> bool:
    return all(a[p] <= b[p] for p in a)


def _components(df: Dataflow) -> list[list[str]]:
    """Weakly connected components, each in breadth-first order (neighbours close together)."""
    adj: dict[str, list[str]] = {p: [] for p in df.processors}
    for edge in df.edges.values():
        adj[edge.src].append(edge.dst)
        adj[edge.dst].append(edge.src)
    out: list[list[str]] = []
    seen: set[str] = set()
    for start in df.processors:
        if start in seen:
            continue
        seen.add(start)
        order, queue = [], [start]
        while queue:
            p = queue.pop(0)
            order.append(p)
            for q in adj[p]:
                if q not in seen:
                    seen.add(q)
                    queue.append(q)
        out.append(order)
    return out
