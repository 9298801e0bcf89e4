"""Input at scale (issue 30): appending 10^6 records to an input log, and Spark replaying one epoch of it.

Cases, all on the same 10^6 four-field records (``user BIGINT, ts BIGINT,
url STRING, amount DOUBLE``; 100,000 distinct users) in one process, CPU time
of this process (``time.process_time``) for the driver-side cases:

* ``bare`` — ``pyarrow.parquet.write_table`` of the same Arrow table (pyarrow's
  defaults), to a local file: the floor an Arrow-native log is compared with;
  ``bare, same encodings`` — the same with the encodings the log's segments
  use (:func:`~falkirk.spark.pipeline.store.segments.parquet_options`), to
  separate the log's own overhead from its choice of encodings;
* ``json (before)`` — today's log before issue 30 (the JSON-lines segments and
  per-record check of commit ``27438cf``, loaded from git), appending the dicts;
* ``dicts`` / ``arrow`` / ``pandas`` — :meth:`InputLog.append` of the list of
  dicts, of a ``pyarrow.Table``, of a pandas ``DataFrame``;

each for two layouts: 1 partition without a key, and 4 partitions keyed by
``user``; every driver-side case runs ``--reps`` times (a fresh log each
time, the cases taking turns) and keeps its least CPU time. Then **replay**: Spark reads one epoch (the 10^6 records) from the
JSON-lines segment and from the Parquet one and materialises every column
(``write.format("noop")``), and only two columns (``user, amount`` summed):
CPU time of the JVM (``/proc/<pid>/stat``, driver and executors: local mode)
plus this process, median of ``--reps`` runs after one warm-up, the two
formats taking turns. Writes ``benchmarks/results/input_log.json``.

Usage: ``.venv/bin/python benchmarks/input_log.py [--rows 1000000] [--reps 3] [--skip-legacy]``
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from falkirk.spark.pipeline.store.inputlog import InputLog

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "input_log.json"
SCHEMA = "user BIGINT, ts BIGINT, url STRING, amount DOUBLE"
#: The last commit whose input log wrote JSON lines (what "today" meant when issue 30 was filed).
LEGACY_COMMIT = "27438cf"
LAYOUTS = {"1 partition": {"partitions": 1, "key": None}, "4 partitions, key=user": {"partitions": 4, "key": "user"}}


def make_table(rows: int, seed: int = 7) -> pa.Table:
    """The benchmark's records as Arrow (deterministic)."""
    rng = np.random.default_rng(seed)
    urls = np.array([f"/p/{i}" for i in range(1000)], dtype=object)
    return pa.table({
        "user": pa.array(rng.integers(0, 100_000, rows)),
        "ts": pa.array(1_700_000_000_000 + np.arange(rows, dtype=np.int64)),
        "url": pa.array(urls[rng.integers(0, 1000, rows)], pa.string()),
        "amount": pa.array(rng.random(rows) * 100),
    })


def legacy_inputlog() -> Any:
    """``InputLog`` as it was at :data:`LEGACY_COMMIT` (its inputlog.py and records.py from git), or ``None``."""
    where = Path(tempfile.mkdtemp(prefix="falkirk-legacy-")) / "falkirk_legacy_inputlog"
    atexit.register(shutil.rmtree, where.parent, ignore_errors=True)  # imported from there until the process ends
    where.mkdir()
    try:
        for name in ("inputlog", "records"):
            text = subprocess.run(["git", "-C", str(ROOT), "show", f"{LEGACY_COMMIT}:src/falkirk/spark/pipeline/store/{name}.py"],
                                  check=True, capture_output=True, text=True).stdout
            text = text.replace("from falkirk.spark.pipeline.store.records import", "from falkirk_legacy_inputlog.records import")
            (where / f"{name}.py").write_text(text)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"legacy input log unavailable ({exc}); skipping the 'json (before)' case")
        return None
    (where / "__init__.py").write_text("")
    sys.path.insert(0, str(where.parent))
    module = importlib.import_module("falkirk_legacy_inputlog.inputlog")
    return module.InputLog


