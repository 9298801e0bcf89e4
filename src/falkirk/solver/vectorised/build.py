"""From a :class:`~falkirk.solver.Dataflow` to a :class:`~falkirk.solver.vectorised.problem.TotalProblem`.

Applies when every processor's domain is totally ordered. Each domain gets a
sorted universe of the frontiers the iteration can produce: the candidate
chains, the initial frontiers, ``∅`` and ``⊤``, recorded projections, closed
under the edges' projections and (for stateless senders of unlogged edges)
the residuals of their exact discarded image. A residual that grows
frontiers (e.g. of a projection that lags by one epoch) makes that closure
infinite: the vectorised solver then raises :class:`NotApplicable` and
``solve_frontiers`` falls back to the worklist. Metadata that is only compared
(``N``, ``M_e``, ``D_e``) becomes a *ceiling rank* (the least universe rank
containing it). Projections become rank maps: one shared map per
(projection, source domain, target domain) for functional projections, and a
map per edge where the sender recorded projections or overrode them at a
checkpoint — both follow :meth:`falkirk.solver.model.access.View.projection`
exactly, so the ranks the engine computes are those of the reference.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> from falkirk.solver.model.access import View
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "lexicographic", arity=2, stateless=True)],
...               [Edge("ab", "a", "b", "epoch_to_loop")])
>>> f, n, _ = solve_view(View(df, frozenset({"a"})))
>>> {p: str(x) for p, x in f.items()}
{'a': 'Frontier(epoch, 3)', 'b': 'Frontier(lexicographic(2), before=[(4, 0)])'}
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable
from typing import Any

import numpy as np

from falkirk.domains import Domain, Frontier, Identity
from falkirk.errors import FalkirkError, SolverError
from falkirk.solver.model import ResolvedCheckpoint
from falkirk.solver.model.access import View
from falkirk.solver.vectorised.engine import solve_total
from falkirk.solver.vectorised.problem import CHAIN, IDENTITY, NONE, TotalProblem

__all__ = ["NotApplicable", "applicable", "build_problem", "solve_view"]

#: Give up (and let the reference solve) when a universe grows beyond this many frontiers.
MAX_UNIVERSE = 1_000_000
_ROUNDS = 64


class NotApplicable(SolverError):
    """The vectorised solver does not apply to this input (the message says why)."""


def applicable(view: View) -> str | None:
    """Why :func:`build_problem` would refuse ``view`` at first sight (``None``: it may accept it)."""
    for p, d in view.df.domains.items():
        if not d.is_total:
            return f"processor {p!r} has domain {d}, which is not totally ordered"
    return None


def _key(f: Frontier) -> tuple[Any, ...]:
    return (1,) if not f.antichain else (0, f.domain.sort_key(f.antichain[0]))


class _Universe:
    """Sorted frontiers of one domain, with rank lookup."""

    def __init__(self, values: list[Frontier]) -> None:
        self.values = sorted(values, key=_key)
        self.keys = [_key(f) for f in self.values]
        self.by_anti = {f.antichain: i for i, f in enumerate(self.values)}  # one domain: antichain is the key

    def of(self, f: Frontier) -> int:
        """Rank of ``f``, which is in the universe."""
        return self.by_anti[f.antichain]

    def ceil(self, f: Frontier) -> int:
        """Least rank whose frontier contains ``f``."""
        r = self.by_anti.get(f.antichain)
        return r if r is not None else bisect_left(self.keys, _key(f))


class _Builder:
    def __init__(self, view: View) -> None:
        reason = applicable(view)
        if reason is not None:
            raise NotApplicable(reason)
        self.view, df = view, view.df
        self.df = df
        self.names = list(df.processors)
        self.pid = {p: i for i, p in enumerate(self.names)}
        self.dom = [df.domains[p] for p in self.names]
        self.stateless = [df.processors[p].stateless for p in self.names]
        self.classes: dict[Hashable, Any] = {}  # functional class key -> a bound projection
        self.class_of: dict[str, Hashable] = {}
        self.residual_needed: set[Hashable] = set()
        self.edges = list(df.edges)
        self.esrc = [self.pid[df.edges[e].src] for e in self.edges]
        self.edst = [self.pid[df.edges[e].dst] for e in self.edges]
        self.logged = [e in df.processors[df.edges[e].src].logs for e in self.edges]
        # output/input edges whose metadata some checkpoint gives explicitly (others take defaults)
        self.explicit_out: list[set[str]] = []
        self.explicit_in: list[set[str]] = []
        for p in self.names:
            proc = df.processors[p]
            cks = list(proc.checkpoints) + ([proc.live] if proc.live is not None else [])
            self.explicit_out.append({e for c in cks for e in (*c.discarded, *c.projection)})
            self.explicit_in.append({e for c in cks for e in c.delivered})
        for k, e in enumerate(self.edges):
            b = df.bound[e]
            if b.recorded or isinstance(b.spec, Identity):
                continue  # recorded: maps per edge; identity: no map at all
            try:
                key: Hashable = (b.spec, b.source, b.target)
                hash(key)
            except TypeError:
                key = ("edge", e)
            self.classes.setdefault(key, b)
            self.class_of[e] = key
            if self.stateless[self.esrc[k]] and not self.logged[k]:
                self.residual_needed.add(key)
        self.U = self._universes()
        self.uof = [self.U[d] for d in self.dom]

    # -- universes ----------------------------------------------------------------------
    def _universes(self) -> dict[Domain, _Universe]:
        view, df = self.view, self.df
        # per domain, frontier by antichain (cheap to hash, unlike Frontier)
        vals: dict[Domain, dict[tuple[Any, ...], Frontier]] = {}

        def add(d: Domain, fs: Any) -> bool:
            into, size = vals[d], len(vals[d])
            for f in fs:
                into.setdefault(f.antichain, f)
            return len(into) > size

        for d in set(self.dom) | {df.bound[e].target for e in self.edges}:
            vals[d] = {}
            add(d, (Frontier.empty(d), Frontier.top(d)))
        for i, p in enumerate(self.names):
            add(self.dom[i], [view.initial(p)])
            if not self.stateless[i]:
                add(self.dom[i], (m.frontier for m in view.cands[p]))
        for k, e in enumerate(self.edges):
            u, b = df.edges[e].src, df.bound[e]
            less = self.stateless[self.esrc[k]]
            if not less and self._plain(k):
                continue  # φ_e(f) = f at every candidate: nothing new
            metas = view.recorded[u][e] if less else view.cands[u]
            if b.recorded or not less:
                add(b.target, (m.projection[e] for m in metas))
            if less and b.recorded:
                add(b.source, (m.frontier for m in metas))
        for _ in range(_ROUNDS):
            grew = False
            for key, b in self.classes.items():
                grew |= add(
                    b.target, [self._call(b.apply, f) for f in list(vals[b.source].values()) if f.antichain]
                )
                if key in self.residual_needed:
                    grew |= add(
                        b.source, [self._call(b.discarded_residual, y) for y in list(vals[b.target].values())]
                    )
            if sum(len(v) for v in vals.values()) > MAX_UNIVERSE:
                raise NotApplicable("the universe of reachable frontiers is too large")
            if not grew:
                return {d: _Universe(list(v.values())) for d, v in vals.items()}
        raise NotApplicable("the projections do not close over a small universe of frontiers")

    def _plain(self, k: int) -> bool:
        """Edge ``k`` is identity with the default ``φ_e`` and ``D_e`` at every checkpoint of its sender."""
        e = self.edges[k]
        return isinstance(self.df.bound[e].spec, Identity) and e not in self.explicit_out[self.esrc[k]]

    @staticmethod
    def _call(fn: Any, f: Frontier) -> Frontier:
        try:
            out = fn(f)
        except FalkirkError as exc:
            raise NotApplicable(f"a projection failed on {f!r}: {exc}") from None
        if out is None:
            raise NotApplicable(f"a residual has no value at {f!r}")
        return out

    # -- maps and tables ------------------------------------------------------------------
    def _class_map(
        self, key: Hashable, residual: bool, cache: dict[tuple[Hashable, bool], np.ndarray]
    ) -> np.ndarray:
        if (key, residual) not in cache:
            b = self.classes[key]
            src, tgt = (
                (self.U[b.target], self.U[b.source]) if residual else (self.U[b.source], self.U[b.target])
            )
            if residual:
                out = [tgt.of(self._call(b.discarded_residual, y)) for y in src.values]
            else:  # φ(⊤) = ⊤ without asking the projection, as View.projection does
                out = [tgt.of(self._call(b.apply, f)) for f in src.values[:-1]] + [len(tgt.values) - 1]
            cache[key, residual] = np.array(out, dtype=np.int64)
        return cache[key, residual]

    def _step_map(
        self, src: _Universe, tgt: _Universe, xs: list[Frontier], ys: list[Frontier], base: np.ndarray | None
    ) -> np.ndarray:
        """``φ(v)`` = ``ys[j]`` for the last ``xs[j] ⊆ v`` (exact matches only when ``base`` is given)."""
        v = np.arange(len(src.values))
        x = np.array([src.of(f) for f in xs], dtype=np.int64)
        y = np.array([tgt.of(f) for f in ys], dtype=np.int64)
        j = np.searchsorted(x, v, side="right") - 1
        hit = j >= 0
        out = np.zeros(v.shape[0], dtype=np.int64)  # ∅ when no point is below
        out[hit] = y[j[hit]]
        if base is not None:
            exact = hit & (x[np.maximum(j, 0)] == v)
            out = np.where(exact, out, base)
        out[-1] = len(tgt.values) - 1  # φ(⊤) = ⊤
        return out

    def build(self) -> TotalProblem:
        view, df = self.view, self.df
        P = len(self.names)
        maps: list[np.ndarray] = []
        map_id: dict[int, int] = {}
        cache: dict[tuple[Hashable, bool], np.ndarray] = {}

        def add_map(a: np.ndarray) -> int:
            if id(a) not in map_id:
                map_id[id(a)] = len(maps)
                maps.append(a)
            return map_id[id(a)]

        tables: list[list[int]] = []
        c_ptr: list[int] = [0]
        c_val: list[int] = []
        c_N: list[int] = []
        init: list[int] = []
        chains: list[list[int]] = []
        for i, p in enumerate(self.names):
            u = self.uof[i]
            init.append(u.of(view.initial(p)))
            chains.append([u.of(m.frontier) for m in view.cands[p]] if not self.stateless[i] else [])
            c_val.extend(chains[i])
            if not self.stateless[i]:
                notes = df.receives_notifications[p]
                c_N.extend(u.ceil(m.notifications) if notes else 0 for m in view.cands[p])
            c_ptr.append(len(c_val))

        def table(i: int, values: list[Frontier], universe: _Universe) -> int:
            """Reference to the ceiling ranks of ``values`` (one per candidate of processor ``i``)."""
            cands = view.cands[self.names[i]]
            if universe is self.uof[i] and all(
                v.antichain == m.frontier.antichain for v, m in zip(values, cands, strict=True)
            ):
                return CHAIN  # e.g. the defaults M_e(f) = f, D_e(f) = φ_e(f) = f
            bottom = universe.values[0].antichain
            if all(v.antichain == bottom for v in values):
                return NONE
            tables.append([universe.ceil(v) for v in values])
            return len(tables) - 1

        cols: dict[str, list[int]] = {k: [] for k in ("s_d", "s_phi", "s_res")}
        r_m: list[int] = []
        for k, e in enumerate(self.edges):
            b = df.bound[e]
            ui, qi = self.esrc[k], self.edst[k]
            su, st = self.uof[ui], self.uof[qi]
            sender, logged = self.names[ui], self.logged[k]
            phi, res, d = IDENTITY, IDENTITY, NONE
            identity = isinstance(b.spec, Identity)
            base = None if b.recorded or identity else self._class_map(self.class_of[e], False, cache)
            if self.stateless[ui]:
                if b.recorded:
                    rec = view.recorded[sender][e]
                    phi = add_map(
                        self._step_map(
                            su, st, [m.frontier for m in rec], [m.projection[e] for m in rec], None
                        )
                    )
                    if not logged:
                        res = add_map(self._residual_map(su, st, rec, e))
                elif base is not None:
                    phi = add_map(base)
                    if not logged:
                        res = add_map(self._class_map(self.class_of[e], True, cache))
            elif self._plain(k):
                d = NONE if logged else CHAIN
            else:
                cands = [m for m in view.cands[sender] if m.frontier.antichain]  # ⊤ maps to ⊤ anyway
                own = [m.projection[e] for m in cands]
                at = [su.of(m.frontier) for m in cands]
                plain = base if base is not None else np.arange(len(su.values))
                if b.recorded or [st.of(y) for y in own] != plain[at].tolist():
                    phi = add_map(
                        self._step_map(
                            su, st, [m.frontier for m in cands], own, None if b.recorded else plain
                        )
                    )
                elif base is not None:
                    phi = add_map(base)
                d = table(ui, [m.discarded[e] for m in view.cands[sender]], st)
            cols["s_d"].append(d)
            cols["s_phi"].append(phi)
            cols["s_res"].append(res)
            if self.stateless[qi]:
                r_m.append(NONE)
            elif e not in self.explicit_in[qi]:
                r_m.append(CHAIN)  # M_e(f) = f (in a one-edge sequence domain: f's count on e)
            else:
                r_m.append(table(qi, [m.delivered[e] for m in view.cands[self.names[qi]]], st))
        cols["r_m"] = r_m
        return self._problem(P, init, c_ptr, c_val, c_N, cols, tables, maps)

    def _residual_map(
        self, su: _Universe, st: _Universe, rec: list[ResolvedCheckpoint], e: str
    ) -> np.ndarray:
        """``φ⁺(y)``: the last recorded frontier whose projection is inside ``y`` (``∅`` if none)."""
        y = np.arange(len(st.values))
        proj = np.array([st.of(m.projection[e]) for m in rec], dtype=np.int64)
        front = np.array([su.of(m.frontier) for m in rec], dtype=np.int64)
        j = np.searchsorted(proj, y, side="right") - 1
        return np.where(j >= 0, front[np.maximum(j, 0)], 0)

    def _problem(
        self,
        P: int,
        init: list[int],
        c_ptr: list[int],
        c_val: list[int],
        c_N: list[int],
        cols: dict[str, list[int]],
        tables: list[list[int]],
        maps: list[np.ndarray],
    ) -> TotalProblem:
        def arr(x: Any) -> np.ndarray:
            return np.asarray(x, dtype=np.int64)

        E = len(self.edges)
        t_ptr = np.zeros(len(tables) + 1, dtype=np.int64)
        np.cumsum([len(t) for t in tables], out=t_ptr[1:])
        m_ptr = np.zeros(len(maps) + 1, dtype=np.int64)
        np.cumsum([len(m) for m in maps], out=m_ptr[1:])
        return TotalProblem(
            stateless=np.array(self.stateless, dtype=bool),
            notes=np.array([self.df.receives_notifications[p] for p in self.names], dtype=bool),
            init=arr(init),
            c_ptr=arr(c_ptr),
            c_val=arr(c_val),
            c_N=arr(c_N),
            groups=E,
            s_group=np.arange(E, dtype=np.int64),
            s_proc=arr(self.esrc),
            s_d=arr(cols["s_d"]),
            s_phi=arr(cols["s_phi"]),
            s_res=arr(cols["s_res"]),
            s_unlogged=~np.array(self.logged, dtype=bool),
            r_group=np.arange(E, dtype=np.int64),
            r_proc=arr(self.edst),
            r_m=arr(cols["r_m"]),
            t_ptr=t_ptr,
            t_val=arr([x for t in tables for x in t]),
            m_ptr=m_ptr,
            m_val=arr(np.concatenate(maps) if maps else []),
            names=self.names,
        )


def build_problem(view: View) -> tuple[TotalProblem, list[list[Frontier]]]:
    """The rank problem of ``view`` and, per processor, the frontier of each rank.

    Raises :class:`NotApplicable` when a domain is not totally ordered or the
    projections do not close over a small universe.
    """
    b = _Builder(view)
    return b.build(), [b.U[d].values for d in b.dom]


def solve_view(view: View) -> tuple[dict[str, Frontier], dict[str, Frontier], int]:
    """``f``, ``n`` (by processor name) and the work done, solved by the vectorised engine."""
    prob, values = build_problem(view)
    sol = solve_total(prob)
    names = list(view.df.processors)
    f = {p: values[i][r] for i, (p, r) in enumerate(zip(names, sol.f.tolist(), strict=True))}
    n = {p: values[i][r] for i, (p, r) in enumerate(zip(names, sol.n.tolist(), strict=True))}
    return f, n, sol.evaluations
