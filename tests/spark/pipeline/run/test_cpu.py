"""The process-tree CPU meter: an orphaned child takes its CPU out of a plain reading, never out of a TreeMeter's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from falkirk.spark.pipeline.run.cpu import TreeMeter, tree_cpu

#: A child that starts a grandchild burning about 0.6 CPU-s, says the grandchild's pid, and exits on a line of stdin
#: without waiting for it: the grandchild is re-parented out of the tree, its CPU never reaped into the tree.
CHILD = textwrap.dedent("""
    import subprocess, sys
    burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6: pass\\nprint('hot', flush=True)\\ntime.sleep(60)"
    g = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    assert g.stdout.readline().strip() == "hot"
    print(g.pid, flush=True)
    sys.stdin.readline()
""")


@pytest.mark.skipif(tree_cpu() is None, reason="no Linux /proc/PID/task/TID/children here: CPU is not metered")
def test_an_orphaned_childs_cpu_stays_counted() -> None:
    meter = TreeMeter()
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    grandchild = int(child.stdout.readline())
    try:
        plain_before, metered_before = tree_cpu(), meter()
        assert plain_before is not None and metered_before is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        child.wait(30)  # the child is reaped (its CPU reaches ours); the grandchild is orphaned, still running
        assert os.getppid() != grandchild and os.path.exists(f"/proc/{grandchild}")
        plain_after, metered_after = tree_cpu(), meter()
        assert plain_after is not None and metered_after is not None
        # the plain reading lost the grandchild's ~0.6 s; the meter kept it
        assert plain_after < plain_before - 0.3
        assert metered_after >= metered_before
        assert meter.kept / os.sysconf("SC_CLK_TCK") >= 0.5
        assert meter() >= metered_after  # and stays monotone on later readings
    finally:
        os.kill(grandchild, signal.SIGKILL)
        child.kill()


def test_a_process_one_reading_missed_is_not_counted_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk can miss a live process (its parent's thread ended while being read): it is charged while missing,
    and the charge is taken back when a reading sees it again, so the readings stay monotone and exact."""
    from falkirk.spark.pipeline.run import cpu

    root, jvm, worker = (1, 10), (2, 20), (3, 30)
    readings = [
        {root: (None, 100, 0), jvm: (root, 1000, 0), worker: (jvm, 500, 0)},
        {root: (None, 101, 0), jvm: (root, 1010, 0)},  # the worker missed: the JVM reaped nothing
        {root: (None, 102, 0), jvm: (root, 1020, 0), worker: (jvm, 510, 0)},
        {root: (None, 103, 0), jvm: (root, 1030, 5)},  # now it is gone, 5 of its 510 ticks reaped by the JVM
    ]
    walks = iter(readings)
    monkeypatch.setattr(cpu, "_walk", lambda pid, threads=None, jit=None: next(walks))
    meter = TreeMeter(1)
    got = [meter() for _ in readings]
    tick = cpu._TICK
    assert got[0] == pytest.approx(1600 / tick) and got[1] == pytest.approx((101 + 1010 + 500) / tick)
    assert got[2] == pytest.approx((102 + 1020 + 510) / tick)  # seen again: its charge taken back
    assert got[3] == pytest.approx((103 + 1030 + 5 + 505) / tick)  # the unreaped 505 kept
    assert got == sorted(got)


