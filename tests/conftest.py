"""Shared pytest configuration: hypothesis profiles.

Pick one with ``HYPOTHESIS_PROFILE`` (``dev`` by default; ``scripts/test.sh``
uses ``ci`` for the whole suite and whenever ``CI`` is set).
"""

import os
import shutil
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# No test may reach a cloud's instance metadata service looking for credentials (botocore's last resort).
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

# Every JVM a test starts — the shared session's, each driver process's (SPARK_SUBMIT_OPTS, inherited), the
# Connect server's, the cluster's Master and Workers (SPARK_DAEMON_JAVA_OPTS) and its executors
# (``spark.executor.extraJavaOptions`` from FALKIRK_TEST_JVM_OPTIONS, tests/spark/cluster/harness.py) — runs
# with the client JIT only and the serial collector. A test's JVM lives seconds to minutes: the C2 compiler's
# work (about half the CPU of a six-epoch flagship run on a fresh JVM here: 26 of 56 CPU-s) never pays back,
# and on two cores it competes with the tests. It changes no result, only what compiling costs. Set
# FALKIRK_TEST_JVM_OPTIONS to "" for the JVM's defaults.
JVM_OPTIONS = os.environ.setdefault("FALKIRK_TEST_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
if JVM_OPTIONS:
    for _var in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
        if JVM_OPTIONS not in os.environ.get(_var, ""):  # xdist's workers import this after the controller
            os.environ[_var] = f"{os.environ.get(_var, '')} {JVM_OPTIONS}".strip()

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_ignore_collect(collection_path, config):  # type: ignore[no-untyped-def]
    """Keep conftest files out of doctest collection (they are loaded as plugins all the same)."""
    if collection_path.name == "conftest.py":
        return True
    return None


#: Session fixtures that start Spark processes of their own: the tests using them share a worker of their own.
PROCESS_FACILITIES = frozenset({"cluster", "connect_server"})


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Keep the Spark tests in two groups, each on one xdist worker.

    ``scripts/test.sh`` runs the suite on two workers (``--dist loadgroup``).
    The tests that drive Spark processes of their own — the standalone
    cluster's and the Connect server's (:data:`PROCESS_FACILITIES`), which
    mostly wait for driver processes — are the group ``spark-procs``: one
    cluster and one Connect server per run, on one worker. The other Spark
    tests are two groups of about the same length, ``spark-run`` (the
    executor's and recovery's, ``tests/spark/pipeline/run``) and ``spark``
    (everything else), so the two workers each start one shared SparkSession
    and neither waits for the other's Spark tests; the tests that provoke a
    fetch failure are ``spark-fetch-failure``. xdist hands groups out
    largest first, every group before any single test, so the fetch failure
    group is handed out after every other Spark group and, on whichever
    worker it runs, no Spark test follows it there. The CPU-bound property
    tests fill in beside them.
    """
    for item in items:
        path = str(item.path).replace(os.sep, "/")
        names = set(getattr(item, "fixturenames", ()))
        if names & PROCESS_FACILITIES:
            item.add_marker(pytest.mark.xdist_group("spark-procs"))
        elif item.get_closest_marker("fetch_failure") is not None:
            item.add_marker(pytest.mark.xdist_group("spark-fetch-failure"))
        elif "/tests/spark/pipeline/run/" in path:
            item.add_marker(pytest.mark.xdist_group("spark-run"))
        elif "spark" in names or "/tests/spark" in path or "/falkirk/spark/" in path:
            item.add_marker(pytest.mark.xdist_group("spark"))
    # Tests that provoke a fetch failure run last (and, on two workers, in a group of their own, above): in
    # local mode the first one unregisters the shared session's block manager for good (no
    # CoarseGrainedScheduler endpoint to re-register with), its heartbeats then fail, and after 60 of them (about 10 minutes) Spark's executor exits the JVM —
    # every Spark test still to come would fail with it. Their own order is kept.
    items[:] = ([i for i in items if i.get_closest_marker("fetch_failure") is None]
                + [i for i in items if i.get_closest_marker("fetch_failure") is not None])


# The SparkSession the Spark tests of a process share (pipeline, lineage, streaming, cluster and docs tests):
# ``local[2,3]`` (three attempts per task), UI off, two shuffle partitions, default parallelism 2, from
# ``getOrCreate`` and never stopped between tests: pytest's process exit ends the JVM. One per process: with
# two xdist workers, each worker's Spark groups (above) share the one it starts.
@pytest.fixture(scope="session")
def spark() -> Any:
    """The SparkSession this process's Spark tests share (``local[2,3]``, UI off, 2 shuffle partitions)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime")
    from falkirk.spark.pipeline.run.session import local_session

    # The suite's JVM_OPTIONS (above) apply here too: measured over whole runs with two Spark groups, the suite
    # used 2,095 CPU-s with them in every JVM and 2,597 with the shared sessions on the default JIT (each
    # compiling the same Spark code with C2).
    return local_session(
        "local[2,3]",
        "falkirk-tests",
        # 2 GB: the one session serves every Spark test of its worker (hundreds of pipelines); with the
        # default 1 GB its JVM spent long GC pauses late in the run, until its heartbeats failed.
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.ui.enabled": "false",
         "spark.driver.memory": "2g"},
    )


@pytest.fixture(scope="session")
def sc(spark: Any) -> Any:
    """The shared session's SparkContext."""
    return spark.sparkContext


# -- a test run leaves the checkout as it found it -----------------------------------------------------------------
# Every file a test writes goes under a temporary directory. A file a run leaves in the checkout (a stray root/, a
# result file a smoke test wrote into benchmarks/results/) fails the run, naming it: git status before and after.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _untracked() -> set[str] | None:
    """Untracked, not ignored files of the checkout (``None``: not a git checkout, or no git)."""
    import subprocess

    if shutil.which("git") is None:
        return None
    out = subprocess.run(["git", "-C", _CHECKOUT, "status", "--porcelain", "--untracked-files=all"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return None
    return {line[3:] for line in out.stdout.splitlines() if line.startswith("?? ")}


def pytest_sessionstart(session):  # type: ignore[no-untyped-def]
    """Note what is untracked before the run (the controller only, under xdist)."""
    if not hasattr(session.config, "workerinput"):
        session.config._falkirk_untracked = _untracked()


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    """Fail the run when it left new untracked files in the checkout."""
    before = getattr(session.config, "_falkirk_untracked", None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    after = _untracked() or set()
    left = sorted(after - before)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = (f"the test run left {len(left)} untracked file(s) in the checkout (tests must write under a "
                f"temporary directory): {', '.join(left[:20])}{' …' if len(left) > 20 else ''}")
        if reporter is not None:
            reporter.write_line(f"ERROR: {text}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
