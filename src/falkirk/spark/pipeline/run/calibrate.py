"""Writes measured apart from any step: what :meth:`Pipeline.profile <falkirk.spark.Pipeline.profile>` adds to
the journal's figures.

A step's execution includes its own writes (Spark computes what it writes
while writing it), so the journal measures a write only as the difference
between a ``Lazy(every=k>1)`` step's epochs with and without a checkpoint —
noise where the state is small (a profile once measured the flagship's
checkpoint at 0.00 CPU-s, and every write was then priced at nothing).
:func:`calibrate` writes again, through the root's own storage
(Parquet, checksums and fsync as the pipeline is configured), the latest
checkpoint and log of every step the run persisted, from data already held
in memory, and measures each write as the journal measures a step: CPU of
the driver's process tree on a ``local`` master, else wall seconds —
each item at its own size and at :data:`SCALE` times its rows (the copy in
memory repeated), so that the points span sizes and fix the line's slope,
not only its fixed part. The
``(bytes, cost)`` points join the journal's in the line ``a + b·bytes``
that prices every write the run did not measure
(:meth:`Costs.complete <falkirk.spark.pipeline.plan.costs.Costs.complete>`).
What it writes is under ``journal/calibration/`` and deleted before it
returns.

:func:`calibrate` also measures reading each of those items back from the
root as a recovery does (checksums verified, every column read: a job
hashing each row), against the same job on the copy held in memory:

* a **restore** (``state_read``) is a job of its own that reads the
  checkpoint back: the whole read job is its cost;
* a **replay** (``log_read``) is read inside its consumer's job, in place of
  the output the consumer would have had in memory: its cost is the read
  job less the same job on the in-memory copy (at least 0).

A step's measured reads replace the estimates (``READ_PER_WRITE`` of a
write) for that step (:func:`~falkirk.spark.pipeline.plan.measured.from_journal`).

Each write is alternated with a count of the same in-memory copy: a step
whose output is a frame of its own has it computed and counted by one Spark
job whether it logs or not, and where it logs, the log's write *is* that
job (:meth:`Frames.observing <falkirk.spark.pipeline.run.frames.Frames.observing>`).
So what ``log=True`` adds to such a step is a write less a count
(``first_writes``, at least 0), not a write job of its own: the fixed cost
of a Spark job (scheduling, a stage, its tasks) is paid by the step anyway.
Through Spark Connect no log is written that way, and ``first_writes`` is
empty.

A driver failure costs more than the steps it redoes. :func:`restart_cost`
measures what a new driver spends outside step executions — the executor
built again from the root (``pipeline.json``, the monitor from the
manifests, restore points, execution records), the plan, its validation
against the manifests, the restores — by running the profiled root again
in this process, as a restarted driver does (everything but the JVM's
start, which is warm here); :func:`session_start` measures that start — a
Python driver, its JVM and its SparkSession, without a job: the first jobs'
cold costs are the profile's ``cold`` part — once, in a process of its own.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial, reduce
from typing import TYPE_CHECKING

from attrs import field, frozen

from falkirk.spark.pipeline.run.cpu import meter
from falkirk.spark.pipeline.run.session import is_connect
from falkirk.spark.pipeline.store.manifest import Manifest
from falkirk.spark.pipeline.store.storage import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.run.executor import RunResult

__all__ = ["Calibration", "Restart", "calibrate", "restart_cost", "session_start", "SCALE", "SCRATCH"]

#: Where the calibration writes, relative to the root (deleted afterwards).
SCRATCH = "journal/calibration"
#: Each item is also written at this many times its rows: writes of one size alone fix the line's fixed part
#: but not its slope (two items a few kB apart once gave a slope that priced a 100 kB log at 4 CPU-s).
SCALE = 8


def _latest(storage: Storage, step: str, kind: str) -> Manifest | None:
    for e in reversed(storage.epochs(step, kind)):
        try:
            m = storage.get(step, kind, e)
        except Exception:  # noqa: BLE001 - an unreadable manifest only costs a measurement here
            continue
        if m.files and not (m.extra.get("delta") or {}).get("chain"):
            return m
    return None


@frozen
class Calibration:
    """What :func:`calibrate` measured, in the journal's unit: ``writes``, ``(bytes, cost)`` of each item
    written again; ``first_writes``, ``(bytes, cost)`` of the same writes less a count job on the same data
    (what a write costs where it is the job that computes a step's output anyway); ``reads``, per ``(step,
    kind)`` (kind ``"checkpoint"`` or ``"log"``), ``(restore, replay)``: the read job's cost, and its cost
    beyond the same job on the in-memory copy."""

    writes: tuple[tuple[float, float], ...] = ()
    reads: dict[tuple[str, str], tuple[float, float]] = field(factory=dict)
    first_writes: tuple[tuple[float, float], ...] = ()


def _hashed(df: DataFrame) -> None:
    """One job reading every column of every row of ``df``."""
    from pyspark.sql import functions as F

    df.agg(F.max(F.xxhash64(*df.columns))).collect()  # max: a sum of 64-bit hashes overflows (ANSI mode)


def _item(
    storage: Storage,
    spark: SparkSession,
    m: Manifest,
    where: str,
    repeats: int,
    cost: Callable[[Callable[[], object]], float],
) -> tuple[list[tuple[float, float, float]], float, float]:
    """One item's writes, as ``(bytes written, median write, median count job)`` at its own size and at
    :data:`SCALE` times its rows (the copy in memory; writes and counts alternated), its median read job from
    the root, and the median of the same job on the copy in memory."""
    from pyspark.sql import DataFrame

    df = storage.read_frame(spark, m, verify=False).persist()
    big: DataFrame | None = None
    try:
        df.count()  # in memory: the writes measure writing, not reading
        # as many files as the item has (a union of 8 copies has 8 times the partitions: each file's own cost,
        # its checksum and fsync, would pass for a cost per byte)
        big = reduce(DataFrame.unionByName, [df] * SCALE).coalesce(max(1, len(m.files))).persist()
        big.count()

        def write(frame: DataFrame, location: str, written: list[float]) -> None:
            out = storage.write_frame(frame, m.step, "calibration", m.epoch, m.rows, location=location)
            written.append(float(sum(f.size for f in out.files)))

        sizes: list[tuple[float, float, float]] = []
        for i, frame in enumerate((df, big)):
            written: list[float] = []
            writes, counts = [], []
            for r in range(repeats):  # alternated, as the reads below
                writes.append(cost(partial(write, frame, f"{where}-{i}-{r}", written)))
                counts.append(cost(frame.count))
            sizes.append((statistics.median(written), statistics.median(writes), statistics.median(counts)))

        def stored() -> None:
            _hashed(storage.read_frame(spark, m, verify=True))

        def held() -> None:
            _hashed(df)

        held()  # both jobs' plans compiled once, outside the figures
        stored()
        reads, memory = [], []
        for _ in range(repeats):  # alternated: a drift of the machine touches both alike
            reads.append(cost(stored))
            memory.append(cost(held))
    finally:
        if big is not None:
            big.unpersist()
        df.unpersist()
    return sizes, statistics.median(reads), statistics.median(memory)


def calibrate(pipeline: Definition, spark: SparkSession, *, repeats: int = 3) -> Calibration:
    """Each step's latest checkpoint and log written again at two sizes (median of ``repeats`` writes each,
    alternated with counts of the same data) and read back (median of ``repeats`` reads, from the root and
    from memory, alternated); costs in the journal's unit (see the module docstring)."""
    storage = Storage(pipeline.location, fsync=pipeline.fsync, checksums=pipeline.checksums)
    cpu = meter(spark)

    def cost(action: Callable[[], object]) -> float:  # CPU less the JIT compilers', as the journal's costs
        t0, c0 = time.perf_counter(), cpu.read() if cpu is not None else None
        action()
        c1 = cpu.read() if cpu is not None else None
        if c0 is None or c1 is None:
            return time.perf_counter() - t0
        return max(0.0, (c1[0] - c0[0]) - (c1[1] - c0[1]))

    items = [m for n in pipeline.steps for kind in ("checkpoint", "log") if (m := _latest(storage, n, kind))]
    points: list[tuple[float, float]] = []
    first: list[tuple[float, float]] = []
    reads: dict[tuple[str, str], tuple[float, float]] = {}
    try:
        for i, m in enumerate(items):
            sizes, restore, memory = _item(storage, spark, m, f"{SCRATCH}/{i}", repeats, cost)
            for nbytes, write, count in sizes:
                points.append((nbytes, write))
                first.append((nbytes, max(0.0, write - count)))
            reads[(m.step, m.kind)] = (restore, max(0.0, restore - memory))
    finally:
        if pipeline.location.exists(SCRATCH):
            pipeline.location.delete(SCRATCH, recursive=True)
    # through Spark Connect no log is its step's first job (Frames.observing): every log is a whole write
    return Calibration(tuple(points), reads, () if is_connect(spark) else tuple(first))


