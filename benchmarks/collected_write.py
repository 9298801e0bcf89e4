"""What a small keyed checkpoint, and a small output epoch, cost written by Spark's writer, and collected and
written from the driver.

``python -m benchmarks.collected_write [--rows 300,3000,30000,300000] [--outputs 100,1000,10000,60000] [--reps 16]
[--warm 8] [--out FILE]``

A keyed checkpoint of a state made and held in Spark's cache (as YSB's ``counts`` state is when its output's job
made it) is written, per repetition, in one warm driver, both ways, through falkirk's own storage:

* ``spark``: :meth:`~falkirk.spark.pipeline.store.storage.Storage.write_frame` — Spark's Parquet writer,
  partitioned by key-group partition, its file committer without the ``_SUCCESS`` marker, then the files
  described (listed, checksummed, flushed);
* ``collected``: the state's size looked up (``held_bytes``, as the checkpoint's choice does), then
  :meth:`~falkirk.spark.pipeline.store.storage.Storage.write_collected` — the rows collected as Arrow (one Spark
  job) and written by pyarrow in the same layout, then described alike.

The state: ``rows`` rows of YSB's state shape (a campaign id string, a window start, a count, this epoch's count)
over two partitions, made and held as a step's state is (``detach``) before the timing, and written tagged with
each row's partition as a keyed checkpoint is (``keyed.tagged``); ``fsync`` on, as falkirk runs by default. Per case, the driver's process tree's CPU (Python,
JVM: :class:`~falkirk.spark.pipeline.run.cpu.TreeMeter`) and the wall time of each write; the cases alternate,
``--warm`` repetitions each first. The median per case, with the state's size in bytes as
:func:`~falkirk.spark.pipeline.run.session.held_bytes` gives it (what
:data:`~falkirk.spark.pipeline.run.incremental.COLLECT_MAX_BYTES` is compared with), the commit and the load
average (``results/collected_write.json``). Each size's two checkpoints are read back and compared as multisets.

``--outputs``: an output epoch of that many rows, computed by its write as YSB's ``campaign_counts`` is (per
campaign and window, the count of an epoch's cached events, 20 per output row), written into its own
``output/<name>/epoch=E``: ``spark`` — Spark's writer, the rows counted by a Spark observation as an output's
write counts them — against ``collected`` — the rows collected as Arrow and written by pyarrow
(:meth:`~falkirk.spark.pipeline.run.runners.StepRunner._collects` picks it for an output whose epoch before had
at most :data:`~falkirk.spark.pipeline.run.runners.COLLECT_MAX_ROWS` rows). The DataFrame is built anew for each
write, as a step builds it each epoch; the two last epochs are read back and compared as multisets.
Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from . import result_header

HERE = Path(__file__).resolve().parent


def state(spark: Any, rows: int) -> Any:
    """``rows`` rows of YSB's state shape in 2 partitions, made and held as a step's state is (``detach``)."""
    from falkirk.spark.pipeline.run.session import detach

    df = spark.range(rows).selectExpr(
        "concat('campaign-', CAST(id % 1000 AS STRING), '-', CAST(id AS STRING)) AS campaign_id",
        "1700000000000 + (id DIV 1000) * 10000 AS window_start", "id % 97 AS count", "id % 13 AS n")
    return detach(df.repartition(2))


def measure(spark: Any, storage: Any, rows: int, reps: int, warm: int) -> dict[str, Any]:
    from falkirk.spark.pipeline.run.cpu import TreeMeter
    from falkirk.spark.pipeline.run.session import free, held_bytes
    from falkirk.spark.pipeline.store import keyed

    made, meter = state(spark, rows), TreeMeter()
    df = keyed.tagged(made, "campaign_id", 2, 16)  # as a keyed checkpoint writes it (StateCheckpoints._whole)
    cases = {
        "spark": lambda e: storage.write_frame(df, "s", "checkpoint", e, rows, partition_by=keyed.SUBTASK),
        # with the size look-up the checkpoint's choice makes first (StateCheckpoints._small)
        "collected": lambda e: (held_bytes(made), storage.write_collected(df, "s", "checkpoint", e, partition_by=keyed.SUBTASK))[1],
    }
    out, last = alternate(spark, storage, cases, reps, warm, meter)
    out = {"rows": rows, "held_bytes": held_bytes(made), **out}
    free(made)
    return out


def alternate(spark: Any, storage: Any, cases: dict[str, Any], reps: int, warm: int, meter: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each case (``spark``, ``collected``: epoch -> manifest) ``warm`` + ``reps`` times, alternating which goes
    first; the medians of the measured ones, their CPU ratio, whether the last of each read back alike
    (multisets), and the last manifests."""
    from falkirk.spark.pipeline.store import frames

    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    epoch, last = 0, {}
    for r in range(warm + reps):
        for name in (list(cases) if r % 2 == 0 else list(reversed(cases))):
            epoch += 1
            c0, t0 = meter(), time.perf_counter()
            last[name] = cases[name](epoch)
            if r >= warm:
                times[name].append((meter() - c0, time.perf_counter() - t0))
    read = {name: Counter(tuple(x) for x in frames.read_frame(storage, spark, m).collect()) for name, m in last.items()}
    out: dict[str, Any] = {"identical": read["spark"] == read["collected"]}
    for name, xs in times.items():
        out[name] = {"cpu_median_s": statistics.median(c for c, _ in xs), "wall_median_s": statistics.median(w for _, w in xs),
                     "n": len(xs)}
    out["cpu_ratio"] = out["collected"]["cpu_median_s"] / out["spark"]["cpu_median_s"]
    return out, last


