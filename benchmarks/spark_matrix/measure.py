"""Measuring the drivers: CPU and memory of process trees (``/proc``), the per-epoch meter, W5's
sampler, what counts as persisted bytes, and the driver processes themselves.

Every configuration runs in driver processes of its own (:func:`child`: ``python -m
benchmarks.spark_matrix --phase …``), one SparkSession each (:func:`session`, or on W5's cluster
:func:`cluster_session`). The definitions of the numbers are in the package's docstring.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import STREAMING_CONF, Clock, Written, kill_leftover, tree_and_jit, tree_cpu
from .configs import BENCHMARKS


def tree_rss(root: int) -> int:
    """Resident bytes of process ``root`` and its descendants (from ``/proc``)."""
    table = proc_table()
    return sum(table[p][2] for p in under(table, {root})) * os.sysconf("SC_PAGE_SIZE")


#: W5: the standalone cluster's processes (master, workers — whose children are the executors and their Python
#: workers), measured with this driver's process tree; empty elsewhere (``local`` mode: the driver's tree is all).
ROOTS: list[int] = []


def proc_table() -> dict[int, tuple[int, int, int]]:
    """``pid → (parent pid, the process's own CPU ticks — user + system, not its reaped children —, resident pages)``
    from ``/proc``."""
    table: dict[int, tuple[int, int, int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        table[int(d)] = (int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[21]))
    return table


def under(table: dict[int, tuple[int, int, int]], roots: set[int]) -> dict[int, int]:
    """``pid → the root it descends from`` for every process of ``table`` under one of ``roots`` (roots included)."""
    out: dict[int, int] = {}
    for pid in table:
        p = pid
        for _ in range(64):
            if p in roots:
                out[pid] = p
                break
            p = table.get(p, (0, 0, 0))[0]
            if p <= 1:
                break
    return out


class _Departed:
    """W5's CPU count: the own CPU of every process now in the trees, plus the last CPU seen of every process that
    left them. Reaped children's CPU (``cutime``) is not used: a SIGKILLed executor's Python daemon and workers are
    orphaned — re-parented out of the trees, their CPU never reaped into a worker's — so it would drop out of the
    count; a process born and gone between two looks (0.2 s apart while the sampler runs) is missed."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.last: dict[int, int] = {}
        self.gone = 0

    def __call__(self) -> float:
        with self.lock:
            table = proc_table()
            now = {p: table[p][1] for p in under(table, {os.getpid(), *ROOTS})}
            self.gone += sum(t for p, t in self.last.items() if p not in now)
            self.last = now
            return (sum(now.values()) + self.gone) / os.sysconf("SC_CLK_TCK")


_cluster_cpu = _Departed()


def now_cpu() -> float:
    """CPU seconds of this driver's process tree (``local``: reaped children included) and, in W5, the cluster's
    (:data:`ROOTS`; see :class:`_Departed`)."""
    if not ROOTS:
        return tree_cpu(os.getpid())
    return _cluster_cpu()


def now_cpu_jit() -> tuple[float, float]:
    """:func:`now_cpu` and, of it, the JVM's JIT compiler threads' CPU, from one reading (on a ``local`` master;
    0 with a cluster, whose executors' JVMs are not read apart)."""
    if not ROOTS:
        return tree_and_jit(os.getpid())
    return _cluster_cpu(), 0.0


def now_rss() -> int:
    if not ROOTS:
        return tree_rss(os.getpid())
    table = proc_table()
    return sum(table[p][2] for p in under(table, {os.getpid(), *ROOTS})) * os.sysconf("SC_PAGE_SIZE")


class Meter(Clock):
    """:class:`Clock` that also samples the process tree's resident memory after each epoch (W5: with the cluster's)."""

    def __init__(self, written: Written) -> None:
        super().__init__(written)
        self.start = (time.perf_counter(), *now_cpu_jit())
        self.peak_rss = now_rss()

    def epoch_done(self, epoch: int) -> None:
        self.ends[epoch] = (time.perf_counter(), *now_cpu_jit())
        self.written.scan()
        self.peak_rss = max(self.peak_rss, now_rss())


def stamp() -> tuple[float, float]:
    return time.perf_counter(), now_cpu()


def executor_jvms(table: dict[int, tuple[int, int, int]]) -> dict[int, int]:
    """``pid → resident bytes of its process tree`` (JVM and Python workers) of every executor JVM on the cluster.

    An executor JVM is a child of a worker: a process the JVM forks has its command line until it runs ``exec``
    (seen: a short-lived child of an executor taken for an executor that came and went)."""
    page = os.sysconf("SC_PAGE_SIZE")
    jvms = []
    for pid, root in under(table, set(ROOTS)).items():
        if pid == root or table[pid][0] not in ROOTS:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    jvms.append(pid)
        except OSError:
            continue
    trees = under(table, set(jvms))
    rss = dict.fromkeys(jvms, 0)
    for pid, jvm in trees.items():
        rss[jvm] += table[pid][2] * page
    return rss


class Sampler:
    """W5: a thread sampling (wall, CPU) of the driver and the cluster and the executor JVMs every ``every`` s.

    Notes when an executor JVM disappears (the kill: the last sample before it is the recovery's start) and when a
    new one appears after it (the replacement the master launches), and the peak resident memory of one executor
    (its JVM and Python workers)."""

    def __init__(self, every: float = 0.2) -> None:
        import threading

        self.every, self.samples = every, []  # type: ignore[var-annotated]
        self.gone: tuple[float, float] | None = None  # the last sample before an executor JVM vanished
        self.gone_at: float | None = None  # the first sample without it
        self.replaced_at: float | None = None  # the first sample with a new executor JVM after that
        self.peak_executor_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def reset_peak(self) -> int:
        peak, self.peak_executor_rss = self.peak_executor_rss, 0
        return peak

    def _loop(self) -> None:
        prev: tuple[float, float] | None = None
        seen: set[int] = set()
        while not self._stop.is_set():
            t = time.perf_counter()
            cpu = now_cpu()
            table = proc_table()
            jvms = executor_jvms(table)
            if jvms:
                self.peak_executor_rss = max(self.peak_executor_rss, *jvms.values())
            now = set(jvms)
            if seen - now and self.gone is None and prev is not None:
                self.gone, self.gone_at = prev, t
            elif self.gone is not None and self.replaced_at is None and now - seen:
                self.replaced_at = t
            seen = now if self.gone is None or self.replaced_at is not None else seen & now
            prev = (t, cpu)
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def falkirk_category(rel: str) -> str | None:
    top = rel.split(os.sep, 1)[0]
    if top in ("output", "input") or rel.startswith("sink.sqlite") or rel.endswith("-shm"):
        return None
    return top


def streaming_category(rel: str) -> str | None:
    """``offsets``, ``commits``, ``state``, ``sources``…: what a checkpoint location holds; outputs not counted.

    >>> streaming_category("checkpoint/totals/state/0/1/2.changelog"), streaming_category("output/x/epoch=1/a")
    ('state', None)
    """
    parts = rel.split(os.sep)
    if not parts[0].startswith("checkpoint") or len(parts) < 3:
        return None
    if parts[1] in ("totals", "sink"):  # streaming-split: one checkpoint location per query
        return parts[2] if len(parts) > 3 else "metadata"
    return parts[1]


def session(conf: dict[str, str] | None) -> Any:
    from ..spark_vs_streaming import session as make

    return make({"spark.driver.memory": "1g", **(conf or {})})


def cluster_session(cluster: dict[str, Any], conf: dict[str, str] | None) -> Any:
    """A driver on the standalone cluster (W5): the harness's driver settings, :data:`STREAMING_CONF`, small data
    (``SMALL_PAGES`` too, as a local session has)."""
    from pyspark.sql import SparkSession

    from falkirk.spark.pipeline.run.session import CODEGEN_CACHE, SMALL_DATA, SMALL_PAGES

    # Python UDFs run the driver's PYSPARK_PYTHON (``python3`` if unset), not ``spark.pyspark.python`` set here
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(cluster["master"]).appName("spark-matrix-w5")
    for key, value in {**cluster["conf"], **CODEGEN_CACHE, **SMALL_PAGES, **STREAMING_CONF, **SMALL_DATA,
                       "spark.sql.streaming.numRecentProgressUpdates": "1000", **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def child_env(local: Path, environ: dict[str, str] | None = None, jvm: str = "") -> dict[str, str]:
    """The environment of a driver process whose scratch files all live under ``local``: Spark's local directories
    (``SPARK_LOCAL_DIRS``: block manager, shuffle files), the driver JVM's ``java.io.tmpdir`` (``SPARK_SUBMIT_OPTS``:
    the ``spark-<uuid>`` directories of added files and PySpark's, the stream's RocksDB working directories) and
    Python's ``TMPDIR`` — so that removing ``local`` after a SIGKILLed driver leaves nothing behind in ``/tmp``.
    ``jvm``: more Java options for the driver's JVM (a configuration's ``jvm``, e.g. the client JIT only)."""
    base = dict(os.environ if environ is None else environ)
    opts = f"{base.get('SPARK_SUBMIT_OPTS', '')} {jvm} -Djava.io.tmpdir={local}".strip()
    return {**base, "PYTHONPATH": os.pathsep.join([str(BENCHMARKS.parent / "src"), str(BENCHMARKS.parent),
                                                   str(BENCHMARKS), base.get("PYTHONPATH", "")]),
            "SPARK_LOCAL_DIRS": str(local), "SPARK_SUBMIT_OPTS": opts, "TMPDIR": str(local)}


def child(spec: dict[str, Any], work: Path, name: str, phase: str | None = None, expected: int = 0,
          stamps: dict[str, float] | None = None, *, module: str | None = None) -> dict[str, Any]:
    """Run ``spec`` in a new driver process (``python -m MODULE --phase``, default this package and the workload's
    phase); its result. ``stamps``: gets ``"exited"``, the wall-clock moment the process ended (YSB: when the
    killed driver died). Its scratch files (Spark's local directories, the JVM's and Python's temporary
    directories: :func:`child_env`) are the process's own, under ``work`` (the same disk as ``/tmp`` here), removed
    once it ended: a SIGKILLed driver cannot remove them itself."""
    phase = phase or spec["workload"]
    spec = {**spec, "result": str(work / f"{name}.json"), "pids": str(work / f"{name}.pids")}
    path = work / f"{name}.spec.json"
    path.write_text(json.dumps(spec))
    local = work / f"{name}.spark-local"
    local.mkdir(exist_ok=True)
    env = child_env(local, jvm=spec.get("jvm", ""))
    with open(work / f"{name}.log", "w") as log:
        p = subprocess.run([sys.executable, "-m", module or __package__, "--phase", phase, "--spec", str(path)], env=env,
                           stdout=log, stderr=subprocess.STDOUT)
    if stamps is not None:
        stamps["exited"] = time.time()
    kill_leftover(Path(spec["pids"]), killed=p.returncode == -signal.SIGKILL)  # the JVM of a killed driver
    shutil.rmtree(local, ignore_errors=True)
    if p.returncode != expected or not Path(spec["result"]).exists():
        tail = (work / f"{name}.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"{name}: exit status {p.returncode}\n{tail}")
    return json.loads(Path(spec["result"]).read_text())
