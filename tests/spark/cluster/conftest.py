"""Fixtures of the cluster tests: one standalone cluster per test session and a driver-process runner.

The cluster (``harness.StandaloneCluster``: a master and two 1-core, 1 GB
workers on loopback, each with a private ``/tmp``) is started once, on the
first cluster test, and stopped — exactly the processes it started — when
the session ends. Where this machine cannot run it (no Java, no
``spark-class``, no ``unshare``) the tests skip with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import StandaloneCluster, why_unavailable
from spark_support import DriverRun, run_driver


@pytest.fixture(scope="session")
def cluster() -> Iterator[StandaloneCluster]:
    """The session's standalone cluster (started on first use)."""
    reason = why_unavailable()
    if reason:
        pytest.skip(f"no Spark standalone cluster: {reason}")
    c = StandaloneCluster(workers=2)
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def drive(cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., DriverRun]:
    """Run ``driver_process.py`` with the given scenarios in a new driver process on the cluster.

    ``during(proc, line)`` (optional) is called with each output line while
    the driver runs; the tests use it to kill things at a chosen moment.
    """
    where = tmp_path_factory.mktemp("drivers")
    base = {"master": cluster.master_url, "conf": cluster.driver_conf()}

    def run(scenarios: list[dict[str, Any]], **kwargs: Any) -> DriverRun:
        return run_driver(base, scenarios, where, **kwargs)

    return run
