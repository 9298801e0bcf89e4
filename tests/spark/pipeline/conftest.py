"""Fixtures of the pipeline tests: a failure-free reference run (the session is ``tests/spark/conftest.py``'s).

The flagship runs on tiny data (``spark_support.SMALL``) for
``EPOCHS`` epochs so that a whole run costs seconds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, SMALL


@pytest.fixture(scope="session")
def reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Root of a failure-free run of the tiny flagship with falkirk off (``durable=False``)."""
    from falkirk.spark.pipeline.flagship import build

    root = tmp_path_factory.mktemp("reference")
    build(root, spark, durable=False, **SMALL).run(EPOCHS)
    return root
