"""SparkSession defaults, job tags and Spark-level task failures: the one place that knows classic from
Connect.

Everything in :mod:`falkirk.spark.pipeline` that needs more than the
DataFrame API goes through this module, which works with a classic session
(a JVM in the driver, reached through py4j) and with a Spark Connect session
(``SparkSession.builder.remote("sc://…")``, no JVM on the client):

==========================  ==================================  =================================
need                        classic                             Spark Connect
==========================  ==================================  =================================
:func:`job_group`           a job group (``setJobGroup``)       a job tag (``addTag``/``removeTag``)
:func:`failed_tasks`        the status tracker                  unknown (``None``)
:func:`all_failed_tasks`    the status store's executor list    unknown (``None``)
:func:`executors`           the JVM status tracker              unknown (``None``)
:func:`detach`              Spark's columnar cache, its         ``localCheckpoint`` (plan statistics
                            batches locally checkpointed        are kept)
:func:`free`                its RDD unpersisted                 left to Spark (the server lets go of it
                                                                when the client's DataFrame is
                                                                collected; its JVM's GC frees it)
:func:`missing_blocks`      the status store's block list       unknown (``None``)
:func:`busiest_executor`    the status store's executor list    unknown (``None``)
==========================  ==================================  =================================

falkirk does not hide Spark: a :class:`~falkirk.spark.Pipeline` takes the
``SparkSession`` you built. :func:`local_session` is the convenience for
everyone else: ``local[2,3]`` (two cores, three attempts per task, so Spark
itself survives a failed task), no UI, two shuffle partitions.

>>> LOCAL_DEFAULTS['spark.sql.shuffle.partitions'], LOCAL_DEFAULTS['spark.ui.enabled']
('2', 'false')
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from falkirk.spark.pipeline.store.jvm import jclass, once

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "LOCAL_DEFAULTS",
    "CODEGEN_CACHE",
    "SMALL_PAGES",
    "SMALL_PAGES_UP_TO_MIB",
    "mebibytes",
    "driver_memory",
    "local_master",
    "small_pages",
    "pages_note",
    "session_pages_note",
    "SMALL_DATA",
    "local_session",
    "sql_conf",
    "job_group",
    "failed_tasks",
    "all_failed_tasks",
    "codegen_compilations",
    "recompiling",
    "RECOMPILING_EPOCHS",
    "detach",
    "stored",
    "executors",
    "is_connect",
    "check_usable",
    "console_to",
    "console_log_path",
    "take_start_seconds",
    "materialised",
    "held_bytes",
    "held_on_driver",
    "local_scan",
    "shares_storage",
    "missing_blocks",
    "busiest_executor",
    "process_alive",
]


def mebibytes(size: str) -> float | None:
    """A JVM memory size as Spark's ``spark.driver.memory`` takes it (a number: MiB; or with a unit ``b``, ``k``,
    ``m``, ``g``, ``t``, the last four optionally followed by ``b``), in MiB; ``None`` if it is none.

    >>> mebibytes("2g"), mebibytes("512m"), mebibytes("1024"), mebibytes("12GB"), mebibytes("1048576b")
    (2048.0, 512.0, 1024.0, 12288.0, 1.0)
    >>> mebibytes("1.5g"), mebibytes("lots")
    (None, None)
    """
    import re

    got = re.fullmatch(r"\s*(\d+)\s*(b|[kmgt]b?)?\s*", size.lower())
    if got is None:
        return None
    unit = {"b": 1 / 1024**2, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2}[(got.group(2) or "m")[0]]
    return float(int(got.group(1)) * unit)


def driver_memory(settings: Mapping[str, str]) -> str:
    """The driver's memory as a session started with ``settings`` has it: ``spark.driver.memory``, else
    ``SPARK_DRIVER_MEMORY``, else Spark's 1 GiB (``"1g"``)."""
    return settings.get("spark.driver.memory") or os.environ.get("SPARK_DRIVER_MEMORY") or "1g"


def local_master(master: str) -> bool:
    """Whether ``master`` runs the executor in the driver's JVM (``local``, ``local[N]``, ``local[N,F]``), not
    ``local-cluster[…]``, whose executors are JVMs of their own, nor a cluster's.

    >>> [local_master(m) for m in ("local", "local[2,3]", "local-cluster[2,1,1024]", "spark://host:7077")]
    [True, True, False, False]
    """
    return master == "local" or master.startswith("local[")


def small_pages(settings: Mapping[str, str], master: str = "local") -> dict[str, str]:
    """:data:`SMALL_PAGES` for a ``local`` ``master`` (:func:`local_master`) whose driver, started with
    ``settings``, has at most :data:`SMALL_PAGES_UP_TO_MIB` of memory (:func:`driver_memory`) and whose page size
    is not set; else nothing (a cluster's executors are sized apart from the driver).

    >>> small_pages({"spark.driver.memory": "1g"}), small_pages({"spark.driver.memory": "8g"}, "local[2,3]")
    ({'spark.buffer.pageSize': '1m'}, {'spark.buffer.pageSize': '1m'})
    >>> small_pages({"spark.driver.memory": "12g"}), small_pages({"spark.buffer.pageSize": "4m"})
    ({}, {})
    >>> small_pages({"spark.driver.memory": "1g"}, "spark://host:7077")
    {}
    """
    driver = mebibytes(driver_memory(settings))
    return (
        dict(SMALL_PAGES) if _wants_small_pages("spark.buffer.pageSize" in settings, master, driver) else {}
    )


