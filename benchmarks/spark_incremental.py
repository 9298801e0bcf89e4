"""Incremental keyed state (issue 28, item 3): bytes per epoch and restore time against full checkpoints.

A pipeline keeps a keyed table of ``--rows`` rows (10^6: ``k BIGINT, v BIGINT,
e BIGINT``) and changes ``--churn`` of its keys each epoch (1 %, 10^4 rows
read from the input log: new values for existing keys). Two configurations
run the same epochs on fresh roots in one SparkSession:

* ``incremental`` — ``Lazy(key="k", incremental=True, snapshot_every=10)``:
  a delta every epoch, a snapshot every 10;
* ``full`` — ``Eager(key="k")``: the whole table every epoch (the keyed
  snapshot layout, so both read the same kind of files);
* ``changes`` — ``incremental`` with ``changes=True``: the step returns only
  the changed keys, the state is kept as a base and the changes since
  (:mod:`falkirk.spark.pipeline.run.layers`), and a restore reads the
  snapshot as the base and resolves the deltas alone into the overlay;
* ``differential`` — ``changes`` with ``differential=True``: each delta holds
  every change since the snapshot, so a restore reads the snapshot and one
  delta, each as written.

Measured:

* **bytes written per checkpoint** (the files its manifest lists): median of
  the non-snapshot epochs of ``incremental`` over the median snapshot
  (target ≤ 3 %);
* **restore**: the epoch-9 state (the longest chain: a snapshot and 9
  deltas) read back and materialised as a recovery does (the chain applied,
  redistributed by key group, locally checkpointed; one Spark job), against
  the same epoch's full checkpoint; after ``--warmup`` untimed restores of
  each (the JVM compiles a plan's code on its first run), alternated ``--reps`` times, median wall
  time and CPU of the process tree (driver, JVM, workers; from ``/proc``)
  (target ≤ 1.2×). All restored tables are checked equal (row count and an
  order-independent checksum). Then, timed apart, the rows of the next
  epoch's keys read from the restored table (``falkirk.spark.lookup``: what
  the next epoch's step reads first), so that a restore that leaves work to
  its first reader is seen.
* per-epoch CPU of both configurations (informational: a delta costs a
  shuffle of the previous and the new state).

Writes ``benchmarks/results/spark_incremental.json`` with the load average.

Usage: ``.venv/bin/python benchmarks/spark_incremental.py [--rows 1000000] [--churn 0.01] [--epochs 12] [--reps 3] [--warmup 1]
[--memory 2g] [--out PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from spark_vs_streaming import tree_cpu  # CPU of a process tree, from /proc (this directory)

from falkirk.spark import Eager, Lazy, Pipeline
from falkirk.spark.pipeline.run.incremental import StateCheckpoints
from falkirk.spark.pipeline.run.session import SMALL_DATA, detach, local_session
from falkirk.spark.pipeline.store.storage import Storage

RESULTS = Path(__file__).resolve().parent / "results" / "spark_incremental.json"


def changed(epoch: int, rows: int, churn: float) -> list[dict[str, int]]:
    """The input of ``epoch``: new values for ``churn`` of the table's ``rows`` keys (seeded by the epoch)."""
    rnd = random.Random(epoch)
    return [{"k": k, "v": rnd.randrange(1 << 30)} for k in rnd.sample(range(rows), max(1, int(rows * churn)))]


def build(root: Path, spark: Any, regime: Any, rows: int, churn: float) -> Pipeline:
    """``changes`` (the epoch's new values) → ``table`` (keyed state of ``rows`` rows)."""
    from pyspark.sql import functions as F

    def source(epoch: int) -> list[dict[str, int]]:
        return changed(epoch, rows, churn)

    pipe = Pipeline(root, spark, spark_conf=SMALL_DATA, gc=False)  # every epoch stays restorable
    pipe.input("changes", "k BIGINT, v BIGINT", partitions=2, source=source)

    first = spark.range(rows).select(F.col("id").alias("k"), (F.col("id") * 7919 % 1000003).alias("v"),
                                     F.lit(-1).cast("bigint").alias("e"))

    @pipe.step(regime=regime)
    def table(changes: Any, *, state: Any, epoch: int) -> Any:
        if state is None:
            state = first
        upd = changes.select("k", "v", F.lit(epoch).cast("bigint").alias("e"))
        if getattr(regime, "changes", False) and state is not first:  # only the changed keys, as the new state
            return upd, upd
        new = state.join(upd.select("k"), "k", "left_anti").unionByName(upd)
        return upd, new

    return pipe


def checkpoint_bytes(root: Path) -> dict[int, dict[str, Any]]:
    """Per checkpoint epoch: bytes of its files, rows, and whether it is a delta."""
    out = {}
    for p in sorted((root / "manifests" / "table" / "checkpoint").glob("*.json")):
        doc = json.loads(p.read_text())
        out[int(p.stem)] = {"bytes": sum(size for _, size, _ in doc["files"]), "rows": doc["rows"],
                            "delta": "delta" in doc["extra"]}
    return out


