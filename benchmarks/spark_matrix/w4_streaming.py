"""W4 and W6 on Structured Streaming: one query (``single``) or one per stateful operator
(``split``); the configurations are described in :mod:`.w4` and :mod:`.w6`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import STREAMING_CONF, Written
from .measure import Meter, streaming_category
from .w4_steps import EVENTS_SCHEMA, SINK_SCHEMA, Failure, heavy_of, insert_sink, sink_rows

TOTALS_OUT = "user BIGINT, spend BIGINT, events BIGINT, purchases BIGINT, avg_spend BIGINT"
PASS_SCHEMA = EVENTS_SCHEMA + ", kind STRING, t_spend BIGINT, t_events BIGINT, t_purchases BIGINT, avg_spend BIGINT"


class StreamingW4:
    """W4/W6 as Structured Streaming: one query (``single``) or one per stateful operator (``split``)."""

    def __init__(self, spark: Any, input_dir: Path, base: Path, mode: str, *, version: int = 1,
                 failure: Failure | None = None, checkpoint: str = "checkpoint") -> None:
        self.spark, self.input_dir, self.base, self.mode, self.version = spark, input_dir, base, mode, version
        self.failure = failure or Failure(None)
        self.checkpoint = base / checkpoint
        self.written = Written(base, streaming_category)
        self.meters: dict[str, Meter] = {}
        self.db_path = base / "sink.sqlite"
        self.progress: list[dict[str, Any]] = []

    def source(self) -> Any:
        return (self.spark.readStream.schema(EVENTS_SCHEMA).option("maxFilesPerTrigger", 1)
                .parquet(str(self.input_dir)))

    def totals_operator(self, src: Any, passthrough: bool) -> Any:
        import pandas as pd
        from pyspark.sql.streaming.state import GroupStateTimeout

        version = self.version

        def update(key: Any, batches: Any, state: Any) -> Any:
            spend, events, purchases = (int(x) for x in state.get) if state.exists else (0, 0, 0)
            parts = []
            for pdf in batches:
                spend += int(pdf["amount"].sum())
                events += len(pdf)
                purchases += int(pdf["purchase"].sum())
                if passthrough:
                    parts.append(pdf)
            state.update((spend, events, purchases))
            user = int(key[0])
            avg = spend // events if version == 1 else (spend * 100) // events  # avg_py, inlined: a worker
            # cannot import this script
            if not passthrough:
                yield pd.DataFrame({"user": [user], "spend": [spend], "events": [events], "purchases": [purchases],
                                    "avg_spend": [avg]})
                return
            out = pd.concat(parts, ignore_index=True)
            out["kind"] = "e"
            total: dict[str, list[Any]] = {c: [None] for c in out.columns}
            total.update(epoch=[int(out["epoch"].iloc[0])], user=[user], kind=["t"], t_spend=[spend],
                         t_events=[events], t_purchases=[purchases], avg_spend=[avg])
            for c in ("t_spend", "t_events", "t_purchases", "avg_spend"):
                out[c] = None
            out = pd.concat([out, pd.DataFrame(total)], ignore_index=True)
            for c in ("epoch", "user", "amount", "purchase", "t_spend", "t_events", "t_purchases", "avg_spend"):
                out[c] = out[c].astype("Int64")
            yield out

        return src.groupBy("user").applyInPandasWithState(
            update, PASS_SCHEMA if passthrough else TOTALS_OUT, "spend LONG, events LONG, purchases LONG", "append",
            GroupStateTimeout.NoTimeout)

    def write_totals(self, totals: Any, batch_id: int) -> None:
        totals.write.mode("overwrite").parquet(str(self.base / "output" / "totals_out" / f"epoch={batch_id}"))

    def sink(self, events: Any, batch_id: int) -> None:
        """``heavy`` and the SQLite sink, exactly once (skipped when the epoch is in the database)."""
        db = sqlite3.connect(self.db_path, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute(SINK_SCHEMA)
            if db.execute("SELECT 1 FROM heavy_rows WHERE epoch = ? LIMIT 1", (batch_id,)).fetchone() is None:
                rows = sink_rows(heavy_of(events))
                self.failure.maybe(batch_id)
                insert_sink(db, batch_id, rows)
            db.execute("COMMIT")
        finally:
            db.close()

    def single_batch(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        df = df.persist()
        self.write_totals(df.where("kind = 't'").select(
            "user", F.col("t_spend").alias("spend"), F.col("t_events").alias("events"),
            F.col("t_purchases").alias("purchases"), "avg_spend"), batch_id)
        self.sink(df.where("kind = 'e'"), batch_id)
        df.unpersist()
        self.meters["single"].epoch_done(batch_id)

    def totals_batch(self, df: Any, batch_id: int) -> None:
        self.write_totals(df, batch_id)
        self.meters["totals"].epoch_done(batch_id)

    def sink_batch(self, df: Any, batch_id: int) -> None:
        df = df.persist()  # heavy scans its input several times: read the batch once
        self.sink(df, batch_id)
        df.unpersist()
        self.meters["sink"].epoch_done(batch_id)

    def queries(self) -> dict[str, Any]:
        """The query (or queries) to start, by name, in order."""
        if self.mode == "single":
            q = self.totals_operator(self.source(), True).writeStream.foreachBatch(self.single_batch)
            return {"single": q.option("checkpointLocation", str(self.checkpoint)).trigger(availableNow=True)}
        totals = self.totals_operator(self.source(), False).writeStream.foreachBatch(self.totals_batch)
        sink = self.source().writeStream.foreachBatch(self.sink_batch)
        return {"totals": totals.option("checkpointLocation", str(self.checkpoint / "totals")).trigger(availableNow=True),
                "sink": sink.option("checkpointLocation", str(self.checkpoint / "sink")).trigger(availableNow=True)}

    def run(self, only: tuple[str, ...] = ()) -> dict[str, Any]:
        """Run the queries to the end of the input; a query that fails is restarted once (same session and
        checkpoint). The restarted batches' progress is kept."""
        from pyspark.errors import StreamingQueryException

        from falkirk.spark.pipeline.run.session import SMALL_DATA, sql_conf

        done = {}
        self.written.scan(count=False)
        with sql_conf(self.spark, {**STREAMING_CONF, **SMALL_DATA}):
            for name, writer in self.queries().items():
                if only and name not in only:
                    continue
                self.meters.setdefault(name, Meter(self.written))
                for attempt in range(2):
                    q = writer.start()
                    try:
                        q.awaitTermination()
                    except StreamingQueryException:
                        if attempt:
                            raise
                        self.progress += [{**json.loads(p.json), "query": name, "attempt": 0}
                                          for p in q.recentProgress]
                        continue  # restart the query in the same SparkSession, same checkpoint location
                    self.progress += [{**json.loads(p.json), "query": name, "attempt": attempt}
                                      for p in q.recentProgress]
                    break
                done[name] = q
        self.written.scan()
        return done

    def per_epoch(self) -> tuple[list[float], list[float]]:
        """Per-epoch wall and CPU, the queries' costs added epoch by epoch."""
        walls: list[float] = []
        cpus: list[float] = []
        for m in self.meters.values():
            w, c = m.per_epoch()
            walls = [a + b for a, b in zip(walls, w, strict=True)] if walls else w
            cpus = [a + b for a, b in zip(cpus, c, strict=True)] if cpus else c
        return walls, cpus