def _wants_small_pages(page_size_set: bool, master: str, driver_mib: float | None) -> bool:
    """The one rule :func:`small_pages` and :func:`pages_note` apply: no page size set, a ``local`` master, a
    driver of at most :data:`SMALL_PAGES_UP_TO_MIB` (``None``: not known, no)."""
    return (
        not page_size_set
        and local_master(master)
        and driver_mib is not None
        and driver_mib <= SMALL_PAGES_UP_TO_MIB
    )


def pages_note(page_size_set: bool, master: str, heap_mib: float) -> str | None:
    """A run-start note for a running session without :data:`SMALL_PAGES` where :func:`local_session` would have
    applied them: no page size set (``page_size_set``), a ``local`` master, a driver whose heap (``heap_mib``, the
    JVM's own maximum) is at most :data:`SMALL_PAGES_UP_TO_MIB` — a session the user built; ``None`` otherwise.

    >>> pages_note(False, "local[2]", 2048.0).split(":")[0]
    'Spark memory pages are their default size in this local driver (2,048 MiB of heap)'
    >>> pages_note(True, "local[2]", 2048.0), pages_note(False, "spark://host:7077", 2048.0)
    (None, None)
    >>> pages_note(False, "local[2]", 12288.0) is None  # past 8 GiB local_session keeps Spark's own pages
    True
    """
    if not _wants_small_pages(page_size_set, master, heap_mib):
        return None
    ((key, value),) = SMALL_PAGES.items()
    return (
        f"Spark memory pages are their default size in this local driver ({heap_mib:,.0f} MiB of heap): "
        "each broadcast join of integer keys holds a page of up to 64 MiB (32 MiB at 1 GiB of heap) on the "
        "driver, however few its rows, until Spark's cleaner drops it, and the driver's heap and garbage "
        f"collection grow with them; build the session with {key}={value} (static: it cannot be changed once "
        "the JVM runs; falkirk.spark.local_session does it): docs/spark.md, 'Spark settings'"
    )


def session_pages_note(spark: SparkSession) -> str | None:
    """:func:`pages_note` for the running session ``spark``, from its driver's JVM (the page size set or not, its
    master, its heap's maximum: a few py4j calls); ``None`` through Spark Connect (its server's settings are not
    this client's) or where the JVM cannot be asked (a note is not worth a failed run)."""
    if is_connect(spark):
        return None
    try:
        sc = spark.sparkContext
        master = sc.master or ""
        if not local_master(master):
            return None
        if sc._jsc.sc().conf().contains("spark.buffer.pageSize"):
            return None
        jvm: Any = sc._jvm
        heap = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
    except Exception:
        return None
    return pages_note(False, master, heap / 2**20)


#: SparkContext -> the seconds :func:`local_session` took to start it (read once: :func:`take_start_seconds`)
_STARTED: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def is_connect(spark: SparkSession) -> bool:
    """``True`` for a Spark Connect session (no JVM on the client)."""
    try:
        from pyspark.sql.utils import is_remote_only

        if is_remote_only():
            return True
    except ImportError:
        pass
    try:
        from pyspark.sql.connect.session import SparkSession as RemoteSession
    except Exception:  # the connect extra (grpcio, pandas, pyarrow) is not installed
        return False
    return isinstance(spark, RemoteSession)


def check_usable(spark: object, what: str = "the pipeline") -> None:
    """Raise :class:`~falkirk.spark.errors.SessionError` unless ``spark`` is a running ``SparkSession``.

    A stopped classic session has no JVM context left (``sparkContext._jsc``
    is ``None``) and a stopped Connect session says so (``is_stopped``);
    either would otherwise fail deep inside the first Spark call. A classic
    session whose driver JVM died (killed, out of memory, or exited after
    Spark gave up on its executor) still looks alive from Python: one call
    into the JVM (``SparkContext.isStopped``, no job) finds out, so the
    error says the session is gone rather than blaming the root's storage.

    >>> check_usable(object())
    Traceback (most recent call last):
    ...
    falkirk.spark.errors.SessionError: the pipeline needs a pyspark.sql.SparkSession, got object
    """
    from falkirk.spark.errors import SessionError

    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - falkirk[spark] not installed
        raise SessionError(f"{what} needs PySpark: pip install 'falkirk[spark]'") from exc
    if not isinstance(spark, SparkSession) and not is_connect(spark):  # type: ignore[arg-type]
        raise SessionError(f"{what} needs a pyspark.sql.SparkSession, got {type(spark).__name__}")
    if is_connect(spark):  # type: ignore[arg-type]
        stopped = bool(getattr(spark, "is_stopped", False))
    else:
        sc = getattr(spark, "_sc", None)
        stopped = sc is None or getattr(sc, "_jsc", None) is None
        if not stopped:
            try:
                stopped = bool(sc._jsc.sc().isStopped())  # type: ignore[union-attr]
            except Exception as exc:  # py4j cannot reach the JVM: the driver process is gone
                from falkirk.spark.pipeline.run.causes import root_cause

                raise SessionError(
                    f"{what}: its SparkSession's JVM does not answer ({root_cause(exc)}): the Spark driver process "
                    "died (killed, out of memory, or Spark exited after an error); build a new session "
                    "(SparkSession.builder.getOrCreate() in a new Python process) and pass it as "
                    "Pipeline(..., spark=...)"
                ) from None
    if stopped:
        raise SessionError(
            f"{what}: its SparkSession was stopped (spark.stop() was called, or Spark shut down after an error); "
            "build a new one (SparkSession.builder.getOrCreate()) and pass it as Pipeline(..., spark=...)"
        )


