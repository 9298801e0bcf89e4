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

A single reading can go *down*: a child that left the tree without its
CPU reaching a parent's ``cutime`` (an orphan re-parented to ``init``, a
child reaped by ``SIGCHLD=SIG_IGN``, a zombie still unreaped) takes its
CPU with it, and so, for one reading, did a JVM's workers whenever one of
the JVM's threads ended while its children were being listed (now
skipped thread by thread). CI once measured an epoch at -0.35 CPU-s.
A meter reads every thread's ``children`` file at most every two seconds,
and in between only those of the threads that had children (:class:`_Threads`).
:class:`TreeMeter` is the stateful reading every measurement uses: it
remembers what each process (pid and start time) showed, and when one
leaves the tree it checks that its nearest remaining ancestor's
``cutime`` grew by at least as much; any shortfall is kept, and taken
back if a later reading sees the process again. Its readings never
decrease.

A meter also reads the CPU of the JVM's JIT compiler threads (HotSpot's
``C1 CompilerThread``/``C2 CompilerThread``, :class:`_Jit`): compiling
Spark's bytecode is a warm-up cost that decays over tens of epochs (on the
flagship about 40 % of a warm-ish epoch's CPU at epochs 7–13, still a
third at epochs 20–39), so a measurement taken early in a JVM's life
prices the JVM's age as much as the step. :meth:`TreeMeter.read` gives
both; the regime advisor prices steady work without the JIT
(:mod:`~falkirk.spark.pipeline.plan.measured`).

