"""The rollback closure of an epoch pipeline for many regime assignments, failures and moments at once.

The advisor (:mod:`~falkirk.spark.pipeline.plan.advisor`) needs the plan
falkirk's solver would pick for every (assignment of regimes, failure kind,
moment of the failure): thousands of solves, where one
:func:`falkirk.solver.solve_frontiers` call on a 50-step pipeline costs
~10 ms. In a pipeline the solver's problem is special — epoch frontiers are
integers, every projection is the identity, a stateful step's checkpoints
are the epochs its regime checkpoints after, a stateless step can stop at
any epoch — so SPEC §5's iteration reduces to integer bounds along edges,
computed here with array operations over all the columns at once:

* **C1**: a stateful step's frontier is a checkpoint epoch ``≤ done``
  (``Lazy(every=k)``: ``e ≡ k-1 (mod k)``; every epoch for ``Eager``,
  ``Output`` and databases) or ``-1`` (``∅``); a step that did not fail may
  stay at ``⊤``. A stateless step can stop at any epoch (at most ``done``
  when it failed).
* **C3** on ``p → q``: ``M(f(q)) ≤ f(p)``, where a live ``q`` has delivered
  ``max(done[q], done[p])`` (its queue counts as delivered).
* **C2** on ``p → q`` when ``p`` does not log: ``D(f(p)) ≤ f(q)``, where a
  live ``p`` has discarded up to ``done[p]``.
* **C4**: ``N_q(f(q)) ≤`` the least ``N`` upstream of ``q``; it binds where
  ``done`` is uneven (a failure striking mid-epoch: the steps before the
  running one are an epoch ahead).

Each sweep applies C3 and C4 to every node in run order, then C2 in reverse order,
each time lowering a violated frontier to the largest one its regime
allows under the bound; sweeps repeat until nothing moves (the greatest
fixpoint, as SPEC §5's worklist reaches it). :func:`reference_frontiers`
asks the real solver for the same columns; the tests check the two agree
on random pipelines, assignments, failures and moments.

Arrays: ``N`` nodes in run order; ``A`` assignments (``logs``, ``every``:
``(N, A)``); ``M`` columns of (failure, moment) (``done``, ``failed``:
``(N, M)``); frontiers ``(N, A, M)`` with :data:`TOP` for ``⊤``. Cost: a
few sweeps of ``O(E)`` array operations on ``A × M`` elements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from attrs import frozen

from falkirk.spark.pipeline.plan.live import live_checkpoint
from falkirk.spark.pipeline.plan.planner import TOP, Planner, epoch_of

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = ["Graph", "frontiers", "reference_frontiers", "TOP"]


@frozen
class Graph:
    """A pipeline's nodes in run order and its edges, as indices (what :func:`frontiers` walks)."""

    names: tuple[str, ...]
    preds: tuple[tuple[int, ...], ...]
    succs: tuple[tuple[int, ...], ...]
    #: inputs, Ephemeral and Batch steps (their regime cannot make them stateful)
    stateless: tuple[bool, ...]
    inputs: tuple[bool, ...]

    @classmethod
    def of(cls, pipeline: Definition) -> Graph:
        names = tuple(pipeline.order)
        index = {n: i for i, n in enumerate(names)}
        preds: list[list[int]] = [[] for _ in names]
        succs: list[list[int]] = [[] for _ in names]
        for e in pipeline.edges:
            preds[index[e.dst]].append(index[e.src])
            succs[index[e.src]].append(index[e.dst])
        return cls(
            names,
            tuple(map(tuple, preds)),
            tuple(map(tuple, succs)),
            tuple(pipeline.stateless(n) for n in names),
            tuple(n in pipeline.inputs for n in names),
        )

    @property
    def edges(self) -> list[tuple[int, int]]:
        """``(p, q)`` for every edge, by receiver in run order."""
        return [(p, q) for q in range(len(self.names)) for p in self.preds[q]]


def last_checkpoint(y: np.ndarray, every: np.ndarray) -> np.ndarray:
    """The last checkpoint epoch ``≤ y`` of a step checkpointing every ``every`` epochs (``-1``: none;
    ``every`` 0: stateless, any epoch).

    >>> last_checkpoint(np.array([1, 2, 5, 7]), np.array([3, 3, 3, 0]))
    array([-1,  2,  5,  7])
    """
    return _rounded(y, np.maximum(every, 1), every == 0)


