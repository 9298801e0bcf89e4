"""The advisor's costs from a root alone: the execution records of a measured run and the manifests.

A durable run records every step execution under the root (``journal/<step>/<epoch>.json``: rows, the first
execution's wall seconds and, on a ``local`` master, its CPU seconds,
:mod:`~falkirk.spark.pipeline.run.journal`) and every checkpoint and log with a manifest (files and sizes).
:func:`from_journal` turns them into :class:`~falkirk.spark.pipeline.plan.costs.Costs`, in CPU seconds of the
process tree where every record has them (a ``local`` master), else in wall seconds:

* in CPU, an execution's cost leaves out what the JVM's JIT compilers
  spent meanwhile (the records' ``jit``,
  :mod:`~falkirk.spark.pipeline.run.cpu`): compiling is a warm-up that
  decays over tens of epochs, and priced as work it made a profile's
  figures depend on the JVM's age (a profile at epochs 11–19 of a JVM
  priced the flagship 27 % above the runs after it) — except in
  ``Costs.restart``, below: a new driver compiles everything again;
* the first epochs recorded warm up the JVM and Spark (:func:`warm_up`:
  the first, and those after it while the JIT is still above twice its
  later rate, at most half of them): with three or more recorded, they are
  left out of the steady figures, and what their executions cost, JIT
  included, beyond the steady ones (like epochs: with a checkpoint or
  without) is ``Costs.restart``, the cold start a driver failure pays
  again;
* a step's execution includes writing its log and its checkpoint, so a
  ``Lazy(every=k>1)`` step's ``compute`` is the median of its epochs without
  a checkpoint and its ``state_write`` the difference of the medians with
  and without one;
* where every epoch writes (``Eager``, ``log=True``), the write is priced
  by the line fitted to the writes measured elsewhere (marked estimated)
  and taken off the median — except a step whose state is its own SQLite
  database (``Eager(database=...)``): its function writes the state inside
  the execution, so all of it is ``compute`` (a redo does it again), and a
  restore is one transaction deleting the rolled-back epochs' rows, priced
  0 (``state_write`` and ``state_read`` 0, marked estimated);
* a recovery's execution of an epoch (``recompute``) is ``compute`` times the
  median ratio of the redone executions to their first ones (less JIT), pooled over
  all steps (a property of the run: warm caches, no input to cut; one
  step's few redos are noise, and an unlogged step's include the replay
  of its input, which the model prices apart), where the root records
  some (else ``compute``);
* a step whose output is a frame of its own, first computed by the step's
  own job (its records say ``fresh``: not its state, not an input passed
  through; not through Spark Connect) has that output computed and counted
  by one job whether it logs or not, and a log's write is that job: with
  ``first_writes`` (a write less a count of the same data, measured apart)
  its log is priced by the line fitted to those instead (``Costs.first_use``);
* ``writes``: ``(bytes, cost)`` of writes measured apart from any step
  (:meth:`Pipeline.profile <falkirk.spark.Pipeline.profile>` makes them,
  :mod:`~falkirk.spark.pipeline.run.calibrate`) join the measured
  checkpoints in the line ``a + b·bytes``;
* bytes are the medians of the manifests' sizes (deltas of incremental
  state apart); reads are :data:`~falkirk.spark.pipeline.plan.costs.READ_PER_WRITE`
  of the writes (estimated), except those measured apart (``reads``, from
  :meth:`Pipeline.profile <falkirk.spark.Pipeline.profile>`): a restore is
  its read job, a replay that job less the same job on the in-memory copy;
* ``spread``: the steady epochs' summed deviations from each step's median
  (like epochs alike) give the relative standard error of the steady cost
  per epoch (:func:`spread`); ``advise`` keeps the current regimes when the
  best assignment it finds saves less than that (a saving the measurements
  cannot tell from noise).

:func:`save_profile` writes a :class:`Costs` to ``ROOT/journal/profile.json``
(what :meth:`Pipeline.profile <falkirk.spark.Pipeline.profile>` measured);
:func:`root_costs` prefers it, and falls back on :func:`from_journal`.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from attrs import evolve

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.regimes import Keyed, Lazy
from falkirk.spark.pipeline.plan.costs import Costs, NodeCosts, fit_writes
from falkirk.spark.pipeline.store.manifest import Manifest
from falkirk.spark.pipeline.store.storage import Storage

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = ["PROFILE", "REPLICATES", "from_journal", "root_costs", "save_profile", "spread", "with_restart"]

#: Where :func:`save_profile` keeps measured costs, relative to the root.
PROFILE = "journal/profile.json"


def _records(pipeline: Definition, name: str) -> dict[int, dict[str, Any]]:
    """``epoch -> record`` of ``name``'s executions recorded under the root (each readable record's JSON)."""
    out: dict[int, dict[str, Any]] = {}
    root = pipeline.location
    for f in root.listdir(f"journal/{name}"):
        if not (f.endswith(".json") and f[:-5].isdigit()):
            continue
        try:
            doc = json.loads(root.read_bytes(f"journal/{name}/{f}"))
            doc["first_seconds"] = float(doc.get("first_seconds") or doc["seconds"])
            doc["rows"] = int(doc["rows"])
            out[int(doc["epoch"])] = doc
        except (OSError, ValueError, KeyError, TypeError):
            continue  # advisory records: a damaged one only costs a measurement
    return out


def _measure(
    recs: dict[int, dict[str, Any]], unit: str
) -> tuple[dict[int, tuple[float, int]], list[float], dict[int, float]]:
    """``epoch -> (seconds, rows)`` of the first executions in ``unit`` (CPU: less the JIT compilers' share,
    where recorded), for each epoch whose latest execution was a recovery's its seconds ÷ the first's (both
    less JIT), and ``epoch ->`` the JIT compilers' seconds left out."""
    now, first = ("cpu", "first_cpu") if unit == "cpu" else ("seconds", "first_seconds")
    out: dict[int, tuple[float, int]] = {}
    ratios: list[float] = []
    jits: dict[int, float] = {}
    for e, doc in recs.items():
        jits[e] = float(doc.get("first_jit") or 0.0) if unit == "cpu" else 0.0
        f = max(0.0, float(doc[first]) - jits[e])
        out[e] = (f, doc["rows"])
        if doc.get("redo") and not doc.get("discarded") and f > 0 and doc.get(now) is not None:
            again = float(doc[now]) - (float(doc.get("jit") or 0.0) if unit == "cpu" else 0.0)
            ratios.append(max(0.0, again) / f)
    return out, ratios, jits


