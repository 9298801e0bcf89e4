"""The reference run every Spark test compares with, and the one S3 server of the test run.

``reference`` is a failure-free run of the tiny flagship
(``spark_support.SMALL``, ``EPOCHS`` epochs) with falkirk off, in local
mode: what every recovered run, local or on a cluster, must equal
(the shared ``spark`` session is in ``tests/conftest.py``).

``connect_server`` is a Spark Connect server on loopback
(``connect_server.ConnectServer``), started on first use and stopped —
exactly the process group it started — when the session ends; the Connect
tests and the SDP tests (``spark-pipelines`` runs through it) share it.

``s3_server`` is SeaweedFS's S3 gateway on loopback (``objectstore.SeaweedS3``),
started on first use and stopped — exactly the process group it started —
when the session ends. Every test under ``tests/spark`` runs on one xdist
worker (``tests/conftest.py``), so a test run starts one server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connect_server import ConnectServer
from connect_server import why_unavailable as connect_unavailable
from objectstore import SeaweedS3, why_unavailable
from spark_support import EPOCHS, SMALL


@pytest.fixture(scope="session")
def reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Root of a failure-free run of the tiny flagship with falkirk off (``durable=False``)."""
    from falkirk.spark.pipeline.tools.flagship import build

    root = tmp_path_factory.mktemp("reference")
    build(root, spark, durable=False, **SMALL).run(EPOCHS)
    return root


@pytest.fixture(scope="session")
def connect_server() -> Iterator[ConnectServer]:
    """The session's Spark Connect server (started on first use; skips, saying why, where it cannot run)."""
    reason = connect_unavailable()
    if reason:
        pytest.skip(f"no Spark Connect server: {reason}")
    server = ConnectServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[SeaweedS3]:
    """The session's SeaweedFS S3 server on 127.0.0.1 (skips, saying why, where ``weed`` cannot run)."""
    reason = why_unavailable()
    if reason:
        pytest.skip(f"no S3 server: {reason}")
    server = SeaweedS3()
    try:
        server.start()
        print(f"\nSeaweedFS S3 server at {server.endpoint}, ready in {server.startup_seconds:.1f} s")
        yield server
    finally:
        server.stop()
