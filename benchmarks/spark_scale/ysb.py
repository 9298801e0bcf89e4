"""A YSB-like event stream (after yahoo/streaming-benchmarks, as the paper ran it): ad events, the views
counted per campaign and 10-second window.

Each epoch is one second of event time holding ``n`` events ``(user_id, page_id, ad_id, ad_type,
event_type, event_time)`` — ``ad_type`` one of five, ``event_type`` one of ``view``, ``click``,
``purchase``, ``event_time`` in milliseconds within the epoch's second. Both systems keep the views
(a third), join each ad to its campaign (1,000 ads, 100 campaigns: a static table, broadcast), and count
per ``(campaign, window)`` (``window = event_time div 10000``: 10-second tumbling windows); the output of
each epoch is every window the epoch's views touched, with its count so far (Redis in YSB; Parquet
``output/windows/epoch=N`` here). The state is at most 100 rows per open window: the work is
proportional to the events, the state small — the opposite of W2/W3.

* falkirk: ``views`` ``Ephemeral()`` (filter, join; in a sequential run computed, with ``counts``, by the
  output's job), ``counts``
  ``Lazy(every=3, key="campaign")`` (``falkirk``), or with ``incremental=True`` (``falkirk-inc``),
  ``Eager(key="campaign")`` (``falkirk-eager``: a checkpoint every epoch, so a restart redoes one epoch), or
  advised; output ``windows``, computed from the state (:func:`falkirk_ysb`: the matrix's YSB form).
* Structured Streaming: Parquet file source (one file per epoch) → filter → stream–static join →
  ``groupBy(campaign, window).count()``, Spark's native streaming aggregation in update mode (its
  strongest form here: no Python in the query) on RocksDB → ``foreachBatch`` writing the epoch's rows.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import Written
from .meters import kind_of

SCHEMA = "epoch BIGINT, user_id BIGINT, page_id BIGINT, ad_id BIGINT, ad_type STRING, event_type STRING, " \
         "event_time BIGINT"
AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
EVENT_TYPES = ("view", "click", "purchase")
ADS, PER_CAMPAIGN, WINDOW_MS = 1000, 10, 10_000


def events(epoch: int, n: int) -> Any:
    """Epoch ``epoch``'s ``n`` events as a pyarrow Table (deterministic in ``epoch``), in event-time order.

    >>> t = events(3, 6)
    >>> t.num_rows, t.column("event_time").to_pylist() == sorted(t.column("event_time").to_pylist())
    (6, True)
    """
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(5000 + epoch)
    return pa.table({"epoch": np.full(n, epoch, dtype="int64"),
                     "user_id": rng.integers(0, 10**6, n).astype("int64"),
                     "page_id": rng.integers(0, 10**5, n).astype("int64"),
                     "ad_id": rng.integers(0, ADS, n).astype("int64"),
                     "ad_type": np.array(AD_TYPES)[rng.integers(0, len(AD_TYPES), n)],
                     "event_type": np.array(EVENT_TYPES)[rng.integers(0, len(EVENT_TYPES), n)],
                     "event_time": (epoch * 1000 + np.sort(rng.integers(0, 1000, n))).astype("int64")})


def ads(spark: Any) -> Any:
    """The static ad → campaign table."""
    from pyspark.sql import functions as F

    return spark.range(ADS).select(F.col("id").alias("ad_id"), (F.col("id") % (ADS // PER_CAMPAIGN)).alias("campaign"))


def views_of(df: Any, table: Any) -> Any:
    """The views of ``df``, each with its campaign and window (the work per event, shared by both systems);
    ``table``: :func:`ads`."""
    from pyspark.sql import functions as F

    return (df.where("event_type = 'view'").select("ad_id", "event_time")
            .join(F.broadcast(table), "ad_id")
            .selectExpr("campaign", f"event_time div {WINDOW_MS} AS window"))


def write_input(directory: Path, n: int, epochs: int) -> None:
    """One Parquet file per epoch for the file source, in epoch order (by modification time)."""
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    base = time.time() - 10 * epochs
    for e in range(epochs):
        p = directory / f"epoch-{e:05d}.parquet"
        pq.write_table(events(e, n), p)
        os.utime(p, (base + e, base + e))


def falkirk_ysb(root: Path, spark: Any, n: int, regimes: str) -> Any:
    """YSB on falkirk in the form the matrix's YSB runs (:func:`benchmarks.spark_matrix.ysb.ysb_pipeline`) and
    docs/spark.md recommends: one input partition (the stream's source reads one file per epoch), the ad table
    made once, the counts' expressions as SQL strings (one py4j call each), and the output computed from the
    state — the state keeps each window's count and, in ``n``, this epoch's count of the windows it updated, so
    the epoch's output is the state's rows with ``n`` set, not a second join of the new state with the epoch's
    windows (the form measured until 2026-12-05, in the scale section's earlier YSB points)."""
    from falkirk.spark import Eager, Ephemeral, Lazy, Pipeline

    pipe = Pipeline(root, spark)
    pipe.input("events", SCHEMA, partitions=1, source=lambda e: events(e, n))
    table = ads(spark)
    keys = ["campaign", "window"]

    def views(events: Any) -> Any:
        return views_of(events, table)

    def counts(views: Any, *, state: Any) -> Any:
        upd = views.groupBy(*keys).count()
        if state is None:
            made = upd.selectExpr(*keys, "count", "count AS n")
        else:  # one full outer join gives both the new counts and the windows this epoch updated (n not null)
            both = state.drop("n").join(upd.withColumnRenamed("count", "n"), keys, "full_outer")
            made = both.selectExpr(*keys, "coalesce(count, 0) + coalesce(n, 0) AS count", "n")
        return (lambda state: state.where("n IS NOT NULL").select(*keys, "count")), made

    # ``eager``: the state checkpointed every epoch (a restart redoes only the epoch it struck, as the stream's)
    regime = Eager(key="campaign") if regimes == "eager" else \
        Lazy(every=3, key="campaign", incremental=regimes == "incremental")
    pipe.step(views, regime=Ephemeral())
    pipe.step(counts, inputs=["views"], regime=regime)
    pipe.output("windows", inputs=["counts"])
    return pipe


class YsbStream:
    """The YSB-like query on Structured Streaming (see the module docstring); the matrix's query interface:
    ``spark``, ``base``, ``written``, ``meter``, ``query()`` and its ``foreachBatch`` method ``batch``."""

    def __init__(self, spark: Any, input_dir: Path, base: Path) -> None:
        from ..spark_matrix.measure import Meter

        self.spark, self.input_dir, self.base = spark, input_dir, base
        self.written = Written(base, kind_of)
        self.meter = Meter(self.written)

    def query(self) -> Any:
        from pyspark.sql import functions as F

        src = self.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(self.input_dir))
        counts = views_of(src, ads(self.spark)).groupBy("campaign", "window").agg(F.count(F.lit(1)).alias("count"))
        return (counts.writeStream.outputMode("update").foreachBatch(self.batch)
                .option("checkpointLocation", str(self.base / "checkpoint")).trigger(availableNow=True))

    def batch(self, df: Any, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(str(self.base / "output" / "windows" / f"epoch={batch_id}"))
        self.meter.epoch_done(batch_id)


class Ysb:
    """The workload adapter (see :mod:`.phases`) for the YSB-like stream."""

    workload = "ysb"
    failed_step = "counts"
    outputs = ("windows",)
    tables: tuple[tuple[str, str], ...] = ()
    batch_attr, meter_attr = "batch", "meter"

    def write_input(self, directory: Path, size: dict[str, Any]) -> None:
        write_input(directory, size["events"], size["epochs"])

    def falkirk(self, root: Path, spark: Any, size: dict[str, Any], regimes: str) -> Any:
        return falkirk_ysb(root, spark, size["events"], regimes)

    def stream_form(self, size: dict[str, Any], override: str | None = None) -> str | None:
        return "native"

    def stream(self, spark: Any, input_dir: Path, base: Path, size: dict[str, Any], form: str) -> Any:
        return YsbStream(spark, input_dir, base)

    def recomputed_by_stream(self, size: dict[str, Any], batch: int) -> int:
        return 0
