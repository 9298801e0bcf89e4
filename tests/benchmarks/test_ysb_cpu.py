"""benchmarks/ysb_cpu.py's arithmetic: JVM threads sorted by kind, per-epoch differences, window medians.

The benchmark itself (two systems, fresh driver processes, 80 epochs) runs outside the suite.
"""

from __future__ import annotations

import os

import pytest
from benchmarks.ysb_cpu import JvmThreads, _kind, per_epoch, summarise


def test_thread_kinds() -> None:
    assert [_kind(c) for c in ("C2 CompilerThre", "C1 CompilerThre", "Executor task launch worker for task",
                               "GC Thread", "G1 Conc", "Thread", "stream execution thread for",
                               "dag-scheduler-event-loop")] == [
        "jit", "jit", "tasks", "gc", "gc", "jvm_rest", "jvm_rest", "jvm_rest"]


def test_per_epoch_differences_and_the_python_remainder() -> None:
    def rec(t: float, tree: float, jit_tree: float, jvm: dict[str, float], py4j: int, compiled: int | None) -> dict:
        return {"t": t, "tree": tree, "jit_tree": jit_tree, "jvm": jvm, "py4j": py4j, "compiled": compiled}

    records = [rec(0.0, 10.0, 2.0, {"jit": 2.0, "tasks": 1.0}, 5, 7),
               rec(0.5, 11.0, 2.25, {"jit": 2.25, "tasks": 1.25, "gc": 0.125}, 105, 8),
               rec(1.5, 11.5, 2.25, {"jit": 2.25, "tasks": 1.5, "gc": 0.125, "jvm_rest": 0.125}, 205, None)]
    first, second = per_epoch(records)
    assert first == {"wall": 0.5, "cpu": 1.0, "cpu_nojit": 0.75, "jit": 0.25, "tasks": 0.25, "gc": 0.125,
                     "jvm_rest": 0.0, "python": 0.375, "py4j": 100, "compiled": 1}
    assert second["cpu"] == 0.5 and second["cpu_nojit"] == 0.5 and second["python"] == 0.125
    assert second["compiled"] is None  # unknown where the last reading was


def test_window_medians_pool_every_drivers_epochs() -> None:
    def epoch(cpu: float) -> dict[str, float]:
        return {"wall": cpu, "cpu": cpu, "cpu_nojit": cpu, "jit": 0.0, "tasks": 0.0, "gc": 0.0, "jvm_rest": 0.0,
                "python": cpu, "py4j": 1, "compiled": None}

    drivers = [[epoch(float(i)) for i in range(50)], [epoch(float(i) + 1000) for i in range(50)]]
    got = summarise(drivers)
    assert set(got) == {"3-20", "20-40", "40-50"}
    # epochs 3..19 of both drivers: 3..19 and 1003..1019, median between the two halves
    assert got["3-20"]["cpu"] == (19 + 1003) / 2
    assert "compiled" not in got["3-20"]  # unknown everywhere: left out, not a median of nothing


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads threads from Linux's /proc")
def test_jvm_threads_reads_a_live_process() -> None:
    """Any process's threads (here this one's): the kinds it found, each with its CPU seconds so far."""
    got = JvmThreads(os.getpid()).read()
    assert got and all(k in {"jit", "tasks", "gc", "jvm_rest"} and v >= 0 for k, v in got.items())
