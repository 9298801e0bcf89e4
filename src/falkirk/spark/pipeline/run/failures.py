"""Injected failures: ``STEP@EPOCH[:WHERE]``, fired once each.

========  ===================================================================
where     what happens when step ``STEP`` works on epoch ``EPOCH``
========  ===================================================================
before    the step fails before it starts the epoch (between steps)
mid       it fails after computing and writing its data, before it publishes
          its manifest and reports to the monitor (the default)
task      the first Spark task of its output to see a row fails on its
          first attempt, whichever partition that is (once on a local
          master; on a cluster once per machine); Spark retries it
          (``local[N,M]``, ``M > 1``): survivable by Spark alone
job       every attempt of every task with a row fails: the Spark job
          fails; the step lost nothing, so it runs the epoch again in place
          (a second failure there, or ``retry_in_place=False``: falkirk
          recovers it)
kill      the driver process is killed with SIGKILL before the step starts
kill-mid  … or at the mid point
executor  the executor JVM holding the most cached blocks (else the one
          running the first task of its output) is killed with SIGKILL by
          its first task there (a lost executor, mid-step; needs a cluster
          master: in ``local`` mode the executor is the driver)
after     the step fails between epochs, once every step has completed
          ``EPOCH`` (what :meth:`Pipeline.plan_failure` plans for)
========  ===================================================================

``task``, ``job`` and ``executor`` act through the step output's job: where the step's output is known to
have no rows by its plan (``df.limit(0)``: no job computes it; an input epoch of no records), they do not
fire that epoch — they stay pending, are in :attr:`RunResult.unfired
<falkirk.spark.pipeline.run.executor.RunResult.unfired>`, not in ``fired``, and a warning on the
``falkirk.spark`` logger says so once. An output empty by its data (a filter no row passes; or any empty
output through Spark Connect, where the plan is not asked) runs its job, and no task sees a row: on a local
master the run finds at its end that no task left the injection's marker in its directory of markers (one a
run, in the driver's temporary directory), and moves it to ``unfired`` with a warning (:meth:`Injector.settle`).
On a cluster or through Spark Connect the driver cannot see the executors' temporary directories, and such an
injection still counts as fired. A run removes its directory of markers as it ends, so that a straggling task of
a failed job (Spark does not interrupt a cancelled task's thread) finds no directory to leave a marker in; what a
killed or interrupted driver left behind is swept by the next run with a ``task`` or ``job`` injection on this
machine (:func:`sweep_markers`). The ``executor`` kills' markers, in the executors' own temporary directories,
are not.

A failed step loses its memory (state, queued input); falkirk plans the
rollback and the executor applies it. A failed job that lost nothing is
retried in place first (:meth:`Executor._in_place
<falkirk.spark.pipeline.run.executor.Executor._in_place>`).

>>> Injection.parse("cc@7")
Injection(step='cc', epoch=7, where='mid')
>>> Injection.parse("heavy@3:before").where
'before'
>>> Injection.parse("cc@x")
Traceback (most recent call last):
...
falkirk.spark.errors.PipelineError: bad failure 'cc@x': expected STEP@EPOCH[:WHERE] with WHERE in before, mid, task, job, kill, kill-mid, executor, after
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from attrs import frozen

from falkirk.spark.errors import PipelineError, StepFailure
from falkirk.spark.pipeline.run.session import busiest_executor, process_alive

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["WHERE", "Injection", "Injector"]

WHERE = ("before", "mid", "task", "job", "kill", "kill-mid", "executor", "after")
_SPEC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)@(\d+)(?::([a-z-]+))?$")


@frozen
class Injection:
    """Fail ``step`` at ``epoch``, at point ``where`` (see the module docstring)."""

    step: str
    epoch: int
    where: str = "mid"

    @classmethod
    def parse(cls, text: str) -> Injection:
        """Parse ``STEP@EPOCH[:WHERE]``."""
        m = _SPEC.match(text.strip())
        if not m or (m.group(3) or "mid") not in WHERE:
            raise PipelineError(
                f"bad failure {text!r}: expected STEP@EPOCH[:WHERE] with WHERE in {', '.join(WHERE)}"
            )
        return cls(m.group(1), int(m.group(2)), m.group(3) or "mid")

    def __str__(self) -> str:
        return f"{self.step}@{self.epoch}:{self.where}"


def _marker(name: str, directory: str | None = None) -> str:
    """Where an injection named ``name`` leaves its marker: ``directory`` (the driver's temporary directory, on a
    local master, where the driver looks for it), else the temporary directory of the process asking (an
    executor's Python worker: once per machine)."""
    return os.path.join(directory or tempfile.gettempdir(), name)


#: a ``task`` or ``job`` injection's marker: the place of the driver that named it (:func:`_place`), its process
#: id, and the injection's own id (:func:`_marker_name`); the older form had neither place nor process id
_MARKER = re.compile(r"falkirk-injection-(?:([0-9a-f]{8})-(\d{1,9})-)?[0-9a-f]{32}")
#: a run's directory of markers (:attr:`Injector.here`): named as a marker is, ``injections`` for ``injection``
_RUN_MARKERS = re.compile(r"falkirk-injections-([0-9a-f]{8})-(\d{1,9})-[0-9a-f]{32}")
#: how old a marker of the older form (no process id to ask after) is before a sweep removes it, in seconds
STALE_MARKER_SECONDS = 24 * 3600


def _place() -> str:
    """This process's machine and process namespace, as 8 hex digits: a process id means this process's only
    where both are the same (another host's driver, or a container's sharing ``/tmp`` but not its process ids,
    may name a marker in the same directory)."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return hashlib.sha1(f"{socket.gethostname()}/{namespace}".encode()).hexdigest()[:8]


def _marker_name(kind: str = "injection") -> str:
    """A new marker's name (:func:`_marker`), unique to it, naming the driver process that made it and where it
    runs (so that :func:`sweep_markers` can tell a live run's ``injection`` markers from those a killed driver
    left); ``kind``: ``executor`` for an executor kill's, which no sweep touches; ``injections`` for a run's
    directory of markers."""
    return f"falkirk-{kind}-{_place()}-{os.getpid()}-{uuid.uuid4().hex}"


def sweep_markers(directory: str) -> list[str]:
    """Remove from ``directory`` the injection markers no run will settle (:meth:`Injector.settle`): the
    directories of markers of driver processes of this machine and process namespace that are gone — killed by a
    ``kill`` injection or a signal before their run ended — with what is in them, markers of such drivers made
    before runs kept theirs in a directory, and markers of the older form still, with no process id, a day old. A
    live driver's markers, this one's included, those named elsewhere (another host, another container), executor
    kills' markers and anything else in ``directory`` are left alone. (A dead driver whose process id a live
    process took since keeps its markers.) The names removed."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    now, here = time.time(), _place()
    for name in names:
        path = os.path.join(directory, name)
        run = _RUN_MARKERS.fullmatch(name)
        if run is not None:
            if run.group(1) == here and not process_alive(int(run.group(2))) and _remove_tree(path):
                removed.append(name)
            continue
        m = _MARKER.fullmatch(name)
        if m is None or (m.group(1) is not None and m.group(1) != here):
            continue
        try:
            if m.group(2) is not None:
                if process_alive(int(m.group(2))):
                    continue
            elif now - os.stat(path).st_mtime < STALE_MARKER_SECONDS:
                continue
            os.remove(path)
        except OSError:  # gone already, not ours to remove, or a directory (no marker)
            continue
        removed.append(name)
    return removed