#: Spark's cache of compiled generated code, in entries (static: set when the JVM starts). Spark's default,
#: 100, is fewer classes than one epoch of the flagship generates (about 120, expression code even without
#: whole-stage code generation): the cache evicted every class before the next epoch asked for it again, and
#: every epoch compiled them all anew (87 Janino compilations per flagship epoch, 42 per Structured Streaming
#: micro-batch of the same application) — and the JVM then compiled the new classes' bytecode again, which
#: kept its JIT busy for good (1.6-2 CPU-s of an epoch's ~4). With room for them, no epoch after the first
#: compiles anything (docs/spark.md, "Spark settings").
CODEGEN_CACHE = {"spark.sql.codegen.cache.maxEntries": "1000"}

#: The size of Spark's memory pages (static: set when the JVM starts), which :func:`local_session` applies on a
#: ``local`` master whose driver has at most :data:`SMALL_PAGES_UP_TO_MIB` of memory. Spark sizes a page from the memory
#: it has: 32 MiB in a 2 GiB driver on 2 cores, for each task's hash aggregation or sort. A broadcast hash join's table
#: of integer keys (packed into a long) is built on the driver by a memory manager of the whole heap on one core: its
#: page is 64 MiB in a heap over 1 GiB (32 MiB at 1 GiB) however few its rows, the JVM zeroing it. Such tables stay in
#: the driver's block manager until Spark's cleaner drops their broadcast: measured on W2's changes form (10^4 keys, one
#: broadcast join in its step an epoch, a 2 GiB driver), the driver's live heap after a full GC was 200-690 MiB, most of
#: it 64 MiB pages, where Structured Streaming's was 79; with 1 MiB pages, 97-111, and the JVM's CPU 0.52 and 0.48 CPU-s
#: an epoch instead of 0.60 and 0.56 (its concurrent G1 marking gone; the stream's 0.33 and 0.34 instead of 0.36 and
#: 0.42). A larger need still gets a page of its size (``allocatePage`` takes the larger of the two).
SMALL_PAGES = {"spark.buffer.pageSize": "1m"}

#: The most driver memory (MiB) :func:`local_session` applies :data:`SMALL_PAGES` with: a task holds at most
#: 8,192 pages (8 GiB of 1 MiB pages; past that it fails, it does not spill), and a task alone may be granted
#: Spark's whole execution memory, about 0.6 of the heap: past 8 GiB of driver memory, Spark's own page size.
SMALL_PAGES_UP_TO_MIB = 8192

#: Configuration :func:`local_session` applies (small data: few partitions, no UI; :data:`CODEGEN_CACHE`; and
#: :data:`SMALL_PAGES` where the driver's memory is at most :data:`SMALL_PAGES_UP_TO_MIB`).
LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    # a concurrent run (Pipeline(concurrency=N)) submits jobs from several threads: FAIR shares the cores
    # between them instead of queueing a small job behind a large one (one thread at a time: the same as FIFO)
    "spark.scheduler.mode": "FAIR",
    **CODEGEN_CACHE,
}

#: Runtime SQL settings for epochs of a few thousand rows (``Pipeline(spark_conf=SMALL_DATA)``):
#: static plans without whole-stage code generation. At that size adaptive re-planning (one
#: job per query stage) and compiling generated code cost more than they save — about 12% of
#: the flagship's CPU time and half of its iterative step's.
SMALL_DATA = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
}


