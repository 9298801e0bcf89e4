"""Fixtures of the Spark Connect tests: one Connect server per test session and a client-process runner.

The server (``server.ConnectServer``: ``SparkConnectServer`` on a
``local[2,3]`` master, loopback, a free port) starts on the first Connect
test and is stopped — exactly the process group it started — when the
session ends. Pipelines run in client processes (``driver_process.py``
with ``remote``), which hold no JVM: what a user of a managed platform has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from server import ConnectServer, why_unavailable
from spark_support import DriverRun, run_driver


@pytest.fixture(scope="session")
def connect_server() -> Iterator[ConnectServer]:
    """The session's Spark Connect server (started on first use)."""
    reason = why_unavailable()
    if reason:
        pytest.skip(f"no Spark Connect server: {reason}")
    server = ConnectServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def remote(connect_server: ConnectServer, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., DriverRun]:
    """Run scenarios in a new Connect client process (``driver_process.py``)."""
    where = tmp_path_factory.mktemp("connect-clients")

    def run(scenarios: list[dict[str, Any]], **kwargs: Any) -> DriverRun:
        return run_driver({"remote": connect_server.url}, scenarios, where, **kwargs)

    return run
