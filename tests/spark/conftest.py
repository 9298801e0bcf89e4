"""The one SparkSession every Spark test shares (pipeline, lineage, streaming and cluster tests), and the reference run.

The session is ``local[2,3]`` (three attempts per task), UI off, two shuffle
partitions, default parallelism 2, from ``getOrCreate`` and never stopped
between tests: pytest's process exit ends the JVM. xdist keeps every Spark test
on one worker (``tests/conftest.py``), so a run starts one JVM.

``reference`` is a failure-free run of the tiny flagship
(``spark_support.SMALL``, ``EPOCHS`` epochs) with falkirk off, in local
mode: what every recovered run, local or on a cluster, must equal.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, SMALL


@pytest.fixture(scope="session")
def spark() -> Any:
    """The one SparkSession of the test session (``local[2,3]``, UI off, 2 shuffle partitions)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime")
    from falkirk.spark.pipeline.session import local_session

    return local_session(
        "local[2,3]",
        "falkirk-tests",
        # 2 GB: the one session serves every Spark test of the run (hundreds of pipelines); with the
        # default 1 GB its JVM spent long GC pauses late in the run, until its heartbeats failed.
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.ui.enabled": "false",
         "spark.driver.memory": "2g"},
    )


@pytest.fixture(scope="session")
def sc(spark: Any) -> Any:
    """The shared session's SparkContext."""
    return spark.sparkContext


@pytest.fixture(scope="session")
def reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Root of a failure-free run of the tiny flagship with falkirk off (``durable=False``)."""
    from falkirk.spark.pipeline.flagship import build

    root = tmp_path_factory.mktemp("reference")
    build(root, spark, durable=False, **SMALL).run(EPOCHS)
    return root