def local_session(
    master: str = "local[2,3]",
    app_name: str = "falkirk",
    conf: Mapping[str, str] | None = None,
    *,
    console: bool = False,
    console_log: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """A local ``SparkSession`` with :data:`LOCAL_DEFAULTS`, and :data:`SMALL_PAGES` on a ``local`` master whose
    driver has at most :data:`SMALL_PAGES_UP_TO_MIB` of memory (:func:`small_pages`) (``getOrCreate``: reuses a
    running one).

    On a ``local`` master, Python workers run this interpreter (``PYSPARK_PYTHON``
    unless already set), so UDFs see the same packages as the driver.

    ``conf`` adds or overrides settings (``{"spark.sql.shuffle.partitions": "4"}``).
    The log level is set to ``ERROR``. Spark's own console output — the
    log4j banner, start-up warnings and the Java stack traces of failed
    tasks, which falkirk recovers from — goes to a log file when this call
    starts the JVM (``console_log``, default ``<tmp>/falkirk-spark-<pid>.log``,
    :func:`console_log_path`; its path is logged to the ``falkirk.spark``
    logger); ``console=True`` lets it through to the terminal.
    """
    import sys

    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    # Python workers run on this machine: use this interpreter (PySpark's default is python3)
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = dict(LOCAL_DEFAULTS)
    settings.update(conf or {})
    settings.update(small_pages(settings, master))
    for key, value in settings.items():
        builder = builder.config(key, value)
    starts_jvm = SparkContext._gateway is None
    log_to = None
    if starts_jvm and not console:
        log_to = Path(console_log) if console_log is not None else console_log_path("falkirk-spark")
    t0 = time.perf_counter()
    with console_to(log_to):
        spark = builder.getOrCreate()
    if starts_jvm:
        _STARTED[spark.sparkContext] = time.perf_counter() - t0
    if log_to is not None:
        logging.getLogger("falkirk.spark").info("Spark's console output (log4j) goes to %s", log_to)
    quiet(spark)
    return spark


#: How many console logs of ended drivers :func:`console_log_path` keeps (the newest), per prefix.
KEPT_CONSOLE_LOGS = 8


def console_log_path(prefix: str, directory: str | os.PathLike[str] | None = None) -> Path:
    """``<directory>/<prefix>-<pid>.log`` (default directory: the temporary one), the default file of this
    driver's Spark console output; the logs of the same prefix left by drivers that have ended are removed
    there, all but the newest :data:`KEPT_CONSOLE_LOGS` (kept to be read after a failure), so a machine that
    starts many drivers (a test suite, a benchmark) does not collect one file per process. A log whose
    process is still running is never removed."""
    import re

    where = Path(tempfile.gettempdir() if directory is None else directory)
    pattern = re.compile(rf"{re.escape(prefix)}-(\d+)\.log")
    ended: list[tuple[float, Path]] = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        entries = []
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None or process_alive(int(m.group(1))):
            continue
        try:
            ended.append((entry.stat().st_mtime, Path(entry.path)))
        except OSError:
            continue  # removed meanwhile
    for _, path in sorted(ended, reverse=True)[KEPT_CONSOLE_LOGS:]:
        try:
            path.unlink()
        except OSError:
            pass  # another driver removed it, or it is not ours to remove
    return where / f"{prefix}-{os.getpid()}.log"


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal exists too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # there, not ours (or not a pid this system could have): left alone
    return True


def take_start_seconds(spark: SparkSession) -> float | None:
    """The seconds :func:`local_session` took to start ``spark`` (JVM and context), once; then ``None``.

    ``None`` too for a session :func:`local_session` did not start (built by
    the caller, or Spark Connect). The first run on a session counts it as
    its restart's session start (:mod:`~falkirk.spark.pipeline.run.journal`).
    """
    try:
        return _STARTED.pop(spark.sparkContext, None)
    except Exception:  # Spark Connect: no SparkContext
        return None


@contextmanager
def console_to(path: Path | None) -> Iterator[None]:
    """Start a JVM inside the block with its standard error going to ``path`` (``None``: the terminal).

    PySpark starts the driver's JVM as a child process that inherits file
    descriptor 2; pointing it at a file while the session is built sends
    Spark's log4j banner, startup warnings and console progress there for
    the JVM's whole life, and leaves Python's own standard error alone.
    """
    if path is None:
        yield
        return
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def quiet(spark: SparkSession) -> None:
    """Log level ``ERROR`` for a classic session's driver (a Connect server logs on its own side)."""
    if not is_connect(spark):
        spark.sparkContext.setLogLevel("ERROR")


@contextmanager
def sql_conf(spark: SparkSession, conf: Mapping[str, str] | None) -> Iterator[None]:
    """Set runtime SQL settings ``conf`` on ``spark`` for the enclosed block, then restore them."""
    saved: dict[str, str | None] = {k: spark.conf.get(k, None) for k in conf or {}}
    for key, value in (conf or {}).items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


@contextmanager
def job_group(
    spark: SparkSession, group: str, description: str = "", *, pool: str | None = None
) -> Iterator[str]:
    """Run the enclosed Spark jobs in job group ``group`` (a job tag through Spark Connect); ``pool``: in
    that scheduler pool (under ``spark.scheduler.mode=FAIR`` pools share the cores fairly; a classic
    session only)."""
    if is_connect(spark):
        tag = group.replace(",", ";")
        spark.addTag(tag)
        try:
            yield tag
        finally:
            spark.removeTag(tag)
        return
    sc = spark.sparkContext
    sc.setJobGroup(group, description or group)
    if pool is not None:
        sc.setLocalProperty("spark.scheduler.pool", pool)
    try:
        yield group
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        if pool is not None:
            sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]


def all_failed_tasks(spark: SparkSession) -> int | None:
    """Failed task attempts of the whole application so far, every executor's (lost ones included); ``None``
    if unknown (Spark Connect, a stopped context).

    One look at Spark's status store (a few py4j calls): two equal
    readings, before and after a job group's jobs, mean none of them had a
    failed attempt (:func:`failed_tasks`' ``quiet``).
    """
    if is_connect(spark):
        return None
    try:
        sc = spark.sparkContext
        summaries = once(("statusStore",), lambda: sc._jsc.sc().statusStore(), owner=sc).executorList(False)
        total = sum(int(summaries.apply(i).failedTasks()) for i in range(summaries.size()))
    except Exception:  # noqa: BLE001 - a stopped context or another JVM: unknown, and the exact path is taken
        return None
    return total


def codegen_compilations(spark: SparkSession) -> int | None:
    """How many generated classes Spark has compiled in the driver's JVM so far (its ``CodegenMetrics``);
    ``None`` where unknown (Spark Connect, a stopped context). On a ``local`` master that is every compilation
    of the job; on a cluster the executors compile in JVMs of their own."""
    if is_connect(spark):
        return None
    try:
        jvm: Any = spark.sparkContext._jvm
        # a static histogram of the JVM's (its package path alone is six py4j calls to look up)
        timer = once(
            ("codegen",), lambda: jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
        )
        return int(timer.getCount())
    except Exception:  # noqa: BLE001 - advisory: unknown
        return None


#: Epochs in a row (after the first) that must each compile classes for :func:`recompiling` to say so.
RECOMPILING_EPOCHS = 3


