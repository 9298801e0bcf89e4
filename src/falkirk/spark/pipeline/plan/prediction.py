"""What one failure costs under an assignment of regimes: :func:`predict` and its :class:`Prediction`.

The same cost model the advisor weighs (:mod:`~falkirk.spark.pipeline.plan.advisor`, ``docs/advisor.md``),
for one failure named by the user — a step, ``"driver"`` or steps failing together — at a moment or averaged
over the moments it can strike at, each figure with the standard error the costs' draws give. Also
:func:`show_regime`, a regime in short, as the advice's table and the predictions print it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from attrs import field, frozen

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.regimes import Keyed, Lazy, Regime
from falkirk.spark.pipeline.plan.advisor import (
    EXACT_SOLVES,
    Model,
    exact_solves,
    failure_kinds,
    regimes_of,
    spacing,
)
from falkirk.spark.pipeline.plan.costs import Costs, Estimate

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = ["Prediction", "predict", "show_regime", "kind_name", "MODEL_ERROR"]

#: The relative error the cost model's own predictions are allowed against measured runs (the checks of
#: ``benchmarks/spark_advisor.py --check``: ±25 %); a change must save more than it on what the change trades.
MODEL_ERROR = 0.25


def show_regime(r: Regime) -> str:
    """A regime in short: ``Lazy(every=3, log=True)``.

    >>> show_regime(Lazy(every=3, log=True)), show_regime(Lazy(key="u", incremental=True))
    ('Lazy(every=3, log=True)', 'Lazy(incremental=True)')
    """
    args = []
    if isinstance(r, Lazy) and not r.incremental:
        args.append(f"every={r.every}")
    if isinstance(r, Keyed) and r.incremental:
        args.append("incremental=True")
    if r.logs and r.kind != "batch":
        args.append("log=True")
    return f"{type(r).__name__}({', '.join(args)})"


def kind_name(kind: tuple[str, ...]) -> str:
    """A failure kind's name: ``"driver"`` for every node, else its steps joined by ``+``."""
    return "driver" if kind == ("all",) else "+".join(kind)


@frozen
class Prediction:
    """What one failure costs under an assignment of regimes, and what the assignment costs per epoch, each
    with its standard error (:func:`predict`).

    ``recovery`` is one failure of ``failure`` — the redo, restores and replays its rollback plan needs, and
    for a driver the new driver's ``restart`` — averaged over the moments it can strike at (``at=None``) or at
    the moment ``at`` names; ``by_step`` is each step's part of it (the restart apart); ``steady`` and
    ``steady_bytes`` are the assignment's cost per epoch without failures. The unit is the costs' (``unit``:
    CPU seconds of the driver's process tree on a ``local`` master, else wall seconds).
    """

    unit: str
    failure: str
    at: str
    regimes: Mapping[str, str]
    steady: Estimate
    steady_bytes: Estimate
    recovery: Estimate
    by_step: Mapping[str, float]
    restart: float = 0.0
    #: what ``restart`` is made of (:attr:`Costs.restart_parts
    #: <falkirk.spark.pipeline.plan.costs.Costs.restart_parts>`)
    restart_parts: Mapping[str, float] = field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "failure": self.failure,
            "at": self.at,
            "regimes": dict(self.regimes),
            "steady": self.steady.to_json(),
            "steady_bytes": self.steady_bytes.to_json(),
            "recovery": self.recovery.to_json(),
            "by_step": dict(self.by_step),
            "restart": self.restart,
            "restart_parts": dict(self.restart_parts),
            "range": {w: list(self.range(w)) for w in ("recovery", "steady", "steady_bytes")},
        }

    def range(self, what: str = "recovery") -> tuple[float, float]:
        """Where a measured run's ``what`` (``"recovery"``, ``"steady"`` or ``"steady_bytes"``) is expected: the
        prediction ± two standard errors of the costs' draws, widened by the model's own error
        (:data:`MODEL_ERROR` of the value). The standard errors alone say how much the profiles disagree, not
        how far the model is from a run (``benchmarks/advisor_check.py`` measures both)."""
        if what not in ("recovery", "steady", "steady_bytes"):
            raise PipelineError(f"Prediction.range: {what!r} is none of recovery, steady, steady_bytes")
        e: Estimate = getattr(self, what)
        width = 2 * e.se + MODEL_ERROR * abs(e.value)
        return max(0.0, e.value - width), e.value + width

    def __str__(self) -> str:
        u = "CPU-s" if self.unit == "cpu" else "s"
        steps = ", ".join(f"{n} {v:.3g}" for n, v in self.by_step.items() if v > 0) or "nothing"
        parts = (
            f" ({', '.join(f'{k} {v:.3g}' for k, v in self.restart_parts.items())})"
            if len(self.restart_parts) > 1
            else ""
        )
        restart = f" + a new driver's restart {self.restart:.3g}{parts}" if self.restart else ""
        low, high = self.range()
        return (
            f"one failure of {self.failure} ({self.at}): {self.recovery} {u} ({steps}{restart}); a run: "
            f"{low:.3g}–{high:.3g} {u} with the model's ±{100 * MODEL_ERROR:.0f} %; steady "
            f"{self.steady} {u}/epoch, {self.steady_bytes.value / 1e6:.3g} MB/epoch"
        )


