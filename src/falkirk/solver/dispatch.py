"""Which solver :func:`~falkirk.solver.solve_frontiers` runs (SPEC §5): its ``strategy``.

* ``"auto"`` (the default) — the vectorised solver whenever it applies
  cheaply, the worklist otherwise (the rule below); if the vectorised
  solver turns out not to apply after all, the worklist.
* ``"worklist"`` — the worklist iteration (:mod:`falkirk.solver.worklist`),
  always.
* ``"round_robin"`` — the literal iteration of Figure 6 (the reference,
  :mod:`falkirk.solver.fixpoint`).
* ``"vectorised"`` — the vectorised solver (:mod:`falkirk.solver.vectorised.problem`),
  or :class:`~falkirk.solver.vectorised.build.NotApplicable` (a
  :class:`~falkirk.errors.SolverError`) saying why it does not apply.

All of them return the same frontiers and notification frontiers (the
unique greatest fixed point, SPEC §5). The vectorised solver records no
per-step reasons; its plan computes them on first use (``plan.explain()``)
by running the worklist, so explanations are the same whichever solver ran.

The rule of ``"auto"`` (:func:`choose`), for a dataflow of ``V`` processors
and ``E`` edges:

1. every processor a plain, restartable ``epoch`` processor (the dataflow's
   columns, :mod:`falkirk.solver.vectorised.columns`: checkpoints that give
   only their frontier, identity edges, no live metadata) — **vectorised**,
   at every size;
2. otherwise, every domain totally ordered, ``V + E ≥``
   :data:`CONVERT_FROM` or ``V ≥`` :data:`VECTORISE_FROM` with at least
   :data:`DENSE_FROM` edges per processor, **and** a rollback of the failed
   processors able to reach at least :data:`REGION_FROM` of the processors
   (:func:`rollback_region`) — **vectorised** (after a conversion,
   :mod:`falkirk.solver.vectorised.build`); the same, large, but with a
   smaller region — the **worklist**;
3. otherwise, a *loop job* of plain prefix checkpoints (product or
   lexicographic loop bodies entered through ``epoch_to_loop``,
   :mod:`falkirk.solver.vectorised.loops`) with ``V ≥`` :data:`VECTORISE_FROM`
   — **vectorised** on the loop engine, whatever its density (it declines
   what it cannot solve exactly, and the worklist runs);
4. otherwise — the **worklist** (other partial orders always end here).

Why (``benchmarks/dispatch.py``, ``benchmarks/results/dispatch.json``: CPU
time of ``solve_frontiers`` on a fresh Dataflow, chains, fan-in and fan-out
trees, sparse and dense random DAGs, diamonds, epoch loops and all-to-all
stages, 10^2 to 10^6 processors, 0.1 %, 1 % and all of them failed):

* On the columns, the vectorised solver was the faster of the two in every
  measured cell (3 processors: 0.3 ms against 0.4 ms; 10^2–10^4, every shape
  and failed fraction: 5–70× faster; 10^5 and 10^6 with one failure, in a
  separate probe: chain 0.7 s against 10 s, sparse DAG 6.8 s against more
  than 20 s), sparse or dense, where the old rule (vectorise only from
  1,000 processors *and* 2 edges per processor) ran the worklist. On a
  fresh Dataflow the worklist resolves every processor it reaches and
  records a :class:`~falkirk.solver.fixpoint.Reason` per step (tens of µs
  per processor), while the array engine pays ``O(V + E)`` of numpy work
  (about 1 µs per processor) and its plan decodes frontiers only when read;
  even one failure rolls back most of a chain or DAG. So no threshold.
* Other totally ordered dataflows (live metadata — what
  :meth:`Monitor.plan_rollback <falkirk.solver.Monitor.plan_rollback>`, the
  monitor's full re-solves and a spark pipeline's what-if (``plan_failure``)
  pass —, recorded projections, lexicographic or single-input sequence
  domains) must first be converted to arrays: ``O(V + E)`` in Python
  whatever failed (7–10 µs per processor and edge at 10^4). The worklist,
  which starts from the live frontiers, examines only processors that must
  move, all of them in the *rollback region* (:func:`rollback_region`: the
  failed processors' closure downstream along every edge and upstream along
  unlogged ones; where every live frontier is ``⊤``, as in the grid, it is
  exactly the set that moves — counted on every shape at 10^4, and on
  chains, trees and sparse DAGs at 10^5). Per processor of the region it
  costs about what the conversion costs per processor, so the conversion
  pays only when most of the dataflow can roll back. Below ``V + E ≈ 10^4``
  the worklist is as fast or faster; dense graphs (1,000 processors, 9 edges
  each) convert at 0.5× its time. At 10^4 and 10^5, regions of 95 % or more
  (chains, sparse DAGs, diamonds, loops, dense shapes, ``tree(out)`` with
  1 % failed) cost the worklist 0.84–1.9× the conversion (chain at 10^5, 0.1 %
  failed: 3.7 s against 3.0 s); regions of 22–42 % (binary trees with few
  failed) cost it 0.37–0.56× at 22–24 %, 0.71–1.14× at 38–42 % (``tree(in)``
  at 10^5, 0.1 % failed: 1.20 s against 2.14 s; 1 %, region 42 %: 2.63 s
  against 2.30 s), where the previous rule, converting from ``V + E ≥ 10^4``
  whatever failed, was up to 1.9× the best. Half the processors
  (:data:`REGION_FROM`) keeps every measured cell within the target (auto at
  most 1.2× the best + 10 ms: ``benchmarks/results/dispatch.json``,
  ``dispatch_live_1e5.json``); it is not sharp — the break-even lies near
  40 % on trees, and no region between 42 % and 95 % was measured at 10^4 or
  more. The walk stops at ``REGION_FROM × V`` processors (about 2 ms at
  10^4, against 0.1–0.2 s for either solver). A region larger than what
  moves (live metadata below ``⊤``) errs towards the conversion, as the old
  rule did.
* The monitor's incremental updates (:meth:`Monitor.record
  <falkirk.solver.Monitor.record>`) re-solve only the region a report
  touches with their own tracking worklist (:mod:`falkirk.solver.monitor.tracker`)
  and do not go through this choice; its rollback plans and its full
  re-solves do.

The keyword ``fast=`` of earlier releases is a deprecated alias
(:class:`DeprecationWarning`): ``fast=True`` is ``strategy="auto"``,
``fast=False`` is ``strategy="worklist"`` (with ``strategy`` left at
``"auto"`` or set to ``"worklist"``; other strategies ignore it, as before).

Cost: :func:`choose` is ``O(1)`` on the columns (the flag is kept by the
Dataflow) and ``O(V + E)`` otherwise (a look at every domain and the walk
of :func:`rollback_region`) once the size thresholds are met.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])], [Edge("ab", "a", "b")])
>>> choose(df), choose(df, strategy="worklist"), choose(df, strategy="round_robin")
('vectorised', 'worklist', 'round_robin')
>>> live = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                  Processor("b", "epoch", checkpoints=[Checkpoint(1)], live=Checkpoint("top"))],
...                 [Edge("ab", "a", "b")])
>>> choose(live)  # live metadata: no columns, and too small to pay for a conversion
'worklist'
>>> plan = solve_frontiers(df, ["a"], strategy="vectorised")
>>> plan.to_json()["frontiers"], plan.explain("b")
({'a': 3, 'b': 1}, ['a failed: ⊤ is gone, its best available frontier is 3', 'b top → 1 by C3 on ab: it had received messages that a at 3 will send again'])
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Literal, get_args

import numpy as np

from falkirk.solver.fixpoint import FixedPoint, Reason, round_robin
from falkirk.solver.model import Dataflow
from falkirk.solver.model.access import View
from falkirk.solver.model.table import Table
from falkirk.solver.vectorised.build import NotApplicable, solve_view
from falkirk.solver.vectorised.columns import solve_columns
from falkirk.solver.vectorised.loops import solve_loops
from falkirk.solver.worklist import run_worklist

__all__ = [
    "Strategy",
    "STRATEGIES",
    "CONVERT_FROM",
    "VECTORISE_FROM",
    "DENSE_FROM",
    "REGION_FROM",
    "strategy_of",
    "choose",
    "rollback_region",
    "solve",
    "LazyReasons",
]

#: What ``solve_frontiers(..., strategy=...)`` accepts.
Strategy = Literal["auto", "worklist", "round_robin", "vectorised"]
#: The strategies, the default first.
STRATEGIES: tuple[str, ...] = get_args(Strategy)

#: Without columns: smallest ``processors + edges`` for which ``"auto"`` converts and vectorises.
CONVERT_FROM = 10_000
#: Without columns: ``"auto"`` also vectorises from this many processors ...
VECTORISE_FROM = 1000
#: ... when they have at least this many edges each (dense: the worklist's examinations cost more).
DENSE_FROM = 2.0
#: ... and when a rollback of the failed processors can reach at least this fraction of them
#: (:func:`rollback_region`).
REGION_FROM = 0.5


class LazyReasons(Mapping[str, list[Reason]]):
    """The reasons of a fixed point, computed by the worklist when first read."""

    def __init__(self, view: View) -> None:
        self._view = view
        self._reasons: dict[str, list[Reason]] | None = None

    def _get(self) -> dict[str, list[Reason]]:
        if self._reasons is None:
            self._reasons = run_worklist(self._view).reasons
        return self._reasons

    def __getitem__(self, name: str) -> list[Reason]:
        return self._get()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._view.df.processors)

    def __repr__(self) -> str:
        state = "computed" if self._reasons is not None else "not computed yet"
        return f"<LazyReasons for {len(self)} processors, {state}>"


def strategy_of(strategy: str, fast: bool | None = None, *, stacklevel: int = 2) -> Strategy:
    """``strategy``, checked, with the deprecated ``fast=`` folded in (``None``: not given).

    ``stacklevel`` is passed to :func:`warnings.warn` so that the warning
    points at the caller of the public function (2: the caller of the one
    calling this).

    >>> strategy_of("auto"), strategy_of("round_robin")
    ('auto', 'round_robin')
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     strategy_of("auto", fast=False), caught[0].category.__name__
    ('worklist', 'DeprecationWarning')
    """
    if strategy not in STRATEGIES:
        choices = ", ".join(repr(s) for s in STRATEGIES)
        raise ValueError(f"unknown strategy {strategy!r}: use one of {choices}")
    if fast is not None:
        warnings.warn(
            "fast= is deprecated: use strategy='auto' (fast=True) or strategy='worklist' (fast=False)",
            DeprecationWarning,
            stacklevel=stacklevel + 1,
        )
        if strategy in ("auto", "worklist"):
            return "auto" if fast else "worklist"
    return strategy  # type: ignore[return-value]


def choose(
    dataflow: Dataflow,
    *,
    strategy: Strategy = "auto",
    fast: bool | None = None,
    failed: Collection[str] | str | None = None,
) -> str:
    """The solver :func:`solve` runs for ``dataflow``: ``"vectorised"``, ``"worklist"`` or ``"round_robin"``.

    ``"auto"`` follows the rule of the module docstring; ``failed`` (names
    of its processors, or ``"all"``) bounds the rollback region of rule 2
    (``None``: every processor may roll back). ``fast=`` is a deprecated
    alias (see the module docstring). Cost:
    ``O(1)``, or ``O(V + E)`` for a dataflow without columns that is large
    enough to convert (a look at every domain, and the walk of
    :func:`rollback_region`, which stops at ``REGION_FROM × V`` processors).
    """
    strategy = strategy_of(strategy, fast)
    if strategy != "auto":
        return strategy
    t = dataflow.table
    if t.epoch_plain:  # the columns: vectorised at every size
        return "vectorised"
    n, m = len(dataflow.processors), len(dataflow.edges)
    large = n + m >= CONVERT_FROM or (n >= VECTORISE_FROM and m >= DENSE_FROM * n)
    if large and all(d.is_total for d in {id(d): d for d in dataflow.domains.values()}.values()):
        stop = math.ceil(REGION_FROM * n)
        if (
            failed is None
            or failed == "all"
            or rollback_region(t, [t.index[p] for p in failed], stop) >= stop
        ):
            return "vectorised"
        return "worklist"  # little can roll back: the worklist touches only that
    if n >= VECTORISE_FROM and t.lex_plain:
        return "vectorised"  # a loop job of plain prefix checkpoints (falkirk.solver.vectorised.loops)
    return "worklist"


def rollback_region(table: Table, failed: Sequence[int], stop: int) -> int:
    """How many processors a rollback of ``failed`` can reach, counted up to ``stop``.

    The region is the closure of the failed processors (indices into
    ``table.names``) downstream along every edge (C3: a receiver has
    received messages its sender will send again) and upstream along the
    unlogged ones (C2: a sender must regenerate what its receiver lost).
    Only processors in it can leave their live frontier, so it bounds the
    worklist's examinations; where every live frontier is ``⊤`` it is
    exactly the set that moves. Cost: ``O(E)`` array work for the adjacency,
    then a walk of at most ``stop`` processors.

    >>> import numpy as np
    >>> from falkirk.solver.model.table import Table
    >>> t = Table(["a", "b", "c", "d"], np.array([0, 1, 2]), np.array([1, 2, 3]),
    ...           np.array([True, False, False]), np.zeros(4, bool))  # a → b logged
    >>> rollback_region(t, [1], 10), rollback_region(t, [0], 10), rollback_region(t, [3], 10), rollback_region(t, [0], 2)
    (3, 4, 3, 2)
    """
    count = len(set(failed))
    if count >= stop or not table.m:
        return count
    up = ~np.asarray(table.logged, dtype=bool)
    frm = np.concatenate([table.src, table.dst[up]])
    to = np.concatenate([table.dst, table.src[up]])
    order = np.argsort(frm, kind="stable")
    ptr = np.zeros(table.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(frm, minlength=table.n), out=ptr[1:])
    nbr, at = to[order].tolist(), ptr.tolist()
    seen = bytearray(table.n)
    todo = list(set(failed))
    for i in todo:
        seen[i] = 1
    while todo:
        u = todo.pop()
        for v in nbr[at[u] : at[u + 1]]:
            if not seen[v]:
                seen[v] = 1
                count += 1
                if count >= stop:
                    return count
                todo.append(v)
    return count


def solve(view: View, *, strategy: Strategy = "auto", fast: bool | None = None) -> FixedPoint:
    """The fixed point of SPEC §5 over ``view``, by the solver :func:`choose` picks.

    When ``"auto"`` picks the vectorised solver but it turns out not to
    apply (e.g. projections whose frontiers do not close over a small
    universe), the worklist runs instead. ``fast=`` is a deprecated alias.
    """
    strategy = strategy_of(strategy, fast)
    chosen = choose(view.df, strategy=strategy, failed=view.failed)
    if chosen == "vectorised":
        try:
            f, n, work = (
                solve_columns(view.df, view.failed) or solve_loops(view.df, view.failed) or solve_view(view)
            )
        except NotApplicable:
            if strategy == "vectorised":
                raise
        else:
            return FixedPoint(f, n, LazyReasons(view), work)  # type: ignore[arg-type]
        chosen = "worklist"
    return fixed_point(view, strategy=chosen)  # type: ignore[arg-type]


def fixed_point(view: View, *, strategy: Literal["worklist", "round_robin"] = "worklist") -> FixedPoint:
    """Run the iteration of SPEC §5 over ``view`` with one of the two scalar drivers.

    ``"worklist"`` re-examines only processors whose constraints changed
    (:func:`falkirk.solver.worklist.run_worklist`); ``"round_robin"`` is the
    reference scan (:func:`falkirk.solver.fixpoint.round_robin`). Both reach
    the same fixed point.
    """
    if strategy == "worklist":
        return run_worklist(view)
    if strategy == "round_robin":
        return round_robin(view)
    raise ValueError(f"unknown strategy {strategy!r}: use 'worklist' or 'round_robin'")
