"""The reference run every Spark test compares with (the shared ``spark`` session is in ``tests/conftest.py``).

``reference`` is a failure-free run of the tiny flagship
(``spark_support.SMALL``, ``EPOCHS`` epochs) with falkirk off, in local
mode: what every recovered run, local or on a cluster, must equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, SMALL


@pytest.fixture(scope="session")
def reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Root of a failure-free run of the tiny flagship with falkirk off (``durable=False``)."""
    from falkirk.spark.pipeline.tools.flagship import build

    root = tmp_path_factory.mktemp("reference")
    build(root, spark, durable=False, **SMALL).run(EPOCHS)
    return root
