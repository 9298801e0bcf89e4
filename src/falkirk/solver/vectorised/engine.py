"""The array engine for :class:`~falkirk.solver.vectorised.problem.TotalProblem`, and :func:`solve_total`
which runs it.

Rounds of array operations while many constraints are dirty (every dirty
group and processor at once, Jacobi style), and a scalar worklist over the
same arrays while few are (a long, thin cascade would otherwise cost one
round of numpy calls per hop). Both apply the monotone update of SPEC §5 to
the same state, so any interleaving reaches the same greatest fixed point.

Cost per round: a few passes over the dirty groups' members. A bound's
place in a chain is found in a padded table (:func:`_dense`: one gather and
comparison per chain position) when chains are short, by a binary search
over all chains otherwise. When every group has one sender and one receiver
(a plain edge), an aggregate is its one member's value: it is assigned, not
folded with ``minimum.at``, and no group pointers are searched.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from falkirk.solver.constraints import cannot_roll_back
from falkirk.solver.vectorised.problem import CHAIN, NONE, Array, TotalProblem, TotalSolution, ranges, spans

__all__ = ["Engine", "solve_total"]


def _by(keys: Array, size: int) -> tuple[Array, Array]:
    """CSR grouping: ``(ptr, order)`` with ``order[ptr[k]:ptr[k+1]]`` the positions whose key is ``k``."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=size), out=ptr[1:])
    return ptr, order


def _lower(target: Array, at: Array, values: Array, mark: Array) -> Array:
    """``target[at] = min(target[at], values)`` (repeats allowed); the positions that went down, ascending.

    ``mark`` is a bool array as long as ``target``, all ``False`` (and left so),
    used to drop repeats without sorting when many positions are given.
    """
    if at.size == 0:
        return at
    lt = values < target[at]  # a position goes down exactly when some value is below it
    at, values = at[lt], values[lt]
    if at.size == 0:
        return at
    np.minimum.at(target, at, values)
    if at.size * 16 < mark.shape[0]:
        return np.unique(at)
    mark[at] = True
    down = np.flatnonzero(mark)
    mark[down] = False
    return down


def _assign(target: Array, at: Array, values: Array) -> Array:
    """``target[at] = min(target[at], values)`` for distinct ``at``; the positions that went down (in ``at``'s
    order)."""
    lt = values < target[at]
    down = at[lt]
    target[down] = values[lt]
    return down


class _Direct:
    """A group aggregate read from its one member: ``value[proc[g]]`` (``value`` is ``f`` or ``n``, updated in
    place).

    Never written: lowering the member's value lowers it.
    """

    __slots__ = ("value", "proc")

    def __init__(self, value: Array, proc: Array) -> None:
        self.value, self.proc = value, proc

    def __getitem__(self, g: Any) -> Any:
        return self.value[self.proc[g]]

    def __lt__(self, x: int) -> Array:
        return self.value[self.proc] < x


def _went_down(target: Any, at: Array, values: Array) -> Array:
    """The groups ``at`` of processors whose value went down, read directly: every one went down."""
    return at


def _ptr(keys: Array, size: int) -> Array:
    """CSR pointers of sorted ``keys`` in ``0..size-1``: ``keys[ptr[k]:ptr[k+1]]`` equal ``k``."""
    ptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=size), out=ptr[1:])
    return ptr


#: :func:`_dense` pads segments to a table when the longest has at most this many entries.
DENSE_UP_TO = 8


def _dense(pool: Array, start: Array, lens: Array, pad: int) -> Array | None:
    """The ascending segments of ``pool`` as a padded table (``None`` if some are long), one row per position.

    Row ``k`` holds every segment's ``k``-th entry (``pad`` past its end), so
    the place of a bound in many segments is a few gathers and comparisons
    instead of a binary search over the whole pool.
    """
    width = int(lens.max(initial=0))
    if width > DENSE_UP_TO or lens.shape[0] * width > 4 * pool.shape[0] + 64:
        return None
    table = np.full((width, lens.shape[0]), pad, dtype=np.int64)
    for k in range(width):
        has = np.flatnonzero(lens > k)
        table[k, has] = pool[start[has] + k]
    return table


def _members(ptr: Array, ids: Array, single: bool) -> Array:
    """The members of groups/processors ``ids`` (``ids`` itself when every one has exactly one)."""
    return ids if single else ranges(ptr, ids)