@frozen
class Restart:
    """What a restart cost outside its step executions (:func:`restart_cost`): ``cpu`` CPU seconds of the
    process tree less the JIT compilers' (``None``: not measured), ``wall`` seconds; and the whole restart's,
    until every step was back where it had been (``total_cpu``, ``total_wall``)."""

    cpu: float | None
    wall: float
    total_cpu: float | None
    total_wall: float


def restart_cost(run: Callable[[], RunResult], spark: SparkSession) -> Restart | None:
    """Run ``run`` — the profiled pipeline started again on its root, a new executor as a restarted driver
    builds it — and measure its restart recovery: from before the executor is built until every step is back
    where it had been, less the step executions it ran meanwhile (the model prices those as redo, replays and
    restores). ``None`` when the run records no restart (nothing under the root yet)."""
    cpu = meter(spark)
    t0, c0 = time.perf_counter(), cpu.read() if cpu is not None else None
    result = run()
    rec = next((r for r in result.journal.recoveries if r.restart), None)
    if rec is None or rec.finished is None:
        return None
    wall = rec.finished - t0
    mine = [x for x in result.journal.executions if x.recovery == rec.index and x.redo]
    total = None
    if c0 is not None and rec.cpu_started is not None and rec.cpu_seconds is not None:
        jit = max(0.0, (rec.jit_started or c0[1]) - c0[1]) + (rec.jit_seconds or 0.0)
        total = max(0.0, rec.cpu_started - c0[0] + rec.cpu_seconds - jit)
    executions = [x.cpu_less_jit for x in mine]
    outside = (
        None
        if total is None or any(c is None for c in executions)
        else max(0.0, total - sum(c or 0.0 for c in executions))
    )
    return Restart(outside, max(0.0, wall - sum(x.seconds for x in mine)), total, wall)


