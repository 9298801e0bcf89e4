"""The advice: each step's current and advised regime, their predicted costs, and how to read and apply them.

:func:`advise` prices the current assignment of regimes, searches for a
better one (:func:`~falkirk.spark.pipeline.plan.advisor.search`) and returns
an :class:`Advice` — a table, a ``falkirk-advice/1`` JSON document, a picture
of the assignments on the overhead × recovery plane — whose
:meth:`Advice.regimes` a pipeline runs with (``Pipeline(..., regimes=...)``
or :meth:`Pipeline.apply <falkirk.spark.Pipeline.apply>`). A change a
pipeline restarted on the existing root would refuse
(:mod:`~falkirk.spark.pipeline.declare.evolution`) is marked with the reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from attrs import field, frozen

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.evolution import changes
from falkirk.spark.pipeline.declare.regimes import Keyed, Lazy, Regime
from falkirk.spark.pipeline.plan.advisor import (
    EXACT_SOLVES,
    OBJECTIVES,
    SEARCH_COLUMNS,
    Model,
    exact_solves,
    failure_kinds,
    regimes_of,
    search,
    spacing,
)
from falkirk.spark.pipeline.plan.costs import Costs, Estimate

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = [
    "Advice",
    "StepAdvice",
    "Totals",
    "Prediction",
    "advise",
    "predict",
    "show_regime",
    "refusals",
    "MODEL_ERROR",
]

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


def _kind_name(kind: tuple[str, ...]) -> str:
    return "driver" if kind == ("all",) else "+".join(kind)


@frozen
class Totals:
    """An assignment's predicted costs per epoch: ``steady`` (compute and persistence), ``steady_bytes``,
    ``recovery`` (failure rate × mean recovery over the failure kinds), ``total``, and the mean cost of one
    failure of each kind (``per_failure``); ``se``: the standard error of each of them, by the same names (a
    failure's by its kind's name), from the costs' draws (:attr:`Costs.replicates
    <falkirk.spark.pipeline.plan.costs.Costs.replicates>`; empty: none). :meth:`estimate` pairs a figure with
    its error."""

    steady: float
    steady_bytes: float
    recovery: float
    total: float
    per_failure: Mapping[str, float]
    se: Mapping[str, float] = field(factory=dict)

    def estimate(self, what: str) -> Estimate:
        """``"steady"``, ``"steady_bytes"``, ``"recovery"``, ``"total"`` or a failure kind's name, with its
        error."""
        value = (
            getattr(self, what)
            if what in ("steady", "steady_bytes", "recovery", "total")
            else self.per_failure.get(what)
        )
        if value is None:
            raise PipelineError(
                f"Totals.estimate: {what!r} is none of steady, steady_bytes, recovery, total or a "
                f"failure kind ({', '.join(self.per_failure)})"
            )
        return Estimate(float(value), float(self.se.get(what, 0.0)))

    def to_json(self) -> dict[str, Any]:
        return {
            "steady": self.steady,
            "steady_bytes": self.steady_bytes,
            "recovery": self.recovery,
            "total": self.total,
            "per_failure": dict(self.per_failure),
            "se": dict(self.se),
        }


@frozen
class StepAdvice:
    """One step: its current and advised regime, and each one's steady cost, bytes and recovery share (its
    own redo, restore and replay) per failure kind."""

    name: str
    current: Regime
    advised: Regime
    steady: tuple[float, float]
    steady_bytes: tuple[float, float]
    recovery: tuple[Mapping[str, float], Mapping[str, float]]
    #: why a pipeline restarted on the existing root would refuse the change (``None``: it accepts it)
    refused: str | None = None
    #: the step's cost figures that are estimates, not measurements
    estimated: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.advised != self.current

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.name,
            "current": self.current.describe(),
            "advised": self.advised.describe(),
            "current_text": show_regime(self.current),
            "advised_text": show_regime(self.advised),
            "steady": list(self.steady),
            "steady_bytes": list(self.steady_bytes),
            "recovery": [dict(r) for r in self.recovery],
            "refused": self.refused,
            "estimated": list(self.estimated),
        }


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
        }

    def __str__(self) -> str:
        u = "CPU-s" if self.unit == "cpu" else "s"
        steps = ", ".join(f"{n} {v:.3g}" for n, v in self.by_step.items() if v > 0) or "nothing"
        parts = (
            f" ({', '.join(f'{k} {v:.3g}' for k, v in self.restart_parts.items())})"
            if len(self.restart_parts) > 1
            else ""
        )
        restart = f" + a new driver's restart {self.restart:.3g}{parts}" if self.restart else ""
        return (
            f"one failure of {self.failure} ({self.at}): {self.recovery} {u} ({steps}{restart}); steady "
            f"{self.steady} {u}/epoch, {self.steady_bytes.value / 1e6:.3g} MB/epoch"
        )


@frozen
class Advice:
    """What :func:`advise` found (see the module docstring)."""

    unit: str
    objective: str
    failure_rate: float
    failures: tuple[str, ...]
    storage_budget: float | None
    steps: tuple[StepAdvice, ...]
    current: Totals
    advised: Totals
    #: (steady, expected recovery) of every assignment the search evaluated
    evaluated: tuple[tuple[float, float], ...]
    search: str
    #: whether the totals come from the planner's own plans (else from the vectorised closure)
    exact: bool
    source: str = ""
    #: a driver failure's cold start (``Costs.restart``), in each ``per_failure["driver"]`` (0: no driver
    #: kind)
    restart: float = 0.0
    #: the dominoes of the current regimes, one sentence each (:meth:`Model.price
    #: <falkirk.spark.pipeline.plan.advisor.Model.price>`); the advice stops them unless ``allow_domino``
    dominoes: tuple[str, ...] = ()
    #: what the best assignment found saves per epoch against the current one, with the combined error of the
    #: measurements (the costs' draws: each prices both, so what moves both alike cancels) and of the model
    #: (:data:`MODEL_ERROR` of what the change trades)
    saving: Estimate = Estimate(0.0)
    #: the two parts of ``saving``'s error: ``{"measurement": se, "model": se}``
    saving_se: Mapping[str, float] = field(factory=dict)
    #: why the advice changes the regimes or keeps them, in one sentence
    verdict: str = ""
    #: what the costs' draws were (``"bootstrap"``, ``"profiles"``; ``""``: none) and how many
    draws: str = ""
    replicates: int = 0
    _pipeline: Any = field(default=None, eq=False, repr=False, alias="pipeline")
    _costs: Any = field(default=None, eq=False, repr=False, alias="costs")

    def regimes(self) -> dict[str, Regime]:
        """The advised regime of every step whose regime changes (``Pipeline(...,
        regimes=advice.regimes())``)."""
        return {s.name: s.advised for s in self.steps if s.changed}

    def predict(self, failure: str | Sequence[str], *, which: str = "advised", at: Any = None) -> Prediction:
        """What one failure of ``failure`` (a step, ``"driver"``, or steps failing together) costs under the
        advised (``which="advised"``) or the current regimes, priced with this advice's costs:
        :func:`predict`."""
        if which not in ("advised", "current"):
            raise PipelineError(f"Advice.predict: which={which!r} must be 'advised' or 'current'")
        if self._pipeline is None:
            raise PipelineError(
                "Advice.predict: this advice was read from JSON and has no pipeline: use "
                "pipe.predict(failure, regimes=advice.regimes())"
            )
        return predict(
            self._pipeline, self._costs, failure, regimes=self.regimes() if which == "advised" else {}, at=at
        )

    @property
    def refused(self) -> dict[str, str]:
        """The changes a restart on the existing root would refuse, by step, with the reason."""
        return {s.name: s.refused for s in self.steps if s.refused}

    def frontier(self) -> list[tuple[float, float]]:
        """The non-dominated (steady, expected recovery) points among those evaluated, by steady cost."""
        out: list[tuple[float, float]] = []
        for s, r in sorted(set(self.evaluated)):
            if not out or r < out[-1][1]:
                out.append((s, r))
        return out

    def table(self) -> str:
        """The advice as text: a row per step, then the totals."""
        u = "CPU-s" if self.unit == "cpu" else "s"
        rows = [("step", "current", "advised", f"steady {u}/epoch", "recovery share", "note")]
        for s in self.steps:
            share = [sum(r.values()) / max(len(r), 1) for r in s.recovery]
            note = f"refused on this root: {s.refused}" if s.refused else ""
            if s.estimated and not note:
                note = "estimated: " + ", ".join(s.estimated)
            rows.append(
                (
                    s.name,
                    show_regime(s.current),
                    show_regime(s.advised) if s.changed else "=",
                    f"{s.steady[0]:.3g} → {s.steady[1]:.3g}",
                    f"{share[0]:.3g} → {share[1]:.3g}",
                    note,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out = [
            f"advice for failure rate {self.failure_rate:g}/epoch ({', '.join(self.failures)}), {self.objective} "
            f"objective, costs in {u}{' (' + self.source + ')' if self.source else ''}:"
        ]
        out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        for name, t in (("current", self.current), ("advised", self.advised)):
            out.append(
                f"  {name}: steady {t.estimate('steady')} {u}/epoch ({t.steady_bytes / 1e6:.3g} MB), expected "
                f"recovery {t.estimate('recovery')} {u}/epoch, total {t.estimate('total')} {u}/epoch"
            )
        for kind in self.failures:
            out.append(
                f"  one failure of {kind}: {self.current.estimate(kind)} {u} now"
                + (f", {self.advised.estimate(kind)} {u} advised" if self.regimes() else "")
            )
        if self.draws:
            out.append(
                f"  ± two standard errors, from {self.replicates} "
                + (
                    "bootstrap draws of one profile's epochs (profiles in other driver processes differ by "
                    "more: pool several, Costs.median)"
                    if self.draws == "bootstrap"
                    else "profiles"
                )
            )
        if self.restart:
            parts = self._costs.restart_parts if self._costs is not None else {}
            shown = f" ({', '.join(f'{k} {v:.3g}' for k, v in parts.items())})" if len(parts) > 1 else ""
            out.append(
                f"  a driver failure includes a new driver's restart, {self.restart:.4g} {u}{shown} under "
                "any regimes"
            )
        for d in self.dominoes:
            out.append(f"  domino: {d}")
        gain = self.current.total - self.advised.total
        pct = 100 * gain / self.current.total if self.current.total > 0 else 0.0
        if self.verdict:
            out.append(f"  {self.verdict}")
        out.append(
            f"  saving {gain:.4g} {u}/epoch ({pct:.1f} %); search: {self.search}; "
            f"{'exact plans' if self.exact else 'vectorised closure'}"
        )
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        """The ``falkirk-advice/1`` document."""
        return {
            "format": "falkirk-advice/1",
            "unit": self.unit,
            "objective": self.objective,
            "failure_rate": self.failure_rate,
            "failures": list(self.failures),
            "storage_budget": self.storage_budget,
            "steps": [s.to_json() for s in self.steps],
            "current": self.current.to_json(),
            "advised": self.advised.to_json(),
            "frontier": [list(p) for p in self.frontier()],
            "evaluated": len(self.evaluated),
            "search": self.search,
            "exact": self.exact,
            "source": self.source,
            "restart": self.restart,
            "dominoes": list(self.dominoes),
            "saving": self.saving.to_json(),
            "saving_se": dict(self.saving_se),
            "verdict": self.verdict,
            "draws": self.draws,
            "replicates": self.replicates,
        }

    def draw(self, path: str) -> None:
        """The evaluated assignments, their frontier, the current and the advised one on the plane (steady
        overhead per epoch × expected recovery per epoch), to ``path`` (needs matplotlib:
        ``falkirk[draw]``)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise PipelineError(
                f"Advice.draw needs matplotlib (pip install 'falkirk[draw]'): {exc}"
            ) from None
        u = "CPU-s" if self.unit == "cpu" else "s"
        fig, ax = plt.subplots(figsize=(6.4, 4.8))
        pts = np.array(self.evaluated) if self.evaluated else np.zeros((0, 2))
        ax.scatter(pts[:, 0], pts[:, 1], s=6, color="0.75", label=f"evaluated ({len(pts)})")
        front = np.array(self.frontier())
        if len(front):
            ax.step(front[:, 0], front[:, 1], where="post", color="0.3", lw=1, label="frontier")
        for name, t, colour in (("current", self.current, "tab:red"), ("advised", self.advised, "tab:green")):
            ax.scatter(
                [t.steady],
                [t.recovery],
                s=60,
                color=colour,
                zorder=3,
                label=f"{name}: total {t.total:.3g} {u}",
            )
        ax.set_xlabel(f"steady cost per epoch ({u})")
        ax.set_ylabel(f"expected recovery per epoch ({u})")
        ax.set_title(f"regime advice, failure rate {self.failure_rate:g}/epoch")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)

    def __str__(self) -> str:
        return self.table()


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
    names = [_kind_name(k) for k in kinds]
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
                f"a failure of {_kind_name(kind)} rolls {', '.join(pushed)}, on another branch, back past "
                f"{'its' if len(pushed) == 1 else 'their'} latest checkpoint at or before the failed step's "
                "restore point (through an unlogged step the branches share, down to a checkpoint they all "
                "share: to empty early in a run)"
            )
    return out


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
    one failure of totals (after epoch 4): 4.6 CPU-s (totals 4.6); steady 2.267 CPU-s/epoch, 0 MB/epoch
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
        _kind_name(kinds[0]),
        where,
        {n: show_regime(r) for n, r in assignment.items()},
        estimate(lambda e: e.steady[0]),
        estimate(lambda e: e.steady_bytes[0]),
        estimate(lambda e: e.recovery[0, 0]),
        {n: float(ev.node_recovery[i, 0, 0]) for i, n in enumerate(model.graph.names)},
        restart,
        dict(costs.restart_parts) if restart else {},
    )
