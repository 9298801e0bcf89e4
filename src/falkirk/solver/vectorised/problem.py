"""A vectorised (numpy) solver for totally ordered domains (SPEC §5).

When every domain is totally ordered, a frontier is one bound, so it can be
stored as an integer **rank** in a sorted universe of the frontiers that can
occur (``0`` is ``∅``, the largest rank ``⊤``). A :class:`TotalProblem`
holds the whole fixed-point problem as arrays:

* each **stateful** processor's chain ``F(p)`` as ascending ranks, with the
  *ceiling ranks* of ``N_p`` per candidate (the least rank containing it);
* **edge groups**: a group has sender members and receiver members and
  stands for an edge from every sender to every receiver. A plain edge is a
  group with one of each; an all-to-all stage pair is one group
  (:mod:`falkirk.solver.vectorised.stages`). Each sender member has its
  ``D_e`` per candidate (ceiling ranks), its projection ``φ_e`` as a map of
  ranks (``-1``: identity) and, if stateless and not logging, its residual
  ``φ⁺_e``; each receiver member its ``M_e`` per candidate.

In a total order ``⋂`` is ``min`` and projections are monotone, so every
constraint a group imposes reads one aggregate: C2 for a sender, the least
``f`` of the receivers; C3 and C4 for a receiver, the least ``φ(f)`` /
``φ(n)`` of the senders. :func:`falkirk.solver.vectorised.engine.solve_total` iterates Figure 6 with array
operations (all affected processors at once, Jacobi style), re-evaluating
only the members of groups whose aggregate went down. Every update is
monotone and deflationary, so this reaches the same greatest fixed point as
the reference iteration (SPEC §5). A round costs one hop of propagation,
so when few constraints are dirty (a long, thin cascade) the engine works
through them one by one instead (:mod:`falkirk.solver.vectorised.engine`).

Build a problem from arrays (:meth:`TotalProblem.from_epochs`), from a
Dataflow (:mod:`falkirk.solver.vectorised.build`, which ``solve_frontiers`` uses)
or from a stage graph (:mod:`falkirk.solver.vectorised.stages`).

>>> import numpy as np
>>> # a -> b, epochs; a failed with a checkpoint at epoch 3, b has checkpoints 1 and 5
>>> prob = TotalProblem.from_epochs(src=np.array([0]), dst=np.array([1]), logged=np.array([True]),
...     stateless=np.array([False, False]), failed=np.array([True, False]),
...     ck_ptr=np.array([0, 1, 3]), ck_val=np.array([3, 1, 5]))
>>> from falkirk.solver.vectorised.engine import solve_total
>>> sol = solve_total(prob)
>>> prob.epochs(sol.f), prob.epochs(sol.n)
([3, 1], [3, 1])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["TotalProblem", "TotalSolution", "spans", "ranges", "CHAIN", "NONE", "IDENTITY"]

Array = np.ndarray
#: Member table reference meaning "the processor's own chain" (e.g. ``M_e(f) = f``).
CHAIN = -2
#: Member table / map reference meaning "no constraint" (tables) or "identity" (maps).
NONE = IDENTITY = -1


def _constant(value: int, size: int) -> Array:
    """``size`` copies of ``value`` as a read-only array that takes no memory (the engine only reads it)."""
    return np.broadcast_to(np.int64(value), (size,))


def spans(starts: Array, lens: Array) -> Array:
    """Concatenation of ``arange(s, s + n)`` for every ``(s, n)`` of ``starts``, ``lens``.

    >>> spans(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(total, dtype=np.int64)


def ranges(ptr: Array, ids: Array) -> Array:
    """Concatenation of ``arange(ptr[i], ptr[i + 1])`` for every ``i`` in ``ids``.

    >>> ranges(np.array([0, 2, 2, 5]), np.array([2, 0])).tolist()
    [2, 3, 4, 0, 1]
    """
    return spans(ptr[ids], ptr[ids + 1] - ptr[ids])


@dataclass
class TotalProblem:
    """The fixed-point problem in rank form (see the module docstring).

    Processors ``0..P-1``; ``init[p]`` is the initial rank (``max F(p)``;
    for a stateful processor the last entry of its chain). Chains are CSR:
    processor ``p``'s candidates are ``c_val[c_ptr[p]:c_ptr[p+1]]`` (empty
    for stateless processors) with ``c_N`` their ceiling-ranked ``N_p``.
    Sender members (sorted by group): ``s_group``, ``s_proc``, ``s_d``
    (``D_e`` table: :data:`CHAIN`, :data:`NONE` or an index into the custom
    tables ``t_ptr``/``t_val``), ``s_phi`` (map index into ``m_ptr``/``m_val``
    or :data:`IDENTITY`), ``s_res`` (residual map, used when the sender is
    stateless and ``s_unlogged``). Receiver members: ``r_group``, ``r_proc``,
    ``r_m`` (``M_e`` table, as ``s_d``). A custom table has one entry per
    candidate of its processor.
    """

    stateless: Array
    notes: Array
    init: Array
    c_ptr: Array
    c_val: Array
    c_N: Array
    groups: int
    s_group: Array
    s_proc: Array
    s_d: Array
    s_phi: Array
    s_res: Array
    s_unlogged: Array
    r_group: Array
    r_proc: Array
    r_m: Array
    t_ptr: Array = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    t_val: Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    m_ptr: Array = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    m_val: Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    names: Sequence[str] | None = None
    top: int = 0  # rank of ⊤ (epoch problems), for :meth:`epochs`

    @property
    def size(self) -> int:
        """Number of processors."""
        return int(self.init.shape[0])

    def name(self, p: int) -> str:
        """Name of processor ``p`` (its index when the problem has no names)."""
        return self.names[p] if self.names is not None else f"#{p}"

    @classmethod
    def from_epochs(
        cls,
        *,
        src: Array,
        dst: Array,
        logged: Array,
        stateless: Array,
        failed: Array,
        ck_ptr: Array,
        ck_val: Array,
        notifications: bool | Array = True,
        names: Sequence[str] | None = None,
    ) -> TotalProblem:
        """An epoch-domain dataflow with identity edges and safe-default metadata, from arrays.

        Edge ``k`` is ``src[k] → dst[k]``, logged when ``logged[k]``.
        Processor ``p``'s checkpoints (or reported complete frontiers, if
        stateless) are the epochs ``ck_val[ck_ptr[p]:ck_ptr[p+1]]``, strictly
        increasing. Ranks: ``∅`` is 0, epoch ``k`` is ``k + 1``, ``⊤`` the largest.
        ``notifications`` says whether the processors receive notifications:
        one flag for all, or one per processor.
        This is what :meth:`Dataflow` objects with the same content resolve to,
        built without any per-processor Python object.
        """
        stateless = np.asarray(stateless, dtype=bool)
        failed = np.asarray(failed, dtype=bool)
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        logged = np.asarray(logged, dtype=bool)
        ck_ptr, ck_val = np.asarray(ck_ptr, dtype=np.int64), np.asarray(ck_val, dtype=np.int64)
        P, E = stateless.shape[0], src.shape[0]
        top = int(ck_val.max()) + 2 if ck_val.size else 1
        counts = np.diff(ck_ptr)
        # stateful chains: [∅] + checkpoints + [⊤ unless failed]; ranks are epoch + 1
        full = ~stateless
        ids = np.flatnonzero(full)
        lens = np.where(full, 1 + counts + ~failed, 0)
        c_ptr = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(lens, out=c_ptr[1:])
        c_val = np.zeros(int(c_ptr[-1]), dtype=np.int64)
        c_val[spans(c_ptr[ids] + 1, counts[ids])] = ck_val[ranges(ck_ptr, ids)] + 1
        c_val[c_ptr[1:][full & ~failed] - 1] = top
        last = np.zeros(P, dtype=np.int64)  # rank of the last checkpoint (∅ if none)
        some = counts > 0
        last[some] = ck_val[ck_ptr[1:][some] - 1] + 1
        init = np.where(failed, last, top)
        init[ids] = c_val[c_ptr[ids + 1] - 1]
        notes = np.broadcast_to(np.asarray(notifications, dtype=bool), (P,)).copy()
        c_N = np.where(np.repeat(notes, lens), c_val, 0)
        eids = np.arange(E, dtype=np.int64)  # edge k is group k, its only sender and receiver member
        none = _constant(IDENTITY, E)
        return cls(
            stateless=stateless,
            notes=notes,
            init=init,
            c_ptr=c_ptr,
            c_val=c_val,
            c_N=c_N,
            groups=E,
            s_group=eids,
            s_proc=src,
            s_d=np.where(logged, NONE, CHAIN),
            s_phi=none,
            s_res=none,
            s_unlogged=~logged,
            r_group=eids,
            r_proc=dst,
            r_m=_constant(CHAIN, E),
            names=names,
            top=top,
        )

    def epochs(self, ranks: Array) -> list[int | str]:
        """Ranks of an epoch problem as epochs (``-1`` for ``∅``, ``"top"`` for ``⊤``)."""
        return ["top" if r == self.top else int(r) - 1 for r in np.asarray(ranks).tolist()]


@dataclass
class TotalSolution:
    """Ranks of ``f(p)`` and ``n(p)``, chain index of stateful processors (``-1`` if stateless)."""

    f: Array
    n: Array
    idx: Array
    rounds: int
    evaluations: int
