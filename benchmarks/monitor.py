"""Benchmark: incremental monitor ``record`` latency vs a full re-solve per event (issue 4).

Graph: a layered random DAG in the epoch domain — stateless sources
(external inputs), stateful middle layers whose processors read one or two
processors of the layer above and log each output edge with probability
1/2, and stateful external outputs at the bottom. Every processor starts
with a few checkpoints (epochs ``1..c``, ``c`` in 2–4). Events: a random
processor persists its next epoch (outputs: the service acknowledges it).

Measured:

* ``record`` latency with an in-memory store (the incremental solve alone),
  and with the SQLite store (``synchronous=NORMAL`` and ``FULL``: the
  durable commit included);
* a full re-solve per event: ``solve_frontiers(df, failed="all")`` on a
  prebuilt dataflow with the current checkpoints, and the same including
  building that dataflow (what a non-incremental monitor would do);
* the speed-up = median full re-solve (solve only) / median in-memory record.

Wall-clock percentiles include the scheduler: on a loaded machine the p99
is mostly time the process spent preempted, so the CPU time of each report
(``time.thread_time``) is reported beside it.

Run ``python benchmarks/monitor.py`` (10,000 processors) or ``--quick``.
Prints a table and writes ``benchmarks/results/monitor.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
from falkirk.solver.monitor import Monitor

RESULTS = Path(__file__).with_name("results") / "monitor.json"


def layered_dag(n: int, depth: int, seed: int) -> tuple[Dataflow, list[str]]:
    """``n`` processors in ``depth`` layers (see the module docstring); returns the dataflow and its outputs."""
    rng = random.Random(seed)
    width = n // depth
    layers = [[f"l{d}_{i}" for i in range(width)] for d in range(depth)]
    edges: list[Edge] = []
    logs: dict[str, list[str]] = {}
    for d in range(1, depth):
        for q in layers[d]:
            for u in rng.sample(layers[d - 1], rng.randint(1, 2)):
                e = Edge(f"{u}>{q}", u, q)
                edges.append(e)
                if rng.random() < 0.5:
                    logs.setdefault(u, []).append(e.name)
    procs = []
    for d, layer in enumerate(layers):
        for p in layer:
            cks = [Checkpoint(k) for k in range(1, rng.randint(2, 4) + 1)]
            procs.append(Processor(p, "epoch", stateless=d == 0, logs=logs.get(p, []), checkpoints=cks))
    return Dataflow(procs, edges), layers[-1]


def events(df: Dataflow, count: int, seed: int) -> list[str]:
    """Which processor reports next, ``count`` times."""
    rng = random.Random(seed)
    names = list(df.processors)
    return [rng.choice(names) for _ in range(count)]


def replay(
    m: Monitor, order: list[str], outputs: set[str], last: dict[str, int]
) -> tuple[list[float], list[float]]:
    """Report each processor's next epoch in ``order``; wall and CPU time of each report, in seconds."""
    wall, cpu = [], []
    clock, cpu_clock = time.perf_counter, time.thread_time
    for p in order:
        last[p] += 1
        ck = None if p in outputs else Checkpoint(last[p])
        c, t = cpu_clock(), clock()
        if ck is None:
            m.acknowledge_output(p, last[p])
        else:
            m.record(p, ck)
        wall.append(clock() - t)
        cpu.append(cpu_clock() - c)
    return wall, cpu


