"""Fixtures of the Spark lineage and streaming tests: one shared local SparkSession.

The builder settings are those of ``tests/spark`` (SPARK-NOTES.md), so in a
full run ``getOrCreate`` hands back the session those tests started. The
session is never stopped here: pytest's process exit ends the JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared local SparkSession (``local[2,3]``, no UI, 2 shuffle partitions)."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,3]")
        .appName("falkirk-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session


@pytest.fixture(scope="session")
def sc(spark: Any) -> Any:
    """The shared session's SparkContext."""
    return spark.sparkContext
