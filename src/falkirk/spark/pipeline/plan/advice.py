"""The advice: each step's current and advised regime, their predicted costs, and how to read and apply them.

:func:`~falkirk.spark.pipeline.plan.advising.advise` prices the current assignment of regimes, searches for a
better one (:func:`~falkirk.spark.pipeline.plan.search.search`) and returns
an :class:`Advice` — a table, a ``falkirk-advice/1`` JSON document, a picture
of the assignments on the overhead × recovery plane — whose
:meth:`Advice.regimes` a pipeline runs with (``Pipeline(..., regimes=...)``
or :meth:`Pipeline.apply <falkirk.spark.Pipeline.apply>`). A change a
pipeline restarted on the existing root would refuse
(:mod:`~falkirk.spark.pipeline.declare.evolution`) is marked with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from attrs import field, frozen

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.regimes import Regime
from falkirk.spark.pipeline.plan.costs import Estimate
from falkirk.spark.pipeline.plan.prediction import Prediction, predict, show_regime

__all__ = ["Advice", "StepAdvice", "Totals"]


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
class Advice:
    """What :func:`~falkirk.spark.pipeline.plan.advising.advise` found (see the module docstring)."""

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
    #: (:data:`~falkirk.spark.pipeline.plan.advising.MODEL_ERROR` of what the change trades)
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
        :func:`~falkirk.spark.pipeline.plan.prediction.predict`."""
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