def _rounded(y: np.ndarray, spacing: np.ndarray, anytime: np.ndarray) -> np.ndarray:
    """:func:`last_checkpoint` from its per-step parts: ``max(every, 1)`` and ``every == 0``."""
    return np.where(anytime, y, np.maximum((y + 1) // spacing * spacing - 1, -1))


def frontiers(
    graph: Graph,
    logs: np.ndarray,
    every: np.ndarray,
    failed: np.ndarray,
    done: np.ndarray,
    mute: np.ndarray | None = None,
) -> np.ndarray:
    """Every node's rollback frontier per (assignment, column): ``(N, A, M)`` epochs, :data:`TOP` for ``⊤``.

    ``logs``/``every`` ``(N, A)``: whether node ``i`` logs its output, and the
    spacing of its checkpoints (``0``: stateless); ``failed``/``done``
    ``(N, M)``: which nodes failed and what each had completed, per column;
    ``mute`` ``(N, M)``: nodes left out of the column (they stay at ``⊤``, and
    no constraint on an edge into one binds), as if the pipeline had none.
    """
    n = len(graph.names)
    every3 = every[:, :, None].astype(np.int64)
    unlogged = ~logs[:, :, None].astype(bool)
    done3 = done[:, None, :].astype(np.int64)
    start = last_checkpoint(np.broadcast_to(done3, (n, every.shape[1], done.shape[1])), every3)
    spacing, anytime = np.maximum(every3, 1), every3 == 0

    # where every assignment lets node i stop at any epoch (stateless, or a checkpoint every epoch), rounding
    # down to a checkpoint is the identity: skipped, as it is a division per element. Every y rounded here is
    # ≥ -1 (an epoch, or ∅), so where no assignment makes node i stateless, the rounding is y - (y + 1) mod k.
    trivial = [bool((spacing[i] == 1).all()) for i in range(n)]
    mixed = [bool(anytime[i].any()) for i in range(n)]

    def last(y: np.ndarray, i: int) -> np.ndarray:  # last_checkpoint(y, every3[i]), its per-node parts once
        if trivial[i]:
            return y
        return _rounded(y, spacing[i], anytime[i]) if mixed[i] else y - (y + 1) % spacing[i]

    f = np.where(failed[:, None, :], start, TOP)
    # A stateful frontier below ⊤ never exceeds what the node has done (it starts at a checkpoint ≤ done and
    # only falls), so "⊤ read as what it has done or queued" is a minimum with that bound, one operation.
    queued = {(p, q): np.maximum(done3[p], done3[q]) for p, q in graph.edges}
    order = range(n)
    moved = True
    while moved:
        moved = False
        low: list[np.ndarray] = []  # C4's n(q) = f(q) ∧ every n(p) upstream
        for q in order:
            preds, lazy = graph.preds[q], graph.stateless[q]
            for p in preds:  # C3: what q delivered, p must not send again differently
                # live, a stateless step has no metadata: its M(⊤) is ⊤, a stateful one's what it queued
                fq = f[q]
                viol = (fq if lazy else np.minimum(fq, queued[(p, q)])) > f[p]
                if mute is not None:
                    viol &= ~mute[q][None, :]
                if viol.any():
                    bound = np.minimum(f[p], fq if lazy else np.minimum(fq, done3[q]))
                    f[q] = np.where(viol, last(bound, q), fq)
                    moved = True
            fq = f[q]
            if not preds:
                low.append(fq)
                continue
            up = low[preds[0]]
            for p in preds[1:]:
                up = np.minimum(up, low[p])
            # C4: N_q(f(q)) ⊆ n(q) (N(f) = f; live: what it was told, a stateless step's N(⊤) = ⊤)
            viol = (fq if lazy else np.minimum(fq, done3[q])) > up
            if mute is not None:
                viol &= ~mute[q][None, :]
            if viol.any():
                fq = f[q] = np.where(viol, last(np.minimum(up, fq), q), fq)
                moved = True
            low.append(np.minimum(fq, up))
        for p in reversed(order):  # C2: what p discarded, q must not need again
            if not unlogged[p].any():
                continue
            # live, a stateless step has no metadata: its D(⊤) is ⊤ (SPEC §3), a stateful one's what it sent
            fp = f[p]
            val = fp if graph.stateless[p] else np.minimum(fp, done3[p])
            for q in graph.succs[p]:
                viol = unlogged[p] & (val > f[q])
                if mute is not None:
                    viol &= ~mute[q][None, :]
                if viol.any():
                    fp = f[p] = np.where(viol, last(np.minimum(f[q], val), p), fp)
                    val = fp if graph.stateless[p] else np.minimum(fp, done3[p])
                    moved = True
    return f


def reference_frontiers(
    pipeline: Definition, failed: Sequence[str], done: Mapping[str, int], *, also_logging: Sequence[str] = ()
) -> dict[str, int]:
    """The frontiers falkirk's solver picks when ``failed`` fail with everyone at ``done`` (the ``Planner``'s
    own answer, with each step's restore points as its regime takes them: the reference :func:`frontiers` is
    tested against). ``failed`` may be ``["all"]`` (a restarted driver)."""
    from falkirk.spark.pipeline.plan.shape import synthetic_available

    everyone = failed == ["all"] or list(failed) == ["all"]
    lost = set(pipeline.order) if everyone else set(failed)
    planner = Planner(
        pipeline.dataflow(also_logging=also_logging),
        outputs=pipeline.external_outputs,
        known=synthetic_available(pipeline, done),
        monitor=False,
    )
    live = {}
    for n in pipeline.order:
        if n not in lost and not pipeline.stateless(n):
            queued = {e.name: done[e.src] for e in pipeline.edges if e.dst == n and done[e.src] > done[n]}
            live[n] = live_checkpoint(pipeline, n, done[n], queued)
    plan = planner.plan("all" if everyone else sorted(lost), live)
    return {n: epoch_of(f) for n, f in plan.frontiers.items()}