def cpu(fn: Callable[[], Any]) -> float:
    """CPU seconds of this process running ``fn`` (garbage collector as a user has it)."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def ingest(table: pa.Table, scratch: Path, legacy: Any, reps: int) -> list[dict[str, Any]]:
    """The driver-side cases (see the module docstring)."""
    from falkirk.spark.pipeline.store.segments import parquet_options

    rows = table.num_rows
    records = table.to_pylist()
    frame = table.to_pandas()
    cases: dict[tuple[str, str], Callable[[Path], Any]] = {
        ("bare", "-"): lambda where: pq.write_table(table, where / "bare.parquet"),
        ("bare, same encodings", "-"): lambda where: pq.write_table(table, where / "bare.parquet",
                                                                    **parquet_options(table)),
    }
    for layout, opts in LAYOUTS.items():
        if legacy is not None:
            cases["json (before)", layout] = lambda where, opts=opts: legacy(
                where, "events", SCHEMA, fsync=False, **opts).append(records, batch="b")
        for case, data in (("dicts", records), ("arrow", table), ("pandas", frame)):
            cases[case, layout] = lambda where, opts=opts, data=data: InputLog(
                where, "events", SCHEMA, fsync=False, **opts).append(data, batch="b")
    times: dict[tuple[str, str], list[float]] = {}
    sizes: dict[tuple[str, str], int] = {}
    for rep in range(reps):
        for (case, layout), run in cases.items():
            if case == "json (before)" and rep:
                continue  # ~15 CPU-s at 10^6 records: once is enough
            where = scratch / f"{case}-{layout}-{rep}".replace(" ", "_").replace(",", "")
            where.mkdir(parents=True)
            times.setdefault((case, layout), []).append(cpu(lambda run=run, where=where: run(where)))
            sizes[case, layout] = sum(f.stat().st_size for f in where.rglob("*") if f.is_file())
            shutil.rmtree(where)
    out = []
    for (case, layout), values in times.items():
        best = min(values)
        out.append({"case": case, "layout": layout, "rows": rows, "cpu_s": round(best, 4), "bytes": sizes[case, layout],
                    "cpu_s_runs": [round(v, 4) for v in values], "records_per_cpu_s": round(rows / best)})
        print(f"  {case:<22} {layout:<24} {best:8.3f} CPU-s  {rows / best:>12,.0f} records/CPU-s")
    return out


def jvm_cpu(spark: Any) -> float:
    """CPU seconds the JVM has used so far (driver and, in local mode, executors), from ``/proc`` (Linux)."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def replay(table: pa.Table, scratch: Path, legacy: Any, reps: int) -> list[dict[str, Any]]:
    """Spark reading one epoch from a JSON-lines segment and from a Parquet one (see the module docstring)."""
    from pyspark.sql import functions as F

    from falkirk.spark.pipeline.run.session import local_session

    spark = local_session()
    logs = {}
    if legacy is not None:
        old = legacy(scratch / "replay-json", "events", SCHEMA, fsync=False)
        old.append(table.to_pylist(), batch="b")
        old.cut(0)
        logs["json"] = InputLog(scratch / "replay-json", "events", SCHEMA, fsync=False)  # today's reader of the old root
    new = InputLog(scratch / "replay-parquet", "events", SCHEMA, fsync=False)
    new.append(table, batch="b")
    new.cut(0)
    logs["parquet"] = new
    queries = {
        "all columns": lambda df: df.write.format("noop").mode("overwrite").save(),
        "2 columns": lambda df: df.select("user", "amount").agg(F.sum("amount"), F.count("user")).collect(),
    }
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(reps + 1):  # the first round warms the JVM up and is dropped
        for query, run in queries.items():
            for fmt, log in logs.items():
                t0, j0 = time.process_time(), jvm_cpu(spark)
                run(log.read(spark, 0))
                times.setdefault((fmt, query), []).append(time.process_time() - t0 + jvm_cpu(spark) - j0)
    out = []
    for (fmt, query), values in times.items():
        median = statistics.median(values[1:])
        out.append({"case": f"replay {fmt}", "query": query, "rows": table.num_rows, "cpu_s": round(median, 4),
                    "cpu_s_runs": [round(v, 4) for v in values[1:]], "records_per_cpu_s": round(table.num_rows / median)})
        print(f"  replay {fmt:<8} {query:<12} {median:8.3f} CPU-s (median of {len(values) - 1})")
    return out


def main() -> None:
    """Run the benchmark, print the table and write the results JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-legacy", action="store_true", help="no 'json (before)' case (it takes ~15 CPU-s at 10^6)")
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    load = [os.getloadavg()]
    table = make_table(args.rows)
    legacy = None if args.skip_legacy else legacy_inputlog()
    scratch = Path(tempfile.mkdtemp(prefix="falkirk-bench-input-"))
    try:
        print(f"ingest, {args.rows:,} records:")
        results = ingest(table, scratch, legacy, args.reps)
        load.append(os.getloadavg())
        if not args.skip_replay:
            print("replay of one epoch by Spark:")
            results += replay(table, scratch, legacy, args.reps)
            load.append(os.getloadavg())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": args.rows, "schema": SCHEMA,
           "load_average": [[round(x, 2) for x in la] for la in load], "cpus": os.cpu_count(),
           "python": platform.python_version(), "pyarrow": pa.__version__, "legacy_commit": LEGACY_COMMIT,
           "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"load average {load}; wrote {args.out}")


if __name__ == "__main__":
    main()