@pytest.mark.skipif(tree_cpu() is None, reason="no Linux /proc/PID/task/TID/children here: CPU is not metered")
def test_a_partial_reading_finds_every_child_a_full_one_does_within_its_period() -> None:
    """Between full readings only threads that had children, and new threads, are asked: a child started by a
    thread that had none is found at the next full reading at the latest; a child that leaves makes the reading a
    full one."""
    import threading

    from falkirk.spark.pipeline.run import cpu

    now = [0.0]
    threads = cpu._Threads()
    threads.clock = lambda: now[0]
    me = os.getpid()

    def kids() -> set[int]:
        return {pid for pid, _ in cpu._walk(me, threads) if pid != me}

    def full() -> set[int]:
        return {pid for pid, _ in cpu._walk(me) if pid != me}

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    started: list[subprocess.Popen[bytes]] = []
    try:
        first = kids()  # full: the meter's first reading of this process
        assert first == full()
        ready, go = threading.Event(), threading.Event()

        def spawn_later() -> None:  # a thread that exists before the next reading, and forks after it
            ready.set()
            go.wait(30)
            started.append(subprocess.Popen(sleeper))

        t = threading.Thread(target=spawn_later)
        t.start()
        ready.wait(30)
        assert kids() == first  # the new thread is read (it has no child yet) and becomes known
        go.set()
        t.join(30)
        late = started[-1].pid
        assert late in full()
        # its thread has ended, and Linux moved the child to a live thread of this process (the main one): if
        # that thread never had a child, it is not read until the next full reading; never a process not there
        assert kids() <= full()
        now[0] += cpu._Threads.FULL
        assert late in kids()  # found, and from now on its thread is read every time
        assert late in kids()
        fresh = threading.Thread(target=lambda: started.append(subprocess.Popen(sleeper)))
        fresh.start()
        fresh.join(30)
        # its thread has ended: Linux moved the child to this process's main thread, which has had children
        # since the first sleeper moved there the same way, and is read every time
        assert started[-1].pid in kids()
        started[0].kill()
        started[0].wait(30)
        assert kids() == full()  # a child seen before is missing: every thread read again
    finally:
        for p in started:
            p.kill()
            p.wait(30)



#: A child whose second thread names itself as a HotSpot compiler thread (``prctl(PR_SET_NAME)``), burns about
#: 0.4 CPU-s and says so; on a line of stdin it burns 0.2 more and ends, and the main thread burns 0.3 CPU-s.
COMPILER = textwrap.dedent("""
    import ctypes, sys, threading, time
    def burn(s):
        t = time.thread_time()
        while time.thread_time() - t < s: pass
    go = threading.Event()
    def compiler():
        ctypes.CDLL(None).prctl(15, b"C2 CompilerThread0")  # PR_SET_NAME: comm is cut to 15 bytes
        burn(0.4)
        print("compiling", flush=True)
        go.wait()
        burn(0.2)
    th = threading.Thread(target=compiler); th.start()
    sys.stdin.readline(); go.set(); th.join()
    burn(0.3)
    print("worked", flush=True)
    sys.stdin.readline()
""")


@pytest.mark.skipif(tree_cpu() is None, reason="no Linux /proc/PID/task/TID/children here: CPU is not metered")
def test_the_jit_compilers_share_is_read_apart_and_kept_when_their_thread_ends() -> None:
    """A compiler thread's CPU is the meter's JIT share while a reading sees it, and stays in it after the thread
    ended; what it spent after the last reading that saw it, and the rest of the tree's CPU, are not."""
    child = subprocess.Popen([sys.executable, "-c", COMPILER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    # the child's own tree: a Spark session an earlier test left in this process has real compiler threads
    meter = TreeMeter(child.pid)
    assert child.stdout is not None and child.stdin is not None
    try:
        start = meter.read()
        assert child.stdout.readline().strip() == "compiling"
        seen = meter.read()  # the compiler thread is alive: about 0.4 CPU-s of its own
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "worked"
        after = meter.read()  # it burnt 0.2 more and ended; the main thread burnt 0.3
    finally:
        child.stdin.write("go\n")
        child.stdin.flush()
        child.wait(30)
    assert start is not None and seen is not None and after is not None
    assert seen[1] - start[1] >= 0.4 - 0.05
    assert after[1] == seen[1]  # kept when the thread ended; its last 0.2 CPU-s are the tree's other work
    assert after[0] - seen[0] >= 0.5 - 0.05
    assert all(0 <= jit <= tree for tree, jit in (start, seen, after))


def test_a_compiler_thread_a_reading_missed_is_neither_lost_nor_counted_twice() -> None:
    """The JIT total across readings where the compiler's process is walked, missed, walked again, then walked
    without the thread (it ended): never decreasing, and never counting the same ticks twice."""
    from falkirk.spark.pipeline.run.cpu import _Jit

    jvm, thread = (7, 70), (7, 70, "71")
    jit = _Jit()
    totals = []
    for walked, ticks in (({jvm}, 100), (set(), None), ({jvm}, 120), ({jvm}, None)):
        jit.start()
        if ticks is not None:
            jit.reading[thread] = ticks  # what read() found in /proc for the thread
        totals.append(jit.total(walked))
    assert totals == [100, 100, 120, 120]
