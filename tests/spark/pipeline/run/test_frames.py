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


def test_a_fused_frame_is_counted_by_its_consumers_job(spark: Any) -> None:
    """:meth:`Frames.fused`: no job and no cache until the consumer's job, which counts the rows on the way."""
    from pyspark.sql import functions as F

    df = spark.range(0, 1234, numPartitions=3).withColumn("k", F.col("id") % 7)
    before = _cached_partitions(spark)
    observed, rows = Frames().fused(df)  # type: ignore[misc]
    groups = observed.groupBy("k").count().collect()  # the consumer's job
    assert sum(r["count"] for r in groups) == 1234
    assert rows() == 1234 and _cached_partitions(spark) == before  # counted by that job, never persisted


def test_a_fused_frame_its_consumer_hid_is_counted(spark: Any) -> None:
    """Where the consumer's job did not carry the observation (an RDD action), ``rows()`` counts the frame."""
    observed, rows = Frames().fused(spark.range(0, 77, numPartitions=2))  # type: ignore[misc]
    assert observed.rdd.map(lambda r: 1).sum() == 77  # no SQL execution: no observed metrics
    assert rows() == 77


def test_the_flagships_parse_batch_runs_inside_heavys_job(spark: Any, tmp_path: Path) -> None:
    """``parse_batch`` (Ephemeral, read only by ``heavy``) runs no job of its own; its execution records still have
    its rows, the number of non-link events of each epoch counted here from the input log, and ``heavy``'s log is
    what the same query gives without the fusion."""
    from pyspark.sql import functions as F

    from falkirk.spark.pipeline.tools.flagship import heavy, parse_batch

    pipe = flagship(tmp_path, spark)
    result = pipe.run(2)
    storage = Storage(tmp_path)
    for epoch in range(2):
        (ex,) = [x for x in result.journal.executions if x.step == "parse_batch" and x.epoch == epoch]
        events = pipe.inputs["events"].log.read(spark, epoch)
        assert ex.jobs == 0 and ex.fresh is False, ex
        assert ex.rows == events.where(F.col("kind") != "link").count() > 0, ex
        logged = spark.read.parquet(str(tmp_path / storage.get("heavy", "log", epoch).location))
        expected = heavy(parse_batch(events))
        assert sorted(logged.collect()) == sorted(expected.select(*logged.columns).collect())