def run(spark: Any, root: Path, regime: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Run the pipeline; per-epoch wall and process-tree CPU."""
    stamps: dict[int, tuple[float, float]] = {}
    t0 = (time.perf_counter(), tree_cpu(os.getpid()))

    def progress(line: str) -> None:
        if line.startswith("epoch"):
            e = int(line.split()[1])
            stamps[e] = (time.perf_counter(), tree_cpu(os.getpid()))
            print(f"  {root.name} epoch {e}: {stamps[e][0] - t0[0]:.0f} s", flush=True)  # progress on long runs

    build(root, spark, regime, args.rows, args.churn).run(args.epochs, progress=progress)
    starts = [t0] + [stamps[e] for e in range(args.epochs - 1)]
    return {"walls": [stamps[e][0] - starts[e][0] for e in range(args.epochs)],
            "cpus": [stamps[e][1] - starts[e][1] for e in range(args.epochs)],
            "checkpoints": checkpoint_bytes(root)}


def restore(
    spark: Any, root: Path, regime: Any, epoch: int, keys: Any
) -> tuple[float, float, float, float, tuple[int, int, int]]:
    """Restore ``table``'s checkpoint at ``epoch`` as a recovery does, then read the rows of ``keys`` from it
    (what the next epoch's step reads, :func:`falkirk.spark.lookup`); (restore wall s, CPU s, lookup wall s,
    CPU s, checksum of the table).

    ``changes=True`` restores as its runner does: the snapshot (the base) and the deltas resolved into one
    overlay, both materialised by one job (the first job after a recovery does that), the whole table not
    rebuilt; the others read the chain (or the full checkpoint) into one materialised table."""
    from pyspark.sql import functions as F

    from falkirk.spark import lookup
    from falkirk.spark.pipeline.run import layers

    storage = Storage(root)
    states = StateCheckpoints(SimpleNamespace(storage=storage, spark=spark), "table", regime)  # type: ignore[arg-type]
    m = storage.get("table", "checkpoint", epoch)
    t0, c0 = time.perf_counter(), tree_cpu(os.getpid())
    parts = []
    if getattr(regime, "changes", False):
        base, overlay, rows, n = states.read_layers(m)
        parts = [detach(base, eager=False), detach(overlay, eager=False)]
        # both materialised by one job, as the first job after a recovery does (its step's reads of the state)
        parts[0].select("k").unionByName(parts[1].select("k")).count()
        held = layers.Layers(layers.view(parts[0], parts[1], "k", n), parts[0], parts[1], None, n, rows, "k")
        layers.register(held)
        state = held.view
    else:
        state = detach(states.read(m), eager=True)
        parts = [state]
    wall, cpu = time.perf_counter() - t0, tree_cpu(os.getpid()) - c0
    t1, c1 = time.perf_counter(), tree_cpu(os.getpid())
    found = lookup(state, keys).count()
    look_wall, look_cpu = time.perf_counter() - t1, tree_cpu(os.getpid()) - c1
    assert found == keys.count(), (found, keys.count())  # every key changed next is in the table
    row = state.agg(F.count("*").alias("n"), F.sum("v").alias("v"),
                    F.sum(F.xxhash64("k", "v", "e") % 1000000007).alias("h")).collect()[0]
    for part in parts:
        part.unpersist()
    return wall, cpu, look_wall, look_cpu, (int(row["n"]), int(row["v"]), int(row["h"]))


def main() -> None:
    """Run the benchmark and report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--churn", type=float, default=0.01)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--snapshot-every", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed restores of each configuration first")
    ap.add_argument("--memory", default="2g", help="spark.driver.memory (10^7 rows: 8g)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    spark = local_session(conf={"spark.driver.memory": args.memory})
    load_before = os.getloadavg()
    regimes = {"incremental": Lazy(key="k", incremental=True, snapshot_every=args.snapshot_every),
               "full": Eager(key="k"),
               "changes": Lazy(key="k", incremental=True, snapshot_every=args.snapshot_every, changes=True),
               "differential": Lazy(key="k", incremental=True, snapshot_every=args.snapshot_every, changes=True,
                                    differential=True)}
    scratch = Path(tempfile.mkdtemp(prefix="falkirk-incremental-"))
    try:
        runs = {}
        for name, regime in regimes.items():
            runs[name] = run(spark, scratch / name, regime, args)
            print(f"{name:12} ran {args.epochs} epochs", flush=True)
        at = min(args.snapshot_every - 1, args.epochs - 1)
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name in regimes}
        lookups: dict[str, list[tuple[float, float]]] = {name: [] for name in regimes}
        keys = spark.createDataFrame([(r["k"],) for r in changed(at + 1, args.rows, args.churn)], "k BIGINT")
        keys = detach(keys, eager=True)  # prepared outside the timing
        sums = {}
        for _ in range(args.warmup):  # untimed: the JVM compiles each restore's code on its first run
            for name, regime in regimes.items():
                restore(spark, scratch / name, regime, at, keys)
        for _ in range(args.reps):
            for name, regime in regimes.items():
                wall, cpu, look_wall, look_cpu, sums[name] = restore(spark, scratch / name, regime, at, keys)
                timings[name].append((wall, cpu))
                lookups[name].append((look_wall, look_cpu))
                print(f"restore {name:12} epoch {at}: {wall:.2f} s wall, {cpu:.2f} s CPU; then the next epoch's "
                      f"keys read: {look_wall:.2f} s wall, {look_cpu:.2f} s CPU", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert sums["incremental"] == sums["full"] == sums["changes"] == sums["differential"], sums  # the same table
    cks = runs["incremental"]["checkpoints"]
    deltas = [c["bytes"] for c in cks.values() if c["delta"]]
    snapshots = [c["bytes"] for c in cks.values() if not c["delta"]]
    restore_s = {n: statistics.median(w for w, _ in t) for n, t in timings.items()}
    restore_cpu = {n: statistics.median(c for _, c in t) for n, t in timings.items()}
    summary = {
        "delta_bytes_median": statistics.median(deltas), "snapshot_bytes_median": statistics.median(snapshots),
        "delta_over_snapshot": statistics.median(deltas) / statistics.median(snapshots),
        "full_checkpoint_bytes_median": statistics.median(c["bytes"] for c in runs["full"]["checkpoints"].values()),
        "restore_epoch": at, "restore_chain_length": at % args.snapshot_every + 1,
        "restore_wall_s": restore_s, "restore_cpu_s": restore_cpu,
        "restore_wall_ratio": restore_s["incremental"] / restore_s["full"],
        "restore_cpu_ratio": restore_cpu["incremental"] / restore_cpu["full"],
        "changes_restore_wall_ratio": restore_s["changes"] / restore_s["full"],
        "changes_restore_cpu_ratio": restore_cpu["changes"] / restore_cpu["full"],
        "differential_restore_wall_ratio": restore_s["differential"] / restore_s["full"],
        "differential_restore_cpu_ratio": restore_cpu["differential"] / restore_cpu["full"],
        "lookup_wall_s": {n: statistics.median(w for w, _ in t) for n, t in lookups.items()},
        "lookup_cpu_s": {n: statistics.median(c for _, c in t) for n, t in lookups.items()},
        "restore_and_lookup_wall_s": {n: statistics.median(a[0] + b[0] for a, b in zip(timings[n], lookups[n],
                                                                                          strict=True))
                                      for n in regimes},
        "restore_and_lookup_cpu_s": {n: statistics.median(a[1] + b[1] for a, b in zip(timings[n], lookups[n],
                                                                                         strict=True))
                                     for n in regimes},
        "epoch_cpu_median_s": {n: statistics.median(r["cpus"][2:]) for n, r in runs.items()},
        "epoch_wall_median_s": {n: statistics.median(r["walls"][2:]) for n, r in runs.items()},
        "rows_after": sums["full"][0],
    }
    print()
    print(f"{args.rows} rows, {args.churn:.1%} of keys changed per epoch, snapshot every {args.snapshot_every}:")
    print(f"  bytes per delta (median) {summary['delta_bytes_median'] / 1e3:9.1f} kB = "
          f"{summary['delta_over_snapshot']:.2%} of a snapshot ({summary['snapshot_bytes_median'] / 1e6:.2f} MB)")
    print(f"  restore epoch {at} (snapshot + {at % args.snapshot_every} deltas): {restore_s['incremental']:.2f} s "
          f"vs full {restore_s['full']:.2f} s = {summary['restore_wall_ratio']:.2f}x wall, "
          f"{summary['restore_cpu_ratio']:.2f}x CPU")
    print(f"  restore with changes=True (the snapshot and the deltas resolved apart): {restore_s['changes']:.2f} s = "
          f"{summary['changes_restore_wall_ratio']:.2f}x wall, {summary['changes_restore_cpu_ratio']:.2f}x CPU")
    print(f"  restore with differential=True (the snapshot and one delta): {restore_s['differential']:.2f} s = "
          f"{summary['differential_restore_wall_ratio']:.2f}x wall, {summary['differential_restore_cpu_ratio']:.2f}x CPU")
    both = summary["restore_and_lookup_wall_s"]
    print("  restore + the next epoch's keys read, wall: " + ", ".join(f"{n} {both[n]:.2f} s" for n in regimes))
    print("  CPU per epoch (median, epochs 2+): "
          + ", ".join(f"{n} {summary['epoch_cpu_median_s'][n]:.2f} s" for n in regimes))
    print("  CPU per epoch (mean, epochs 1 .. restored): "
          + ", ".join(f"{n} {statistics.mean(runs[n]['cpus'][1:at + 1]):.2f} s" for n in regimes))
    doc = {"benchmark": "spark_incremental", "args": {k: str(v) for k, v in vars(args).items()},
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "spark": spark.version, "load_average_before": load_before, "load_average": os.getloadavg()},
           "summary": summary, "runs": runs, "restore_timings": timings, "lookup_timings": lookups}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