def recompiling(counts: list[int], *, epochs: int = RECOMPILING_EPOCHS, least: int = 20) -> int | None:
    """From :func:`codegen_compilations` read at the end of each epoch: the fewest classes compiled by each of
    the last ``epochs`` epochs when every one compiled at least ``least`` (the first epoch's excepted: a cold
    cache), else ``None``. A job whose codegen cache holds what an epoch uses compiles next to nothing after
    its first epochs; one whose cache is too small compiles the same classes again every epoch.

    >>> recompiling([120, 207, 294, 381, 468])   # 87 classes every epoch
    87
    >>> recompiling([120, 123, 123, 124, 124]) is None
    True
    >>> recompiling([120, 207, 294]) is None     # too few epochs to tell
    True
    """
    deltas = [b - a for a, b in zip(counts, counts[1:], strict=False)]
    last = deltas[-epochs:]
    if len(deltas) <= epochs or min(last) < least:
        return None
    return min(last)


def failed_tasks(spark: SparkSession, group: str, *, quiet: bool = False) -> tuple[int, int] | None:
    """``(jobs, failed task attempts)`` of the Spark jobs run in job group ``group``; ``None`` if unknown.

    Read from Spark's status tracker. Failed attempts in jobs that still
    succeeded were retried by Spark on its own, without falkirk. Spark
    Connect does not expose the status tracker: ``None``.

    ``quiet``: the caller saw :func:`all_failed_tasks` unchanged from
    before the group's jobs ran until after they ended, so none of them had
    a failed attempt: only the jobs are counted (two py4j calls). Otherwise every
    stage of every job of the group is read (about ten calls per stage;
    done for every step execution of the flagship, a sixth of falkirk's
    py4j calls).
    """
    if is_connect(spark):
        return None
    if quiet:
        sc = spark.sparkContext
        return len(
            once(("statusTracker",), lambda: sc._jsc.statusTracker(), owner=sc).getJobIdsForGroup(group)
        ), 0
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    failed = 0
    for job in jobs:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            s = tracker.getStageInfo(stage)
            failed += s.numFailedTasks if s else 0
    return len(jobs), failed


def executors(spark: SparkSession) -> frozenset[str] | None:
    """``host:port`` of every executor the application has now, or ``None`` where unknown.

    ``None`` on a ``local`` master (the executor is the driver: losing it is
    a driver failure) and where the session has no JVM to ask. Read from
    the JVM status tracker (one call); the driver's own entry is left out.
    An executor killed or lost with its worker disappears from this set as
    soon as the driver notices (its RPC connection drops).
    """
    try:
        sc = spark.sparkContext
        if (sc.master or "").startswith("local"):
            return None
        infos = sc._jsc.sc().statusTracker().getExecutorInfos()
        driver = f"{sc.getConf().get('spark.driver.host', '')}:{sc.getConf().get('spark.driver.port', '')}"
    except Exception:  # no JVM (Spark Connect) or a stopped context
        return None
    # port 0: an executor whose block manager has not registered yet (it reappears with its port)
    return frozenset(f"{i.host()}:{i.port()}" for i in infos if i.port() > 0) - {driver}


def detach(df: DataFrame, *, eager: bool = True, replicas: int = 1) -> DataFrame:
    """A copy of ``df`` with its lineage **and** its plan statistics cut, held in Spark's columnar cache.

    ``df.localCheckpoint()`` alone keeps the size estimate of the plan it came
    from, and Spark estimates a join's size as the product of its sides'; a
    state that is joined and checkpointed again every epoch (or every
    iteration) then carries an estimate whose number of digits doubles each
    time, until planning spends minutes multiplying big integers. The copy
    is a new DataFrame over ``df``'s internal rows (JVM side, no Python, no
    conversion of rows), so its estimate is Spark's default until it is
    cached, then the cache's own size.

    The copy is held the way ``DataFrame.persist()`` caches: rows encoded
    in compressed column batches, not one JVM object per row as a
    ``localCheckpoint()`` of rows keeps them. At 10^7 rows of two longs that
    is tens of MB instead of about a GB of heap, and cheaper to build and to
    scan (``benchmarks/README.md``, "the columnar state"). The batches are
    locally checkpointed, so the lineage is cut once they are made: a lost
    block is not computed again from earlier epochs (a read fails, and the
    run recovers), and nothing of the epochs before stays referenced. The
    copy is not registered in Spark's cache manager: as a local checkpoint
    of rows, ``unpersist()`` leaves it alone, :func:`free` frees it, and
    the JVM's collection of an unreferenced copy frees it too.

    ``eager=False`` materialises it on its first use (the first job that
    reads it caches its blocks: no job of its own). ``replicas``: copies of
    each block kept on different executors (``StorageLevel`` memory and
    disk, ``replicas`` replicated), so that the checkpoint survives the loss
    of ``replicas - 1`` executors; its memory cost is ``replicas`` times the
    state's size. Through Spark Connect: the server's ``localCheckpoint``.
    """
    from pyspark import StorageLevel

    if is_connect(df.sparkSession):
        level = StorageLevel(True, True, False, False, replicas) if replicas > 1 else None
        return df.localCheckpoint(eager=eager, storageLevel=level)
    spark = df.sparkSession
    jss, jdf = spark._jsparkSession, df._jdf
    jvm: Any = spark.sparkContext._jvm
    # the plan runs in the calling JVM thread, whose active session the plans it makes take (given back after)
    sessions = jclass(jvm, "org.apache.spark.sql.SparkSession")
    active = sessions.getActiveSession()
    sessions.setActiveSession(jss)
    try:
        fresh, batches = _columnar(spark, jss, jdf, jvm, replicas)
    finally:
        if active.isDefined():
            sessions.setActiveSession(active.get())
        else:
            sessions.clearActiveSession()
    fresh._falkirk_blocks = batches  # type: ignore[attr-defined]  # what _blocks finds: see there
    if eager:
        fresh.count()
    return fresh


