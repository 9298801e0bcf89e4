"""Stage graphs: all-to-all edges between stages, represented once per stage pair.

Batch and streaming jobs are often declared as **stages** of parallel tasks,
where every task of stage A sends to every task of stage B (a shuffle). As a
:class:`~falkirk.solver.Dataflow` that is ``w_A · w_B`` edges — 60 million
for a 10,000 × 6,000 job. When the edge metadata is per stage (every edge of
the pair has the same projection and logging, and a task's ``M_e``/``D_e``
do not depend on which task is at the other end), the constraints of the
pair only read aggregates: C2 for a task of A reads the least ``f`` over B,
C3/C4 for a task of B the least ``f``/``n`` over A. A :class:`StageGraph` is
solved as one edge *group* per stage pair by the vectorised engine
(:mod:`falkirk.solver.vectorised.problem`), in time linear in the number of tasks.

Frontiers are epochs (SPEC §7's encoding: ``k`` means epochs ``0..k``,
:data:`EMPTY` ``= -1`` is ``∅``, :data:`TOP` is ``⊤``); edges are identity.

>>> g = StageGraph(
...     [Stage("map", 3, checkpoints=[[1, 4], [2, 5], [3, 6]], failed=[1]),
...      Stage("reduce", 2, checkpoints=[[2], [4]])],
...     [StageEdge("map", "reduce", logged=True)])
>>> plan = g.solve()
>>> plan.frontiers["map"].tolist() == [TOP, 5, TOP], plan.frontiers["reduce"].tolist()
(True, [2, 4])
>>> df, failed = g.expand()                   # the same job with its 6 explicit edges
>>> len(df.edges), failed
(6, ['map[1]'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from falkirk.errors import UnknownNameError, ValidationError
from falkirk.solver.model import Checkpoint, Dataflow, Edge, Processor
from falkirk.solver.vectorised.engine import solve_total
from falkirk.solver.vectorised.problem import CHAIN, IDENTITY, NONE, TotalProblem

__all__ = ["Stage", "StageEdge", "StageGraph", "StagePlan", "TOP", "EMPTY"]

#: ``⊤`` in epoch arrays (every epoch).
TOP = int(np.iinfo(np.int64).max)
#: ``∅`` in epoch arrays.
EMPTY = -1


def _rows(value: Any, width: int, where: str) -> np.ndarray:
    """Per-task epochs as a ``(width, k)`` int array, rows left-padded with :data:`EMPTY`."""
    if value is None:
        return np.full((width, 0), EMPTY, dtype=np.int64)
    if isinstance(value, np.ndarray):
        arr = np.asarray(value, dtype=np.int64)
    else:
        rows = [list(r) for r in value]
        k = max((len(r) for r in rows), default=0)
        arr = np.array([[EMPTY] * (k - len(r)) + r for r in rows], dtype=np.int64).reshape(len(rows), k)
    if arr.ndim != 2 or arr.shape[0] != width:
        raise ValidationError(f"{where}: expected one row per task ({width}), got shape {arr.shape}")
    if (arr < EMPTY).any():
        raise ValidationError(f"{where}: epochs are integers >= -1")
    return arr


@dataclass(frozen=True)
class Stage:
    """``width`` parallel tasks with the same regime.

    ``checkpoints[i]`` lists task ``i``'s checkpoint epochs in increasing
    order (a list per task, or a ``(width, k)`` array whose rows are
    left-padded with :data:`EMPTY`); for stateless tasks, the complete
    frontiers they reported. ``failed`` lists task indices. ``delivered``
    (same shape as ``checkpoints``) is ``M_e`` at each checkpoint, the same
    on every input edge of the task (default: the checkpoint epoch), and
    ``live_delivered[i]`` ``M_e(⊤)`` of a task that has not failed (default
    :data:`TOP`); both concern stateful tasks only.
    """

    name: str
    width: int
    checkpoints: Any = None
    stateless: bool = False
    failed: Sequence[int] = ()
    delivered: Any = None
    live_delivered: Any = None
    notifications: bool = True


@dataclass(frozen=True)
class StageEdge:
    """Every task of stage ``src`` sends to every task of stage ``dst`` (identity projection)."""

    src: str
    dst: str
    logged: bool = False
    name: str | None = None

    @property
    def label(self) -> str:
        """The edge's name (``"src->dst"`` unless named)."""
        return self.name if self.name is not None else f"{self.src}->{self.dst}"


