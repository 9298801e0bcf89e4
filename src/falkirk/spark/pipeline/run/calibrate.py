"""Writes measured apart from any step: what :meth:`Pipeline.profile <falkirk.spark.Pipeline.profile>` adds to
the journal's figures.

A step's execution includes its own writes (Spark computes what it writes
while writing it), so the journal measures a write only as the difference
between a ``Lazy(every=k>1)`` step's epochs with and without a checkpoint —
noise where the state is small (a profile once measured the flagship's
checkpoint at 0.00 CPU-s, and every write was then priced at nothing).
:func:`calibrate_writes` writes again, through the root's own storage
(Parquet, checksums and fsync as the pipeline is configured), the latest
checkpoint and log of every step the run persisted, from data already held
in memory, and measures each write as the journal measures a step: CPU of
the driver's process tree on a ``local`` master, else wall seconds. The
``(bytes, cost)`` points join the journal's in the line ``a + b·bytes``
that prices every write the run did not measure
(:meth:`Costs.complete <falkirk.spark.pipeline.plan.costs.Costs.complete>`).
What it writes is under ``journal/calibration/`` and deleted before it
returns.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

from falkirk.spark.pipeline.run.cpu import meter
from falkirk.spark.pipeline.store.storage import Manifest, Storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = ["calibrate_writes", "SCRATCH"]

#: Where the calibration writes, relative to the root (deleted afterwards).
SCRATCH = "journal/calibration"


def _latest(storage: Storage, step: str, kind: str) -> Manifest | None:
    for e in reversed(storage.epochs(step, kind)):
        try:
            m = storage.get(step, kind, e)
        except Exception:  # noqa: BLE001 - an unreadable manifest only costs a measurement here
            continue
        if m.files and not (m.extra.get("delta") or {}).get("chain"):
            return m
    return None


def calibrate_writes(pipeline: Definition, spark: SparkSession, *, repeats: int = 3) -> list[tuple[float, float]]:
    """``(bytes, cost)`` of writing again each step's latest checkpoint and log (median of ``repeats`` writes;
    cost in the journal's unit, see the module docstring)."""
    storage = Storage(pipeline.location, fsync=pipeline.fsync, checksums=pipeline.checksums)
    cpu = meter(spark)
    items = [m for n in pipeline.steps for kind in ("checkpoint", "log") if (m := _latest(storage, n, kind))]
    points: list[tuple[float, float]] = []
    try:
        for i, m in enumerate(items):
            df = storage.read_frame(spark, m, verify=False).persist()
            try:
                df.count()  # in memory: the writes below measure writing, not reading
                costs = []
                for r in range(repeats):
                    t0, c0 = time.perf_counter(), cpu() if cpu is not None else None
                    storage.write_frame(df, m.step, "calibration", m.epoch, m.rows, location=f"{SCRATCH}/{i}-{r}")
                    c1 = cpu() if cpu is not None else None
                    costs.append(c1 - c0 if c0 is not None and c1 is not None else time.perf_counter() - t0)
            finally:
                df.unpersist()
            points.append((float(sum(f.size for f in m.files)), statistics.median(costs)))
    finally:
        if pipeline.location.exists(SCRATCH):
            pipeline.location.delete(SCRATCH, recursive=True)
    return points
