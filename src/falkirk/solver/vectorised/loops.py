"""Loop jobs as rank problems: plain epoch, ``product(k)`` and ``lexicographic(k)`` processors solved by the
engine (SPEC §5).

An iterative job (Naiad loops: epochs entering ``product(2)`` loop bodies
through ``epoch_to_loop``, feedback and exit projections) is partially
ordered, but its checkpoints usually are *lexicographic prefixes* — every
time before ``(epoch, iteration)``, a single iteration coordinate per loop
(:mod:`falkirk.solver.model.orders`). Those frontiers are nested like their
bounds, so within them ``⊆`` is a total order and the meet is the lesser
bound. When every processor is plain and restartable
(:mod:`falkirk.solver.model.deferred`), every checkpoint is such a prefix,
and the edges' projections map such prefixes to such prefixes (checked
below, as the images are computed), every frontier the iteration of SPEC §5
can reach is one: the fixed point is that of a total-order problem whose
ranks index, per domain, a sorted **universe** of prefixes — the
checkpoints, ``∅``, ``⊤``, closed under the projections and, for stateless
senders of unlogged edges, their residuals. :func:`loop_columns` builds
what does not depend on the failures once (kept on the dataflow);
:func:`solve_loops` makes the :class:`~falkirk.solver.vectorised.problem.TotalProblem`
for one set of failures and runs :func:`~falkirk.solver.vectorised.engine.solve_total`.
Projections become rank maps (one call of the projection per universe
frontier and projection class), ``D_e`` of a stateful sender a table of its
chain's images. Anything else (a checkpoint that is no prefix, an image
that is none, a universe that does not close) makes it decline (``None``)
and the general paths solve.

Costs: :func:`loop_columns` ``O(V + E + checkpoints)`` array operations plus
``O(U)`` projection calls per projection class for a universe of ``U``
frontiers; :func:`solve_loops` ``O(V + E + checkpoints)`` to make the problem,
then the engine.

>>> from falkirk.domains import Product
>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", Product(2), checkpoints=[Checkpoint({"before": [[2, 1], [3, 0]]})])],
...               [Edge("ab", "a", "b", "epoch_to_loop")])
>>> f, n, work = solve_loops(df, frozenset({"a"}))
>>> f.encoded()
{'a': 3, 'b': {'before': [[2, 1], [3, 0]]}}
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from falkirk.domains import Domain, Epoch, Frontier, Identity
from falkirk.solver.model import Dataflow
from falkirk.solver.model.orders import TOP_CODE, decode_bound, encode_bounds, lex_frontier, prefix_code
from falkirk.solver.vectorised.columns import RankFrontiers
from falkirk.solver.vectorised.engine import solve_total
from falkirk.solver.vectorised.problem import CHAIN, IDENTITY, NONE, Array, TotalProblem, ranges, spans

__all__ = ["LoopColumns", "loop_columns", "solve_loops"]

#: Give up when the universes of one job grow beyond this many frontiers.
MAX_UNIVERSE = 100_000
#: Rounds of images added to the universes before the maps round up instead (and the answer is checked).
ROUNDS = 4
_TOP = TOP_CODE
_key = prefix_code


class _Universe:
    """The sorted prefix frontiers of one domain, as codes of their bounds; a frontier made per code on
    demand."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.width = getattr(domain, "arity", 1)
        self.keys: set[int] = {_TOP, 0}  # ⊤ and ∅ (the bound 0 or (0, …))
        self.sorted: list[int] = []
        self.rank: dict[int, int] = {}

    def frontier(self, key: int) -> Frontier:
        if key == _TOP:
            return Frontier.top(self.domain)
        if isinstance(self.domain, Epoch):
            return Frontier(self.domain, (key,))
        return lex_frontier(self.domain, decode_bound(key, self.width))

    def close(self) -> None:
        self.sorted = sorted(self.keys)
        self.rank = {k: r for r, k in enumerate(self.sorted)}


