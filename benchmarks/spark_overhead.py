"""Steady-state overhead of falkirk's mixed regimes on the flagship, versus no checkpointing at all.

Runs the Figure 1 pipeline (:mod:`falkirk.spark.pipeline.tools.flagship`) in three
configurations on one SparkSession, alternating them ``--reps`` times with
fresh roots:

* ``baseline`` — falkirk off (``durable=False``): the same steps and the same
  executor (each step's output is materialised and counted, inputs come from
  the input log, responses and the SQLite database are written), but no
  checkpoint, log, manifest, monitor or garbage collection;
* ``falkirk`` — the mixed regimes as shipped: logs (heavy), Parquet state
  checkpoints (cc every 3 epochs), SQLite commits with manifests (stats),
  output manifests, SHA-256 checksums, fsync, the SQLite monitor, GC;
* ``falkirk-nofsync`` — the same without fsync and checksums.

Before timing, one untimed run of the baseline (``--warmup-epochs``
epochs) warms the JVM up: on a loaded machine its JIT is not done after
two epochs, and the first timed configuration would pay for it. The first
``--warmup`` epochs of every timed run are dropped as well (each fresh
root's first epochs); the median over the rest is the steady state, in wall time,
in **CPU time of the whole process tree** (the Python driver, its JVM and
the Python workers, from ``/proc``: what the machine spent, whatever else
runs on it) and in **driver-side Python CPU** (``time.process_time`` of
the driver process: falkirk's own bookkeeping plus PySpark's client side).
Ratios are taken within one run of this script. Per step, the median time
shows where the overhead goes. Prints a table and writes
``benchmarks/results/spark_overhead.json`` (with the load average before
and after).

Usage: ``.venv/bin/python benchmarks/spark_overhead.py [--epochs 8] [--events 4000] [--reps 2] [--warmup-epochs 6]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from spark_vs_streaming import tree_cpu  # CPU of a process tree, from /proc (this directory)

from falkirk.spark.pipeline.run.session import local_session
from falkirk.spark.pipeline.tools.flagship import build

CONFIGS: dict[str, dict[str, Any]] = {
    "baseline": {"durable": False},
    "falkirk": {},
    "falkirk-nofsync": {"fsync": False, "checksums": False},
}
RESULTS = Path(__file__).resolve().parent / "results" / "spark_overhead.json"


def one_run(spark: Any, root: Path, config: dict[str, Any], epochs: int, size: dict[str, int]) -> dict[str, Any]:
    """Run the flagship once; per-epoch wall, process-tree CPU and driver CPU, and per-(step, epoch) times."""
    stamps: dict[int, tuple[float, float, float]] = {}

    def now() -> tuple[float, float, float]:
        return time.perf_counter(), tree_cpu(os.getpid()), time.process_time()

    t0 = now()

    def progress(line: str) -> None:
        if line.startswith("epoch"):
            stamps[int(line.split()[1])] = now()

    result = build(root, spark, **size, **config).run(epochs, progress=progress)
    total = time.perf_counter() - t0[0]
    starts = [t0] + [stamps[e] for e in range(epochs - 1)]
    per_epoch = [[stamps[e][i] - starts[e][i] for e in range(epochs)] for i in range(3)]
    steps: dict[str, list[float]] = {}
    for x in result.journal.executions:
        steps.setdefault(x.step, []).append(x.seconds)
    return {"total": total, "epochs": per_epoch[0], "cpu": per_epoch[1], "driver_cpu": per_epoch[2], "steps": steps,
            "root_bytes": result.root_bytes}


def main() -> None:
    """Run the benchmark and report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--warmup-epochs", type=int, default=6, help="epochs of the untimed warm-up run (0: none)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    size = {"events_per_epoch": args.events, "queries_per_epoch": 60, "users": 300, "nodes": 1500, "cc_every": 3}
    spark = local_session()
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CONFIGS}
    scratch = Path(tempfile.mkdtemp(prefix="falkirk-bench-"))
    try:
        if args.warmup_epochs:
            t = time.perf_counter()
            build(scratch / "warmup", spark, **size, durable=False).run(args.warmup_epochs)
            print(f"warm-up  ({args.warmup_epochs} epochs, untimed) {time.perf_counter() - t:6.1f} s", flush=True)
            shutil.rmtree(scratch / "warmup", ignore_errors=True)
        for rep in range(args.reps):
            for name, config in CONFIGS.items():
                root = scratch / f"{name}-{rep}"
                r = one_run(spark, root, config, args.epochs, size)
                runs[name].append(r)
                print(f"rep {rep} {name:16} {r['total']:6.1f} s", flush=True)
                shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    w = args.warmup
    summary: dict[str, Any] = {}
    for name, rs in runs.items():
        steady = [t for r in rs for t in r["epochs"][w:]]
        cpu = [t for r in rs for t in r["cpu"][w:]]
        driver = [t for r in rs for t in r["driver_cpu"][w:]]
        steps = {s: statistics.median([t for r in rs for t in r["steps"][s][w:]]) for s in rs[0]["steps"]}
        summary[name] = {"epoch_median_s": statistics.median(steady), "epoch_mean_s": statistics.mean(steady),
                         "cpu_median_s": statistics.median(cpu), "cpu_mean_s": statistics.mean(cpu),
                         "driver_cpu_median_s": statistics.median(driver), "driver_cpu_mean_s": statistics.mean(driver),
                         "step_median_s": steps, "root_bytes": rs[-1]["root_bytes"]}
    base = summary["baseline"]
    for s in summary.values():
        s["overhead_vs_baseline"] = s["epoch_median_s"] / base["epoch_median_s"] - 1.0
        s["cpu_ratio_vs_baseline"] = s["cpu_median_s"] / base["cpu_median_s"]
        s["cpu_mean_ratio_vs_baseline"] = s["cpu_mean_s"] / base["cpu_mean_s"]
        s["driver_cpu_extra_s"] = s["driver_cpu_median_s"] - base["driver_cpu_median_s"]
    for name, rs in runs.items():  # paired within a rep (the same minutes of machine load): CPU ratio per rep
        summary[name]["cpu_ratio_per_rep"] = [
            statistics.median(r["cpu"][w:]) / statistics.median(b["cpu"][w:]) for r, b in zip(rs, runs["baseline"], strict=True)]
    print()
    print(f"steady state (epochs {w}..{args.epochs - 1}, {args.reps} reps, {args.events} events/epoch), median per epoch:")
    print(f"{'configuration':18} {'epoch (s)':>10} {'overhead':>9} {'CPU (s)':>8} {'CPU ratio':>9} "
          f"{'driver CPU':>10} {'root after run':>15}")
    for name, s in summary.items():
        print(f"{name:18} {s['epoch_median_s']:10.2f} {s['overhead_vs_baseline']:+9.1%} {s['cpu_median_s']:8.2f} "
              f"{s['cpu_ratio_vs_baseline']:9.3f} {s['driver_cpu_median_s']:10.3f} {s['root_bytes'] / 1e6:12.2f} MB")
    print("CPU ratio vs baseline per rep: " + "; ".join(
        f"{name} {' '.join(f'{x:.3f}' for x in s['cpu_ratio_per_rep'])}" for name, s in summary.items() if name != "baseline"))
    print()
    step_names = list(summary["baseline"]["step_median_s"])
    print(f"{'step (median s)':16}" + "".join(f"{n:>18}" for n in summary))
    for st in step_names:
        print(f"{st:16}" + "".join(f"{summary[n]['step_median_s'][st]:18.3f}" for n in summary))
    doc = {
        "benchmark": "spark_overhead", "epochs": args.epochs, "warmup": w, "reps": args.reps, "size": size,
        "warmup_epochs": args.warmup_epochs,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "spark": spark.version, "load_average_before": load_before, "load_average": os.getloadavg()},
        "summary": summary, "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