def _manifests(storage: Storage, name: str, kind: str) -> list[Manifest]:
    out = []
    for e in storage.epochs(name, kind):
        try:
            out.append(storage.get(name, kind, e))
        except Exception:  # noqa: BLE001 - an unreadable manifest only costs a measurement here
            continue
    return out


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def warm_up(jits: Mapping[int, float]) -> list[int]:
    """The epochs of one step that warm up a new driver, from ``epoch -> `` the JIT compilers' seconds during its
    execution: the first epoch, and each one after it while the JIT is still above twice its rate in the later
    half of the epochs (and a tick) — at most half of the epochs, so that the steady figures keep the rest. A
    JVM compiles its hot code over the first executions of each kind (the first epoch, the first checkpoint): at
    10^7 keys that took three epochs of 1.7–2.2× a steady one's CPU, JIT and interpreted code together. In wall
    seconds (no JIT recorded), the first epoch alone.

    >>> warm_up({0: 4.9, 1: 3.5, 2: 3.3, 3: 0.95, 4: 0.83, 5: 1.5, 6: 0.5, 7: 0.36, 8: 0.69, 9: 0.33})
    [0, 1, 2]
    >>> warm_up({0: 0.0, 1: 0.0, 2: 0.0}), warm_up({3: 2.0, 4: 2.0, 5: 0.1, 6: 0.1}), warm_up({3: 2.0, 4: 2.0})
    ([0], [3, 4], [3])
    """
    epochs = sorted(jits)
    if not epochs:
        return []
    later = [jits[e] for e in epochs[len(epochs) // 2 :]]
    above = 2 * statistics.median(later) + 0.01
    out = [epochs[0]]
    for e in epochs[1 : len(epochs) // 2]:
        if jits[e] <= above:
            break
        out.append(e)
    return out


def _alike(items: Sequence[tuple[int, float, int]], regime: Any, epoch: int) -> list[float]:
    """The costs of the ``(epoch, cost, rows)`` ``items`` like ``epoch``: a ``Lazy(every=k>1)`` step's with a
    checkpoint or without, as ``epoch`` is; any other step's all."""
    return [
        s
        for e, s, _ in items
        if not isinstance(regime, Lazy)
        or regime.incremental
        or regime.checkpoints_at(e) == regime.checkpoints_at(epoch)
    ]


def spread(residuals: Mapping[int, float], steady: float) -> float:
    """The relative standard error of a steady cost per epoch: ``residuals`` (per epoch, the executions'
    summed deviation from their steps' medians) over ``steady`` (the steps' mean epochs, summed), ÷ √epochs; 0
    with fewer than 2.

    >>> round(spread({1: 0.1, 2: -0.1, 3: 0.0, 4: 0.2}, 4.0), 4)
    0.0161
    """
    xs = list(residuals.values())
    if len(xs) < 2 or steady <= 0:
        return 0.0
    return statistics.stdev(xs) / steady / math.sqrt(len(xs))


#: Bootstrap draws :func:`from_journal` adds to the costs it measures (``Costs.replicates``).
REPLICATES = 40


def from_journal(
    pipeline: Definition,
    *,
    calibration: Sequence[tuple[float, float]] = (),
    reads: Mapping[tuple[str, str], tuple[float, float]] | None = None,
    first_writes: Sequence[tuple[float, float]] = (),
    replicates: int = REPLICATES,
    seed: int = 0,
) -> Costs:
    """Costs from the execution records and manifests under ``pipeline``'s root (see above); ``calibration``:
    writes measured apart, ``first_writes``: the same writes less a count of the same data, ``reads``: per
    ``(step, "checkpoint" | "log")``, ``(restore, replay)`` measured apart
    (:func:`~falkirk.spark.pipeline.run.calibrate.calibrate`).

    In CPU seconds when every record has them (a run on a ``local`` master,
    :mod:`~falkirk.spark.pipeline.run.cpu`), else in wall seconds. With
    ``replicates`` (default :data:`REPLICATES`) the costs carry as many
    bootstrap draws (``draws="bootstrap"``): the same figures from the steady
    epochs drawn with replacement (one draw of epochs for every step, so what
    moves a whole epoch moves them together), the redone executions' ratios,
    the manifests' sizes and the writes measured apart likewise (seeded by
    ``seed``: the same journal gives the same draws).
    """
    storage = Storage(pipeline.location, fsync=False, checksums=False)
    records = {n: _records(pipeline, n) for n in pipeline.order}
    every = [doc for recs in records.values() for doc in recs.values()]
    unit = "cpu" if every and all(doc.get("first_cpu") is not None for doc in every) else "wall"
    sizes: dict[str, dict[str, list[float]]] = {}
    for n in pipeline.order:
        regime = pipeline.steps[n].regime if n in pipeline.steps else None
        logs = [m for m in _manifests(storage, n, "log") if m.files] if regime is not None else []
        cks = [m for m in _manifests(storage, n, "checkpoint") if m.files] if regime is not None else []
        sizes[n] = {
            "log_bytes": [float(sum(f.size for f in m.files)) for m in logs],
            "state_bytes": [
                float(sum(f.size for f in m.files))
                for m in cks
                if not (m.extra.get("delta") or {}).get("chain")
            ],
            "delta_bytes": [
                float(sum(f.size for f in m.files)) for m in cks if (m.extra.get("delta") or {}).get("chain")
            ],
        }
    args = (pipeline, records, unit, sizes, list(calibration), reads, list(first_writes))
    point = _figures(*args, None)
    if replicates < 2:
        return point
    rng = random.Random(seed)
    draws = tuple(_figures(*args, rng) for _ in range(replicates))
    return evolve(point, replicates=draws, draws="bootstrap")


def _figures(
    pipeline: Definition,
    records: Mapping[str, dict[int, dict[str, Any]]],
    unit: str,
    sizes: Mapping[str, Mapping[str, list[float]]],
    calibration: list[tuple[float, float]],
    reads: Mapping[tuple[str, str], tuple[float, float]] | None,
    first_writes: list[tuple[float, float]],
    rng: random.Random | None,
) -> Costs:
    """:func:`from_journal`'s figures; with ``rng`` one bootstrap draw of them (see there)."""

    def draw(xs: list[Any]) -> list[Any]:
        return xs if rng is None or not xs else [rng.choice(xs) for _ in xs]

    figures: dict[str, dict[str, float | None]] = {}
    estimated: dict[str, set[str]] = {}
    mixed: dict[str, list[str]] = {}  # per node: the writes its median execution includes
    redo_ratios: list[float] = []  # every step's: a recovery's execution of an epoch ÷ its first
    measured_epochs = 0
    restart = 0.0  # the warm-up epochs' executions beyond steady ones: a new driver's cold start
    jit = 0.0  # the JIT compilers' CPU left out of the executions' measurements
    # per steady epoch: Σ over steps of (execution - its step's median alike)
    residuals: dict[int, float] = {}
    steady = 0.0
    epochs = sorted({e for recs in records.values() for e in recs})
    chosen = draw(epochs)  # one draw of epochs for every step
    for n in pipeline.order:
        measured, ratios, jits = _measure(records[n], unit)
        jit += sum(jits.values())
        regime = pipeline.steps[n].regime if n in pipeline.steps else None
        warm = warm_up(jits) if len(measured) > 2 else []  # warms up the JVM and Spark: not steady epochs
        items = [(e, *measured[e]) for e in chosen if e in measured and e not in warm]
        if not items:
            items = [(e, sec, rows) for e, (sec, rows) in measured.items() if e not in warm]
        for e in warm:
            cold = measured[e][0] + jits[e]  # all of it, JIT included: what a new driver pays again
            restart += cold - statistics.median(_alike(items, regime, e) or [s for _, s, _ in items])
        measured_epochs += len(items)
        if rng is None:
            for e, sec, _ in items:
                residuals[e] = residuals.get(e, 0.0) + sec - statistics.median(_alike(items, regime, e))
        steady += statistics.mean([x for _, x, _ in items]) if items else 0.0
        seconds = [x for _, x, _ in items]
        fig: dict[str, float | None] = {
            "rows": _median([float(r) for _, _, r in items if r >= 0]),  # -1: not known (a failed consumer)
            **{k: _median(draw(v)) for k, v in sizes[n].items()},
        }
        est: set[str] = set()
        fig["compute"] = _median(seconds)
        writes: list[str] = []
        if regime is not None and regime.logs:
            writes.append("log")
        if isinstance(regime, Lazy) and not regime.incremental and regime.every > 1 and items:
            with_ck = [x for e, x, _ in items if regime.checkpoints_at(e)]
            without = [x for e, x, _ in items if not regime.checkpoints_at(e)]
            if with_ck and without:
                fig["compute"] = statistics.median(without)
                fig["state_write"] = max(0.0, statistics.median(with_ck) - statistics.median(without))
        elif getattr(regime, "database", None):
            # state in the step's own SQLite database: written by its function, inside its execution (no
            # Parquet checkpoint to take apart), restored by one transaction deleting the rolled-back epochs'
            # rows (DatabaseRunner.reset: no Spark job, milliseconds): both inside what is measured, priced 0
            # apart
            fig["state_write"] = fig["state_read"] = 0.0
            est |= {"state_write", "state_read"}
        elif regime is not None and not regime.stateless and regime.kind != "output":
            writes.append("delta" if isinstance(regime, Keyed) and regime.incremental else "state")
        if fig["compute"] is None:
            fig["compute"] = 0.0
            est.add("compute")
        figures[n], estimated[n], mixed[n] = fig, est, writes
        redo_ratios += ratios
    if measured_epochs == 0:
        raise PipelineError(
            f"{pipeline.location.uri} holds no measurements (no journal/<step>/<epoch>.json): run "
            "the pipeline durably for a few epochs, or pipe.profile(epochs=n), then advise"
        )
    calibration, first_writes = draw(calibration), draw(first_writes)
    points = [
        (float(f.get("state_bytes") or 0.0), float(f["state_write"] or 0.0))
        for f in figures.values()
        if f.get("state_write") is not None
    ]  # bytes unknown (no manifest kept): the fixed cost alone
    # measured apart from any step (Pipeline.profile)
    points += [(float(b), float(c)) for b, c in calibration]
    a, b = fit_writes(points)
    # a log that is written by the job computing and counting its step's output anyway adds a write less a
    # count (Costs.complete)
    first_line = fit_writes([(float(x), float(y)) for x, y in first_writes]) if first_writes else (a, b)
    # the steps whose records say their output was a frame of their own (most of them: an injected failure
    # wraps a state that is the output in a new frame for its epoch)
    first_use = {
        n
        for n, recs in records.items()
        if sum(1 if r.get("fresh") else -1 for r in recs.values() if r.get("fresh") is not None) > 0
    }
    ratio = _median(draw(redo_ratios))
    for n, writes in mixed.items():
        fig = figures[n]
        for kind in writes:
            nbytes = fig.get(f"{kind}_bytes")
            fa, fb = first_line if kind == "log" and n in first_use else (a, b)
            cost = fa + fb * float(nbytes or 0.0)
            fig[f"{kind}_write"] = cost
            fig["compute"] = max(0.0, float(fig["compute"] or 0.0) - cost)
            estimated[n] |= {f"{kind}_write", "compute"}
        if ratio is not None:
            fig["recompute"] = float(fig["compute"] or 0.0) * ratio
    applied = {key: value for key, value in (reads or {}).items() if key[0] in figures}
    # measured apart: a restore is its own read job, a replay what reading adds to its consumer's job
    for (n, kind), (restore, replay) in applied.items():
        read, value = ("state_read", restore) if kind == "checkpoint" else ("log_read", replay)
        figures[n][read] = value
        estimated[n].discard(read)
    nodes = {
        n: NodeCosts(**{k: v for k, v in fig.items() if v is not None}, estimated=estimated[n])
        for n, fig in figures.items()
    }
    source = (
        f"journal of {measured_epochs} step execution(s) under the root "
        f"({'CPU of the process tree' if unit == 'cpu' else 'wall time'}"
        + (f", less {jit:.3g} s of the JVM's JIT compilation" if jit else "")
        + ")"
    )
    if mixed and any(mixed.values()) and not any(y > 0 for _, y in points):
        source += (
            "; no checkpoint write was measured above zero (a Lazy(every=k>1) step's epochs with and without "
            "one): every write is priced at 0 — profile more epochs, or with Pipeline.profile"
        )
    if calibration:
        source += f"; {len(calibration)} write(s) measured apart from the steps"
    if applied:
        source += f"; {len(applied)} read(s) measured apart"
    if first_writes:
        source += "; a log that is its step's first job priced as a write less a count"
    return Costs(
        nodes,
        unit=unit,
        source=source,
        restart=max(0.0, restart),
        restart_parts={"cold": max(0.0, restart)},
        writes=tuple(calibration),
        spread=spread(residuals, steady) if rng is None else 0.0,
        first_writes=tuple(first_writes),
        first_use=first_use,
    )


def with_restart(costs: Costs, **parts: float | None) -> Costs:
    """``costs`` (and each of its draws) with a driver failure's ``restart`` made of its measured ``parts`` —
    ``rebuild`` (what a restart spends outside step executions), ``session`` (a driver's, JVM's and
    SparkSession's start) — beside the ``cold`` start the journal measured (:attr:`Costs.restart_parts`); a
    part that is ``None`` is left out.

    >>> c = with_restart(Costs({}, restart=2.0, restart_parts={"cold": 2.0}), rebuild=1.5, session=None)
    >>> c.restart, c.restart_parts
    (3.5, {'cold': 2.0, 'rebuild': 1.5})
    """
    given = {k: float(v) for k, v in parts.items() if v is not None}

    def one(c: Costs) -> Costs:
        mine = {"cold": float(c.restart_parts.get("cold", c.restart)), **given}
        return evolve(c, restart=sum(mine.values()), restart_parts=mine)

    return evolve(one(costs), replicates=tuple(one(r) for r in costs.replicates))


def save_profile(pipeline: Definition, costs: Costs) -> None:
    """Keep ``costs`` under the root (``journal/profile.json``), for ``falkirk pipeline advise ROOT``."""
    pipeline.location.replace(PROFILE, json.dumps(costs.to_json(), sort_keys=True, indent=1).encode())


def root_costs(pipeline: Definition) -> Costs:
    """The costs kept under the root (``journal/profile.json``), else measured from its journal."""
    try:
        data = pipeline.location.read_bytes(PROFILE)
    except FileNotFoundError:
        return from_journal(pipeline)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PipelineError(
            f"{pipeline.location.uri}/{PROFILE} is not valid JSON ({exc}); delete it to measure "
            "from the journal"
        ) from None
    return Costs.from_json(doc)
