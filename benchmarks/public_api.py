"""The public API at scale (issue 18): build a Dataflow and solve it, next to networkx, each case in a fresh process.

The job: ``random_dag`` of ``benchmarks/graphs.py`` with degree 10 (about
``10 n`` edges), epoch domain, 3 checkpoints per processor, 20% of the
edges logged, 1% of the processors failed. Cases:

* ``objects`` — ``solve_frontiers(Dataflow([...Processor...], [...Edge...]), failed)``;
  *build* includes making the ``Processor``, ``Checkpoint`` and ``Edge`` values
  (reported apart as ``objects_cpu_s``: the caller's share of the build). The
  caller has its processor names already, as ``from_arrays`` is given them:
  each ``Edge`` refers to those strings for its ends (``Graph.objects(names=...)``)
  rather than formatting two new ones, but every ``Edge`` (with its name),
  ``Checkpoint`` and ``Processor`` value is made within the timing;
* ``from_arrays`` — ``Dataflow.from_arrays(names, src, dst, ...)`` and solve;
* ``from_networkx`` — ``Dataflow.from_networkx(G)`` of a ``DiGraph`` the
  scheduler already holds (its construction is reported apart, ``graph_cpu_s``)
  and solve;
* ``networkx`` — the baseline: building that ``DiGraph`` with the same node
  and edge data, plus one ``networkx.topological_sort``.

Each case runs in its own interpreter (``python benchmarks/public_api.py
--case CASE --n N``, which prints one JSON line), so its peak RSS
(``VmHWM`` of ``/proc/self/status``: :func:`status_mb`) is its own; ``base_rss_mb``
is the resident size after generating the arrays, before the case starts.
Times are process CPU seconds, the cyclic garbage collector left on as a
user would have it. :func:`run` drives the cases and is what
``benchmarks/solver.py --public-api`` calls, with the cases taking turns
three times and each keeping its run of least total CPU (``--repeat``
here).
"""

from __future__ import annotations

import argparse
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

CASES = ("networkx", "objects", "from_arrays", "from_networkx")


