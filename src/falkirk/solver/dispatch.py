"""Which solver :func:`~falkirk.solver.solve_frontiers` runs (SPEC §5): its ``strategy``.

* ``"auto"`` (the default) — the worklist, or the vectorised solver when it
  applies (every domain totally ordered) and the dataflow has at least
  :data:`VECTORISE_FROM` processors and :data:`DENSE_FROM` edges per
  processor, or when a dataflow of at least :data:`VECTORISE_FROM`
  processors is a *loop job* of plain prefix checkpoints
  (:mod:`falkirk.solver.vectorised.loops`, whatever its density); if it then
  turns out not to apply, the worklist.
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

The keyword ``fast=`` of earlier releases is a deprecated alias
(:class:`DeprecationWarning`): ``fast=True`` is ``strategy="auto"``,
``fast=False`` is ``strategy="worklist"`` (with ``strategy`` left at
``"auto"`` or set to ``"worklist"``; other strategies ignore it, as before).

Why those thresholds (``benchmarks/solver.py``): below a thousand processors
both solvers take milliseconds and the worklist's reasons come for free.
Converting a Dataflow to arrays costs time in proportion to the whole graph,
while the worklist's cost is proportional to the part that rolls back; on
the dense families (random DAGs, shuffles) the vectorised solver, conversion
included, is about twice as fast, on chains and loops the two are even (or
the worklist wins when little rolls back). Built straight from arrays
(:meth:`~falkirk.solver.vectorised.problem.TotalProblem.from_epochs`,
:mod:`falkirk.solver.vectorised.stages`) it needs no conversion at all; a
Dataflow of plain epoch processors (:mod:`falkirk.solver.vectorised.columns`)
hands over the columns it keeps (:mod:`falkirk.solver.model.table`) as they
are, without resolving any checkpoint, and its plan decodes frontiers only
when they are read.

Cost: :func:`choose` is ``O(V)`` (a look at every domain) once the size
thresholds are met, ``O(1)`` otherwise.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])], [Edge("ab", "a", "b")])
>>> choose(df), choose(df, strategy="round_robin")
('worklist', 'round_robin')
>>> plan = solve_frontiers(df, ["a"], strategy="vectorised")
>>> plan.to_json()["frontiers"], plan.explain("b")
({'a': 3, 'b': 1}, ['a failed: ⊤ is gone, its best available frontier is 3', 'b top → 1 by C3 on ab: it had received messages that a at 3 will send again'])
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Literal, get_args

from falkirk.solver.fixpoint import FixedPoint, Reason, round_robin
from falkirk.solver.model import Dataflow
from falkirk.solver.model.access import View
from falkirk.solver.vectorised.build import NotApplicable, solve_view
from falkirk.solver.vectorised.columns import solve_columns
from falkirk.solver.vectorised.loops import solve_loops
from falkirk.solver.worklist import run_worklist

__all__ = [
    "Strategy",
    "STRATEGIES",
    "VECTORISE_FROM",
    "DENSE_FROM",
    "strategy_of",
    "choose",
    "solve",
    "LazyReasons",
]

#: What ``solve_frontiers(..., strategy=...)`` accepts.
Strategy = Literal["auto", "worklist", "round_robin", "vectorised"]
#: The strategies, the default first.
STRATEGIES: tuple[str, ...] = get_args(Strategy)

#: Smallest dataflow (in processors) for which ``"auto"`` picks the vectorised solver.
VECTORISE_FROM = 1000
#: ... and the least number of edges per processor (sparse graphs: the worklist is as fast).
DENSE_FROM = 2.0


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


def choose(dataflow: Dataflow, *, strategy: Strategy = "auto", fast: bool | None = None) -> str:
    """The solver :func:`solve` runs for ``dataflow``: ``"vectorised"``, ``"worklist"`` or ``"round_robin"``.

    ``fast=`` is a deprecated alias (see the module docstring).
    """
    strategy = strategy_of(strategy, fast)
    if strategy != "auto":
        return strategy
    n = len(dataflow.processors)
    if n >= VECTORISE_FROM and len(dataflow.edges) >= DENSE_FROM * n and _total(dataflow):
        return "vectorised"
    if n >= VECTORISE_FROM and dataflow._table.lex_plain and not dataflow._table.epoch_plain:
        return "vectorised"  # a loop job of plain prefix checkpoints (falkirk.solver.vectorised.loops)
    return "worklist"


def _total(dataflow: Dataflow) -> bool:
    if dataflow._table.epoch_plain:  # one epoch domain (the columns say so without a pass)
        return True
    return all(d.is_total for d in {id(d): d for d in dataflow.domains.values()}.values())


def solve(view: View, *, strategy: Strategy = "auto", fast: bool | None = None) -> FixedPoint:
    """The fixed point of SPEC §5 over ``view``, by the solver :func:`choose` picks.

    When ``"auto"`` picks the vectorised solver but it turns out not to
    apply (e.g. projections whose frontiers do not close over a small
    universe), the worklist runs instead. ``fast=`` is a deprecated alias.
    """
    strategy = strategy_of(strategy, fast)
    chosen = choose(view.df, strategy=strategy)
    if chosen == "vectorised":
        try:
            f, n, work = solve_columns(view.df, view.failed) or solve_loops(view.df, view.failed) or solve_view(view)
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
