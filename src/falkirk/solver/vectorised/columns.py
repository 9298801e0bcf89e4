"""A Dataflow of plain epoch processors as arrays, built once and solved without resolving it.

When every processor of a :class:`~falkirk.solver.model.Dataflow` is in the
``epoch`` domain, restartable and *plain* (its checkpoints give only their
frontiers, its edges are identity edges: :mod:`falkirk.solver.model.plain`),
its rank problem is :meth:`TotalProblem.from_epochs
<falkirk.solver.vectorised.problem.TotalProblem.from_epochs>` of a few
arrays. :func:`epoch_columns` builds those arrays on the first solve and
keeps them on the dataflow, so later solves (other failures) reuse them;
:func:`solve_columns` solves one set of failures. No checkpoint is resolved
and no per-checkpoint frontier is made: the answer is the same as the
general conversion's (:mod:`falkirk.solver.vectorised.build`), which
resolves every processor first.

Cost: :func:`epoch_columns` ``O(V + E + checkpoints)`` once;
:func:`solve_columns` the engine's cost plus ``O(V)`` to name the answer.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])], [Edge("ab", "a", "b")])
>>> f, n, work = solve_columns(df, frozenset({"a"}))
>>> f
{'a': Frontier(epoch, 3), 'b': Frontier(epoch, 1)}
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from falkirk.domains import Epoch, Frontier
from falkirk.solver.model import Dataflow
from falkirk.solver.vectorised.engine import solve_total
from falkirk.solver.vectorised.problem import Array, TotalProblem

__all__ = ["EpochColumns", "epoch_columns", "solve_columns"]


@dataclass
class EpochColumns:
    """The arrays of :meth:`TotalProblem.from_epochs` but ``failed``, and the processors' names."""

    names: list[str]
    index: dict[str, int]
    src: Array
    dst: Array
    logged: Array
    stateless: Array
    notes: Array
    ck_ptr: Array
    ck_val: Array
    domain: Epoch

    def problem(self, failed: frozenset[str]) -> TotalProblem:
        """The rank problem when the processors ``failed`` have failed."""
        mask = np.zeros(len(self.names), dtype=bool)
        if failed:
            mask[[self.index[p] for p in failed]] = True
        return TotalProblem.from_epochs(
            src=self.src,
            dst=self.dst,
            logged=self.logged,
            stateless=self.stateless,
            failed=mask,
            ck_ptr=self.ck_ptr,
            ck_val=self.ck_val,
            notifications=self.notes,
            names=self.names,
        )


def epoch_columns(df: Dataflow) -> EpochColumns | None:
    """The array form of ``df`` (kept on it), or ``None`` when it is not all plain epoch processors."""
    if df._columns is None:
        df._columns = _build(df) or False
    return df._columns or None


def _build(df: Dataflow) -> EpochColumns | None:
    names = list(df.processors)
    if not names or len(df.plain) != len(names):
        return None
    doms = df.domains
    procs = df.processors
    if any(type(doms[p]) is not Epoch or not procs[p].restartable for p in names):
        return None
    index = {p: i for i, p in enumerate(names)}
    edges = df.edges.values()
    src = np.fromiter((index[e.src] for e in edges), dtype=np.int64, count=len(df.edges))
    dst = np.fromiter((index[e.dst] for e in edges), dtype=np.int64, count=len(df.edges))
    logged = np.fromiter((e.name in procs[e.src].logs for e in edges), dtype=bool, count=len(df.edges))
    plain = df.plain
    counts = np.fromiter((len(plain[p]) for p in names), dtype=np.int64, count=len(names))
    ck_ptr = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum(counts, out=ck_ptr[1:])
    ck_val = np.fromiter((k for p in names for k in plain[p]), dtype=np.int64, count=int(ck_ptr[-1]))
    return EpochColumns(
        names=names,
        index=index,
        src=src,
        dst=dst,
        logged=logged,
        stateless=np.fromiter((procs[p].stateless for p in names), dtype=bool, count=len(names)),
        notes=np.fromiter((df.receives_notifications[p] for p in names), dtype=bool, count=len(names)),
        ck_ptr=ck_ptr,
        ck_val=ck_val,
        domain=doms[names[0]],  # type: ignore[arg-type]
    )


def solve_columns(
    df: Dataflow, failed: frozenset[str]
) -> tuple[dict[str, Frontier], dict[str, Frontier], int] | None:
    """``f``, ``n`` (by processor name) and the work done, or ``None`` when ``df`` has no array form."""
    cols = epoch_columns(df)
    if cols is None:
        return None
    prob = cols.problem(failed)
    sol = solve_total(prob)
    top = Frontier.top(cols.domain)
    made: dict[int, Frontier] = {}

    def frontier(r: int) -> Frontier:
        out = made.get(r)
        if out is None:
            out = made[r] = top if r == prob.top else Frontier(cols.domain, (r,))
        return out

    f = {p: frontier(r) for p, r in zip(cols.names, sol.f.tolist(), strict=True)}
    n = {p: frontier(r) for p, r in zip(cols.names, sol.n.tolist(), strict=True)}
    return f, n, sol.evaluations