def predict(
    pipeline: Definition,
    costs: Costs,
    failure: str | Sequence[str],
    *,
    regimes: Mapping[str, Regime] | None = None,
    at: Any = None,
    exact: bool | None = None,
) -> Prediction:
    """What one failure of ``failure`` costs under ``pipeline``'s regimes changed by ``regimes``, priced with
    ``costs`` as the advisor prices (``docs/advisor.md``), with the standard error the costs' draws give.

    ``failure``: a step's name, ``"driver"`` (every node), or a list of steps failing together. ``at``:
    ``None`` — the mean over the moments it can strike at in a cycle of the checkpoint spacings (what the
    advice weighs); an epoch ``e`` — between epochs ``e`` and ``e + 1``, every step having completed ``e``
    (what ``STEP@e:after`` injects, and :meth:`Pipeline.plan_failure <falkirk.spark.Pipeline.plan_failure>`
    plans); ``(e, step)`` — while ``step`` runs epoch ``e + 1`` (the steps before it in the run order having
    completed it; ``STEP@e+1:mid`` of that step). ``exact``: price with the planner's own plans (``None``:
    when that takes at most :data:`~falkirk.spark.pipeline.plan.advisor.EXACT_SOLVES` solves).

    >>> from falkirk.spark import Costs, Ephemeral, Lazy, NodeCosts, Pipeline
    >>> pipe = Pipeline("memory://falkirk-doc/predict")
    >>> _ = pipe.input("events", "user BIGINT")
    >>> @pipe.step(regime=Lazy(every=3))
    ... def totals(events, *, state): return events, state
    >>> costs = Costs({"events": NodeCosts(compute=0.1), "totals": NodeCosts(compute=2.0, state_write=0.5,
    ...                                                                        state_read=0.4)})
    >>> p = predict(pipe, costs, "totals", at=4)   # after epoch 4: back to its checkpoint of epoch 2
    >>> round(p.recovery.value, 6)   # totals restores 0.4, redoes 2 epochs of 2.0, reads their 2 cuts again (0.1)
    4.6
    >>> print(p)  # doctest: +ELLIPSIS
    one failure of totals (after epoch 4): 4.6 CPU-s (totals 4.6); a run: 3.45–5.75 CPU-s with the model's ±25 %; steady 2.267 CPU-s/epoch, 0 MB/epoch
    """
    if isinstance(failure, str):
        named: Any = failure
    else:
        named = [tuple(failure)]
    kinds = failure_kinds(pipeline, named)
    if len(kinds) != 1 or kinds[0] == ("each-step",):
        raise PipelineError(
            f"predict: failure={failure!r} must name one failure: a step, 'driver' or a list of steps"
        )
    assignment = {**regimes_of(pipeline), **dict(regimes or {})}
    for n in assignment:
        if n not in pipeline.steps:
            raise PipelineError(f"predict: regimes names {n!r}, which is not a step of this pipeline")
    if at is None:
        moments, period = None, math.lcm(*(max(spacing(r), 1) for r in assignment.values()))
        where = "mean over the moments of a cycle"
    elif isinstance(at, int) and not isinstance(at, bool) and at >= 0:
        moments, period, where = [(at, None)], 1, f"after epoch {at}"
    elif (
        isinstance(at, tuple)
        and len(at) == 2
        and isinstance(at[0], int)
        and at[0] >= 0
        and isinstance(at[1], str)
        and at[1] in pipeline.order
    ):
        moments, period, where = [at], 1, f"while {at[1]} runs epoch {at[0] + 1}"
    else:
        raise PipelineError(f"predict: at={at!r} must be None, an epoch >= 0 or (epoch, step)")
    model = Model(pipeline, costs, kinds, period=period, moments=moments)
    if exact is None:
        exact = exact_solves(model, [assignment]) <= EXACT_SOLVES
    ev, draws = model.evaluate_draws([assignment], exact=exact)

    def estimate(get: Any) -> Estimate:
        return Estimate.of(float(get(ev)), [float(get(d)) for d in draws], costs.draws)

    restart = float(costs.restart) if kinds[0] == ("all",) else 0.0
    return Prediction(
        costs.unit,
        kind_name(kinds[0]),
        where,
        {n: show_regime(r) for n, r in assignment.items()},
        estimate(lambda e: e.steady[0]),
        estimate(lambda e: e.steady_bytes[0]),
        estimate(lambda e: e.recovery[0, 0]),
        {n: float(ev.node_recovery[i, 0, 0]) for i, n in enumerate(model.graph.names)},
        restart,
        dict(costs.restart_parts) if restart else {},
    )