>>> t = tree_cpu()
>>> t is None or t >= 0
True
>>> m = TreeMeter()
>>> a = m(); b = m()
>>> a is None or b >= a
True
>>> r = m.read()
>>> r is None or 0 <= r[1] <= r[0]
True
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["TreeMeter", "meter", "tree_cpu"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: The thread names (``comm``, cut at 15 bytes) of a HotSpot JVM's JIT compilers.
JIT_THREADS = frozenset({b"C1 CompilerThre", b"C2 CompilerThre"})


def _children(pid: int, threads: _Threads | None = None, tids: list[str] | None = None) -> list[int]:
    """The children of every thread of ``pid`` (a thread that ends meanwhile is skipped, not the whole list: a
    JVM starts and ends threads all the time, and losing its children for one reading loses the workers' CPU).

    With ``threads`` (a :class:`_Threads` memory), only the threads it says to read are read; ``tids``: the
    threads of ``pid`` if already listed.
    """
    if tids is None:
        tids = os.listdir(f"/proc/{pid}/task")
    if threads is None:
        return _read_children(pid, tids)[0]
    out, forked = _read_children(pid, threads.to_read(pid, tids))
    if not threads.still(pid, out):  # a child seen before is not where it was: read every thread
        out, forked = _read_children(pid, threads.to_read(pid, tids, full=True))
    threads.read(pid, tids, forked, out)
    return out


def _read_children(pid: int, tids: list[str]) -> tuple[list[int], list[str]]:
    """The children of threads ``tids`` of ``pid``, and which of those threads had any."""
    out: list[int] = []
    forked: list[str] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids = f.read().split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if kids:
            forked.append(tid)
            out.extend(int(c) for c in kids)
    return out, forked


class _Threads:
    """Which threads of a process a reading must ask for children: all of them at most every :attr:`FULL`
    seconds, and in between only the threads that had children and the threads not seen before — and all of
    them again whenever a child seen before is not among the children read (it ended, or its thread did and
    it moved to another).

    A JVM has a hundred threads or more, and reading each one's
    ``children`` file made a reading cost about 6 ms — on the flagship a
    third of falkirk's own driver CPU per epoch, with one reading at each
    step execution's start and end. Its children (the PySpark daemon) are
    started once, by a thread that then keeps them. A child started by a
    thread that had none is found at the next full reading, at most
    :attr:`FULL` seconds later: until then its CPU is not in the readings,
    and once found all of it is (it counts from its start); one that ends
    before that reaches its parent's ``cutime``, which is read.
    """

    #: seconds between readings of every thread
    FULL = 2.0

    def __init__(self) -> None:
        import time

        self.clock = time.monotonic
        self.known: dict[int, set[str]] = {}
        self.forkers: dict[int, set[str]] = {}
        self.children: dict[int, set[int]] = {}
        self.full: dict[int, float] = {}

    def to_read(self, pid: int, tids: list[str], *, full: bool = False) -> list[str]:
        """The threads of ``pid`` (now ``tids``) to ask for children."""
        if full or pid not in self.known or self.clock() - self.full[pid] >= self.FULL:
            self.full[pid] = self.clock()
            self.known[pid], self.forkers[pid] = set(), set()
            return tids
        known, forkers = self.known[pid], self.forkers[pid]
        return [t for t in tids if t in forkers or t not in known]

    def still(self, pid: int, children: list[int]) -> bool:
        """Whether every child of ``pid`` seen at the last reading is in ``children``."""
        return self.children.get(pid, set()) <= set(children)

    def read(self, pid: int, tids: list[str], forked: list[str], children: list[int]) -> None:
        """What one reading of ``pid`` found: its threads, those with children, the children."""
        self.known[pid] = set(tids)
        self.forkers[pid] = (self.forkers[pid] & self.known[pid]) | set(forked)
        self.children[pid] = set(children)

    def keep(self, pids: set[int]) -> None:
        """Forget the processes not in ``pids`` (gone: their pid may be reused)."""
        for memo in (self.known, self.forkers, self.children, self.full):
            for pid in [p for p in memo if p not in pids]:
                del memo[pid]


class _Jit:
    """The CPU ticks of the JIT compiler threads (:data:`JIT_THREADS`) of the processes a reading walks.

    Each thread's name is read once, when a reading first lists it; a
    compiler thread's ``utime + stime`` at every reading. A compiler thread
    that ends (HotSpot starts and stops them as the compile queue grows and
    shrinks) keeps what it showed last, so the total never decreases; what
    it spent after that reading counts as the tree's other work.
    """

    def __init__(self) -> None:
        self.names: dict[tuple[int, int], dict[str, bool]] = {}  # process -> its threads: a compiler?
        self.ticks: dict[tuple[int, int, str], int] = {}  # (pid, start, tid) -> ticks at the last reading
        self.gone = 0
        self.reading: dict[tuple[int, int, str], int] = {}

    def start(self) -> None:
        """A new reading begins."""
        self.reading = {}

    def read(self, key: tuple[int, int], tids: list[str]) -> None:
        """Process ``key`` (pid, start time) has threads ``tids`` now: read its compilers."""
        pid = key[0]
        known = self.names.setdefault(key, {})
        listed = set(tids)
        for tid in [t for t in known if t not in listed]:
            del known[tid]
        for tid in tids:
            if tid not in known:
                try:
                    with open(f"/proc/{pid}/task/{tid}/comm", "rb") as f:
                        known[tid] = f.read().rstrip(b"\n") in JIT_THREADS
                except (FileNotFoundError, ProcessLookupError):
                    continue
            if known.get(tid):
                try:
                    with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                except (FileNotFoundError, ProcessLookupError):
                    continue
                self.reading[(pid, key[1], tid)] = int(fields[11]) + int(fields[12])

    def total(self, processes: set[tuple[int, int]]) -> int:
        """The reading's total ticks (``processes``: those it walked). A compiler thread of a walked process
        that was not read has ended: its last ticks are kept for good. One of a process the walk did not reach
        (it ended, or a reading missed it) keeps its last ticks until a reading sees it again, so a missed
        reading neither loses it nor, later, counts it twice."""
        for k, t in self.ticks.items():
            if k not in self.reading:
                if (k[0], k[1]) in processes:
                    self.gone += t
                else:
                    self.reading[k] = t
        self.ticks, self.reading = self.reading, {}
        for key in [k for k in self.names if k not in processes]:
            del self.names[key]
        return self.gone + sum(self.ticks.values())


def tree_cpu(pid: int | None = None) -> float | None:
    """CPU seconds (user + system, with reaped children) of process ``pid`` (default: this one) and its
    descendants: one reading, which can go down (see :class:`TreeMeter`)."""
    try:
        seen = _walk(os.getpid() if pid is None else pid)
    except (OSError, ValueError, IndexError):
        return None
    return sum(own + kids for _, own, kids in seen.values()) / _TICK


#: One process as :class:`TreeMeter` saw it: (parent's key, own ticks, reaped children's ticks).
_Seen = tuple[tuple[int, int] | None, int, int]


def _walk(
    root: int, threads: _Threads | None = None, jit: _Jit | None = None
) -> dict[tuple[int, int], _Seen]:
    """Every process under ``root``, keyed by (pid, start time) so that a reused pid is another process;
    ``threads``: which threads to ask for children (:class:`_Threads`; default all); ``jit``: read the JIT
    compilers' CPU too (:class:`_Jit`)."""
    out: dict[tuple[int, int], _Seen] = {}
    todo: list[tuple[int, tuple[int, int] | None]] = [(root, None)]
    seen: set[int] = set()
    while todo:
        p, parent = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            key = (p, int(fields[19]))
            out[key] = (parent, int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]))
            tids = os.listdir(f"/proc/{p}/task")
            if jit is not None:
                jit.read(key, tids)
            todo.extend((c, key) for c in _children(p, threads, tids))
        except (FileNotFoundError, ProcessLookupError):
            if p == root:
                raise
            continue  # gone between the parent's children list and its own stat
    return out


