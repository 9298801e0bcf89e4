"""CPU seconds of the driver's process tree, for measuring steps on a ``local`` master.

On a ``local[...]`` master the whole of Spark runs in processes this driver
started: the JVM (a child of the Python driver), and the Python workers
the JVM forks for UDFs and ``applyInPandas``. Steps run one at a time, so
the CPU the tree used between a step's start and its end is what the step
cost (plus the little that background threads — heartbeats, the garbage
collector — spend meanwhile), measured the way
``benchmarks/spark_vs_streaming.py`` measures a configuration.

:func:`tree_cpu` reads ``/proc``: ``utime + stime + cutime + cstime`` of
every process reachable from ``pid`` through ``/proc/PID/task/TID/children``
(so workers that already exited count through their reaped parent). It
returns ``None`` where ``/proc`` does not give this (not Linux, or a kernel
without ``children`` files); the journal then records wall time only. On a
cluster or through Spark Connect the executors are not in the tree, and
:func:`meter` returns ``None``: the work would not be seen.

>>> t = tree_cpu()
>>> t is None or t >= 0
True
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["meter", "tree_cpu"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
            out.extend(int(c) for c in f.read().split())
    return out


def tree_cpu(pid: int | None = None) -> float | None:
    """CPU seconds (user + system, with reaped children) of process ``pid`` (default: this one) and its descendants."""
    todo = [os.getpid() if pid is None else pid]
    ticks = 0
    seen = set()
    try:
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            try:
                with open(f"/proc/{p}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                ticks += sum(int(x) for x in fields[11:15])
                todo.extend(_children(p))
            except (FileNotFoundError, ProcessLookupError):
                if p == (os.getpid() if pid is None else pid):
                    raise
                continue  # a worker that exited between the two reads
    except (OSError, ValueError, IndexError):
        return None
    return ticks / _TICK


def meter(spark: SparkSession) -> Callable[[], float | None] | None:
    """:func:`tree_cpu` for ``spark`` when its executors run in this driver's process tree, else ``None``.

    That is a classic session on a ``local`` master; a Connect session's
    server, and a cluster's executors, are other machines' or other
    processes' work.
    """
    from falkirk.spark.pipeline.run.probe import is_local_master
    from falkirk.spark.pipeline.run.session import is_connect

    if is_connect(spark) or not is_local_master(spark) or tree_cpu() is None:
        return None
    return tree_cpu
