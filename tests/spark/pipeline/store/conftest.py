"""Roots for the storage tests: the same test on a local directory and on a real S3 server.

``place`` is parametrised: ``local`` (a temporary directory) and ``s3`` (a
fresh prefix ``s3a://falkirk-tests/<id>`` on the session's SeaweedFS server,
``s3_server`` in ``tests/spark/conftest.py``). Each place also hands out
*another client* on the same storage — pyarrow's own filesystem, as Spark's
executors or a second program would write — for the tests of what the
driver sees when someone else writes.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from objectstore import BUCKET
from places import Place


@pytest.fixture(params=["local", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    """A fresh root on a local directory, or under a new prefix on the S3 server."""
    from pyarrow import fs

    if request.param == "local":
        return Place("local", str(tmp_path / "root"), None, fs.LocalFileSystem(), str(tmp_path / "root"))
    server = request.getfixturevalue("s3_server")
    prefix = f"{BUCKET}/{uuid.uuid4().hex[:12]}"
    return Place("s3", f"s3a://{prefix}", server.options(), server.arrow(), prefix)
