"""YSB (and the mixed application's second query) on Structured Streaming, micro-batch: the configurations are
described in :mod:`.ysb` and :mod:`.mixed`.

One query written the usual way: a Parquet file source (the producer renames one file per epoch into the
source directory; ``maxFilesPerTrigger=1``, so a batch is an epoch and batch ``N`` is epoch ``N``) → keep
``view`` → broadcast join ad → campaign → watermark → count per campaign per event-time window
(``groupBy(campaign_id, window(ts, W))``, update mode) on the RocksDB state store with changelog
checkpointing on → ``foreachBatch``: the batch's updated counts to ``output/<name>/epoch=<batch>`` (Parquet,
overwritten: idempotent per batch id), then the commit time to ``commits.jsonl``. Trigger: processing time,
every epoch interval. ``spark.sql.streaming.noDataMicroBatches.enabled=false``: no batch without new data (the
watermark moves on with the next data batch, whose state eviction is the same; without it a no-data batch
runs after every data batch, which costs the stream CPU and renumbers the batches).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import STREAMING_CONF
from .ysb_input import EVENTS_SCHEMA, ads

#: the stream's settings beside STREAMING_CONF (RocksDB, changelog checkpointing)
STREAM_EXTRA = {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}


def ad_table(spark: Any, size: dict[str, Any]) -> Any:
    """The ad → campaign table (YSB keeps it in Redis), a small local DataFrame."""
    return spark.createDataFrame(ads(size), "ad_id STRING, campaign_id STRING")


def views_of(events: Any, table: Any) -> Any:
    """YSB's filter, projection and join, as a streaming or a batch DataFrame: ``campaign_id, user_id, et`` (ms)."""
    from pyspark.sql import functions as F

    return (events.where("event_type = 'view'")
            .selectExpr("ad_id", "user_id", "CAST(event_time AS BIGINT) AS et")
            .join(F.broadcast(table), "ad_id").select("campaign_id", "user_id", "et"))


class Failure:
    """One exception (``kind="raise"``) or driver SIGKILL (``kind="kill"``) when epoch ``epoch`` reaches the
    hook, once per process; the moment (wall clock) it struck is kept."""

    def __init__(self, epoch: int | None, kind: str = "raise", where: str = "counts") -> None:
        self.epoch, self.kind, self.where = epoch, kind, where
        self.at: float | None = None

    def maybe(self, epoch: int, victims: tuple[int, ...] = ()) -> None:
        if epoch != self.epoch or self.at is not None:
            return
        self.at = time.time()
        if self.kind == "kill":
            for pid in victims:  # the driver: its JVM, then its Python process
                os.kill(pid, signal.SIGKILL)
        raise ConnectionError(f"{self.where}: the state service is unavailable at epoch {epoch} (injected once)")


class StreamingYSB:
    """YSB's counts as one micro-batch query over ``base/source`` (module docstring); ``extra``: more
    ``foreachBatch`` work on the batch's views (the mixed application's one-query form, unused by default)."""

    name = "campaign_counts"

    def __init__(self, spark: Any, base: Path, size: dict[str, Any], *, failure: Failure | None = None,
                 on_commit: Callable[[int, float], None] | None = None) -> None:
        self.spark, self.base, self.size = spark, base, size
        self.failure = failure or Failure(None)
        self.on_commit = on_commit
        self.commits: dict[int, float] = {}
        self.progress: list[dict[str, Any]] = []
        self.victims = (int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()), os.getpid())

    def source(self) -> Any:
        return (self.spark.readStream.schema(EVENTS_SCHEMA).option("maxFilesPerTrigger", 1)
                .parquet(str(self.base / "source")))

    def writer(self) -> Any:
        from pyspark.sql import functions as F

        w = self.size["window_ms"] // 1000
        counts = (views_of(self.source(), ad_table(self.spark, self.size))
                  .withColumn("ts", F.timestamp_millis("et"))
                  .withWatermark("ts", f"{w} seconds")
                  .groupBy("campaign_id", F.window("ts", f"{w} seconds")).count()
                  .select("campaign_id", F.unix_millis(F.col("window.start")).alias("window_start"), "count"))
        return (counts.writeStream.outputMode("update").foreachBatch(self.batch)
                .option("checkpointLocation", str(self.base / "checkpoint"))
                .trigger(processingTime=f"{self.size['interval']} seconds"))

    def batch(self, df: Any, batch_id: int) -> None:
        self.failure.maybe(batch_id, self.victims)
        df.write.mode("overwrite").parquet(str(self.base / "output" / self.name / f"epoch={batch_id}"))
        self.commit(batch_id)

    def commit(self, batch_id: int) -> None:
        at = time.time()
        self.commits[batch_id] = at
        with open(self.base / "commits.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"epoch": batch_id, "at": at}) + "\n")
        if self.on_commit is not None:
            self.on_commit(batch_id, at)

    def run(self, epochs: int, timeout: float = 1800.0) -> None:
        """Run the query until batch ``epochs - 1`` is committed; a query that fails is restarted once in the same
        session on the same checkpoint (the failed batch runs again)."""
        from pyspark.errors import StreamingQueryException

        from falkirk.spark.pipeline.run.session import SMALL_DATA, sql_conf

        end = time.time() + timeout
        with sql_conf(self.spark, {**STREAMING_CONF, **SMALL_DATA, **STREAM_EXTRA}):
            for attempt in range(2):
                q = self.writer().start()
                try:
                    while epochs - 1 not in self.commits:
                        if q.awaitTermination(0.2):
                            raise RuntimeError("the streaming query stopped")
                        if time.time() > end:
                            raise TimeoutError(f"batch {epochs - 1} not committed within {timeout} s")
                except StreamingQueryException:
                    self.progress += [{**json.loads(p.json), "attempt": attempt} for p in q.recentProgress]
                    if attempt:
                        raise
                    continue
                self.progress += [{**json.loads(p.json), "attempt": attempt} for p in q.recentProgress]
                q.stop()
                break


def commits_of(base: Path) -> dict[int, float]:
    """``epoch → commit time`` the stream's sink recorded under ``base``, every driver's; a batch written twice
    (run again after a crash between its write and Spark's commit log) keeps its first: from then on a reader
    saw it."""
    out: dict[int, float] = {}
    try:
        lines = (base / "commits.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return out
    for d in map(json.loads, filter(None, lines)):
        out.setdefault(d["epoch"], d["at"])
    return out
