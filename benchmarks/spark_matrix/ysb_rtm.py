"""YSB in Structured Streaming's real-time mode (``trigger(realTime=...)``, PySpark 4.3): the steady state only.

What PySpark 4.3 allows, found by running it (see also :mod:`.ysb`, *Real-time mode*): the real-time scan
takes only sources implementing ``SupportsRealTimeMode`` — Kafka (whose connector is not shipped with
PySpark) and Spark's internal ``LowLatencyMemoryStream``; the file source and the rate source are refused
(``STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED``). The sinks allowed are console, ``foreach``,
Kafka and the continuous memory sink; ``foreachBatch`` and the memory sink are refused
(``OPERATOR_OR_SINK_NOT_IN_ALLOWLIST``). YSB's watermarked windowed count in update mode is accepted; its
stages run together (pipelined shuffle), so the query needs as many task slots as source partitions plus
shuffle partitions (``CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT`` with 2 + 2 on ``local[2]``): here one of each.
It emits one update per input record.

``streaming-rtm`` — the same YSB query (:func:`.ysb_streaming.views_of`, the watermark, the window count) in
real-time mode (``realTime`` = the epoch interval, at least 5 s — ``realTimeMode.minBatchDuration``: its
checkpoint interval; RocksDB, changelog checkpointing
and asynchronous progress tracking are what real-time mode turns on) over a ``LowLatencyMemoryStream``
of strings (one per epoch, ``split`` and ``explode`` into events: one py4j call per epoch), fed by a thread of
the driver at each release time (so the producer's few ms per epoch are in this configuration's CPU), into a
``foreach`` writer (a Python ``ForeachWriter`` appending each update with its time to a file per task).
An epoch is committed when every count it made final has been written; the final counts come from the
pure-Python count of the generator (:func:`.ysb.expected_counts`), which also checks the updates. The memory
source keeps its data in the driver: a killed driver loses it, so neither failure is measured here (with
Kafka the stream could replay; this machine has no broker).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from .ysb_input import EVENTS_SCHEMA, CpuSampler, events_table, first_release, samples

LOW_LATENCY = "org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream$"


def update_writer(directory: str) -> Any:
    """A ``ForeachWriter``: each update ``(campaign_id, window_start, count)`` and when it was written, a line in
    ``directory/<partition>-<pid>.txt`` (flushed per row). Defined here, not at module level: the Python
    workers cannot import this package, so the class goes to them by value."""

    class UpdateWriter:
        def open(self, partition_id: int, epoch_id: int) -> bool:
            self.f = open(os.path.join(directory, f"{partition_id}-{os.getpid()}.txt"), "a", encoding="utf-8")
            return True

        def process(self, row: Any) -> None:
            self.f.write(f"{row[0]} {row[1]} {row[2]} {time.time():.4f}\n")
            self.f.flush()

        def close(self, error: Any) -> None:
            self.f.close()

    return UpdateWriter()


def _feed(spark: Any, stream: Any, size: dict[str, Any], t0: float, epochs: int, released: dict[int, float]) -> None:
    """The in-driver producer: epoch ``e`` as one string added to the memory stream at its release time."""
    jvm = spark.sparkContext._jvm
    names = [c.split()[0] for c in EVENTS_SCHEMA.split(", ")]
    for e in range(epochs):
        table = events_table(e, size)
        text = "\n".join(",".join(r) for r in zip(*(table.column(c).to_pylist() for c in names), strict=True))
        items = jvm.java.util.ArrayList()
        items.add(text)
        time.sleep(max(0.0, t0 + (e + 1) * size["interval"] - time.time()))
        stream.addData(jvm.scala.jdk.javaapi.CollectionConverters.asScala(items))
        released[e] = time.time()


def run_rtm(spark: Any, base: Path, size: dict[str, Any], kind: str, epochs: int) -> dict[str, Any]:
    """One paced real-time-mode run under ``base/kind``: releases, the sink's updates, the CPU series."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from falkirk.spark.pipeline.run.session import SMALL_DATA, sql_conf

    from ..spark_vs_streaming import STREAMING_CONF
    from .ysb_streaming import ad_table, views_of

    d = base / kind
    (d / "updates").mkdir(parents=True, exist_ok=True)
    jvm, w = spark.sparkContext._jvm, size["window_ms"] // 1000
    module = getattr(getattr(jvm, LOW_LATENCY), "MODULE$")
    stream = module.apply(spark._jsparkSession, 1, jvm.org.apache.spark.sql.Encoders.STRING())
    lines = DataFrame(stream.toDF(), spark).select(F.explode(F.split("value", "\n")).alias("line"))
    parts = F.split("line", ",")
    names = [c.split()[0] for c in EVENTS_SCHEMA.split(", ")]
    events = lines.select(*(parts[i].alias(n) for i, n in enumerate(names)))
    counts = (views_of(events, ad_table(spark, size)).withColumn("ts", F.timestamp_millis("et"))
              .withWatermark("ts", f"{w} seconds").groupBy("campaign_id", F.window("ts", f"{w} seconds")).count()
              .select("campaign_id", F.unix_millis(F.col("window.start")).alias("window_start"), "count"))
    released: dict[int, float] = {}
    t0 = first_release(size["interval"], size.get("lead", 2.0))
    sampler = CpuSampler(base / f"{kind}.cpu")
    with sql_conf(spark, {**STREAMING_CONF, **SMALL_DATA, "spark.sql.shuffle.partitions": "1"}):
        q = (counts.writeStream.outputMode("update").foreach(update_writer(str(d / "updates")))
             .option("checkpointLocation", str(d / "checkpoint")).trigger(realTime=f"{max(5.0, size['interval'])} seconds")
             .start())
        feeder = threading.Thread(target=_feed, args=(spark, stream, size, t0, epochs, released), daemon=True)
        feeder.start()
        feeder.join()
        expected = expected_final(size, epochs)
        deadline = time.time() + 120 + 10 * size["interval"]
        while not all(k in updates(d) for k in expected.get(epochs - 1, {})) and time.time() < deadline:
            if q.exception() is not None:
                raise RuntimeError(f"real-time query failed: {q.exception()}")
            time.sleep(0.2)
        q.stop()
    sampler.stop()
    return {"t0": t0, "releases": released, "updates": updates(d), "series": samples(base / f"{kind}.cpu"), "dir": d}


