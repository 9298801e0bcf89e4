"""Fixtures of the Spark Connect tests: a client-process runner on the session's Connect server.

The server (``connect_server``, in ``tests/spark/conftest.py``: one per test
session, shared with the SDP tests) starts on first use. Pipelines run in
client processes (``driver_process.py`` with ``remote``), which hold no JVM:
what a user of a managed platform has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from connect_server import ConnectServer
from spark_support import DriverRun, run_driver


@pytest.fixture(scope="session")
def remote(connect_server: ConnectServer, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., DriverRun]:
    """Run scenarios in a new Connect client process (``driver_process.py``)."""
    where = tmp_path_factory.mktemp("connect-clients")

    def run(scenarios: list[dict[str, Any]], **kwargs: Any) -> DriverRun:
        return run_driver({"remote": connect_server.url}, scenarios, where, **kwargs)

    return run
