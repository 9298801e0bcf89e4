"""Loop jobs at scale (issue 31): ``product_loops`` built and solved next to epoch jobs of the same size, each case in a fresh process.

For each size, three families — ``product_loops(8)`` (Naiad loops: epoch
processors entering ``product(2)`` loop bodies through ``epoch_to_loop``,
closed by a feedback edge and left through an exit projection,
``benchmarks/graphs.py``), the epoch ``random_dag`` (degree 4, as in section
1) and the epoch ``chain`` — each built two ways and solved with
``solve_frontiers(df, failed)`` (the automatic strategy):

* ``objects`` — the caller makes every ``Processor``, ``Checkpoint`` (a
  ``product(2)`` checkpoint is a ``Frontier``) and ``Edge`` value
  (``objects_cpu_s``, counted in *build*), then ``Dataflow(processors, edges)``;
* ``arrays`` — ``Dataflow.from_arrays`` of the generator's arrays; a loop job's
  checkpoints are given as rows (``Graph.loop_arrays``: made before the
  clock starts, like every other input array; its cost is ``inputs_cpu_s``).

CPU seconds of the process (``time.process_time``), the garbage collector on
as a user has it unless ``--gc off``; ``peak_rss_mb`` is the process's peak
resident memory (``VmHWM``) and ``base_rss_mb`` its resident memory once the inputs
(arrays, and for ``objects`` the caller's values) exist. Each case runs
``repeat`` times, the cases taking turns, and keeps its run of least total
CPU (all totals are in ``runs_total_cpu_s``). ``ratio`` is a case's total
over ``random_dag``'s with the same constructor and size; the two
constructors of a family must give the same plan (checked by a hash of
the ``falkirk solve --json`` document).

    .venv/bin/python benchmarks/loops.py --n 1000 --n 10000 --n 100000 --repeat 2
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: (label, family, options) of the families compared.
FAMILIES = [
    ("product_loops(8)", "product_loops", {"length": 8, "between": 2}),
    ("random_dag(d=4)", "random_dag", {"degree": 4}),
    ("chain", "chain", {}),
]
CONSTRUCTORS = ("objects", "arrays")


def one(label: str, constructor: str, n: int, collector: bool = True) -> dict[str, Any]:
    """Build and solve one case in this process (see the module docstring)."""
    from benchmarks.graphs import make
    from benchmarks.public_api import status_mb
    from falkirk.solver import Dataflow, solve_frontiers

    family, opts = next((f, o) for lab, f, o in FAMILIES if lab == label)
    if not collector:
        gc.disable()
    g = make(family, n, seed=1, **opts)
    failed = g.failed_names()
    names = [g.name(p) for p in range(g.n)]
    out: dict[str, Any] = {"family": label, "constructor": constructor, "processors": g.n, "edges": g.m}
    c0 = time.process_time()
    loop = g.loop_arrays() if family == "product_loops" and constructor == "arrays" else None
    out["inputs_cpu_s"] = time.process_time() - c0
    c0 = time.process_time()
    if constructor == "objects":
        procs, edges = g.objects(names=names)
        out["objects_cpu_s"] = time.process_time() - c0  # the caller making the values
        out["base_rss_mb"] = status_mb()
        df = Dataflow(procs, edges, notifications=g.notifications)
        del procs, edges
    elif constructor == "arrays":
        out["base_rss_mb"] = status_mb()
        df = g.from_arrays(names, loop=loop)
    else:
        raise ValueError(f"unknown constructor {constructor!r}; known: {CONSTRUCTORS}")
    c1 = time.process_time()
    plan = solve_frontiers(df, failed)
    c2 = time.process_time()
    out["build_cpu_s"], out["solve_cpu_s"] = c1 - c0, c2 - c1
    out["total_cpu_s"] = c2 - c0
    out["strategy"] = type(plan.frontiers).__name__
    doc = json.dumps(plan.to_json(), sort_keys=True)
    out["check"] = hashlib.sha256(doc.encode()).hexdigest()[:16]
    out["rolled_back"] = sum(a != "keep" for a in plan.actions.values())
    out["peak_rss_mb"] = status_mb("VmHWM")
    out["collector"] = collector
    return out


def run(sizes: list[int], repeat: int = 1, collector: bool = True, python: str | None = None) -> list[dict[str, Any]]:
    """Every family × constructor at every size, each in a fresh interpreter; ratios to ``random_dag`` added."""
    rows = []
    for n in sizes:
        got: dict[tuple[str, str], dict[str, Any]] = {}
        totals: dict[tuple[str, str], list[float]] = {}
        for _ in range(repeat):
            for label, _, _ in FAMILIES:
                for constructor in CONSTRUCTORS:
                    cmd = [python or sys.executable, str(Path(__file__).resolve()), "--case", label, constructor,
                           "--n", str(n), "--gc", "on" if collector else "off"]
                    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                    if proc.returncode != 0:
                        print(f"{label} {constructor} at {n}: failed\n{proc.stderr[-2000:]}", flush=True)
                        continue
                    row = json.loads(proc.stdout.strip().splitlines()[-1])
                    key = (label, constructor)
                    totals.setdefault(key, []).append(row["total_cpu_s"])
                    if key not in got or row["total_cpu_s"] < got[key]["total_cpu_s"]:
                        got[key] = row
        for (label, constructor), row in got.items():
            row["runs_total_cpu_s"] = totals[label, constructor]
            base = got.get(("random_dag(d=4)", constructor))
            if base is not None:
                row["ratio_to_random_dag"] = row["total_cpu_s"] / base["total_cpu_s"]
            other = got.get((label, "arrays" if constructor == "objects" else "objects"))
            if other is not None and other["check"] != row["check"]:
                raise AssertionError(f"{label} at {n}: the constructors give different plans")
            row["load_average"] = os.getloadavg()
            rows.append(row)
            print(_line(row), flush=True)
    return rows


HEADER = (
    f"{'loop jobs':17s} {'constructor':>11s} {'procs':>7s} {'edges':>7s} {'build':>7s} {'(caller)':>8s} "
    f"{'solve':>7s} {'total':>7s} {'vs dag':>7s} {'peak MB':>8s} {'base MB':>8s}   (cpu s; a fresh process per case)"
)


def _line(row: dict[str, Any]) -> str:
    caller = f"({row['objects_cpu_s']:.2f})" if "objects_cpu_s" in row else ""
    return (
        f"{row['family']:17s} {row['constructor']:>11s} {row['processors']:>7d} {row['edges']:>7d} "
        f"{row['build_cpu_s']:7.2f} {caller:>8s} {row['solve_cpu_s']:7.2f} {row['total_cpu_s']:7.2f} "
        f"{row.get('ratio_to_random_dag', 0):6.2f}x {row['peak_rss_mb']:8.0f} {row['base_rss_mb']:8.0f}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs=2, metavar=("FAMILY", "CONSTRUCTOR"), help="run one case here, print JSON")
    ap.add_argument("--n", type=int, action="append", help="processors (repeat for several sizes)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per case; the least total CPU is kept")
    ap.add_argument("--gc", choices=("on", "off"), default="on", help="the garbage collector during the case")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    sizes = args.n or [10_000]
    if args.case:
        print(json.dumps(one(args.case[0], args.case[1], sizes[0], args.gc == "on")))
        return
    print(HEADER)
    rows = run(sizes, repeat=args.repeat, collector=args.gc == "on")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"format": "falkirk-bench-loops/1", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
