"""What each step costs, as the regime advisor prices it: measured per epoch, or estimated and said so.

A :class:`Costs` holds, per pipeline node, the figures the advisor's cost
model (``docs/advisor.md``) needs, in one unit (CPU seconds of the driver's
process tree, or wall seconds) and bytes:

==================  ==========================================================================
field               what
==================  ==========================================================================
``compute``         running one epoch of the step, without writing its log or checkpoint
                    (an input: reading one epoch's cut)
``log_write``       writing one epoch of its output as a log (``log=True``), and its bytes
``log_read``        reading one logged epoch back (a replay; an input: reading a cut again)
``state_write``     writing one checkpoint of its state, and its bytes
``state_read``      reading a checkpoint back (a restore)
``delta_write``     writing one delta of incremental state, and its bytes (``delta_bytes``);
                    ``None``: not measured, and ``incremental=True`` is not advised
``delta_read``      reading one delta back
``recompute``       running one epoch again in a recovery (default: ``compute``; a measured
                    run's redone epochs are often faster than its first ones)
==================  ==========================================================================

plus ``overhead``, the executor's own work per epoch between the steps
(the same for every assignment of regimes), and ``restart``, what a new
driver's first epoch costs beyond a steady one — a cold JVM and cold
caches, paid once per driver failure whatever the regimes. Figures come from a measured
run's journal, from a profile run (:meth:`Pipeline.profile
<falkirk.spark.Pipeline.profile>`), or are estimated from the others
(:meth:`Costs.complete`); every estimated field is named in
:attr:`NodeCosts.estimated`, and the advice marks what rests on one.

Measured costs carry ``replicates``: other draws of the same figures —
bootstrap resamples of the profile's epochs (``draws="bootstrap"``), or the
profiles :meth:`Costs.median` pooled (``draws="profiles"``). Every
prediction is priced once per draw too, and their spread is its standard
error (an :class:`Estimate`).

>>> c = Costs({"ev": NodeCosts(compute=0.1, log_read=0.1),
...            "cc": NodeCosts(compute=2.0, state_write=0.5, state_bytes=1e6)}, unit="cpu")
>>> full = c.complete(["ev", "cc"])
>>> full["cc"].state_read, sorted(full["cc"].estimated)
(0.375, ['log_bytes', 'log_read', 'log_write', 'recompute', 'state_read'])
>>> Costs.from_json(full.to_json()) == full
True
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from attrs import evolve, field, frozen

from falkirk.spark.errors import PipelineError

__all__ = ["NodeCosts", "Costs", "Estimate", "READ_PER_WRITE", "FIELDS", "UNITS", "DRAWS", "fit_writes"]

#: A read costs this fraction of the matching write when no read was measured (SPARK-NOTES: a Parquet
#: epoch written in 0.2–0.27 s reads back in ~0.18 s).
READ_PER_WRITE = 0.75
#: The figures of a node, in the order of :class:`NodeCosts`.
FIELDS = (
    "compute",
    "log_write",
    "log_bytes",
    "log_read",
    "state_write",
    "state_bytes",
    "state_read",
    "rows",
    "delta_write",
    "delta_bytes",
    "delta_read",
    "recompute",
)
#: The units a measurement can be in.
UNITS = ("cpu", "wall")
#: What :attr:`Costs.replicates` are: none, bootstrap resamples of one profile's epochs, or independent
#: profiles.
DRAWS = ("", "bootstrap", "profiles")


@frozen
class Estimate:
    """A predicted figure and its standard error ``se`` (0: not known); ``low``/``high``: ``value ∓ 2·se``
    (about 95 %), ``relative``: ``2·se / value``.

    >>> e = Estimate(2.0, 0.1)
    >>> str(e), e.low, e.high, e.relative
    ('2 ± 0.2', 1.8, 2.2, 0.1)
    """

    value: float
    se: float = 0.0

    @property
    def low(self) -> float:
        return self.value - 2 * self.se

    @property
    def high(self) -> float:
        return self.value + 2 * self.se

    @property
    def relative(self) -> float:
        return 2 * self.se / abs(self.value) if self.value else 0.0

    def __str__(self) -> str:
        return f"{self.value:.4g} ± {2 * self.se:.2g}" if self.se else f"{self.value:.4g}"

    def to_json(self) -> dict[str, float]:
        return {"value": self.value, "se": self.se, "low": self.low, "high": self.high}

    @classmethod
    def of(cls, value: float, draws: Sequence[float], kind: str) -> Estimate:
        """``value`` with the standard error its ``draws`` give: their standard deviation for bootstrap draws,
        that ÷ √n for ``n`` independent profiles (the error of what pools them); 0 with fewer than two."""
        if len(draws) < 2:
            return cls(float(value), 0.0)
        sd = statistics.stdev(float(d) for d in draws)
        return cls(float(value), sd / math.sqrt(len(draws)) if kind == "profiles" else sd)


def _number(instance: object, attribute: Any, value: float | None) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or math.isinf(value)
    ):
        raise PipelineError(
            f"{type(instance).__name__}: {attribute.name}={value!r} must be a finite number >= 0"
        )


def _points(value: Iterable[Sequence[float]]) -> tuple[tuple[float, float], ...]:
    return tuple((float(b), float(c)) for b, c in value)


def _names(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


@frozen
class NodeCosts:
    """The figures of one node (see the module docstring); ``None``: not known."""

    compute: float = field(default=0.0, validator=_number)
    log_write: float | None = field(default=None, validator=_number)
    log_bytes: float | None = field(default=None, validator=_number)
    log_read: float | None = field(default=None, validator=_number)
    state_write: float | None = field(default=None, validator=_number)
    state_bytes: float | None = field(default=None, validator=_number)
    state_read: float | None = field(default=None, validator=_number)
    #: output rows per epoch (what byte estimates scale with)
    rows: float | None = field(default=None, validator=_number)
    delta_write: float | None = field(default=None, validator=_number)
    delta_bytes: float | None = field(default=None, validator=_number)
    delta_read: float | None = field(default=None, validator=_number)
    recompute: float | None = field(default=None, validator=_number)
    #: the fields that are estimates, not measurements
    estimated: frozenset[str] = field(default=frozenset(), converter=_names)

    def to_json(self) -> dict[str, Any]:
        return {**{f: getattr(self, f) for f in FIELDS}, "estimated": sorted(self.estimated)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> NodeCosts:
        figures: dict[str, Any] = {f: doc.get(f) for f in FIELDS if doc.get(f) is not None}
        return cls(**figures, estimated=frozenset(doc.get("estimated", ())))


def fit_writes(points: list[tuple[float, float]]) -> tuple[float, float]:
    """``cost ≈ a + b·bytes`` by least squares over measured writes (``b >= 0``; one point: ``a`` only)."""
    if not points:
        return 0.0, 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    if len(set(xs)) < 2:
        return statistics.median(ys), 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = max(0.0, sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs))
    return max(0.0, my - b * mx), b


def _parts(value: Mapping[str, float]) -> dict[str, float]:
    return {str(k): float(v) for k, v in value.items()}


def _replicates(value: Iterable[Costs]) -> tuple[Costs, ...]:
    return tuple(value)


def _nodes(value: Mapping[str, NodeCosts]) -> dict[str, NodeCosts]:
    out = dict(value)
    for name, c in out.items():
        if not isinstance(c, NodeCosts):
            raise PipelineError(f"Costs: node {name!r} has {c!r}, expected a NodeCosts")
    return out


@frozen
class Costs:
    """Per-node :class:`NodeCosts` in one ``unit`` (``"cpu"`` or ``"wall"``), the fixed ``overhead`` per
    epoch, ``restart``: what a new driver's first epoch costs beyond a steady one (paid once per driver
    failure, whatever the regimes), ``writes``: writes measured apart from any step, ``spread``: the relative
    standard error of the measured steady cost per epoch (what a predicted saving must exceed to be told from
    noise; 0: unknown), and ``source``: what was measured, for the advice's readers."""

    nodes: Mapping[str, NodeCosts] = field(converter=_nodes)
    unit: str = field(default="cpu")
    overhead: float = field(default=0.0, validator=_number)
    source: str = ""
    restart: float = field(default=0.0, validator=_number)
    #: ``(bytes, cost)`` of writes measured apart from any step
    #: (:mod:`~falkirk.spark.pipeline.run.calibrate`): they join the steps' measured writes in the line that
    #: prices the others
    writes: tuple[tuple[float, float], ...] = field(default=(), converter=_points)
    #: relative standard error of the measured steady cost per epoch
    #: (:func:`~falkirk.spark.pipeline.plan.measured.spread`)
    spread: float = field(default=0.0, validator=_number)
    #: ``(bytes, cost)`` of writes less a count of the same data, measured apart
    #: (:mod:`~falkirk.spark.pipeline.run.calibrate`): what a log adds to a step whose output a job computes
    #: and counts anyway (see :meth:`complete`)
    first_writes: tuple[tuple[float, float], ...] = field(default=(), converter=_points)
    #: the nodes whose output is a frame of their own, first computed by their own job (the journal's
    #: ``fresh``): their log's write would be that job (see :meth:`complete`)
    first_use: frozenset[str] = field(default=frozenset(), converter=_names)
    #: other draws of these figures (each a :class:`Costs` without draws of its own): what :attr:`draws` says
    replicates: tuple[Costs, ...] = field(default=(), converter=_replicates)
    #: what the replicates are (:data:`DRAWS`): bootstrap resamples of one profile's epochs, or the profiles
    #: pooled
    draws: str = field(default="")
    #: what ``restart`` is made of, by part (:func:`~falkirk.spark.pipeline.plan.measured.with_restart`):
    #: ``"cold"`` a new driver's first executions beyond steady ones, ``"rebuild"`` its work outside step
    #: executions (the executor built from the root, the plan, its validation, the restores), ``"session"``
    #: its Python driver's, JVM's and SparkSession's start
    restart_parts: Mapping[str, float] = field(factory=dict, converter=_parts)

    @draws.validator
    def _draws(self, attribute: Any, value: str) -> None:
        if value not in DRAWS:
            raise PipelineError(f"Costs: draws={value!r} must be one of {', '.join(repr(d) for d in DRAWS)}")
        if value and not self.replicates:
            raise PipelineError(f"Costs: draws={value!r} without replicates")

    @unit.validator
    def _unit(self, attribute: Any, value: str) -> None:
        if value not in UNITS:
            raise PipelineError(f"Costs: unit={value!r} must be one of {', '.join(UNITS)}")

    def __getitem__(self, name: str) -> NodeCosts:
        return self.nodes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def complete(self, names: Iterable[str]) -> Costs:
        """Every field of every node in ``names`` filled in: measured where known, estimated otherwise.

        A missing write is priced by a line ``a + b·bytes`` fitted to the
        writes measured anywhere in the pipeline (so the fixed cost of a
        Spark job dominates small writes, as it does when measured) — except
        the log of a node in :attr:`first_use` (its output is computed and
        counted by a job of its own whether it logs or not, and a log's
        write is that job) where :attr:`first_writes` were measured: the
        line fitted to those (a write less a count); missing
        bytes by the node's rows times the median bytes per row measured
        elsewhere; a missing restore (``state_read``) as :data:`READ_PER_WRITE`
        of its write; a missing replay (``log_read``) as :data:`READ_PER_WRITE`
        of the per-byte part ``b·bytes`` alone, because a replayed log is read
        inside its consumer's Spark job, not by a job of its own (so the fixed
        cost of a job is not paid again).
        A node with no figures at all is free to compute (noted as estimated).
        """
        names = list(names)
        writes = [
            (n.log_bytes, n.log_write)
            for n in self.nodes.values()
            if n.log_bytes is not None and n.log_write is not None and "log_write" not in n.estimated
        ]
        writes += [
            (n.state_bytes, n.state_write)
            for n in self.nodes.values()
            if n.state_bytes is not None and n.state_write is not None and "state_write" not in n.estimated
        ]
        a, b = fit_writes([(float(x), float(y)) for x, y in writes] + list(self.writes))
        first = fit_writes(list(self.first_writes)) if self.first_writes else (a, b)
        per_row = [
            n.log_bytes / n.rows
            for n in self.nodes.values()
            if n.log_bytes is not None and n.rows and "log_bytes" not in n.estimated
        ]
        row_bytes = statistics.median(per_row) if per_row else 0.0
        out = {}
        for name in names:
            n = self.nodes.get(name) or NodeCosts(estimated={"compute"})
            est = set(n.estimated)
            values: dict[str, float | None] = {f: getattr(n, f) for f in FIELDS}
            for kind in ("log", "state"):
                if values[f"{kind}_bytes"] is None:
                    values[f"{kind}_bytes"] = (n.rows or 0.0) * row_bytes
                    est.add(f"{kind}_bytes")
                if values[f"{kind}_write"] is None:
                    line = first if kind == "log" and name in self.first_use else (a, b)
                    values[f"{kind}_write"] = line[0] + line[1] * float(values[f"{kind}_bytes"] or 0.0)
                    est.add(f"{kind}_write")
                if values[f"{kind}_read"] is None:
                    write = (
                        float(values[f"{kind}_write"] or 0.0)
                        if kind == "state"
                        else b * float(values[f"{kind}_bytes"] or 0.0)
                    )
                    values[f"{kind}_read"] = READ_PER_WRITE * write
                    est.add(f"{kind}_read")
            if values["recompute"] is None:
                values["recompute"] = values["compute"]
                est.add("recompute")
            if values["delta_write"] is not None and values["delta_read"] is None:
                values["delta_read"] = READ_PER_WRITE * float(values["delta_write"])
                est.add("delta_read")
            out[name] = evolve(n, **values, estimated=frozenset(est))  # type: ignore[arg-type]
        return evolve(self, nodes=out)

    @classmethod
    def median(cls, profiles: Sequence[Costs]) -> Costs:
        """Several profiles of one pipeline (each from its own driver process, say) pooled: every figure the
        median of the profiles that measured it (of those that estimated it where none did; a figure is
        estimated only then), ``overhead``, ``restart`` and ``spread`` the medians, the write points of all;
        the profiles are its ``replicates`` (``draws="profiles"``: each prediction's standard error is their
        spread ÷ √profiles). The same code priced in two driver processes can differ by a fifth per epoch on a
        small machine; the median of a few profiles moves less, and their spread says by how much.

        >>> a = Costs({"x": NodeCosts(compute=1.0, state_write=0.2)}, restart=2.0)
        >>> b = Costs({"x": NodeCosts(compute=1.6, state_write=0.5, estimated={"state_write"})}, restart=4.0)
        >>> c = Costs({"x": NodeCosts(compute=1.2)}, restart=3.0)
        >>> m = Costs.median([a, b, c])
        >>> m["x"].compute, m["x"].state_write, sorted(m["x"].estimated), m.restart
        (1.2, 0.2, [], 3.0)
        """
        if not profiles:
            raise PipelineError("Costs.median: no profiles to pool")
        units = {c.unit for c in profiles}
        if len(units) > 1:
            raise PipelineError(
                f"Costs.median: the profiles are in different units ({', '.join(sorted(units))})"
            )
        med = statistics.median
        nodes = {}
        for name in dict.fromkeys(n for c in profiles for n in c.nodes):
            have = [c.nodes[name] for c in profiles if name in c.nodes]
            values: dict[str, Any] = {}
            estimated = set()
            for f in FIELDS:
                measured = [getattr(n, f) for n in have if getattr(n, f) is not None and f not in n.estimated]
                guessed = [getattr(n, f) for n in have if getattr(n, f) is not None and f in n.estimated]
                if measured:
                    values[f] = med(measured)
                elif guessed:
                    values[f] = med(guessed)
                    estimated.add(f)
            nodes[name] = NodeCosts(**values, estimated=frozenset(estimated))
        return cls(
            nodes,
            unit=profiles[0].unit,
            overhead=med(c.overhead for c in profiles),
            source=f"median of {len(profiles)} profiles: " + "; ".join(c.source for c in profiles),
            restart=med(c.restart for c in profiles),
            writes=[w for c in profiles for w in c.writes],
            spread=med(c.spread for c in profiles),
            first_writes=[w for c in profiles for w in c.first_writes],
            first_use=frozenset().union(*(c.first_use for c in profiles)),
            replicates=tuple(evolve(c, replicates=(), draws="") for c in profiles)
            if len(profiles) > 1
            else (),
            draws="profiles" if len(profiles) > 1 else "",
            restart_parts={
                k: med([c.restart_parts[k] for c in profiles if k in c.restart_parts])
                for k in dict.fromkeys(k for c in profiles for k in c.restart_parts)
            },
        )

    def to_json(self) -> dict[str, Any]:
        """The ``falkirk-costs/1`` document (what ``ROOT/journal/profile.json`` holds)."""
        doc = {
            "format": "falkirk-costs/1",
            "unit": self.unit,
            "overhead": self.overhead,
            "source": self.source,
            "restart": self.restart,
            "writes": [list(w) for w in self.writes],
            "spread": self.spread,
            "first_writes": [list(w) for w in self.first_writes],
            "first_use": sorted(self.first_use),
            "nodes": {n: c.to_json() for n, c in self.nodes.items()},
        }
        if self.restart_parts:
            doc["restart_parts"] = dict(self.restart_parts)
        if self.replicates:
            doc["draws"] = self.draws
            doc["replicates"] = [c.to_json() for c in self.replicates]
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Costs:
        """Parse :meth:`to_json`'s document (``PipelineError`` naming what is wrong)."""
        if not isinstance(doc, Mapping) or doc.get("format") != "falkirk-costs/1":
            raise PipelineError(f"not a falkirk-costs/1 document: {str(doc)[:80]}")
        try:
            return cls(
                {n: NodeCosts.from_json(c) for n, c in doc["nodes"].items()},
                unit=doc["unit"],
                overhead=doc.get("overhead", 0.0),
                source=doc.get("source", ""),
                restart=doc.get("restart", 0.0),
                writes=doc.get("writes", ()),
                spread=doc.get("spread", 0.0),
                first_writes=doc.get("first_writes", ()),
                first_use=doc.get("first_use", ()),
                replicates=tuple(cls.from_json(r) for r in doc.get("replicates", ())),
                draws=doc.get("draws", ""),
                restart_parts=doc.get("restart_parts", {}),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise PipelineError(
                f"falkirk-costs/1 document is malformed ({type(exc).__name__}: {exc})"
            ) from None