def updates(d: Path) -> dict[tuple[str, int, int], float]:
    """``(campaign_id, window_start, count) → when written`` (the first time) from the writer's files."""
    out: dict[tuple[str, int, int], float] = {}
    for p in (d / "updates").glob("*.txt"):
        for line in p.read_text(encoding="utf-8").splitlines():
            c, ws, n, at = line.split()
            out.setdefault((c, int(ws), int(n)), float(at))
    return out


def expected_final(size: dict[str, Any], epochs: int) -> dict[int, set[tuple[str, int, int]]]:
    """Per epoch, the counts it makes final for the windows it updated: what the sink must have written."""
    from .ysb import expected_counts

    return {e: set(c) for e, c in expected_counts({**size, "epochs": epochs}).items()}


def phase_rtm(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """``streaming-rtm``'s one driver: a warm-up and the measured failure-free run; per-epoch commits derived
    from the updates written (module docstring); every update checked against the pure-Python count."""
    from .ysb import expected_counts
    from .ysb_metrics import describe_run

    size, base = spec["size"], Path(spec["base"])
    if size.get("warm"):
        run_rtm(spark, base, size, "warm", size["warm"])
    run = run_rtm(spark, base, size, "reference", size["epochs"])
    want = expected_counts(size)
    got = run["updates"]
    commits = {e: max(got[k] for k in keys) for e, keys in ((e, set(c)) for e, c in want.items())
               if keys and all(k in got for k in keys)}
    # every record's update: counts 1..final for each window, each written once
    final: dict[tuple[str, int], int] = {}
    for c in want.values():
        for camp, ws, n in c:
            final[(camp, ws)] = max(final.get((camp, ws), 0), n)
    # every window's final count written, nothing beyond it; one update per record is Spark's own rhythm (noted)
    extra = [k for k in got if k[2] > final.get((k[0], k[1]), 0)]
    diffs = [f"{len(extra)} updates beyond the final counts"] if extra else []
    diffs += [f"epoch {e}: a final count never written" for e in want if e not in commits]
    per_record = all((k[0], k[1], i) in got for k, n in final.items() for i in range(1, n + 1))
    ref = describe_run(commits, run["releases"], run["series"], run["t0"], {e: list(c) for e, c in want.items()},
                       size)
    return {"reference": ref, "differences": diffs, "updates_written": len(got), "one_update_per_record": per_record}