def stats(xs: list[float]) -> dict[str, float]:
    """Median, p99 and mean in milliseconds."""
    ys = sorted(xs)
    return {
        "median_ms": statistics.median(ys) * 1e3,
        "p99_ms": ys[min(len(ys) - 1, int(0.99 * len(ys)))] * 1e3,
        "mean_ms": statistics.fmean(ys) * 1e3,
        "samples": len(ys),
    }


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    """Wall time of ``repeat`` calls of ``fn``."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 processors, fewer events (seconds)")
    ap.add_argument("--processors", type=int, default=None)
    ap.add_argument("--events", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/monitor.json")
    args = ap.parse_args(argv)
    n = args.processors or (1_000 if args.quick else 10_000)
    count = args.events or (500 if args.quick else 5_000)
    durable = max(50, count // 10)
    full_repeat = 3 if args.quick else 5

    df, outs = layered_dag(n, depth=5, seed=args.seed)
    outputs = set(outs)
    order = events(df, count, args.seed + 1)
    t = time.perf_counter()
    m = Monitor(df, outputs=outs)
    build_s = time.perf_counter() - t
    last = {p: len(df.processors[p].checkpoints) for p in df.processors}
    mem, mem_cpu = replay(m, order, outputs, last)
    examined = []
    for p in order[: min(200, len(order))]:  # work per event, on fresh reports
        last[p] += 1
        ch = m.acknowledge_output(p, last[p]) if p in outputs else m.record(p, Checkpoint(last[p]))
        examined.append(ch.examined)
    current = m.dataflow()
    solve_only = timed(lambda: solve_frontiers(current, "all"), full_repeat)
    with_build = timed(lambda: solve_frontiers(m.dataflow(), "all"), full_repeat)
    check = solve_frontiers(current, "all").frontiers == m.watermarks

    sqlite: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sync in ("NORMAL", "FULL"):
            dm = Monitor.create(df, Path(tmp) / f"{sync}.db", outputs=outs, synchronous=sync)
            dl = {p: len(df.processors[p].checkpoints) for p in df.processors}
            sqlite[sync] = stats(replay(dm, order[:durable], outputs, dl)[0])
            dm.close()

    rec = stats(mem)
    full = stats(solve_only)
    result = {
        "graph": {
            "processors": n,
            "edges": len(df.edges),
            "layers": 5,
            "domain": "epoch",
            "outputs": len(outs),
        },
        "events": count,
        "monitor_build_s": build_s,
        "record_memory": rec,
        "record_memory_cpu_time": stats(mem_cpu),
        "record_sqlite_normal": sqlite["NORMAL"],
        "record_sqlite_full": sqlite["FULL"],
        "examined_per_event": {"median": statistics.median(examined), "max": max(examined)},
        "full_resolve": full,
        "full_resolve_with_dataflow_build": stats(with_build),
        "speedup_median": full["median_ms"] / rec["median_ms"],
        "speedup_mean": full["mean_ms"] / rec["mean_ms"],
        "agrees_with_full_resolve": check,
        "python": sys.version.split()[0],
        "load_average_1min": os.getloadavg()[0],
    }
    rows = [
        ("record, in memory", rec),
        ("record, in memory (CPU time)", result["record_memory_cpu_time"]),
        ("record, SQLite NORMAL", sqlite["NORMAL"]),
        ("record, SQLite FULL", sqlite["FULL"]),
        ("full re-solve (prebuilt dataflow)", full),
        ("full re-solve + dataflow build", result["full_resolve_with_dataflow_build"]),
    ]
    print(
        f"monitor benchmark: {n} processors, {len(df.edges)} edges, {count} events "
        f"(monitor build {build_s:.2f} s, load average {result['load_average_1min']:.1f})"
    )
    print(f"{'what':36} {'median ms':>10} {'p99 ms':>10} {'samples':>8}")
    for label, s in rows:
        print(f"{label:36} {s['median_ms']:10.3f} {s['p99_ms']:10.3f} {s['samples']:8d}")
    print(
        f"speed-up vs full re-solve: {result['speedup_median']:.0f}x (median), {result['speedup_mean']:.0f}x (mean); "
        f"examined per event: median {result['examined_per_event']['median']}, max {result['examined_per_event']['max']}; "
        f"agrees with full re-solve: {check}"
    )
    if not args.no_write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    return 0 if check else 1


if __name__ == "__main__":
    sys.exit(main())