def stored(df: DataFrame) -> DataFrame:
    """``df``, a checkpoint's files read as they were written (or rows held on the driver), marked as such: a
    state held that way is not in executor memory, so an executor's loss takes none of it (:func:`missing_blocks`
    gives ``[]``)."""
    df._falkirk_stored = True  # type: ignore[attr-defined]
    return df


def local_scan(df: DataFrame) -> bool:
    """Whether ``df``'s physical plan is rows on the driver alone (a local relation Spark's optimiser folded its
    projections, filters and limit into): collected without a job (classic Spark; through Connect ``False``)."""
    jdf = vars(df).get("_jdf")
    return (
        jdf is not None
        and jdf.queryExecution().executedPlan().getClass().getSimpleName() == "LocalTableScanExec"
    )


def held_on_driver(df: DataFrame, nbytes: int) -> DataFrame:
    """``df``, rows held on the driver (a local relation of ``nbytes`` Arrow bytes), marked as such: made, cut
    from any lineage (:func:`materialised`), that size (:func:`held_bytes`), and out of an executor's reach
    (:func:`stored`)."""
    df._falkirk_driver_bytes = nbytes  # type: ignore[attr-defined]
    return stored(df)


def _columnar(spark: SparkSession, jss: Any, jdf: Any, jvm: Any, replicas: int) -> tuple[DataFrame, Any]:
    """:func:`detach`'s copy of ``jdf`` (classic), and the RDD of its column batches."""
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame as _DataFrame

    # the rows as Spark holds them (the plan's shuffles run now, as for .rdd); not toRdd(): its RDD carries the
    # plan it came from, which reaches, through the state before's cache, every earlier epoch's plan (Spark's SQL
    # listener then keeps a graph of all of them for each query: memory that grows with every epoch)
    rows = jdf.queryExecution().executedPlan().execute()
    over = jss.internalCreateDataFrame(rows, jdf.schema(), False)  # a fresh plan: Spark's default estimate
    # serialized (PySpark's MEMORY_AND_DISK): kept as objects, the batches cost no less to build and scan (a probe
    # at 10^7 keys, W3's join: 5.2 against 5.0-5.4 CPU-s per epoch; benchmarks/README.md, "the columnar state")
    jlevel = spark.sparkContext._getJavaStorageLevel(StorageLevel(True, True, False, False, replicas))
    relation = (
        jclass(jvm, "org.apache.spark.sql.execution.columnar.InMemoryRelation$")
        .__getattr__("MODULE$")
        .apply(jlevel, over.queryExecution(), jclass(jvm, "scala.Option").empty())
    )
    batches = relation.cacheBuilder().cachedColumnBuffers()  # the batches' RDD, not computed yet
    batches.localCheckpoint()
    _forget_source(relation.cacheBuilder(), jss, jdf.schema(), jvm)
    dataset = jclass(jvm, "org.apache.spark.sql.classic.Dataset")
    return _DataFrame(dataset.ofRows(jss, relation), spark), batches


def _forget_source(builder: Any, jss: Any, schema: Any, jvm: Any) -> None:
    """Make a cache builder whose batches' RDD exists (and is marked for its local checkpoint) forget the plan
    the batches are made from.

    Spark's ``CachedRDDBuilder`` keeps that plan (``cachedPlan``, ``logicalPlan``) for as long as the cache
    lives, only to make the batches and to describe itself. Here the plan is a scan of this epoch's rows
    (``rows`` in :func:`detach`), whose lineage reaches the state before through the scan of *its*
    batches — and that state's builder the plan of the epoch before, and so on: kept, every state the run
    ever made (its builder, its shuffles' dependencies, so their files too) stays referenced by the
    newest. Measured (``jmap -histo:live``, a state joined and detached 40 times, the old ones freed):
    41 builders and 80 shuffle dependencies live at the end; with the plans forgotten, 14 and 18.

    The batches' RDD, made before this, holds its own lineage until its local checkpoint cuts it. The
    builder is given, in place of both plans, the same kind of plan over an empty RDD (no partitioning or
    ordering claimed, as the scan of ``rows`` claims none). Spark has no API for this: the two fields are
    set by reflection; if that fails (another Spark), the cache works as before and keeps the plans (a
    warning says so once). Each builder gets plans of its own, over an empty RDD of its own: Spark compares
    builders as case classes, by their fields, so two builders given the same plans would be *equal*, and
    a query over two such states would reuse one's exchange for the other's (wrong rows; a shared plan
    was tried, and the suite caught it). The two fields are looked up once (:func:`once`).
    """
    try:
        plans = _empty_plans(jss, schema, jvm)  # its own, never shared: see the docstring
        for field, plan in zip(once(("builder-fields",), lambda: _plan_fields(builder)), plans, strict=True):
            field.set(builder, plan)
    except Exception:  # noqa: BLE001 - an optimisation: without it the cache is still right, only kept longer
        global _forget_warned
        if not _forget_warned:
            _forget_warned = True
            logging.getLogger(__name__).warning(
                "could not make Spark's cache builder forget the plan of a detached state: every earlier "
                "state stays referenced by the newest until the run ends (memory and shuffle files)",
                exc_info=True,
            )