_SESSION = """
import json, sys, time
t0 = time.perf_counter()
from falkirk.spark.pipeline.run.cpu import TreeMeter
meter = TreeMeter()
c0 = meter.read()
from falkirk.spark.pipeline.run.session import local_session
spark = local_session(sys.argv[1])
c1 = meter.read()
print(json.dumps({"wall": time.perf_counter() - t0,
                  "cpu": None if c0 is None or c1 is None else c1[0] - c0[0],
                  "jit": None if c0 is None or c1 is None else c1[1] - c0[1]}))
spark.stop()
"""


def session_start(master: str = "local[2,3]", *, timeout: float = 600.0) -> dict[str, float | None]:
    """What starting a driver costs — Python's imports, the JVM and a ``local_session(master)`` — measured in a
    process of its own: ``{"cpu": CPU seconds of its process tree (None: not measured), "jit": of which the JIT
    compilers', "wall": seconds}``. A restarted driver pays it before anything falkirk does.

    No job is run: a new JVM's first jobs (class loading, code generation, the JIT's work on them) are what
    the profile's ``cold`` part measures (the first epoch's executions beyond steady ones), so a first job here
    would price them twice — on this machine ``spark.range(1).count()`` added about 4 CPU-s to the 9 of the
    start, and restarted drivers' starts measured 8.7–10.2 CPU-s without a job (issue 59's check)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p
            for p in (
                os.path.dirname(
                    os.path.dirname(
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                    )
                ),
                os.environ.get("PYTHONPATH", ""),
            )
            if p
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", _SESSION, master],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"session_start: the measuring process exited with {done.returncode}: "
            f"{(done.stderr or done.stdout)[-500:]}"
        )
    return dict(json.loads(lines[-1]))