class LoopColumns:
    """What :func:`solve_loops` needs besides the failures (see the module docstring)."""

    def __init__(self, df: Dataflow) -> None:
        t = df.table
        self.names, self.index, self.t = t.names, t.index, t
        doms = [df.domains[p] for p in t.names]
        kinds = {id(d): d for d in doms}
        self.domains: list[Domain] = list(kinds.values())
        code = {i: c for c, i in enumerate(kinds)}
        self.pdom = np.fromiter((code[id(d)] for d in doms), dtype=np.int64, count=t.n)
        self.notes = t.notifications  # no sequence domain here: the per-processor flags as given
        self.U = [_Universe(d) for d in self.domains]
        n = t.n
        # every plain processor's checkpoints as codes of their bounds (epochs: the bound k + 1), in CSR
        parts, ptrs = [t.ck_val + 1], [np.diff(t.ck_ptr)]
        self.ok = True
        for ch in t.tuples.values():
            codes = encode_bounds(ch.bound)
            self.ok &= codes is not None
            parts.append(codes if codes is not None else np.zeros(ch.bound.shape[0], dtype=np.int64))
            ptrs.append(np.diff(ch.ptr))
        per = np.sum(ptrs, axis=0)
        self.ck_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(per, out=self.ck_ptr[1:])
        order = np.argsort(np.concatenate([np.repeat(np.arange(n), p) for p in ptrs]), kind="stable")
        self.codes = np.concatenate(parts)[order]  # each processor's checkpoints, ascending
        ckdom = np.repeat(self.pdom, per)
        for c, u in enumerate(self.U):
            u.keys.update(np.unique(self.codes[ckdom == c]).tolist())
        self.samples = sample = t.sample
        self.group = t.sample_of
        self.classes = [g for g, b in enumerate(sample) if type(b.spec) is not Identity]
        # (source, target) domain codes per projection class; a target that no processor has: not a loop job
        self.ok &= all(id(sample[g].target) in code for g in self.classes)
        self.cdom: dict[int, tuple[int, int]] = {
            g: (code[id(sample[g].source)], code.get(id(sample[g].target), 0)) for g in self.classes
        }
        stateless_src = t.stateless[t.src] & ~t.logged
        self.residual = set(np.unique(self.group[stateless_src]).tolist()) & set(self.classes)
        self.ok = self.ok and self._close() and self._maps()

    def _image(self, g: int, residual: bool, key: int) -> int | None:
        """The bound of ``φ`` (or of its residual) of class ``g`` at the prefix ``key`` (``None``: no
        prefix)."""
        memo = self.memo[g, residual]
        if key not in memo:
            b, (s, d) = self.samples[g], self.cdom[g]
            fn, u = (b.discarded_residual, self.U[d]) if residual else (b.apply, self.U[s])
            try:
                out = fn(u.frontier(key)) if key != _TOP or residual else Frontier.top(b.target)
            except Exception:
                out = None
            memo[key] = None if type(out) is not Frontier else _key(out)
        return memo[key]

    def _close(self) -> bool:
        """Grow the universes by the images until nothing is new or :data:`ROUNDS` rounds have passed.

        A universe that does not close (a feedback edge moves the iteration
        on forever) is kept as it is: the maps then round images up into it
        and :meth:`consistent` checks the answer against the exact images.
        """
        self.memo: dict[tuple[int, bool], dict[int, int | None]] = {
            (g, r): {} for g in self.classes for r in (False, True)
        }
        self.exact = False
        for _ in range(ROUNDS):
            grew = False
            for g in self.classes:
                s, d = self.cdom[g]
                for key in list(self.U[s].keys):
                    y = self._image(g, False, key)
                    if y is None:
                        return False
                    grew |= y not in self.U[d].keys
                    self.U[d].keys.add(y)
                if g in self.residual:
                    for key in list(self.U[d].keys):
                        x = self._image(g, True, key)
                        if x is None:
                            return False
                        grew |= x not in self.U[s].keys
                        self.U[s].keys.add(x)
            if sum(len(u.keys) for u in self.U) > MAX_UNIVERSE:
                return False
            if not grew:
                self.exact = True
                break
        for u in self.U:
            u.close()
        return True

    def _rank_map(self, g: int, residual: bool) -> tuple[Array, list[int]] | None:
        """Class ``g``'s map of ranks (images rounded up into the universe) and its exact images' keys."""
        s, d = self.cdom[g]
        src, tgt = (self.U[d], self.U[s]) if residual else (self.U[s], self.U[d])
        got = [self._image(g, residual, k) for k in src.sorted]
        keys = [k for k in got if k is not None]
        if len(keys) != len(got):
            return None
        rank = tgt.rank
        # rounded up when not in it
        ranks = [rank[k] if k in rank else bisect_left(tgt.sorted, k) for k in keys]
        return np.array(ranks, dtype=np.int64), keys

    def _maps(self) -> bool:
        """Per projection class its rank maps; per checkpoint its rank; codes to compare exact images."""
        self.phi: dict[int, Array] = {}
        self.res: dict[int, Array] = {}
        exact: dict[int, list[int]] = {}
        for g in self.classes:
            got = self._rank_map(g, False)
            if got is None:
                return False
            self.phi[g], exact[g] = got
            if g in self.residual:
                got = self._rank_map(g, True)
                if got is None:
                    return False
                self.res[g] = got[0]
        ckdom = np.repeat(self.pdom, np.diff(self.ck_ptr))
        self.ck_rank = np.zeros(self.codes.shape[0], dtype=np.int64)
        for c, u in enumerate(self.U):
            sel = ckdom == c
            self.ck_rank[sel] = np.searchsorted(np.array(u.sorted, dtype=np.int64), self.codes[sel])
        self.top = np.array([len(u.sorted) - 1 for u in self.U], dtype=np.int64)[self.pdom]
        offsets = np.cumsum([0] + [len(u.sorted) for u in self.U])
        self.offset = offsets[:-1][self.pdom]
        self.values: list[Frontier] = [u.frontier(k) for u in self.U for k in u.sorted]
        # one order per domain over the universe and every exact image in it, to check an answer
        merged = [set(u.sorted) for u in self.U]
        for g in self.classes:
            merged[self.cdom[g][1]].update(exact[g])
        order = [{k: i for i, k in enumerate(sorted(m))} for m in merged]
        self.code = [np.array([order[c][k] for k in u.sorted], dtype=np.int64) for c, u in enumerate(self.U)]
        self.image_code = {
            g: np.array([order[self.cdom[g][1]][k] for k in exact[g]], dtype=np.int64) for g in self.classes
        }
        return True

    def problem(self, failed: frozenset[str]) -> TotalProblem:
        """The rank problem when the processors ``failed`` have failed (ranks local to each processor's
        domain)."""
        t = self.t
        P, E = t.n, t.m
        mask = np.zeros(P, dtype=bool)
        if failed:
            mask[[self.index[p] for p in failed]] = True
        counts = np.diff(self.ck_ptr)
        full = ~t.stateless
        ids = np.flatnonzero(full)
        lens = np.where(full, 1 + counts + ~mask, 0)
        c_ptr = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(lens, out=c_ptr[1:])
        c_val = np.zeros(int(c_ptr[-1]), dtype=np.int64)
        c_val[spans(c_ptr[ids] + 1, counts[ids])] = self.ck_rank[ranges(self.ck_ptr, ids)]
        live = full & ~mask
        c_val[c_ptr[1:][live] - 1] = self.top[live]
        last = np.zeros(P, dtype=np.int64)
        some = counts > 0
        last[some] = self.ck_rank[self.ck_ptr[1:][some] - 1]
        init = np.where(mask, last, self.top)
        c_N = np.where(np.repeat(self.notes, lens), c_val, 0)
        g = self.group
        phi = np.full(E, IDENTITY, dtype=np.int64)
        res = np.full(E, IDENTITY, dtype=np.int64)
        maps = [self.phi[c] for c in self.classes] + [self.res[c] for c in self.classes if c in self.res]
        m_ptr = np.zeros(len(maps) + 1, dtype=np.int64)
        np.cumsum([m.shape[0] for m in maps], out=m_ptr[1:])
        where = {c: j for j, c in enumerate(self.classes)}
        where_res = {c: len(self.classes) + j for j, c in enumerate(c for c in self.classes if c in self.res)}
        lut = np.full(len(self.samples) + 1, IDENTITY, dtype=np.int64)
        lut_res = lut.copy()
        for c in self.classes:
            lut[c] = where[c]
            lut_res[c] = where_res.get(c, IDENTITY)
        phi = lut[g] if E else phi
        unlogged = ~t.logged
        less = t.stateless[t.src]
        res = np.where(less & unlogged, lut_res[g], IDENTITY) if E else res
        s_d = np.where(t.logged, NONE, CHAIN)
        # D_e of a stateful sender on an unlogged edge that projects: its chain's images (∅ at ∅)
        tab = np.flatnonzero(~less & unlogged & (phi != IDENTITY))
        t_ptr = np.zeros(tab.shape[0] + 1, dtype=np.int64)
        t_val = np.zeros(0, dtype=np.int64)
        if tab.size:
            snd = t.src[tab]
            np.cumsum(lens[snd], out=t_ptr[1:])
            pos = ranges(c_ptr, snd)
            owner = np.repeat(np.arange(tab.shape[0]), lens[snd])
            m_val_all = np.concatenate(maps)
            t_val = m_val_all[m_ptr[phi[tab]][owner] + c_val[pos]]
            t_val[t_ptr[:-1]] = 0
            s_d = s_d.copy()
            s_d[tab] = np.arange(tab.shape[0])
        eids = np.arange(E, dtype=np.int64)
        return TotalProblem(
            stateless=t.stateless,
            notes=self.notes,
            init=init,
            c_ptr=c_ptr,
            c_val=c_val,
            c_N=c_N,
            groups=E,
            s_group=eids,
            s_proc=t.src,
            s_d=s_d,
            s_phi=phi,
            s_res=res,
            s_unlogged=unlogged,
            r_group=eids,
            r_proc=t.dst,
            r_m=np.where(t.stateless[t.dst], NONE, CHAIN),
            t_ptr=t_ptr,
            t_val=t_val,
            m_ptr=m_ptr,
            m_val=np.concatenate(maps) if maps else np.zeros(0, dtype=np.int64),
            names=self.names,
        )

    def consistent(self, f: Array, n: Array) -> bool:
        """Whether local ranks ``f``, ``n`` satisfy C2–C4 with the exact images (C1 holds by construction).

        Needed only when the universes did not close (the maps rounded some
        images up, which can only weaken constraints): an answer of the
        weaker problem that satisfies the exact constraints is the greatest
        fixed point of the exact problem too (SPEC §5). Cost ``O(V + E)``.
        """
        t = self.t
        codes = np.concatenate(self.code)
        fc, nc = codes[self.offset + f], codes[self.offset + n]
        phi_f, phi_n = fc[t.src].copy(), nc[t.src].copy()
        if self.classes:
            icat = np.concatenate([self.image_code[g] for g in self.classes])
            start = np.cumsum([0] + [self.image_code[g].shape[0] for g in self.classes])[:-1]
            lut = np.full(len(self.samples), -1, dtype=np.int64)
            lut[self.classes] = start
            at = lut[self.group]
            k = np.flatnonzero(at >= 0)
            phi_f[k] = icat[at[k] + f[t.src[k]]]
            phi_n[k] = icat[at[k] + n[t.src[k]]]
        c2 = ~t.logged & ~(~t.stateless[t.src] & (f[t.src] == 0))  # D_e(∅) = ∅ at a stateful sender
        return bool(
            (fc[t.dst] <= phi_f).all()
            and (phi_f[c2] <= fc[t.dst][c2]).all()
            and (nc[t.dst] <= phi_n).all()
            and (n <= f).all()
            and (f[self.notes] <= n[self.notes]).all()
        )