_forget_warned = False


def _empty_plans(jss: Any, schema: Any, jvm: Any) -> tuple[Any, Any]:
    """The executed and the analyzed plan of a scan of a new empty RDD of ``schema``'s rows."""
    tag = once(("internal-row-tag",), lambda: _internal_row_tag(jvm))
    empty = jss.internalCreateDataFrame(jss.sparkContext().emptyRDD(tag), schema, False).queryExecution()
    return empty.executedPlan(), empty.analyzed()


def _internal_row_tag(jvm: Any) -> Any:
    return jvm.scala.reflect.ClassTag.apply(
        jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.InternalRow")
    )


def _plan_fields(builder: Any) -> tuple[Any, Any]:
    """``CachedRDDBuilder``'s fields ``cachedPlan`` and ``logicalPlan``, made settable."""
    fields = tuple(builder.getClass().getDeclaredField(name) for name in ("cachedPlan", "logicalPlan"))
    for field in fields:
        field.setAccessible(True)
    return fields


def _blocks(df: DataFrame) -> Any:
    """The JVM RDD whose blocks hold :func:`detach`-ed ``df`` (locally checkpointed), or ``None``: the column
    batches :func:`detach` made, or (a local checkpoint of rows) the RDD under its plan.

    The batches are the RDD ``detach`` recorded, not the one the cache's builder gives now: a builder whose
    batches were cleared would make new ones from the plan it was left with (empty, :func:`_forget_source`),
    and those would pass for the state."""
    recorded = vars(df).get("_falkirk_blocks")  # not getattr: a DataFrame looks unknown names up as columns
    if recorded is not None:
        return recorded if recorded.isLocallyCheckpointed() else None
    plan = df._jdf.queryExecution().analyzed()
    name = plan.getClass().getName()
    if name.endswith(".InMemoryRelation"):
        rdd = plan.cacheBuilder().cachedColumnBuffers()
    elif name.endswith(".LogicalRDD"):
        rdd = plan.rdd()
    else:
        return None
    return rdd if rdd.isLocallyCheckpointed() else None


def takes_up(df: DataFrame) -> bool:
    """Whether :func:`detach`-ed ``df``, made by an execution whose job failed, may serve a retry of that
    execution: made through Spark Connect (the server's local checkpoint, whose lineage the client cannot see:
    Spark computes what is missing), every block held if it is checkpointed already, or else no indeterminate
    RDD in its lineage (``repartition(n)`` without keys, say: partitions computed again could disagree with
    the ones the failed job cached; Spark refuses to mix them within one job, nothing would across two)."""
    from falkirk.spark.lineage._jvm import is_indeterminate

    if is_connect(df.sparkSession):
        return True
    try:
        if materialised(df):
            return missing_blocks(df, wait=0.0) == []
        rdd = _blocks(df)
        if rdd is None:
            return False
        seen: set[int] = set()
        todo = [rdd]
        while todo:
            r = todo.pop()
            if r.id() in seen:
                continue
            seen.add(r.id())
            if is_indeterminate(r):
                return False
            deps = r.dependencies().iterator()
            while deps.hasNext():
                todo.append(deps.next().rdd())
    except Exception:  # noqa: BLE001 - cannot tell: not taken up
        return False
    return True


def free(df: DataFrame) -> None:
    """Free the blocks of :func:`detach`-ed ``df`` now (asynchronously).

    ``df.unpersist()`` does not: a local checkpoint keeps its blocks outside
    Spark's cache manager, with the checkpointed RDD, until the driver's JVM
    garbage-collects that RDD — under a large heap, many epochs later,
    every state of the run cached (or spilled to disk) meanwhile. Nothing
    may read ``df`` afterwards (a read fails: its lineage is cut). A frame
    that is no local checkpoint (one a step built on its own RDD) is left
    alone. Through
    Spark Connect nothing is done: the server lets go of the checkpoint when
    the client's DataFrame is garbage-collected, and its blocks go when the
    server's JVM collects the RDD.
    """
    if is_connect(df.sparkSession):
        return
    try:
        blocks = _blocks(df)
        if blocks is not None:
            blocks.unpersist(False)
    except Exception:  # noqa: BLE001 - freeing early is an optimisation: the JVM's collection frees it anyway
        logging.getLogger(__name__).debug("could not free a local checkpoint's blocks", exc_info=True)


def materialised(df: DataFrame) -> bool:
    """Whether :func:`detach`-ed ``df`` has been computed and cut from its lineage (``False`` where
    unknown)."""
    if vars(df).get("_falkirk_driver_bytes") is not None:  # (:func:`held_on_driver`)
        return True
    if is_connect(df.sparkSession):
        return False
    try:
        blocks = _blocks(df)
        return bool(blocks is not None and blocks.isCheckpointed())
    except Exception:
        return False


HELD_WAIT_S = 2.0
"""How long :func:`held_bytes` looks for a made cache in Spark's status store (filled from the listener bus, after
the job that made it returned) before its size counts as unknown."""

COMPRESSION_BOUND = 64
"""What :func:`held_bytes` multiplies the block managers' figure by where Spark's cache has no count of its own: the
blocks hold compressed column batches, the count (and a collection to the driver) is of the rows uncompressed."""