class TreeMeter:
    """:func:`tree_cpu` of ``pid``'s tree, made monotone: CPU that leaves the tree unreaped is kept.

    A process gone since the last reading should have reached its nearest
    ancestor still in the tree through ``cutime``; where that ancestor's
    ``cutime`` grew by less than the gone processes last showed, the
    difference is added to every later reading. (CPU a process spent
    after the last reading and took away unreaped is still missed.)
    Calls are serialised; ``None`` where ``/proc`` does not give the tree.
    :meth:`read` also gives the JIT compilers' share (:class:`_Jit`).
    """

    #: How many gone processes' charges are remembered, in case one was only missed by a reading.
    REMEMBER = 4096

    def __init__(self, pid: int | None = None) -> None:
        import threading

        self.pid = os.getpid() if pid is None else pid
        self.last: dict[tuple[int, int], _Seen] = {}
        self.kept = 0.0
        #: what each gone process added to :attr:`kept` (taken back if a later reading sees it again)
        self.charged: dict[tuple[int, int], float] = {}
        self.lock = threading.Lock()
        self.threads = _Threads()
        self.jit = _Jit()

    def __call__(self) -> float | None:
        got = self.read()
        return None if got is None else got[0]

    def read(self) -> tuple[float, float] | None:
        """(CPU seconds of the tree, of which the JVM's JIT compilers' seconds), both never decreasing."""
        with self.lock:
            self.jit.start()
            try:
                now = _walk(self.pid, self.threads, self.jit)
            except (OSError, ValueError, IndexError):
                return None
            jit = self.jit.total(set(now))
            self.threads.keep({pid for pid, _ in now})
            for key in [k for k in self.charged if k in now]:  # not gone after all: one reading missed it
                self.kept -= self.charged.pop(key)
            gone: dict[tuple[int, int], list[tuple[tuple[int, int], int]]] = {}
            for key, (parent, own, kids) in self.last.items():
                if key in now:
                    continue
                while parent is not None and parent not in now:
                    parent = self.last[parent][0] if parent in self.last else None
                if parent is not None:  # (None: the root itself is gone, and the walk has failed)
                    gone.setdefault(parent, []).append((key, own + kids))
            for ancestor, keys in gone.items():
                total = sum(t for _, t in keys)
                short = max(0, total - (now[ancestor][2] - self.last[ancestor][2]))
                for key, t in keys:  # the shortfall, shared in proportion to what each showed
                    if short and t:
                        self.charged[key] = short * t / total
                        self.kept += self.charged[key]
            while len(self.charged) > self.REMEMBER:
                self.charged.pop(next(iter(self.charged)))
            self.last = now
            tree = (sum(own + kids for _, own, kids in now.values()) + max(0.0, self.kept)) / _TICK
            return tree, min(jit / _TICK, tree)


def meter(spark: SparkSession) -> TreeMeter | None:
    """A :class:`TreeMeter` for ``spark`` when its executors run in this driver's process tree, else ``None``.

    That is a classic session on a ``local`` master; a Connect session's
    server, and a cluster's executors, are other machines' or other
    processes' work.
    """
    from falkirk.spark.pipeline.run.probe import is_local_master
    from falkirk.spark.pipeline.run.session import is_connect

    if is_connect(spark) or not is_local_master(spark) or tree_cpu() is None:
        return None
    return TreeMeter()
