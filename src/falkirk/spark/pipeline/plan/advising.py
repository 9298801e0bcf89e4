"""Computing an advice: :func:`advise` prices the current regimes, searches for a better assignment and
returns an :class:`~falkirk.spark.pipeline.plan.advice.Advice`; :func:`refusals` says which changes a restart
on the existing root would refuse; :data:`MODEL_ERROR` is the cost model's allowed error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.evolution import changes
from falkirk.spark.pipeline.declare.regimes import Keyed, Regime
from falkirk.spark.pipeline.plan.advice import Advice, StepAdvice, Totals
from falkirk.spark.pipeline.plan.advisor import (
    EXACT_SOLVES,
    OBJECTIVES,
    SEARCH_COLUMNS,
    Model,
    exact_solves,
    failure_kinds,
    regimes_of,
    spacing,
)
from falkirk.spark.pipeline.plan.costs import Costs, Estimate
from falkirk.spark.pipeline.plan.prediction import MODEL_ERROR, kind_name
from falkirk.spark.pipeline.plan.search import search

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = ["advise", "refusals", "MODEL_ERROR"]


def _estimated(fields: frozenset[str], *regimes: Regime) -> tuple[str, ...]:
    """The estimated ``fields`` the figures of ``regimes`` rest on."""
    used = {"compute"}
    if any(r.logs for r in regimes):
        used |= {"log_write", "log_bytes", "log_read"}
    if any(not r.stateless and r.kind != "output" for r in regimes):
        used |= {"state_write", "state_bytes", "state_read"}
    if any(isinstance(r, Keyed) and r.incremental for r in regimes):
        used |= {"delta_write", "delta_bytes", "delta_read"}
    return tuple(sorted(fields & used))


def refusals(pipeline: Definition, regimes: Mapping[str, Regime]) -> dict[str, str]:
    """For each step whose regime would change: why a restart on ``pipeline``'s existing root would refuse it
    (steps it accepts are left out; nothing when the root records no pipeline yet)."""
    theirs = pipeline.recorded()
    if theirs is None:
        return {}
    out = {}
    for name, regime in regimes.items():
        if name not in theirs.get("steps", {}):
            continue
        mine = json.loads(json.dumps(pipeline.with_regimes({name: regime}).describe()))
        mine["steps"] = {**theirs["steps"], name: mine["steps"][name]}
        mine["steps"][name]["code"] = theirs["steps"][name].get("code")
        mine["inputs"] = theirs.get("inputs", {})
        try:
            changes(theirs, mine, where=pipeline.location.uri)
        except PipelineError as exc:
            out[name] = str(exc)
    return out


def advise(
    pipeline: Definition,
    costs: Costs,
    failure_rate: float,
    *,
    failures: str | Sequence[Any] = "each-step",
    storage_budget: float | None = None,
    objective: str = "cpu",
    accepted_only: bool = False,
    exact: bool | None = None,
    min_saving: float | None = None,
    allow_domino: bool = False,
) -> Advice:
    """The regime advice for ``pipeline`` priced with ``costs`` (see the module docstring and
    ``docs/advisor.md``).

    ``failure_rate``: expected failures per epoch, each of one of the kinds
    ``failures`` names; ``storage_budget``: at most this many bytes persisted
    per epoch (``None``: no limit); ``objective``: ``"cpu"`` or ``"wall"``
    (costs measured in the other unit are used as they are, and the advice
    says so); ``accepted_only``: consider only changes a restart on the
    existing root accepts; ``exact``: price the current and advised
    assignments with the planner (``None``: when it takes at most
    :data:`~falkirk.spark.pipeline.plan.advisor.EXACT_SOLVES` solves);
    ``min_saving``: keep the current regimes unless the advised ones save at
    least this fraction of the current predicted total (``None``: more than
    the saving's uncertainty, two standard errors of the measurements — the
    costs' draws, each pricing both assignments — combined with the model's
    :data:`MODEL_ERROR` of what the change trades; ``Advice.verdict`` says
    which; ``0``: any saving); ``allow_domino``:
    consider assignments under which a failure sets off a domino (a failure
    in one branch that rolls another back past its latest checkpoint, through
    an unlogged step they share: down to a checkpoint all of them share, to
    empty early in a run). By default the advice never leaves one:
    where the current regimes set one off it advises the cheapest assignment
    that does not (usually ``log=True`` on the unlogged step), whatever the
    saving.
    """
    if (
        isinstance(failure_rate, bool)
        or not isinstance(failure_rate, (int, float))
        or not (failure_rate >= 0 and math.isfinite(failure_rate))
    ):
        raise PipelineError(
            f"advise: failure_rate={failure_rate!r} must be a finite number >= 0 (failures per epoch)"
        )
    if objective not in OBJECTIVES:
        raise PipelineError(f"advise: objective={objective!r} must be one of {', '.join(OBJECTIVES)}")
    if storage_budget is not None and (
        isinstance(storage_budget, bool)
        or not isinstance(storage_budget, (int, float))
        or not storage_budget >= 0
    ):
        raise PipelineError(
            f"advise: storage_budget={storage_budget!r} must be a number of bytes >= 0 or None"
        )
    if not isinstance(costs, Costs):
        raise PipelineError(
            f"advise: costs={costs!r} must be a falkirk.spark Costs (measured, or Costs(...))"
        )
    if min_saving is not None and (
        isinstance(min_saving, bool) or not isinstance(min_saving, (int, float)) or not 0 <= min_saving < 1
    ):
        raise PipelineError(f"advise: min_saving={min_saving!r} must be a fraction in [0, 1) or None")
    if not pipeline.steps:
        raise PipelineError("advise: the pipeline has no steps")
    rate = float(failure_rate)
    kinds = failure_kinds(pipeline, failures)
    model = Model(pipeline, costs, kinds, max_columns=SEARCH_COLUMNS)
    current = regimes_of(pipeline)
    best, points, how = search(
        model, rate, storage_budget=storage_budget, accepted_only=accepted_only, allow_domino=allow_domino
    )
    pair = [current, best]
    # the moments of a failure: a cycle of the two assignments' spacings (each phase once)
    period = math.lcm(*(max(spacing(r), 1) for a in pair for r in a.values()))
    final = Model(pipeline, costs, kinds, period=period) if period != model.period or model.sampled else model
    if exact is None:
        exact = exact_solves(final, pair) <= EXACT_SOLVES
    ev, draws = final.evaluate_draws(pair, exact=exact)
    saving, parts = _saving(ev, draws, rate, costs)
    totals = ev.steady + ev.expected(rate)
    over_budget = storage_budget is not None and ev.steady_bytes[1] > storage_budget >= ev.steady_bytes[0]
    dominoes = _dominoes(final, ev, kinds, 0)
    stops = bool(dominoes) and not allow_domino and best != current and not ev.dominoes[1]
    if dominoes and not allow_domino:
        how += "; the current regimes set off a domino: " + (
            "the advice is the cheapest assignment found that does not"
            if stops
            else "no assignment found stops it"
        )
    base = float(totals[0]) if totals[0] > 0 else 1.0
    pct, band = saving.value / base, 2 * saving.se / base
    if min_saving is not None:
        threshold, rule = float(min_saving), f"min_saving {_pct(float(min_saving))}"
    else:
        threshold = band
        rule = (
            f"the ±{_pct(band)} uncertainty (measurement ±{_pct(2 * parts['measurement'] / base)}, the model's "
            f"±{_pct(2 * parts['model'] / base)})"
        )
    verdict = ""
    if best == current:
        verdict = "keep: no assignment found costs less than the current regimes"
    elif stops:
        verdict = "change: the current regimes set off a domino (below), which the advised ones do not"
    elif over_budget:
        verdict = "keep: the best found is over the storage budget"
    elif pct <= threshold:
        verdict = f"keep: the saving {_pct(pct)} is within {rule}"
    else:
        verdict = f"change: the saving {_pct(pct)} exceeds {rule}"
    if verdict.startswith("keep") and best != current:
        if not over_budget and totals[1] <= totals[0]:  # a saving below what the measurements can resolve
            how += (
                f"; the best found saves {_pct(pct)} of the current total, within "
                f"{rule}: the current regimes are kept"
            )
        best = current
        ev, draws = ev.pick([0, 0]), [d.pick([0, 0]) for d in draws]
        totals = ev.steady + ev.expected(rate)
    names = [kind_name(k) for k in kinds]
    refused = refusals(pipeline, {n: r for n, r in best.items() if r != current[n]})
    index = {n: i for i, n in enumerate(model.graph.names)}
    steps = tuple(
        StepAdvice(
            n,
            current[n],
            best[n],
            (float(ev.node_steady[index[n], 0]), float(ev.node_steady[index[n], 1])),
            (float(ev.node_bytes[index[n], 0]), float(ev.node_bytes[index[n], 1])),
            (
                {k: float(ev.node_recovery[index[n], 0, j]) for j, k in enumerate(names)},
                {k: float(ev.node_recovery[index[n], 1, j]) for j, k in enumerate(names)},
            ),
            refused.get(n),
            _estimated(model.costs[n].estimated, current[n], best[n]),
        )
        for n in pipeline.steps
    )
    tot = [_totals(ev, draws, a, rate, names, costs.draws) for a in (0, 1)]
    unit_note = (
        costs.source
        if costs.unit == objective
        else (
            f"{costs.source + '; ' if costs.source else ''}measured in {costs.unit} seconds, used for the {objective} "
            "objective"
        )
    )
    return Advice(
        costs.unit,
        objective,
        rate,
        tuple(names),
        storage_budget,
        steps,
        tot[0],
        tot[1],
        tuple(points),
        how,
        bool(exact),
        unit_note,
        float(costs.restart) if ("all",) in kinds else 0.0,
        tuple(dominoes),
        saving,
        parts,
        verdict,
        costs.draws,
        len(costs.replicates),
        pipeline=pipeline,
        costs=costs,
    )


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _totals(ev: Any, draws: Sequence[Any], a: int, rate: float, names: Sequence[str], kind: str) -> Totals:
    """Assignment ``a``'s :class:`Totals`, each figure's error from the ``draws``."""

    def se(point: float, values: Sequence[float]) -> float:
        return Estimate.of(point, values, kind).se

    figures = {
        "steady": (float(ev.steady[a]), [float(d.steady[a]) for d in draws]),
        "steady_bytes": (float(ev.steady_bytes[a]), [float(d.steady_bytes[a]) for d in draws]),
        "recovery": (float(ev.expected(rate)[a]), [float(d.expected(rate)[a]) for d in draws]),
        "total": (
            float(ev.steady[a] + ev.expected(rate)[a]),
            [float(d.steady[a] + d.expected(rate)[a]) for d in draws],
        ),
    }
    failures = {
        k: (float(ev.recovery[a, j]), [float(d.recovery[a, j]) for d in draws]) for j, k in enumerate(names)
    }
    errors = {k: se(v, ds) for k, (v, ds) in {**figures, **failures}.items() if draws}
    return Totals(
        figures["steady"][0],
        figures["steady_bytes"][0],
        figures["recovery"][0],
        figures["total"][0],
        {k: v for k, (v, _) in failures.items()},
        errors,
    )


def _saving(ev: Any, draws: Sequence[Any], rate: float, costs: Costs) -> tuple[Estimate, dict[str, float]]:
    """What assignment 1 of ``ev`` saves per epoch against assignment 0, with its standard error: the
    measurements' (the same saving priced by each draw of the costs; without draws, the costs' ``spread`` of
    the steady cost) combined with the model's (:data:`MODEL_ERROR` of the steady cost and of the expected
    recovery the change trades, each a ±2-standard-error band)."""
    total = ev.steady + ev.expected(rate)
    value = float(total[0] - total[1])
    if draws:
        measured = Estimate.of(
            value,
            [float((d.steady + d.expected(rate))[0] - (d.steady + d.expected(rate))[1]) for d in draws],
            costs.draws,
        ).se
    else:
        measured = float(costs.spread) * float(ev.steady[0])
    model = (
        MODEL_ERROR
        / 2
        * math.hypot(float(ev.steady[0] - ev.steady[1]), float(ev.expected(rate)[0] - ev.expected(rate)[1]))
    )
    return Estimate(value, math.hypot(measured, model)), {"measurement": measured, "model": model}


def _dominoes(model: Model, ev: Any, kinds: Sequence[tuple[str, ...]], a: int) -> list[str]:
    """One sentence per failure kind that sets off a domino under assignment ``a`` of ``ev``."""
    names = model.graph.names
    out = []
    for k, kind in enumerate(kinds):
        pushed = [names[i] for i in np.flatnonzero(ev.domino[:, a, k])]
        if pushed:
            out.append(
                f"a failure of {kind_name(kind)} rolls {', '.join(pushed)}, on another branch, back past "
                f"{'its' if len(pushed) == 1 else 'their'} latest checkpoint at or before the failed step's "
                "restore point (through an unlogged step the branches share, down to a checkpoint they all "
                "share: to empty early in a run)"
            )
    return out