@dataclass
class StagePlan:
    """Per stage, the epochs of ``f`` and ``n`` of every task (:data:`EMPTY`, :data:`TOP`)."""

    frontiers: dict[str, np.ndarray]
    notification_frontiers: dict[str, np.ndarray]
    rounds: int = 0
    evaluations: int = 0
    tasks: list[tuple[str, int]] = field(default_factory=list, repr=False)  # (stage, index), in order

    def encoded(self) -> dict[str, dict[str, Any]]:
        """``{"frontiers": {"stage[i]": enc}, "notification_frontiers": …}`` in SPEC §9 encodings."""

        def enc(x: int) -> Any:
            return "top" if x == TOP else ("empty" if x == EMPTY else x)

        return {
            key: {f"{s}[{i}]": enc(int(arrs[s][i])) for s, i in self.tasks}
            for key, arrs in (
                ("frontiers", self.frontiers),
                ("notification_frontiers", self.notification_frontiers),
            )
        }


class StageGraph:
    """Stages and all-to-all stage edges (see the module docstring)."""

    def __init__(self, stages: Sequence[Stage], edges: Sequence[StageEdge]) -> None:
        self.stages = list(stages)
        self.edges = list(edges)
        self.index = {s.name: k for k, s in enumerate(self.stages)}
        if len(self.index) != len(self.stages):
            raise ValidationError("stage names must be unique")
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in self.index:
                    raise UnknownNameError(f"stage edge {e.label!r}: {end!r} is not a stage")
        self.offset = np.cumsum([0] + [s.width for s in self.stages])
        self.ck = [_rows(s.checkpoints, s.width, f"stage {s.name!r} checkpoints") for s in self.stages]
        self.dl = [self._delivered(s, k) for k, s in enumerate(self.stages)]
        for s, ck in zip(self.stages, self.ck, strict=True):
            if any(not 0 <= i < s.width for i in s.failed):
                raise ValidationError(f"stage {s.name!r}: failed task indices must be in 0..{s.width - 1}")
            valid = ck[:, 1:] >= 0
            if ((ck[:, 1:] <= ck[:, :-1]) & valid).any():
                raise ValidationError(f"stage {s.name!r}: each task's checkpoints must strictly increase")

    def _delivered(self, s: Stage, k: int) -> np.ndarray | None:
        if s.delivered is None and s.live_delivered is None:
            return None
        ck = self.ck[k]
        d = ck.copy() if s.delivered is None else _rows(s.delivered, s.width, f"stage {s.name!r} delivered")
        live = (
            np.full(s.width, TOP, dtype=np.int64)
            if s.live_delivered is None
            else np.asarray(s.live_delivered, dtype=np.int64)
        )
        if d.shape != ck.shape or live.shape != (s.width,):
            raise ValidationError(
                f"stage {s.name!r}: delivered must match checkpoints, live_delivered one per task"
            )
        full = np.concatenate([np.where(ck >= 0, d, EMPTY), live[:, None]], axis=1)
        if (full[:, 1:] < full[:, :-1]).any():
            raise ValidationError(f"stage {s.name!r}: delivered must not shrink as checkpoints grow")
        return full

    # -- the rank problem -------------------------------------------------------------------
    def problem(self) -> TotalProblem:
        """The stage graph as one :class:`~falkirk.solver.vectorised.problem.TotalProblem` (a group per stage
        edge)."""
        finite = [a[(a >= 0) & (a != TOP)] for a in self.ck + [d for d in self.dl if d is not None]]
        top = int(max((int(a.max()) for a in finite if a.size), default=-1)) + 2
        st, nt, init, chains, n_chains, t_ref = [], [], [], [], [], []
        tables: list[np.ndarray] = []
        for k, s in enumerate(self.stages):
            ck = self.ck[k]
            failed = np.zeros(s.width, dtype=bool)
            failed[np.asarray(s.failed, dtype=np.int64)] = True
            ranks = np.where(ck >= 0, ck + 1, -1)  # -1: unused slot
            last = ranks.max(axis=1, initial=0) if ranks.size else np.zeros(s.width, dtype=np.int64)
            st.append(np.full(s.width, s.stateless))
            nt.append(np.full(s.width, s.notifications))
            if s.stateless:
                init.append(np.where(failed, np.maximum(last, 0), top))
                chains.append(np.zeros(0, dtype=np.int64))
                n_chains.append(np.zeros(s.width, dtype=np.int64))
                t_ref.append(np.full(s.width, NONE))
                continue
            cols = np.concatenate(
                [np.zeros((s.width, 1), dtype=np.int64), ranks, np.where(failed, -1, top)[:, None]], axis=1
            )
            keep = cols >= 0
            chains.append(cols[keep])
            n_chains.append(keep.sum(axis=1))
            init.append(np.where(failed, np.maximum(last, 0), top))
            d = self.dl[k]
            if d is None:
                t_ref.append(np.full(s.width, CHAIN))
            else:
                dr = np.where(d == TOP, top, d + 1)
                tab = np.concatenate([np.zeros((s.width, 1), dtype=np.int64), dr], axis=1)
                t_ref.append(len(tables) + np.arange(s.width))
                tables.extend(tab[i][keep[i]] for i in range(s.width))
        counts = np.concatenate(n_chains)
        c_ptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=c_ptr[1:])
        c_val = np.concatenate(chains)
        notes = np.concatenate(nt)
        stateless = np.concatenate(st)
        per_task = np.repeat(notes, counts)
        return TotalProblem(
            stateless=stateless,
            notes=notes,
            init=np.concatenate(init),
            c_ptr=c_ptr,
            c_val=c_val,
            c_N=np.where(per_task, c_val, 0),
            groups=len(self.edges),
            **self._members(np.concatenate(t_ref)),
            t_ptr=np.concatenate([[0], np.cumsum([len(t) for t in tables], dtype=np.int64)]).astype(np.int64),
            t_val=np.concatenate(tables) if tables else np.zeros(0, dtype=np.int64),
            names=None,
            top=top,
        )

    def _members(self, t_ref: np.ndarray) -> dict[str, np.ndarray]:
        s_group, s_proc, s_unlog, r_group, r_proc = [], [], [], [], []
        for g, e in enumerate(self.edges):
            a, b = self.index[e.src], self.index[e.dst]
            senders = np.arange(self.offset[a], self.offset[a + 1])
            receivers = np.arange(self.offset[b], self.offset[b + 1])
            s_group.append(np.full(senders.shape[0], g))
            s_proc.append(senders)
            s_unlog.append(np.full(senders.shape[0], not e.logged))
            r_group.append(np.full(receivers.shape[0], g))
            r_proc.append(receivers)

        def cat(parts: list[np.ndarray], dtype: Any = np.int64) -> np.ndarray:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

        sp, unlog = cat(s_proc), cat(s_unlog, bool)
        return dict(
            s_group=cat(s_group),
            s_proc=sp,
            s_d=np.where(unlog, CHAIN, NONE),
            s_phi=np.full(sp.shape[0], IDENTITY),
            s_res=np.full(sp.shape[0], IDENTITY),
            s_unlogged=unlog,
            r_group=cat(r_group),
            r_proc=cat(r_proc),
            r_m=t_ref[cat(r_proc)] if r_proc else np.zeros(0, dtype=np.int64),
        )

    def solve(self) -> StagePlan:
        """Solve SPEC §5 for every task (see :class:`StagePlan`)."""
        prob = self.problem()
        sol = solve_total(prob)

        def epochs(r: np.ndarray) -> np.ndarray:
            return np.where(r == prob.top, TOP, r - 1)

        f, n = epochs(sol.f), epochs(sol.n)
        cut = [(s.name, int(self.offset[k]), int(self.offset[k + 1])) for k, s in enumerate(self.stages)]
        names = [(s.name, i) for s in self.stages for i in range(s.width)]
        return StagePlan(
            {s: f[a:b] for s, a, b in cut}, {s: n[a:b] for s, a, b in cut}, sol.rounds, sol.evaluations, names
        )

    # -- the explicit dataflow ---------------------------------------------------------------
    def expand(self) -> tuple[Dataflow, list[str]]:
        """The same job as a :class:`~falkirk.solver.Dataflow` with every edge, and its failed tasks.

        For checking and small jobs: it has ``Σ w_A · w_B`` edges.
        """
        ins: dict[str, list[str]] = {}
        outs: dict[str, list[str]] = {}
        edges = []
        for e in self.edges:
            a, b = self.stages[self.index[e.src]], self.stages[self.index[e.dst]]
            for i in range(a.width):
                for j in range(b.width):
                    name = f"{e.label}[{i},{j}]"
                    edges.append(Edge(name, f"{a.name}[{i}]", f"{b.name}[{j}]"))
                    if e.logged:
                        outs.setdefault(f"{a.name}[{i}]", []).append(name)
                    ins.setdefault(f"{b.name}[{j}]", []).append(name)
        procs, failed = [], []
        for k, s in enumerate(self.stages):
            down = set(s.failed)
            for i in range(s.width):
                name = f"{s.name}[{i}]"
                if i in down:
                    failed.append(name)
                row, given = self.ck[k][i], self.dl[k]
                cks, live = [], None
                inputs = ins.get(name, [])
                for c, x in enumerate(row.tolist()):
                    if x >= 0:
                        dl = {} if given is None or s.stateless else {e: int(given[i][c]) for e in inputs}
                        cks.append(Checkpoint(x, delivered=dl))
                if given is not None and not s.stateless and inputs:
                    v = int(given[i][-1])
                    live = Checkpoint("top", delivered={e: ("top" if v == TOP else v) for e in inputs})
                procs.append(
                    Processor(
                        name,
                        "epoch",
                        stateless=s.stateless,
                        logs=outs.get(name, []),
                        checkpoints=cks,
                        live=live,
                        notifications=s.notifications,
                    )
                )
        return Dataflow(procs, edges), failed
