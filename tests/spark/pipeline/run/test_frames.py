"""An output whose first use is a write is computed, cached and counted by that write (no count job before it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import flagship

from falkirk.spark import Storage
from falkirk.spark.pipeline.run import frames as frames_module
from falkirk.spark.pipeline.run.frames import Frames

pytestmark = pytest.mark.spark


def _cached_partitions(spark: Any) -> int:
    return sum(i.numCachedPartitions() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo())


def test_the_write_fills_the_cache_and_counts_the_rows(spark: Any, tmp_path: Path) -> None:
    """The observed write's job counts the rows and fills the persisted frame's cache; a frame counted before is
    left to :meth:`Frames.materialise`."""
    from pyspark.sql import functions as F

    frames = Frames()
    df = spark.range(0, 1234, numPartitions=3).withColumn("k", F.col("id") % 7)
    before = _cached_partitions(spark)
    persisted, observed, rows = frames.observing(df)  # type: ignore[misc]
    assert _cached_partitions(spark) == before  # no job yet
    observed.write.parquet(str(tmp_path / "out"))
    assert _cached_partitions(spark) >= before + 3  # filled by the write
    assert rows() == 1234 == spark.read.parquet(str(tmp_path / "out")).count()
    assert frames.materialise(persisted) == (persisted, 1234)  # remembered: not counted again
    assert frames.observing(persisted) is None
    persisted.unpersist()


def test_without_the_observation_the_rows_are_counted(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no action delivered the observation, ``rows()`` counts the persisted frame instead."""
    monkeypatch.setattr(frames_module, "OBSERVED_WAIT", 0.05)
    persisted, _observed, rows = Frames().observing(spark.range(0, 77, numPartitions=2))  # type: ignore[misc]
    assert rows() == 77
    persisted.unpersist()


def test_logged_and_output_steps_record_the_rows_they_wrote(spark: Any, tmp_path: Path) -> None:
    """In the flagship, ``heavy`` (logged) and ``responses`` (an output) are counted by their writes: the rows in
    their manifests and execution records are the rows of the data written."""
    result = flagship(tmp_path, spark).run(2)
    storage = Storage(tmp_path)
    for step, kind in (("heavy", "log"), ("responses", "output")):
        for epoch in range(2):
            m = storage.get(step, kind, epoch)
            (execution,) = [x for x in result.journal.executions if x.step == step and x.epoch == epoch]
            data = spark.read.parquet(str(tmp_path / m.location)).count()
            assert m.rows == execution.rows == data > 0, (step, epoch)