def job(n: int) -> Any:
    """The issue's job at ``n`` processors."""
    from benchmarks.graphs import make

    return make("random_dag", n, seed=1, degree=10, checkpoints=(3, 3), logged=0.2, failures=max(n // 100, 1))


def status_mb(field: str = "VmRSS") -> float:
    """This process's ``/proc/self/status`` memory ``field`` in MB: ``VmRSS`` now, ``VmHWM`` its peak.

    ``VmHWM`` is the peak of this process's own memory (exec starts it
    afresh); ``getrusage``'s ``ru_maxrss`` keeps the parent's resident size
    at the fork, which overstates a small case run from a large driver.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


_rss_mb = status_mb


def _digraph(g: Any) -> Any:
    """The job as a networkx DiGraph with the node and edge data a scheduler would keep."""
    import networkx as nx

    G = nx.DiGraph()
    less, ptr, val = g.stateless.tolist(), g.ck_ptr.tolist(), g.ck_val.tolist()
    G.add_nodes_from(
        (f"p{p}", {"stateless": less[p], "checkpoints": val[ptr[p] : ptr[p + 1]]}) for p in range(g.n)
    )
    logged = g.logged.tolist()
    G.add_edges_from(
        (f"p{s}", f"p{d}", {"name": f"e{e}", "logged": logged[e]})
        for e, (s, d) in enumerate(zip(g.src.tolist(), g.dst.tolist(), strict=True))
    )
    return G


def one(case: str, n: int) -> dict[str, Any]:
    """Run ``case`` at ``n`` processors in this process (see the module docstring)."""
    import networkx as nx

    from falkirk.solver import Dataflow, solve_frontiers

    g = job(n)
    failed = g.failed_names()
    names = [g.name(p) for p in range(g.n)]
    out: dict[str, Any] = {"case": case, "processors": g.n, "edges": g.m, "base_rss_mb": _rss_mb()}
    c0 = time.process_time()
    if case == "networkx":
        G = _digraph(g)
        order = list(nx.topological_sort(G))
        out["build_cpu_s"] = time.process_time() - c0
        out["solve_cpu_s"] = 0.0
        out["check"] = len(order)
    else:
        if case == "objects":
            procs, edges = g.objects(names=names)
            out["objects_cpu_s"] = time.process_time() - c0  # the caller making the values
            df = Dataflow(procs, edges, notifications=g.notifications)
            del procs, edges
        elif case == "from_arrays":
            df = g.from_arrays(names)
        elif case == "from_networkx":
            G = _digraph(g)
            out["graph_cpu_s"] = time.process_time() - c0
            c0 = time.process_time()
            df = Dataflow.from_networkx(G, notifications=g.notifications)
        else:
            raise ValueError(f"unknown case {case!r}; known: {CASES}")
        c1 = time.process_time()
        plan = solve_frontiers(df, failed)
        c2 = time.process_time()
        out["build_cpu_s"], out["solve_cpu_s"] = c1 - c0, c2 - c1
        doc = json.dumps(plan.to_json()["frontiers"], sort_keys=True)
        out["check"] = hashlib.sha256(doc.encode()).hexdigest()[:16]
    out["total_cpu_s"] = out["build_cpu_s"] + out["solve_cpu_s"]
    out["peak_rss_mb"] = status_mb("VmHWM")
    return out


def run(
    sizes: list[int], cases: tuple[str, ...] = CASES, python: str | None = None, repeat: int = 1
) -> list[dict[str, Any]]:
    """Every case at every size, each in a fresh interpreter; ratios to networkx added per size.

    With ``repeat`` > 1 the cases take turns ``repeat`` times and each keeps
    its run with the least total CPU (all totals in ``runs_total_cpu_s``):
    on a shared machine one run can be slowed by others' work.
    """
    rows = []
    env = dict(os.environ)
    for n in sizes:
        got: dict[str, dict[str, Any]] = {}
        totals: dict[str, list[float]] = {case: [] for case in cases}
        for _ in range(repeat):
            for case in cases:
                cmd = [python or sys.executable, str(Path(__file__).resolve()), "--case", case, "--n", str(n)]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
                if proc.returncode != 0:
                    print(f"{case} at {n}: failed\n{proc.stderr[-2000:]}", flush=True)
                    continue
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                totals[case].append(row["total_cpu_s"])
                if case not in got or row["total_cpu_s"] < got[case]["total_cpu_s"]:
                    got[case] = row
        for case, row in got.items():
            row["runs_total_cpu_s"] = totals[case]
        base = got.get("networkx")
        checks = {r["check"] for c, r in got.items() if c != "networkx"}
        if len(checks) > 1:
            raise AssertionError(f"the constructors disagree at {n} processors: {got}")
        for row in got.values():
            if base is not None:
                row["cpu_ratio_to_networkx"] = row["total_cpu_s"] / base["total_cpu_s"]
                row["rss_ratio_to_networkx"] = row["peak_rss_mb"] / base["peak_rss_mb"]
            rows.append(row)
            print(
                f"{row['case']:14s} {row['processors']:>7d} {row['edges']:>8d} {row['build_cpu_s']:8.2f} "
                f"{row['solve_cpu_s']:8.2f} {row['total_cpu_s']:8.2f} {row.get('cpu_ratio_to_networkx', 0):7.2f}x "
                f"{row['peak_rss_mb']:9.0f} {row['base_rss_mb']:9.0f}",
                flush=True,
            )
    return rows


HEADER = (
    f"{'public API':14s} {'procs':>7s} {'edges':>8s} {'build':>8s} {'solve':>8s} {'total':>8s} {'vs nx':>8s} "
    f"{'peak MB':>9s} {'base MB':>9s}   (cpu s; RSS of a fresh process per case)"
)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=CASES, help="run one case in this process and print it as JSON")
    ap.add_argument("--n", type=int, action="append", help="processors (repeat for several sizes)")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    ap.add_argument("--repeat", type=int, default=1, help="runs per case; the least total CPU is kept")
    args = ap.parse_args(argv)
    sizes = args.n or [10_000]
    if args.case:
        print(json.dumps(one(args.case, sizes[0])))
        return
    print(HEADER)
    rows = run(sizes, repeat=args.repeat)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"format": "falkirk-bench-public-api/1", "rows": rows}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
