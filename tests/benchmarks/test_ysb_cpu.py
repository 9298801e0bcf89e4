"""benchmarks/ysb_cpu.py's arithmetic: JVM threads sorted by kind, per-epoch differences, windows, ratios.

The benchmark itself (two systems, fresh driver processes, 80 epochs) runs outside the suite.
"""

from __future__ import annotations

import os

import pytest
from benchmarks.ysb_cpu import JvmThreads, per_epoch, ratios, summarise, thread_kind, windows


def test_thread_kinds_from_names_as_proc_gives_them() -> None:
    names = ("C2 CompilerThre", "C1 CompilerThre", "Executor task launch worker for task 3", "GC Thread#0",
             "GC Thread#1", "G1 Conc#0", "G1 Refine#0", "Thread-4", "stream execution thread for",
             "dag-scheduler-event-loop")
    assert [thread_kind(c) for c in names] == [
        "jit", "jit", "tasks", "gc", "gc", "gc", "gc", "jvm_rest", "jvm_rest", "jvm_rest"]


def test_per_epoch_differences_and_the_rest_of_the_tree() -> None:
    def rec(t: float, tree: float, jit_tree: float, jvm: dict[str, float], py4j: int, compiled: int | None) -> dict:
        return {"t": t, "tree": tree, "jit_tree": jit_tree, "jvm": jvm, "py4j": py4j, "compiled": compiled}

    records = [rec(0.0, 10.0, 2.0, {"jit": 2.0, "tasks": 1.0}, 5, 7),
               rec(0.5, 11.0, 2.25, {"jit": 2.25, "tasks": 1.25, "gc": 0.125}, 105, 8),
               rec(1.5, 11.5, 2.25, {"jit": 2.25, "tasks": 1.5, "gc": 0.125, "jvm_rest": 0.125}, 205, None),
               rec(2.0, 12.0, 2.25, {"jit": 2.25, "tasks": 1.5, "gc": 0.125, "jvm_rest": 0.125}, 205, 9)]
    first, second, third = per_epoch(records)
    assert first == {"wall": 0.5, "cpu": 1.0, "cpu_nojit": 0.75, "jit": 0.25, "tasks": 0.25, "gc": 0.125,
                     "jvm_rest": 0.0, "rest": 0.375, "py4j": 100, "compiled": 1}
    assert second["cpu"] == 0.5 and second["cpu_nojit"] == 0.5 and second["rest"] == 0.125
    # unknown where either reading was (a stopped context), not a difference with nothing
    assert second["compiled"] is None and third["compiled"] is None and third["rest"] == 0.5


def epoch(cpu: float) -> dict[str, float | None]:
    return {"wall": cpu, "cpu": cpu, "cpu_nojit": cpu / 2, "jit": cpu / 2, "tasks": 0.0, "gc": 0.0, "jvm_rest": 0.0,
            "rest": 0.0, "py4j": 1, "compiled": None}


def test_windows_pool_every_drivers_epochs_and_end_with_the_shortest_driver() -> None:
    drivers = [[epoch(float(i)) for i in range(50)], [epoch(float(i) + 1000) for i in range(45)]]
    assert windows(drivers) == [("3-20", 3, 20), ("20-40", 20, 40), ("40-45", 40, 45)]
    got = summarise(drivers)
    # epochs 3..19 of both drivers: 3..19 and 1003..1019, the median between the two halves
    assert got["3-20"]["cpu"] == (19 + 1003) / 2
    assert got["3-20"]["cpu_mean"] == (sum(range(3, 20)) + sum(range(1003, 1020))) / 34
    assert got["40-45"]["cpu_mean_per_driver"] == [42.0, 1042.0]
    assert "compiled" not in got["3-20"]  # unknown everywhere: left out, not a median of nothing


def test_ratios_per_window_and_per_driver() -> None:
    falkirk = summarise([[epoch(3.0)] * 25, [epoch(6.0)] * 25])
    stream = summarise([[epoch(2.0)] * 25, [epoch(2.0)] * 25])
    r = ratios(falkirk, stream)
    assert set(r) == {"3-20", "20-25"}
    assert r["3-20"]["cpu_mean"] == 4.5 / 2 and r["3-20"]["cpu_nojit"] == 2.25 / 1
    assert r["20-25"]["cpu_mean_per_driver"] == [1.5, 3.0]
    assert r["3-20"]["tasks"] is None  # the stream's is 0: no ratio


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads threads from Linux's /proc")
def test_jvm_threads_reads_a_live_process() -> None:
    """Any process's threads (here this one's, which has no compiler threads): its CPU so far, all of it under
    ``jvm_rest``, and no more than the process's own."""
    got = JvmThreads(os.getpid()).read()
    after = os.times()
    assert set(got) == {"jvm_rest"}
    assert 0 < got["jvm_rest"] <= after.user + after.system + 0.02