class Engine:
    """State of one :func:`solve_total` run (arrays named as in :class:`TotalProblem`)."""

    def __init__(self, prob: TotalProblem) -> None:
        self.prob = prob
        P, G = prob.size, prob.groups
        self.ps_ptr, self.ps_mem = _by(prob.s_proc, P)  # sender members of each processor
        self.pr_ptr, self.pr_mem = _by(prob.r_proc, P)  # receiver members of each processor
        self.gs_ptr = _ptr(prob.s_group, G)  # members are sorted by group
        self.gr_ptr = self.gs_ptr if prob.r_group is prob.s_group else _ptr(prob.r_group, G)
        # one member per group: then member k is group k (members are sorted by group)
        self.gs_single = prob.s_group.shape[0] == G and bool((np.diff(self.gs_ptr) == 1).all())
        self.gr_single = prob.r_group.shape[0] == G and bool((np.diff(self.gr_ptr) == 1).all())
        self.p_mark = np.zeros(P, dtype=bool)
        self.g_mark = np.zeros(G, dtype=bool)
        # one pool of ascending segments: chains (P), N (P), custom tables
        C = prob.c_val.shape[0]
        pool = np.concatenate([prob.c_val, prob.c_N, prob.t_val])
        self.seg_start = np.concatenate([prob.c_ptr[:-1], C + prob.c_ptr[:-1], 2 * C + prob.t_ptr[:-1]])
        self.pool = pool
        self.seg_len = seg_len = np.concatenate(
            [np.diff(prob.c_ptr), np.diff(prob.c_ptr), np.diff(prob.t_ptr)]
        )
        tops = [int(prob.init.max(initial=0)), int(pool.max(initial=0)), int(prob.m_val.max(initial=0))]
        self.big = max(tops) + 1  # above every rank: "no constraint"
        self.W = self.big + 1
        self.dense = _dense(pool, self.seg_start, seg_len, self.W)
        if self.dense is None:
            self.keys = np.repeat(np.arange(seg_len.shape[0], dtype=np.int64), seg_len) * self.W + pool

        def seg(ref: Array, owner: Array) -> Array:
            chain = ref == CHAIN
            if chain.all():  # (M_e(f) = f on every edge: the owner's chain, no copy)
                return owner
            out = np.where(chain, owner, NONE)
            table = np.flatnonzero(ref >= 0)
            out[table] = 2 * P + ref[table]
            return out

        self.s_seg = seg(prob.s_d, prob.s_proc)
        self.r_seg = seg(prob.r_m, prob.r_proc)
        self.stateful = ~prob.stateless
        # what each member constrains: 0 nothing, 1 a chain index (table), 2 a stateless rank
        sf_s, sf_r = self.stateful[prob.s_proc], self.stateful[prob.r_proc]
        one, two, none = np.int8(1), np.int8(2), np.int8(0)
        self.s_kind = np.where(
            sf_s, np.where(self.s_seg >= 0, one, none), np.where(prob.s_unlogged, two, none)
        )
        self.r_kind = np.where(sf_r, np.where(self.r_seg >= 0, one, none), two)
        self.maps = prob.m_ptr.shape[0] > 1  # some projection or residual is not the identity
        # plain edges and no maps: a group's aggregate is its one member's f or n (:class:`_Direct`)
        self.direct = self.gs_single and self.gr_single and not self.maps
        self.idx = np.where(self.stateful, np.diff(prob.c_ptr) - 1, -1)
        self.f = prob.init.astype(np.int64).copy()
        self.n = self.f.copy()
        self.evaluations = 0

    # -- helpers ------------------------------------------------------------------------
    def last_ok(self, seg: Array, x: Array) -> Array:
        """Largest index ``j`` of each segment with entry ``<= x`` (``-1`` if none)."""
        self.evaluations += seg.shape[0]
        if self.dense is not None:  # count the entries <= x, a column at a time
            count = np.full(seg.shape[0], -1, dtype=np.int64)
            for column in self.dense:
                count += column[seg] <= x
            return count
        pos = np.searchsorted(self.keys, seg * self.W + x, side="right")
        return pos - self.seg_start[seg] - 1

    def of(self, ptr: Array, mem: Array, procs: Array, value: Array) -> tuple[Array, Array]:
        """The members of ``procs`` (CSR ``ptr``/``mem``) and their owner's ``value`` (not made when read
        directly)."""
        start = ptr[procs]
        lens = ptr[procs + 1] - start
        return mem[spans(start, lens)], value[:0] if self.direct else np.repeat(value[procs], lens)

    def apply(self, maps: Array, x: Array) -> Array:
        """Each map of ``maps`` (or the identity) applied to the matching rank of ``x``."""
        if not self.maps:
            return x
        sel = maps >= 0
        if not sel.any():
            return x
        out = x.copy()
        out[sel] = self.prob.m_val[self.prob.m_ptr[maps[sel]] + x[sel]]
        return out

    # -- the iteration ---------------------------------------------------------------------
    def run(self) -> TotalSolution:
        prob, G = self.prob, self.prob.groups
        big = self.big
        self.Rf: Any  # least f over receivers (C2 for senders)
        self.Sf: Any  # least φ(f) over senders (C3 for receivers)
        self.Sn: Any  # least φ(n) over senders (n of receivers)
        if self.direct:
            self.Rf, self.Sf = _Direct(self.f, prob.r_proc), _Direct(self.f, prob.s_proc)
            self.Sn = _Direct(self.n, prob.s_proc)
        else:
            self.Rf = Rf = np.full(G, big, dtype=np.int64)
            self.Sf = Sf = np.full(G, big, dtype=np.int64)
            self.Sn = Sn = np.full(G, big, dtype=np.int64)
            np.minimum.at(Rf, prob.r_group, self.f[prob.r_proc])
            np.minimum.at(Sf, prob.s_group, self.apply(prob.s_phi, self.f[prob.s_proc]))
            np.minimum.at(Sn, prob.s_group, self.apply(prob.s_phi, self.n[prob.s_proc]))
        dirty = self.first_dirty()
        self.rounds = 0
        while any(d.size for d in dirty):
            if sum(d.size for d in dirty) <= self.SCALAR_BELOW:
                dirty = self.scalar(dirty)
            else:
                dirty = self.round(dirty)
        return TotalSolution(self.f, self.n, self.idx, self.rounds, self.evaluations)

    def first_dirty(self) -> tuple[Array, Array, Array, Array]:
        """The constraints the first round must look at.

        Every one, in general. In an epoch problem (:attr:`TotalProblem.top`
        set) whose ranks are at most ``⊤`` and that has no maps, a
        group whose aggregate is still ``⊤`` bounds nothing (the largest
        chain entry at or below ``⊤`` is the last one), nor does a processor whose ``n`` is ``⊤``: only the
        groups and processors below ``⊤`` — around the failures — are
        dirty at first, so a large job where little fails does not pay a
        round over every edge.
        """
        prob = self.prob
        top = prob.top
        quiet = (
            top > 0
            and int(self.pool.max(initial=0)) <= top
            and int(prob.init.max(initial=0)) <= top
            and not self.maps  # (epoch problems have none)
        )
        if not quiet:  # every group that bounds something (a group with no receivers bounds nothing)
            big = self.big
            return (
                np.flatnonzero(self.Rf < big),
                np.flatnonzero(self.Sf < big),
                np.flatnonzero(self.Sn < big),
                np.flatnonzero(prob.notes),
            )
        return (
            np.flatnonzero(self.Rf < top),
            np.flatnonzero(self.Sf < top),
            np.flatnonzero(self.Sn < top),
            np.flatnonzero(prob.notes & (self.n < top)),
        )

    #: Below this many dirty groups/processors the scalar worklist takes over, until
    #: :attr:`SCALAR_UNTIL` are queued.
    SCALAR_BELOW = 24
    SCALAR_UNTIL = 256

    def round(self, dirty: tuple[Array, Array, Array, Array]) -> tuple[Array, Array, Array, Array]:
        """One Jacobi round over every dirty constraint; the constraints it makes dirty."""
        prob, Rf, Sf, Sn = self.prob, self.Rf, self.Sf, self.Sn
        d_rf, d_sf, d_sn, d_c4 = dirty
        self.rounds += 1
        at_i, by_i, at_v, by_v = self.bounds(d_rf, d_sf, d_c4)
        P, G = self.p_mark, self.g_mark
        ch_i = _lower(self.idx, at_i, by_i, P)
        if ch_i.size and self.idx[ch_i].min() < 0:
            self.fail(int(ch_i[self.idx[ch_i] < 0][0]))
        self.f[ch_i] = prob.c_val[prob.c_ptr[ch_i] + self.idx[ch_i]]
        ch_f = np.concatenate([ch_i, _lower(self.f, at_v, by_v, P)])
        # n(p) = n(p) ∩ f(p) ∩ φ(n(u)) for the receivers of groups whose Sn went down
        mem = _members(self.gr_ptr, d_sn, self.gr_single)
        at_n = np.concatenate([ch_f, prob.r_proc[mem]])
        by_n = np.concatenate([self.f[ch_f], Sn[prob.r_group[mem]]])
        ch_n = _lower(self.n, at_n, by_n, P)
        # aggregates of the groups these processors belong to
        d_rf = d_sf = d_sn = ch_f[:0]
        # (one member per group: distinct members are distinct groups, so no repeats to fold;
        # read directly, the aggregate of a changed processor's group went down with it)
        lower_r = _went_down if self.direct else _assign if self.gr_single else partial(_lower, mark=G)
        lower_s = _went_down if self.direct else _assign if self.gs_single else partial(_lower, mark=G)
        if ch_f.size:
            rm, fr = self.of(self.pr_ptr, self.pr_mem, ch_f, self.f)
            d_rf = lower_r(Rf, rm if self.gr_single else prob.r_group[rm], fr)
            sm, fs = self.of(self.ps_ptr, self.ps_mem, ch_f, self.f)
            d_sf = lower_s(Sf, sm if self.gs_single else prob.s_group[sm], self.apply(prob.s_phi[sm], fs))
        if ch_n.size:
            sm, ns = self.of(self.ps_ptr, self.ps_mem, ch_n, self.n)
            d_sn = lower_s(Sn, sm if self.gs_single else prob.s_group[sm], self.apply(prob.s_phi[sm], ns))
        return d_rf, d_sf, d_sn, ch_n[prob.notes[ch_n]]

    def bounds(self, d_rf: Array, d_sf: Array, d_c4: Array) -> tuple[Array, Array, Array, Array]:
        """New upper bounds from the dirty constraints: (processors, chain indices) for stateful
        processors and (processors, ranks) for stateless ones."""
        prob = self.prob
        at_i: list[Array] = []
        by_i: list[Array] = []
        at_v: list[Array] = []
        by_v: list[Array] = []
        sides = []
        if d_rf.size:  # C2: senders of groups whose least receiver frontier went down
            mem = _members(self.gs_ptr, d_rf, self.gs_single)
            res = prob.s_res if self.maps else None
            group = None if self.gs_single else prob.s_group
            sides.append((mem, group, self.Rf, self.s_kind, prob.s_proc, self.s_seg, res))
        if d_sf.size:  # C3: receivers of groups whose least sender projection went down
            mem = _members(self.gr_ptr, d_sf, self.gr_single)
            group = None if self.gr_single else prob.r_group
            sides.append((mem, group, self.Sf, self.r_kind, prob.r_proc, self.r_seg, None))
        # (the aggregates read are below big: dirty ones went down, and the first round skips the rest)
        for mem, group, agg, kinds, procs, segs, res in sides:
            kind = kinds[mem]
            one, two = mem[kind == 1], mem[kind == 2]
            at_i.append(procs[one])
            by_i.append(self.last_ok(segs[one], agg[one if group is None else group[one]]))
            at_v.append(procs[two])
            x = agg[two if group is None else group[two]]
            by_v.append(x if res is None else self.apply(res[two], x))
        if d_c4.size:  # C4: processors whose n went down
            full = self.stateful[d_c4]
            at_i.append(d_c4[full])
            by_i.append(self.last_ok(d_c4[full] + prob.size, self.n[d_c4[full]]))
            at_v.append(d_c4[~full])
            by_v.append(self.n[d_c4[~full]])
        if not at_i:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty, empty
        cat = np.concatenate
        return cat(at_i), cat(by_i), cat(at_v), cat(by_v)

    def fail(self, p: int) -> None:
        cands = self.prob.c_ptr
        lowest = f"even its lowest available frontier (of {int(cands[p + 1] - cands[p])})"
        raise cannot_roll_back(self.prob.name(int(p)), lowest, "C2–C4")

    # -- the scalar worklist ------------------------------------------------------------
    def scalar(self, dirty: tuple[Array, Array, Array, Array]) -> tuple[Array, Array, Array, Array]:
        """Work through the dirty constraints one by one until none or many are left."""
        queue: deque[tuple[int, int]] = deque()
        queued: set[tuple[int, int]] = set()

        def push(item: tuple[int, int]) -> None:
            if item not in queued:
                queued.add(item)
                queue.append(item)

        for kind, ids in enumerate(dirty):
            for x in ids.tolist():
                push((kind, x))
        self.rounds += 1
        prob, big = self.prob, self.big
        stateful, s_seg, r_seg = self.stateful, self.s_seg, self.r_seg
        while queue and len(queue) <= self.SCALAR_UNTIL:
            item = queue.popleft()
            queued.discard(item)
            kind, x = item
            if kind == 0:  # C2 for the senders of group x
                bound = int(self.Rf[x])
                for m in range(self.gs_ptr[x], self.gs_ptr[x + 1]):
                    p = int(prob.s_proc[m])
                    if bound >= big:
                        break
                    if stateful[p]:
                        if s_seg[m] >= 0:
                            self.lower_idx(p, self.last_ok1(int(s_seg[m]), bound), push)
                    elif prob.s_unlogged[m]:
                        self.lower_f(p, self.apply1(int(prob.s_res[m]), bound), push)
            elif kind in (1, 2):  # C3 (or n) for the receivers of group x
                bound = int(self.Sf[x] if kind == 1 else self.Sn[x])
                for m in range(self.gr_ptr[x], self.gr_ptr[x + 1]):
                    p = int(prob.r_proc[m])
                    if bound >= big:
                        break
                    if kind == 2:
                        self.lower_n(p, bound, push)
                    elif not stateful[p]:
                        self.lower_f(p, bound, push)
                    elif r_seg[m] >= 0:
                        self.lower_idx(p, self.last_ok1(int(r_seg[m]), bound), push)
            elif stateful[x]:  # C4
                self.lower_idx(x, self.last_ok1(x + prob.size, int(self.n[x])), push)
            else:
                self.lower_f(x, int(self.n[x]), push)
        left: list[list[int]] = [[], [], [], []]
        for kind, x in queue:
            left[kind].append(x)
        return tuple(np.array(sorted(ids), dtype=np.int64) for ids in left)  # type: ignore[return-value]

    def last_ok1(self, seg: int, x: int) -> int:
        self.evaluations += 1
        lo = int(self.seg_start[seg])
        return bisect_right(self.pool, x, lo, lo + int(self.seg_len[seg])) - lo - 1

    def apply1(self, m: int, x: int) -> int:
        return x if m < 0 else int(self.prob.m_val[self.prob.m_ptr[m] + x])

    def lower_idx(self, p: int, j: int, push: Callable[[tuple[int, int]], None]) -> None:
        if j < self.idx[p]:
            if j < 0:
                self.fail(p)
            self.idx[p] = j
            prob = self.prob
            self.lower_f(p, int(prob.c_val[prob.c_ptr[p] + j]), push)

    def lower_f(self, p: int, v: int, push: Callable[[tuple[int, int]], None]) -> None:
        if v >= self.f[p]:
            return
        self.f[p] = v
        if self.direct:  # member k is group k, and its aggregate is f[p] itself: every one went down
            for g in self.pr_mem[self.pr_ptr[p] : self.pr_ptr[p + 1]].tolist():
                push((0, g))
            for g in self.ps_mem[self.ps_ptr[p] : self.ps_ptr[p + 1]].tolist():
                push((1, g))
        else:
            r_group = self.prob.r_group
            for k in range(self.pr_ptr[p], self.pr_ptr[p + 1]):
                g = int(r_group[self.pr_mem[k]])
                if v < self.Rf[g]:
                    self.Rf[g] = v
                    push((0, g))
            self.lower_senders(p, v, self.Sf, 1, push)
        self.lower_n(p, v, push)

    def lower_n(self, p: int, v: int, push: Callable[[tuple[int, int]], None]) -> None:
        if v >= self.n[p]:
            return
        self.n[p] = v
        if self.direct:
            for g in self.ps_mem[self.ps_ptr[p] : self.ps_ptr[p + 1]].tolist():
                push((2, g))
        else:
            self.lower_senders(p, v, self.Sn, 2, push)
        if self.prob.notes[p]:
            push((3, p))

    def lower_senders(
        self, p: int, v: int, agg: Array, kind: int, push: Callable[[tuple[int, int]], None]
    ) -> None:
        """``p``'s value went down to ``v``: lower ``agg`` (``Sf`` or ``Sn``) of the groups it sends to, queue
        those that went down."""
        prob = self.prob
        for m in self.ps_mem[self.ps_ptr[p] : self.ps_ptr[p + 1]].tolist():
            g, y = int(prob.s_group[m]), self.apply1(int(prob.s_phi[m]), v)
            if y < agg[g]:
                agg[g] = y
                push((kind, g))


def solve_total(prob: TotalProblem) -> TotalSolution:
    """The greatest fixed point of SPEC §5 for ``prob`` (see the module docstring).

    Raises :class:`~falkirk.errors.SolverError` when a processor would have
    to go below the lowest frontier of its chain (only possible when the
    chain lacks ``∅``).
    """
    return Engine(prob).run()