def output_frame(spark: Any, rows: int) -> tuple[Any, Any]:
    """An output of about ``rows`` rows computed by its write, as YSB's ``campaign_counts`` is: per campaign and
    window, the count of an epoch's events (20 per output row, cached, 2 partitions: the epoch's input). Returns the
    events (to free) and a function giving the output's DataFrame anew (a step builds it each epoch)."""
    events = spark.range(rows * 20).selectExpr(
        "concat('campaign-', CAST(id % " + str(rows) + " AS STRING)) AS campaign_id", "id * 7 % 100000 AS et"
    ).repartition(2).cache()
    events.count()
    return events, lambda: events.selectExpr("campaign_id", "et - et % 100000 AS window_start").groupBy(
        "campaign_id", "window_start").count()


def measure_output(spark: Any, storage: Any, rows: int, reps: int, warm: int) -> dict[str, Any]:
    """An output epoch written both ways, into its own ``output/<name>/epoch=E``: Spark's writer (the rows counted
    by a Spark observation, as an output's first write is) against the collection and pyarrow's write."""
    from falkirk.spark.pipeline.run.cpu import TreeMeter
    from falkirk.spark.pipeline.run.frames import Frames

    events, out = output_frame(spark, rows)
    meter, observer = TreeMeter(), Frames()

    def by_spark(e: int) -> Any:
        _, observed, count = observer.observing(out())
        m = storage.write_frame(observed, "o", "output", e, 0, location=f"output/spark/epoch={e}")
        return attrs.evolve(m, rows=count())

    cases = {
        "spark": by_spark,
        "collected": lambda e: storage.write_collected(out(), "o", "output", e, location=f"output/collected/epoch={e}"),
    }
    got, last = alternate(spark, storage, cases, reps, warm, meter)
    events.unpersist()
    return {"output_rows": last["collected"].rows, "rows_as_counted": last["spark"].rows, **got}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="300,3000,30000,300000", help="rows of the states measured (empty: none)")
    ap.add_argument("--outputs", default="100,1000,10000,60000",
                    help="rows of the output epochs measured (an empty value: none)")
    ap.add_argument("--reps", type=int, default=16)
    ap.add_argument("--warm", type=int, default=8)
    ap.add_argument("--out", default=str(HERE / "results" / "collected_write.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from falkirk.spark.pipeline.run.incremental import COLLECT_MAX_BYTES
    from falkirk.spark.pipeline.run.runners import COLLECT_MAX_FILE_BYTES, COLLECT_MAX_ROWS
    from falkirk.spark.pipeline.run.session import SMALL_DATA, local_session
    from falkirk.spark.pipeline.store.storage import Storage

    started, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), os.getloadavg()
    spark = local_session(conf=SMALL_DATA)
    results, outputs = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="collected-write-") as work:
            plan = [("root", measure, results, lambda g, n: f"{n:>8} rows ({g['held_bytes']} B held)", args.rows),
                    ("output", measure_output, outputs, lambda g, n: f"output of {g['output_rows']:>6} rows", args.outputs)]
            for prefix, how, into, label, sizes in plan:
                for rows in (int(x) for x in sizes.split(",") if x):
                    got = how(spark, Storage(str(Path(work) / f"{prefix}-{rows}")), rows, args.reps, args.warm)
                    into.append(got)
                    print(f"{label(got, rows)}: spark {got['spark']['cpu_median_s']:.3f} CPU-s "
                          f"{got['spark']['wall_median_s']:.3f} s, collected {got['collected']['cpu_median_s']:.3f} "
                          f"CPU-s {got['collected']['wall_median_s']:.3f} s ({got['cpu_ratio']:.2f}x), identical "
                          f"{got['identical']}", flush=True)
    finally:
        spark.stop()
    doc = {**result_header("collected_write", argv, started, load_before), "reps": args.reps, "warm": args.warm,
           "collect_max_bytes": COLLECT_MAX_BYTES, "collect_max_rows": COLLECT_MAX_ROWS,
           "collect_max_file_bytes": COLLECT_MAX_FILE_BYTES, "sizes": results, "outputs": outputs}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["identical"] for r in results + outputs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
