"""Per-epoch measurements of one driver: CPU of the process tree and of the driver's Python alone, resident
memory by role, and bytes written by kind.

:class:`ScaleMeter` is the matrix's :class:`~benchmarks.spark_matrix.measure.Meter` (wall, CPU of the
driver's whole process tree and of the JVM's JIT compilers, at each epoch's end) plus:

* **driver CPU**: the driver's Python process alone (``getrusage``: every thread of it — the pipeline's
  bookkeeping, py4j — and nothing of the JVM or the Python workers);
* **peak resident memory** by role: the driver's Python process, the JVM (on a ``local`` master it *is* the
  executor: the state, the shuffles, RocksDB's native memory), the Python workers;
* the CPU of counting the written bytes (a walk of the run's directory after each epoch) taken out of the
  next epoch, where it would otherwise fall.

:func:`kind_of` files each written byte under ``state``, ``log`` or ``metadata`` for both systems.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any

from ..spark_matrix.measure import Meter, proc_table, under


def driver_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_by_role(jvm: int | None) -> dict[str, int]:
    """Resident bytes of this driver's Python process, its JVM and the JVM's descendants (the Python workers)."""
    table, page = proc_table(), os.sysconf("SC_PAGE_SIZE")
    me = os.getpid()
    out = {"driver": table.get(me, (0, 0, 0))[2] * page, "jvm": 0, "workers": 0}
    if jvm is not None and jvm in table:
        out["jvm"] = table[jvm][2] * page
        out["workers"] = sum(table[p][2] for p in under(table, {jvm}) if p != jvm) * page
    return out


class ScaleMeter(Meter):
    """:class:`~benchmarks.spark_matrix.measure.Meter` with the driver's own CPU and memory by role (see the module
    docstring). ``jvm``: the driver's JVM pid."""

    def __init__(self, written: Any, jvm: int | None) -> None:
        super().__init__(written)
        self.jvm = jvm
        self.driver_start = driver_cpu()
        self.driver_ends: dict[int, float] = {}
        self.peaks = rss_by_role(jvm)
        self._owed = 0.0  # CPU of the last byte count, taken out of the next epoch

    def epoch_done(self, epoch: int) -> None:
        t, cpu, jit = time.perf_counter(), *self._now()
        self.ends[epoch] = (t, cpu - self._owed, jit)
        self.driver_ends[epoch] = driver_cpu() - self._owed
        c0 = time.thread_time()
        self.written.scan()
        for role, v in rss_by_role(self.jvm).items():
            self.peaks[role] = max(self.peaks[role], v)
        self.peak_rss = max(self.peak_rss, sum(self.peaks.values()))
        self._owed += time.thread_time() - c0

    @staticmethod
    def _now() -> tuple[float, float]:
        from ..spark_matrix.measure import now_cpu_jit

        return now_cpu_jit()

    def driver_per_epoch(self) -> list[float]:
        out, prev = [], self.driver_start
        for e in sorted(self.driver_ends):
            out.append(self.driver_ends[e] - prev)
            prev = self.driver_ends[e]
        return out

    def figures(self) -> dict[str, Any]:
        """Per-epoch lists and peaks, as the driver's result keeps them."""
        walls, cpus = self.per_epoch()
        return {"walls": walls, "cpus": cpus, "jits": self.jit_per_epoch(), "driver_cpus": self.driver_per_epoch(),
                "peak_rss": self.peak_rss, **{f"peak_rss_{k}": v for k, v in self.peaks.items()},
                "bytes": dict(self.written.bytes)}


def kind_of(rel: str) -> str | None:
    """What a file written under a run's directory is: ``state`` (checkpoints, state stores, state tables), ``log``
    (falkirk's logged outputs and the stream's offsets/commits write-ahead log), ``metadata`` (manifests, journals,
    SQLite caches, the stream's source and metadata files); ``None``: inputs and outputs, not counted.

    >>> [kind_of(p) for p in ("data/agg/checkpoint/3-ab/x.parquet", "data/heavy/log/1/x", "manifests/agg/log/1.json",
    ...                       "checkpoint/state/0/0/2.changelog", "checkpoint/offsets/2", "checkpoint/table/v=3/p",
    ...                       "output/changes/epoch=1/p", "input/updates/part-0/0.json", "meta.sqlite-wal")]
    ['state', 'log', 'metadata', 'state', 'log', 'state', None, None, 'metadata']
    """
    parts = rel.split(os.sep)
    top = parts[0]
    if top in ("output", "input", "killed") or rel.endswith("-shm") or top.endswith(".sqlite") and "meta" not in top:
        return None
    if top == "data" and len(parts) > 2:
        return "state" if parts[2] == "checkpoint" else "log"
    if top.startswith("checkpoint") and len(parts) > 1:
        sub = parts[1] if parts[1] not in ("totals", "sink") else (parts[2] if len(parts) > 2 else "")
        if sub in ("state", "table", "cc-state"):
            return "state"
        if sub in ("offsets", "commits"):
            return "log"
        return "metadata"
    if top == "cc-state":
        return "state"
    return "metadata"
