"""An input's epoch frame persisted in executor memory, or read from the log by each job that uses it.

Until 2026-12-01 falkirk persisted every input's epoch frame (``MEMORY_AND_DISK``, filled by its first
consumer's job), so that several consumers would not scan the log's Parquet again; since then it is read from
the log by each job, unless the input is declared with ``Pipeline.input(cache=True)``. This measures both, on
the scale harness's falkirk pipelines (``benchmarks.spark_scale``):

* ``ysb`` — the YSB-like stream, one consumer of ``events``;
* ``flagship`` — the paper's Figure 1 application, two consumers of ``events``.

Each (workload, mode) runs in a fresh driver process (``local[2,3]``), the modes alternated ``--drivers``
times; the input log is filled before the timing; CPU per epoch is the process tree's (driver, JVM, Python
workers, from ``/proc``), epochs ``--warmup`` to the end. Each run's output is compared, as a digest of its
sorted rows, with the other mode's: ``identical`` is false otherwise.

Usage: ``.venv/bin/python -m benchmarks.input_cache [--events 1000000] [--epochs 10] [--drivers 2]
[--workloads ysb,flagship] [--out benchmarks/results/input_cache.json]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "input_cache.json"


def one(workload: str, cache: bool, events: int, epochs: int) -> dict[str, Any]:
    """One driver: the pipeline run for ``epochs`` epochs; per-epoch wall and CPU, and the output's digest."""
    import attrs

    from falkirk.spark.pipeline.run.session import local_session

    from .spark_matrix.measure import now_cpu_jit
    from .spark_scale.plan import Point, memory, sql_settings
    from .spark_vs_streaming import fill_input_logs

    spark = local_session(conf=memory(Point(workload, events, None, epochs, epochs)))
    root = Path(tempfile.mkdtemp(prefix=f"input-cache-{workload}-"))
    size = {"events": events, "epochs": epochs, "crash": epochs}
    if workload == "ysb":
        from .spark_scale.ysb import Ysb as Adapter
    else:
        from .spark_scale.flagship import Flagship as Adapter
    pipe = Adapter().falkirk(root, spark, size, "shipped")
    pipe.spark_conf = sql_settings(Point(workload, events, None, epochs, epochs))
    for name, inp in list(pipe.inputs.items()):
        pipe.inputs[name] = attrs.evolve(inp, cache=cache)
    fill_input_logs(pipe, epochs)
    marks: list[tuple[int, float, float]] = []

    def progress(line: str) -> None:
        if line.startswith("epoch"):
            marks.append((int(line.split()[1]), time.perf_counter(), now_cpu_jit()[0]))

    start = (-1, time.perf_counter(), now_cpu_jit()[0])
    pipe.run(epochs, progress=progress)
    per, prev = [], start
    for m in marks:
        per.append({"epoch": m[0], "wall": m[1] - prev[1], "cpu": m[2] - prev[2]})
        prev = m
    output = Adapter.outputs[0]
    rows = sorted(tuple(r) for r in spark.read.parquet(str(root / "output" / output)).collect())
    return {"workload": workload, "cache": cache, "per_epoch": per, "rows": len(rows),
            "digest": hashlib.sha256(repr(rows).encode()).hexdigest()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=10**6)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--drivers", type=int, default=2, help="driver processes per (workload, mode), alternated")
    ap.add_argument("--warmup", type=int, default=2, help="epochs left out of the per-epoch medians")
    ap.add_argument("--workloads", default="ysb,flagship")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:  # a driver process: WORKLOAD:cache|read
        workload, mode = args.one.split(":")
        print(json.dumps(one(workload, mode == "cache", args.events, args.epochs)))
        return 0
    doc: dict[str, Any] = {"benchmark": "input_cache", "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                           "argv": sys.argv[1:], "load_average_start": os.getloadavg(),
                           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                           "events": args.events, "epochs": args.epochs, "warmup": args.warmup, "runs": []}
    for workload in args.workloads.split(","):
        for i in range(args.drivers):
            for mode in ("cache", "read"):
                cmd = [sys.executable, "-m", "benchmarks.input_cache", "--one", f"{workload}:{mode}",
                       "--events", str(args.events), "--epochs", str(args.epochs)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
                run = json.loads(out) | {"driver": i + 1, "mode": mode}
                cpus = [p["cpu"] for p in run["per_epoch"] if p["epoch"] >= args.warmup]
                run["cpu_median_s"], run["cpu_mean_s"] = statistics.median(cpus), statistics.fmean(cpus)
                doc["runs"].append(run)
                print(f"{workload:9} {mode:5} driver {i + 1}: {run['cpu_median_s']:.2f} CPU-s/epoch (mean "
                      f"{run['cpu_mean_s']:.2f}), {run['rows']} output rows, load {os.getloadavg()[0]:.1f}", flush=True)
    summary: dict[str, Any] = {}
    for workload in args.workloads.split(","):
        runs = [r for r in doc["runs"] if r["workload"] == workload]
        med = {m: statistics.median(r["cpu_median_s"] for r in runs if r["mode"] == m) for m in ("cache", "read")}
        summary[workload] = {"cache_cpu_median_s": med["cache"], "read_cpu_median_s": med["read"],
                             "change": med["read"] / med["cache"] - 1,
                             "identical": len({r["digest"] for r in runs}) == 1}
    doc["summary"], doc["load_average_end"] = summary, os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if all(s["identical"] for s in summary.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