def _remove_tree(path: str) -> bool:
    """Remove directory ``path`` with what is in it, again while a late task leaves a marker in it as it goes:
    once it is gone, no task can (a task makes no directory). Whether it is gone."""
    for _ in range(8):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return True
    return False


def _failing_filter(
    df: DataFrame, label: str, every_attempt: bool, marker: str, directory: str | None = None
) -> DataFrame:
    """``df`` behind a filter that fails: the first attempt of the first task to see a row (whichever partition
    it is: the first to create ``marker`` (:func:`_marker`): once on a local master, once per machine on a
    cluster), or (``every_attempt``) every attempt of every task with a row — a job fails wherever its rows are,
    even where the first partition is empty. Either leaves ``marker`` behind: the failure fired. A frame without
    rows runs no filter and cannot fail this way (and leaves no marker). Where the marker cannot be written (a
    full or read-only temporary directory; ``directory`` gone, its run settled), a ``task`` failure falls back to
    partition 0's first attempt."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    # the tasks of this worker that let their rows through: one look at the marker each, not one a row
    passed: set[tuple[int, int, int]] = set()

    def ok(_):  # type: ignore[no-untyped-def]  # no hints: PySpark would try to infer a pandas UDF
        tc = TaskContext.get()
        if tc is None:
            return True
        task = (tc.stageId(), tc.partitionId(), tc.attemptNumber())
        if task in passed:
            return True
        path = _marker(marker, directory)
        if every_attempt:
            try:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY))
            except OSError:
                pass  # fails all the same; the driver will not know it fired
        elif tc.attemptNumber() != 0:
            passed.add(task)
            return True
        else:
            try:  # the first task with a row, not partition 0's (which may have none)
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                passed.add(task)
                return True
            except OSError:
                if tc.partitionId() != 0:
                    passed.add(task)
                    return True
        raise RuntimeError(f"falkirk injected task failure ({label}, attempt {tc.attemptNumber()})")

    udf = F.udf(ok, BooleanType(), useArrow=False).asNondeterministic()
    return df.where(udf(F.lit(1)))


def _executor_process(pid: int) -> int | None:
    """The pid of the executor JVM above process ``pid`` (a Python worker), or ``None`` (Linux ``/proc``)."""
    for _ in range(8):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            return None
        if b"CoarseGrainedExecutorBackend" in cmdline:
            return pid
    return None


def _executor_id(jvm: int) -> str | None:
    """The ``--executor-id`` argument of executor JVM ``jvm`` (Linux ``/proc``)."""
    try:
        with open(f"/proc/{jvm}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return None
    for flag, value in zip(args, args[1:], strict=False):
        if flag == b"--executor-id":
            return value.decode()
    return None


def _killing_filter(df: DataFrame, label: str, target: str | None = None) -> DataFrame:
    """``df`` behind a filter whose task SIGKILLs the executor JVM it runs in.

    ``target``: the id of the executor to kill (the one holding the most
    cached blocks); it fires on the first attempt of the first task that
    runs there. Without a target, on the first attempt of partition 0.
    Once per machine: a marker in the machine's temporary directory stops a
    resubmitted stage from killing the replacement executor there too.
    """
    from pyspark import TaskContext
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    # named here, placed there: the executor's temporary directory, not the driver's (which another machine, or a
    # worker in another mount namespace, may not have; a driver with TMPDIR set has one of its own)
    name = _marker_name("executor")

    def ok(_):  # type: ignore[no-untyped-def]
        marker = _marker(name)
        tc = TaskContext.get()
        if tc is None or tc.attemptNumber() != 0 or (target is None and tc.partitionId() != 0):
            return True
        jvm = _executor_process(os.getpid())
        if jvm is None:
            raise RuntimeError(f"falkirk injection {label}: no executor JVM above this Python worker")
        if target is not None and _executor_id(jvm) != target:
            return True
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return True
        os.kill(jvm, signal.SIGKILL)
        return True

    udf = F.udf(ok, BooleanType(), useArrow=False).asNondeterministic()
    return df.where(udf(F.lit(1)))


class Injector:
    """The pending injections of one run; each fires at most once."""

    def __init__(self, injections: Iterable[Injection | str] = ()) -> None:
        if isinstance(injections, (str, Injection)):
            injections = [injections]
        self.pending = [i if isinstance(i, Injection) else Injection.parse(i) for i in injections]
        self.fired: list[Injection] = []
        self._unfired_said: set[Injection] = set()  # warned once each
        #: the markers of the ``task`` and ``job`` injections wrapped (:func:`_failing_filter`), by name: looked
        #: for and removed by :meth:`settle`
        self.markers: dict[str, Injection] = {}
        #: the driver's temporary directory where its executors' tasks can write to it (a local master, not
        #: through Spark Connect): the markers go there, and :meth:`settle` knows which failures fired
        self.here: str | None = None
        #: this run's directory of markers in :attr:`here`, made by the first :meth:`wrap` to need it and removed
        #: by :meth:`settle`
        self._run: str | None = None
        # a concurrent run's executions reach their injection points on several threads
        self._lock = threading.Lock()

    def validate(self, steps: Iterable[str], *, local: bool = True) -> None:
        """Reject injections naming unknown steps, and executor kills on a ``local`` master."""
        known = set(steps)
        for i in self.pending:
            if i.step not in known:
                raise PipelineError(
                    f"failure {i}: unknown step {i.step!r} (steps: {', '.join(sorted(known))})"
                )
            if i.where == "executor" and local:
                raise PipelineError(
                    f"failure {i}: killing an executor needs a cluster master (in local mode the executor "
                    "is the driver's own JVM)"
                )

    def _take(self, step: str, epoch: int, where: Iterable[str]) -> Injection | None:
        with self._lock:
            for i in self.pending:
                if (i.step, i.epoch) == (step, epoch) and i.where in where:
                    self.pending.remove(i)
                    self.fired.append(i)
                    return i
        return None

    def at(self, step: str, epoch: int, point: str) -> None:
        """Fire a ``before`` or ``mid`` injection (or kill) at ``point`` of ``step``'s epoch, if one is
        pending."""
        kill = "kill" if point == "before" else "kill-mid"
        i = self._take(step, epoch, (point, kill))
        if i is None:
            return
        if i.where.startswith("kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        raise StepFailure(step, epoch, f"injected failure ({point})", injected=True)

    def after(self, epoch: int) -> list[Injection]:
        """The ``after`` injections of ``epoch`` (fired now: every step has completed ``epoch``)."""
        with self._lock:
            due = [i for i in self.pending if i.epoch == epoch and i.where == "after"]
            for i in due:
                self.pending.remove(i)
                self.fired.append(i)
        return due

    def wrap(self, step: str, epoch: int, df: DataFrame, *, empty: bool = False) -> DataFrame:
        """``df`` with an injected task (retried by Spark) or job failure, if one is pending. ``empty``: ``df``
        is known to have no rows with no job (:meth:`Frames.planned_empty
        <falkirk.spark.pipeline.run.frames.Frames.planned_empty>`): no task runs to fail, so a pending one does
        not fire (see the module docstring)."""
        kinds = ("task", "job", "executor")
        if empty:
            with self._lock:
                unfired = [
                    i
                    for i in self.pending
                    if (i.step, i.epoch) == (step, epoch) and i.where in kinds and i not in self._unfired_said
                ]
                self._unfired_said.update(unfired)
            for i in unfired:
                logging.getLogger("falkirk.spark").warning(
                    "failure %s did not fire: %r has no rows at epoch %d, known without a job (an output empty "
                    "by its plan, an input epoch of no records), so no task runs to fail",
                    i,
                    step,
                    epoch,
                )
            return df
        taken = self._take(step, epoch, kinds)
        if taken is None:
            return df
        if taken.where == "executor":
            return _killing_filter(df, str(taken), busiest_executor(df.sparkSession))
        name = _marker_name()
        with self._lock:
            self.markers[name] = taken
            run = self._markers_here()
        return _failing_filter(df, str(taken), taken.where == "job", name, run)

    def _markers_here(self) -> str | None:
        """This run's directory of markers (under the lock), made now if it is not there; ``None`` where the
        driver cannot see its tasks' markers. Where it cannot be made, tasks find no place for their markers
        (see :func:`_failing_filter`)."""
        if self.here is None:
            return None
        if self._run is None:
            self._run = os.path.join(self.here, _marker_name("injections"))
            try:
                os.mkdir(self._run)
            except OSError as e:
                logging.getLogger("falkirk.spark").info(
                    "no directory of injection markers %s: %s", self._run, e
                )
        return self._run

    def settle(self) -> list[Injection]:
        """At the end of a run: the ``task`` and ``job`` injections that were wrapped but whose filter no task
        ran — an output empty by its data (a filter no row passes), an execution that failed before its job —
        moved from :attr:`fired` back to :attr:`pending` (:attr:`RunResult.unfired
        <falkirk.spark.pipeline.run.executor.RunResult.unfired>`), each with a warning, and returned. Known only
        where the markers are the driver's to see (:attr:`here`); elsewhere they stay fired. The markers this
        machine holds are removed, with the run's directory of them: a straggling task of a failed job that reaches
        its filter after this finds no directory to leave its marker in."""
        with self._lock:
            markers, self.markers = self.markers, {}
            run, self._run = self._run, None
        missed: list[Injection] = []
        for name, i in markers.items():
            path = _marker(name, run)
            if run is not None and not os.path.exists(path):
                missed.append(i)
            try:
                os.remove(path)
            except OSError:
                pass
        if run is not None and not _remove_tree(run):
            logging.getLogger("falkirk.spark").warning("could not remove the injection markers in %s", run)
        with self._lock:
            for i in missed:
                if i in self.fired:
                    self.fired.remove(i)
                    self.pending.append(i)
        for i in missed:
            logging.getLogger("falkirk.spark").warning(
                "failure %s did not fire: no task of %r at epoch %d saw a row (an output empty by its data, or "
                "an execution that failed before its job ran), so no task failed",
                i,
                i.step,
                i.epoch,
            )
        return missed