def held_bytes(df: DataFrame) -> int | None:
    """The bytes :func:`detach`-ed ``df`` takes in Spark's columnar cache once made, ``None`` before that, through
    Spark Connect, or where Spark does not say: the larger of the cache's own count (the uncompressed size,
    accumulated by the tasks that made it) and what the block managers report holding for its batches (every
    replica, compressed), once they report every partition held.

    Where the cache does not count itself loaded — a state an in-place retry took up from its failed execution,
    whose blocks the failed job's tasks made, and failed tasks' counts are not kept — Spark's size is the plan's
    estimate (its default, 8 EiB): the block managers' figure times :data:`COMPRESSION_BOUND` stands for it.
    Spark's status store is filled after the job that made the cache returned: for such a cache it is read again
    (backing off) for up to :data:`HELD_WAIT_S` until it lists every partition held. A cache that counts itself
    loaded has its exact count, and is not waited for: the block managers' figure is taken where already listed.
    Rows held on the driver (:func:`held_on_driver`): their Arrow bytes."""
    on_driver = vars(df).get("_falkirk_driver_bytes")
    if on_driver is not None:
        return int(on_driver)
    if is_connect(df.sparkSession):
        return None
    try:
        rdd = _blocks(df)  # looked up once: materialised() would look it up again
        if rdd is None or not rdd.isCheckpointed() or rdd.getNumPartitions() == 0:
            return None  # (an RDD of no partitions holds no block: the status store never lists it)
        plan = df._jdf.queryExecution().analyzed()
        if not plan.getClass().getName().endswith(".InMemoryRelation"):
            return None
        loaded = bool(plan.cacheBuilder().isCachedColumnBuffersLoaded())
        counted = int(str(plan.computeStats().sizeInBytes())) if loaded else None  # a Scala BigInt
        sc, wanted = df.sparkSession.sparkContext._jsc.sc(), rdd.id()
        held = _held_blocks(sc, wanted)
        if counted is not None:
            return counted if held is None else max(counted, held)
        deadline, pause = time.monotonic() + HELD_WAIT_S, 0.02
        while held is None and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(2 * pause, 0.25)
            held = _held_blocks(sc, wanted)
        return None if held is None else held * COMPRESSION_BOUND
    except Exception:  # noqa: BLE001 - a size is an optimisation's input: unknown is always safe
        return None


def _held_blocks(sc: Any, rdd_id: int) -> int | None:
    """The bytes (memory and disk, every replica) Spark's status store says the blocks of RDD ``rdd_id`` take,
    where it lists every partition held; else ``None``."""
    infos = sc.getRDDStorageInfo()
    for i in range(len(infos)):
        info = infos[i]
        if info.id() == rdd_id:
            if info.numCachedPartitions() < info.numPartitions():
                return None
            return int(info.memSize()) + int(info.diskSize())
    return None


def shares_storage(spark: SparkSession, object_store: bool) -> bool:
    """Whether files this driver writes under a root are the files the executors read: a classic session whose
    executors run on this machine (``local`` masters), or a root on an object store. (On a cluster, a root on a
    local path can be each machine's own disk.)"""
    if is_connect(spark):
        return False
    return object_store or str(spark.sparkContext.master).startswith("local")


def missing_blocks(df: DataFrame, *, wait: float = 3.0) -> list[int] | None:
    """Partitions of :func:`detach`-ed ``df`` whose blocks no live executor holds; ``None`` where unknown.

    ``[]`` also while ``df`` is not materialised yet (its lineage is intact:
    Spark recomputes it). Read from the application's status store (the
    storage tab's data: per block, the executors holding it), which drops a
    lost executor's blocks in the same event that removes the executor
    from :func:`executors`; a block cached moments ago may be reported late,
    so a missing one is looked for again for up to ``wait`` seconds before
    it counts as lost (erring towards "lost": a rollback, never wrong data).
    ``None`` through Spark Connect or for a DataFrame that is not a local
    checkpoint; ``[]`` for one read from a checkpoint's files (:func:`stored`).
    """
    if is_connect(df.sparkSession):
        return None
    if vars(df).get("_falkirk_stored"):  # on files or the driver, which outlive executors (:func:`stored`)
        return []
    try:
        rdd = _blocks(df)
        if rdd is None:
            return None
        if not rdd.isCheckpointed():
            return []
        n = rdd.getNumPartitions()
        store = df.sparkSession.sparkContext._jsc.sc().statusStore()
    except Exception:
        return None
    deadline = time.monotonic() + wait
    while True:
        held: set[int] = set()
        try:
            parts = store.rdd(rdd.id()).partitions()
            it = parts.get().iterator() if parts.isDefined() else None
            while it is not None and it.hasNext():
                p = it.next()
                if p.executors().nonEmpty():
                    held.add(int(p.blockName().rsplit("_", 1)[1]))
        except Exception:  # no storage information left for the RDD: every block is gone
            pass
        missing = [i for i in range(n) if i not in held]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(0.25)


def busiest_executor(spark: SparkSession) -> str | None:
    """The id of the executor holding the most cached blocks (RDD blocks, then memory used); ``None`` if
    unknown.

    ``None`` on a ``local`` master, through Spark Connect or when no
    executor holds a block.
    """
    try:
        sc = spark.sparkContext
        if (sc.master or "").startswith("local"):
            return None
        it = sc._jsc.sc().statusStore().executorList(True).iterator()
        best: tuple[int, int, str] | None = None
        while it.hasNext():
            e = it.next()
            if e.id() == "driver":
                continue
            key = (int(e.rddBlocks()), int(e.memoryUsed()), str(e.id()))
            best = key if best is None or key[:2] > best[:2] else best
    except Exception:
        return None
    return best[2] if best is not None and best[0] > 0 else None