class ValueFrontiers(RankFrontiers):
    """A processor → frontier mapping kept as one array of ranks into a list of frontier values."""

    def __init__(self, names: list[str], index: dict[str, int], ranks: Array, values: list[Frontier]) -> None:
        super().__init__(names, index, ranks, -1, None)  # type: ignore[arg-type]
        self._values = values
        self._top = np.fromiter((not f.antichain for f in values), dtype=bool, count=len(values))
        self._empty = np.fromiter((f.is_empty for f in values), dtype=bool, count=len(values))

    def frontier(self, r: int) -> Frontier:
        return self._values[r]

    def tops(self, ranks: Array) -> Array:
        return self._top[ranks]

    def empties(self, ranks: Array) -> Array:
        return self._empty[ranks]

    def __eq__(self, other: object) -> bool:
        return dict(self.items()) == (dict(other.items()) if isinstance(other, RankFrontiers) else other)

    __hash__ = None


def loop_columns(df: Dataflow) -> LoopColumns | None:
    """The loop job's failure-independent arrays (kept on ``df``), or ``None`` when it is not one."""
    t = df.table

    def build() -> LoopColumns | None:
        cols = LoopColumns(df) if t.lex_plain and t.n and not t.epoch_plain else None
        return cols if cols is not None and cols.ok else None

    built: LoopColumns | None = t.derived("loop_columns", build)
    return built


def solve_loops(df: Dataflow, failed: frozenset[str]) -> tuple[ValueFrontiers, ValueFrontiers, int] | None:
    """``f``, ``n`` (by processor name, decoded on read) and the work done, or ``None`` when ``df`` is no loop
    job."""
    cols = loop_columns(df)
    if cols is None:
        return None
    sol = solve_total(cols.problem(failed))
    if not cols.exact and not cols.consistent(sol.f, sol.n):
        return None
    f = ValueFrontiers(cols.names, cols.index, sol.f + cols.offset, cols.values)
    n = ValueFrontiers(cols.names, cols.index, sol.n + cols.offset, cols.values)
    return f, n, sol.evaluations
