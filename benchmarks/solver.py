"""Solver benchmarks (issues 9 and 18): worklist vs the literal round robin, the fast paths, memory.

Run from the repository root::

    .venv/bin/python benchmarks/solver.py --quick   # under 2 minutes
    .venv/bin/python benchmarks/solver.py           # full: up to 10^5 processors (about half an hour)

Prints tables and writes ``benchmarks/results/solver.json`` (and PNG plots
with ``benchmarks/plot_solver.py``, which the full run calls).

Sections:

1. **worklist vs round robin** — ``solve_frontiers(df, failed, strategy="worklist")``
   (the worklist) and ``strategy="round_robin"`` (Figure 6, literally) on the
   same :class:`~falkirk.solver.Dataflow`, for every graph family of
   ``benchmarks/graphs.py`` declared in topological order (the round robin's
   best case), two of them also in a random order, and the vectorised solver on the same Dataflow (conversion
   included). The round robin stops after a CPU budget (2 s quick, 60 s
   full); a stopped run's time is a *lower bound* (marked ``>``), and so is
   the ratio computed from it. ``sweeps`` counts the round robin's passes
   over all processors.
2. **vectorised from arrays** — ``TotalProblem`` built straight from the
   generator's arrays (no Dataflow) and solved, up to 10^5 processors and
   10^6 edges.
3. **compressed stage graphs** — a 10,000 × 6,000 all-to-all job.
4. **memory** (full run) — ``tracemalloc`` peak of each large case in a
   separate untimed run, and the process's peak RSS.
5. **a huge Dataflow** (full run) — building a 10^5-processor, 10^6-edge
   :class:`~falkirk.solver.Dataflow` and solving it with the worklist and
   the vectorised solver: what the array form saves.
6. **the public API** (issue 18; ``--public-api`` runs only this section) —
   ``solve_frontiers`` on a Dataflow built by the object constructors,
   ``Dataflow.from_arrays`` and ``Dataflow.from_networkx``, next to networkx
   building the same ``DiGraph`` and sorting it topologically, each case in
   a fresh process with its CPU time and peak RSS, best of 3 alternated runs
   (``benchmarks/public_api.py``); written to ``benchmarks/results/public_api.json``.
7. **partial orders** (issues 18, 31) — ``product_loops`` (Naiad loops: an
   epoch pipeline whose loop bodies run in ``product(2)``, entered through
   ``epoch_to_loop``, closed by a feedback edge and left through an exit
   projection) at 10^3 and 10^4 processors: the worklist with its cost per
   constraint check (``FixedPoint.checks``), and the round robin under the
   same budget; then **loop jobs at scale** (``benchmarks/loops.py``):
   ``product_loops`` at 10^3, 10^4 and 10^5 processors built from objects
   and from arrays and solved automatically (the vectorised engine takes
   loop jobs of prefix checkpoints), next to the epoch ``random_dag`` and
   ``chain`` of the same size in the same run, each case in a fresh process
   with its CPU time and peak RSS.
8. **lexsort ratio** (issue 18) — ``Dataflow.from_arrays`` +
   ``solve_frontiers`` on the public-API job at 10^5 processors (about 10^6
   edges; 10^4 with ``--quick``) next to one ``numpy.lexsort`` of its edge
   arrays ``(dst, src)``, in a fresh interpreter.

Times are the best of a few runs; ``wall`` is ``time.perf_counter`` and
``cpu`` is ``time.process_time`` of this process (the same on an idle
machine; the CPU time is the fairer figure on a shared one). The cyclic
garbage collector is frozen after building each graph and disabled during
timed solves, for every solver alike. A Dataflow resolves a processor's
checkpoints on first use: sections 1 and 7 time one solve on the fresh
Dataflow (``worklist_first``, which resolves what it reaches), then resolve
every processor (``resolve``) and time the strategies on the resolved
Dataflow, so that the worklist and the round robin compare the iterations
alone, as before checkpoints were resolved lazily.

``--only SECTION,...`` (``rr``, ``po``, ``arrays``, ``stages``, ``huge``,
``lexsort``) runs only those sections and merges them into the existing
``solver.json`` (rows of sections 1 and 7 replaced by family and size;
``runs`` records when and how each section was last run); ``--sizes``
overrides the sizes of sections 1 and 7.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import loops  # noqa: E402
from benchmarks.graphs import make  # noqa: E402
from falkirk.solver import solve_frontiers  # noqa: E402
from falkirk.solver.vectorised.engine import solve_total  # noqa: E402
from falkirk.solver.vectorised.stages import Stage, StageEdge, StageGraph  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"

#: (label, family, options) of the worklist-vs-round-robin series.
FAMILIES = [
    ("chain", "chain", {}),
    ("diamonds", "diamonds", {}),
    ("random_dag(d=4)", "random_dag", {"degree": 4}),
    ("loops(8)", "loops", {"length": 8}),
    ("shuffle(w=8)", "shuffle", {"width": 8}),
]
#: Families whose processors are also declared in a random order (``Graph.dataflow(order="random")``).
SHUFFLED = [("chain, random order", "chain", {}), ("loops(8), random order", "loops", {"length": 8})]
#: (label, family, options) of the vectorised series, at 10^5 processors about 10^6 edges for the last two.
DENSE = FAMILIES[:4] + [
    ("random_dag(d=10)", "random_dag", {"degree": 10}),
    ("shuffle(w=10)", "shuffle", {"width": 10}),
]


def timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float, float]:
    """``(result, best wall seconds, best cpu seconds)`` over ``repeat`` runs, GC disabled."""
    best_w = best_c = float("inf")
    out = None
    for _ in range(repeat):
        gc.disable()
        try:
            w, c = time.perf_counter(), time.process_time()
            out = fn()
            w, c = time.perf_counter() - w, time.process_time() - c
        finally:
            gc.enable()
        best_w, best_c = min(best_w, w), min(best_c, c)
    return out, best_w, best_c


def peak_mb(fn: Callable[[], Any]) -> float:
    """``tracemalloc`` peak (MB) of one untimed run of ``fn``."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def round_robin(df: Any, failed: list[str], budget: float) -> dict[str, Any]:
    """Figure 6's round robin, literally (``fixpoint.Iteration``'s sweeps), stopped after ``budget`` CPU seconds.

    Returns its times, sweeps and, when it finished, ``f`` and ``n``; a stopped
    run's time is a lower bound of the full run's.
    """
    from falkirk.solver.fixpoint import Iteration
    from falkirk.solver.model.access import View, normalise_failed

    gc.disable()
    try:
        w0, c0 = time.perf_counter(), time.process_time()
        s = Iteration(View(df, normalise_failed(df, failed)))
        names, sweeps, changed = list(df.processors), 0, True
        while changed:
            changed = False
            for p in names:
                f_changed, n_changed = s.examine(p)
                changed = changed or f_changed or n_changed
            sweeps += 1
            if changed and time.process_time() - c0 > budget:
                break
        w, c = time.perf_counter() - w0, time.process_time() - c0
    finally:
        gc.enable()
    out: dict[str, Any] = {"wall": w, "cpu": c, "sweeps": sweeps, "complete": not changed}
    if not changed:
        out["f"], out["n"] = s.f, s.n
    return out


def _repeat(n: int) -> int:
    return 2 if n <= 3000 else 1


def resolve_all(df: Any) -> None:
    """Resolve every processor's checkpoints (``Dataflow`` does it on first use)."""
    for p in df.processors:
        df.candidates(p, failed=False)


def _run_worklist(df: Any, failed: list[str]) -> Any:
    """The worklist's fixed point alone (no plan): it counts its constraint checks."""
    from falkirk.solver.model.access import View, normalise_failed
    from falkirk.solver.worklist import run_worklist

    return run_worklist(View(df, normalise_failed(df, failed)))


def worklist_row(df: Any, failed: list[str], n: int, row: dict[str, Any]) -> Any:
    """Time the worklist on ``df`` into ``row``: first solve, resolving, resolved solves, checks; its plan."""
    _, row["worklist_first_s"], row["worklist_first_cpu_s"] = timed(
        partial(solve_frontiers, df, failed, strategy="worklist"), 1
    )
    _, row["resolve_s"], row["resolve_cpu_s"] = timed(partial(resolve_all, df), 1)
    ref, row["worklist_s"], row["worklist_cpu_s"] = timed(
        partial(solve_frontiers, df, failed, strategy="worklist"), _repeat(n) + 1
    )
    fp, _, row["worklist_run_cpu_s"] = timed(partial(_run_worklist, df, failed), _repeat(n) + 1)
    row["worklist_examinations"] = ref.examinations
    row["worklist_checks"] = fp.checks
    row["us_per_check"] = 1e6 * row["worklist_run_cpu_s"] / max(fp.checks, 1)
    row["rolled_back"] = sum(1 for f in ref.frontiers.values() if not f.is_top)
    return ref


def round_robin_row(df: Any, failed: list[str], ref: Any, budget: float, row: dict[str, Any]) -> None:
    """Time the round robin into ``row`` (best of 3 below 3000 processors) and check it agrees with ``ref``."""
    rr = round_robin(df, failed, budget)
    if rr["complete"] and row["processors"] <= 3000:  # small: best of a few
        rr = min((round_robin(df, failed, budget) for _ in range(2)), key=lambda r: r["cpu"], default=rr)
    if rr["complete"]:
        assert rr["f"] == ref.frontiers and rr["n"] == ref.notification_frontiers
    row["round_robin_s"], row["round_robin_cpu_s"] = rr["wall"], rr["cpu"]
    row["round_robin_sweeps"], row["round_robin_complete"] = rr["sweeps"], rr["complete"]
    row["ratio"] = row["round_robin_cpu_s"] / row["worklist_cpu_s"]


# -- 1. worklist vs round robin ------------------------------------------------------------------
def built(g: Any, label: str, order: str = "topological", **extra: Any) -> tuple[Any, dict[str, Any]]:
    """``g``'s Dataflow (build timed, then the garbage collector frozen) and the start of its result row."""
    df, build_w, build_c = timed(partial(g.dataflow, order), 1)
    gc.collect()
    gc.freeze()
    row = {"family": label, "processors": g.n, "edges": g.m, **extra, "build_s": build_w, "build_cpu_s": build_c}
    return df, row


def worklist_vs_round_robin(
    sizes: list[int], budget: float, vectorised: bool, memory: bool
) -> list[dict[str, Any]]:
    rows = []
    for label, family, opts in FAMILIES + SHUFFLED:
        order = "random" if "random order" in label else "topological"
        for n in sizes:
            if order == "random" and budget < 10 and n > 1000:
                continue  # quick run: the shuffled families only up to 1000 processors
            g = make(family, n, seed=1, **opts)
            failed = g.failed_names()
            df, row = built(g, label, order)
            ref = worklist_row(df, failed, n, row)
            round_robin_row(df, failed, ref, budget, row)
            if vectorised:
                vec, row["vectorised_s"], row["vectorised_cpu_s"] = timed(
                    partial(solve_frontiers, df, failed, strategy="vectorised"), _repeat(n)
                )
                assert (
                    vec.frontiers == ref.frontiers
                    and vec.notification_frontiers == ref.notification_frontiers
                )
            if memory and n == sizes[-1]:
                row["worklist_peak_mb"] = peak_mb(partial(solve_frontiers, df, failed, strategy="worklist"))
                if vectorised:
                    row["vectorised_peak_mb"] = peak_mb(
                        partial(solve_frontiers, df, failed, strategy="vectorised")
                    )
            gc.unfreeze()
            del df
            gc.collect()
            rows.append(row)
            _print_row(row)
    return rows


def _print_row(row: dict[str, Any]) -> None:
    rr = f"{'>' if not row['round_robin_complete'] else ' '}{row['round_robin_cpu_s']:9.3f}"
    vec = f"{row['vectorised_cpu_s']:8.3f}" if "vectorised_cpu_s" in row else "       -"
    print(
        f"{row['family']:22s} {row['processors']:>7d} {row['edges']:>8d} {row['rolled_back']:>7d} {row['build_cpu_s']:8.2f} "
        f"{row['worklist_cpu_s']:9.3f} {rr} {'>' if not row['round_robin_complete'] else ' '}{row['ratio']:7.1f}x {row['round_robin_sweeps']:>6d} {vec} "
        f"{row['worklist_first_cpu_s']:8.3f} {row['worklist_checks']:>8d} {row['us_per_check']:6.1f}",
        flush=True,
    )


#: The header of a section-1 or section-7 row.
ROW_HEADER = (
    f"{'procs':>7s} {'edges':>8s} {'rolled':>7s} {'build':>8s} {'worklist':>9s} {'round-rob':>10s} "
    f"{'ratio':>9s} {'sweeps':>6s} {'vector':>8s} {'1st solve':>8s} {'checks':>8s} {'us/chk':>6s}"
)


# -- 7. partial orders: Naiad loops in product(2) -----------------------------------------------------
#: (label, options) of the partial-order series (``benchmarks.graphs.product_loops``).
PRODUCT_LOOPS = [("product_loops(8)", {"length": 8, "between": 2})]


def partial_orders(sizes: list[int], budget: float) -> list[dict[str, Any]]:
    """Section 7: the worklist and the round robin on ``product_loops`` (see the module docstring)."""
    rows = []
    for label, opts in PRODUCT_LOOPS:
        for n in sizes:
            g = make("product_loops", n, seed=1, **opts)
            failed = g.failed_names()
            df, row = built(g, label, domains="epoch + product(2)")
            ref = worklist_row(df, failed, n, row)
            round_robin_row(df, failed, ref, budget, row)
            gc.unfreeze()
            del df
            gc.collect()
            rows.append(row)
            _print_row(row)
    return rows


# -- 8. Dataflow.from_arrays + solve next to one lexsort ------------------------------------------------
def lexsort_one(n: int) -> dict[str, Any]:
    """In this (fresh) process: one lexsort of the job's edge arrays (best of 3), then from_arrays + solve once."""
    from benchmarks.public_api import job

    g = job(n)
    failed = g.failed_names()
    names = [g.name(p) for p in range(g.n)]
    best = float("inf")
    for _ in range(3):
        c = time.process_time()
        order = np.lexsort((g.src, g.dst))  # by dst, then src
        best = min(best, time.process_time() - c)
    assert order.shape[0] == g.m
    c0 = time.process_time()
    df = g.from_arrays(names)
    c1 = time.process_time()
    plan = solve_frontiers(df, failed)
    c2 = time.process_time()
    return {
        "processors": g.n,
        "edges": g.m,
        "lexsort_cpu_s": best,
        "from_arrays_cpu_s": c1 - c0,
        "solve_cpu_s": c2 - c1,
        "total_cpu_s": c2 - c0,
        "ratio_to_lexsort": (c2 - c0) / best,
        "rolled_back": sum(1 for f in plan.frontiers.values() if not f.is_top),
    }


def lexsort_ratio(n: int) -> dict[str, Any]:
    """Section 8: :func:`lexsort_one` in a fresh interpreter (its garbage collector on, as a user has it)."""
    import subprocess

    cmd = [sys.executable, str(Path(__file__).resolve()), "--lexsort-one", str(n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"{row['processors']} processors / {row['edges']} edges: from_arrays {row['from_arrays_cpu_s']:.2f}s + "
        f"solve {row['solve_cpu_s']:.2f}s = {row['total_cpu_s']:.2f}s cpu; one lexsort (dst, src) "
        f"{row['lexsort_cpu_s'] * 1e3:.1f} ms; ratio {row['ratio_to_lexsort']:.0f}x",
        flush=True,
    )
    return row


def _solve_graph(g: Any) -> Any:
    return solve_total(g.problem())


# -- 2. vectorised from arrays ----------------------------------------------------------------------
def vectorised_from_arrays(sizes: list[int], memory: bool, repeat: int = 3) -> list[dict[str, Any]]:
    rows = []
    for label, family, opts in DENSE:
        for n in sizes:
            g = make(family, n, seed=1, **opts)
            prob, pw, pc = timed(g.problem, repeat)
            sol, sw, sc = timed(partial(solve_total, prob), repeat if n <= 10_000 else max(repeat - 1, 1))
            row = {
                "family": label,
                "processors": g.n,
                "edges": g.m,
                "problem_s": pw,
                "problem_cpu_s": pc,
                "solve_s": sw,
                "solve_cpu_s": sc,
                "total_s": pw + sw,
                "total_cpu_s": pc + sc,
                "rounds": sol.rounds,
                "evaluations": sol.evaluations,
                "rolled_back": int((sol.f != prob.init).sum()),
            }
            if memory and n == sizes[-1]:
                row["peak_mb"] = peak_mb(partial(_solve_graph, g))
            rows.append(row)
            print(
                f"{label:17s} {g.n:>7d} {g.m:>8d} {pc:8.3f} {sc:8.3f} {pc + sc:8.3f} {sol.rounds:>6d} "
                f"{row.get('peak_mb', float('nan')):8.1f}",
                flush=True,
            )
    return rows


# -- 3. compressed stage graphs -----------------------------------------------------------------------
def stage_job(widths: tuple[int, int], k: int, seed: int = 0) -> StageGraph:
    """Two stages, all-to-all: ``k`` checkpoints per task, one failed task in the first stage."""
    rng = np.random.default_rng(seed)

    def ck(w: int) -> np.ndarray:
        return np.sort(rng.integers(0, 1000, size=(w, k)), axis=1) + np.arange(k)[None, :]

    a, b = widths
    return StageGraph(
        [
            Stage("map", a, checkpoints=ck(a), failed=[int(rng.integers(a))]),
            Stage("reduce", b, checkpoints=ck(b)),
        ],
        [StageEdge("map", "reduce")],
    )


def _solve_stages(widths: tuple[int, int], k: int) -> Any:
    return stage_job(widths, k).solve()


def compressed(ks: list[int], memory: bool) -> list[dict[str, Any]]:
    rows = []
    for k in ks:
        widths = (10_000, 6_000)
        g, bw, bc = timed(partial(stage_job, widths, k), 1)
        plan, sw, sc = timed(g.solve, 3)
        row = {
            "stages": list(widths),
            "logical_edges": widths[0] * widths[1],
            "checkpoints_per_task": k,
            "declare_s": bw,
            "declare_cpu_s": bc,
            "solve_s": sw,
            "solve_cpu_s": sc,
            "rounds": plan.rounds,
        }
        if memory:
            row["peak_mb"] = peak_mb(partial(_solve_stages, widths, k))
        rows.append(row)
        print(
            f"10000 x 6000 (60M edges), k={k:>3d}: declare {bc:.3f}s  solve {sc:.3f}s cpu ({sw:.3f}s wall)  rounds {plan.rounds}",
            flush=True,
        )
    return rows


def _rss_mb() -> float:
    """Current resident set size in MB (Linux ``/proc``; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# -- 5. a Dataflow at the scale of the array benchmarks --------------------------------------------
def huge_dataflow(n: int) -> dict[str, Any]:
    """Build a 10^5-processor, ~10^6-edge Dataflow and solve it both ways (what the arrays avoid)."""
    g = make("random_dag", n, seed=1, degree=10)
    failed = g.failed_names()
    rss0 = _rss_mb()
    df, bw, bc = timed(g.dataflow, 1)
    rss1 = _rss_mb()
    gc.collect()
    gc.freeze()
    ref, ww, wc = timed(partial(solve_frontiers, df, failed, strategy="worklist"), 1)
    vec, vw, vc = timed(partial(solve_frontiers, df, failed, strategy="vectorised"), 1)
    assert vec.frontiers == ref.frontiers and vec.notification_frontiers == ref.notification_frontiers
    row = {
        "family": "random_dag(d=10)",
        "processors": g.n,
        "edges": g.m,
        "build_s": bw,
        "build_cpu_s": bc,
        "build_rss_growth_mb": rss1 - rss0,
        "worklist_s": ww,
        "worklist_cpu_s": wc,
        "vectorised_s": vw,
        "vectorised_cpu_s": vc,
    }
    gc.unfreeze()
    print(
        f"Dataflow {g.n} processors / {g.m} edges: build {bc:.1f}s cpu (+{row['build_rss_growth_mb']:.0f} MB RSS), "
        f"worklist {wc:.2f}s, vectorised incl. conversion {vc:.2f}s",
        flush=True,
    )
    return row


# -- 6. the public API next to networkx ------------------------------------------------------------
def public_api(sizes: list[int], repeat: int = 3) -> dict[str, Any]:
    """Section 6: every case of ``benchmarks/public_api.py``, each in a fresh process, the best of ``repeat``
    runs per case (cases alternated); written to its own file."""
    from benchmarks.public_api import HEADER, run

    print(HEADER)
    res = {
        "format": "falkirk-bench-public-api/1",
        "load_average_at_start": os.getloadavg(),
        "repeat": repeat,
        "rows": run(sizes, repeat=repeat),
    }
    res["load_average_at_end"] = os.getloadavg()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "public_api.json").write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {RESULTS / 'public_api.json'}")
    return res


# -- driver -----------------------------------------------------------------------------------------
def summary(res: dict[str, Any]) -> dict[str, Any]:
    """Each issue-9 and issue-18 target with the measured value and whether it is met."""
    out: dict[str, Any] = {}
    at = [r for r in res["worklist_vs_round_robin"] if r["processors"] >= 9000]
    if at:
        out["worklist_20x_at_1e4"] = {
            r["family"]: {
                "ratio": round(r["ratio"], 1),
                "lower_bound": not r["round_robin_complete"],
                "met": r["ratio"] >= 20,
            }
            for r in at
            if r["processors"] < 90_000
        }
    big = [r for r in res.get("vectorised", []) if r["processors"] >= 90_000 and r["edges"] >= 900_000]
    if big:
        out["1e5_processors_1e6_edges_under_2s"] = {
            r["family"]: {
                "total_cpu_s": round(r["total_cpu_s"], 3),
                "total_wall_s": round(r["total_s"], 3),
                "met": r["total_cpu_s"] < 2,
            }
            for r in big
        }
    po = res.get("partial_orders", [])
    if po:
        out["partial_orders"] = {
            f"{r['family']} at {r['processors']}": {
                "worklist_cpu_s": round(r["worklist_cpu_s"], 4),
                "checks": r["worklist_checks"],
                "us_per_check": round(r["us_per_check"], 2),
                "ratio": round(r["ratio"], 1),
                "lower_bound": not r["round_robin_complete"],
            }
            for r in po
        }
    scale = [r for r in res.get("loop_scale", []) if r["family"].startswith("product_loops")]
    if scale:
        out["product_loops_within_3x_random_dag"] = {
            f"{r['constructor']} at {r['processors']}": {
                "total_cpu_s": round(r["total_cpu_s"], 3),
                "ratio": round(r.get("ratio_to_random_dag", float("nan")), 2),
                "met": r.get("ratio_to_random_dag", float("inf")) <= 3,
            }
            for r in scale
            if r["processors"] >= 90_000
        }
    if res.get("lexsort"):
        lx = res["lexsort"]
        out["from_arrays_and_solve_within_20x_lexsort"] = {
            "processors": lx["processors"],
            "edges": lx["edges"],
            "ratio": round(lx["ratio_to_lexsort"], 1),
            "met": lx["ratio_to_lexsort"] <= 20,
        }
    if res.get("compressed"):
        out["10000x6000_under_4s"] = {
            f"k={r['checkpoints_per_task']}": {
                "cpu_s": round(r["declare_cpu_s"] + r["solve_cpu_s"], 3),
                "met": r["declare_cpu_s"] + r["solve_cpu_s"] < 4,
            }
            for r in res["compressed"]
        }
    return out


#: Sections ``--only`` accepts: 1 (``rr``), 2 (``arrays``), 3 (``stages``), 5 (``huge``), 7 (``po``), 8 (``lexsort``).
SECTIONS = ("rr", "arrays", "stages", "huge", "po", "lexsort")


def _merge_rows(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old`` with the rows of ``new`` replacing those of the same family and size (the others appended)."""
    key = lambda r: (r["family"], r["processors"])  # noqa: E731
    fresh = {key(r): r for r in new}
    out = [fresh.pop(key(r), r) for r in old]
    return out + [r for r in new if key(r) in fresh]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, under 2 minutes")
    ap.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    ap.add_argument(
        "--public-api", action="store_true", help="only section 6, the public API next to networkx"
    )
    ap.add_argument(
        "--only",
        help=f"comma-separated sections among {', '.join(SECTIONS)}: run only those and merge them "
        "into the existing results/solver.json",
    )
    ap.add_argument("--sizes", type=int, nargs="+", help="processors for sections 1 and 7 (rr, po)")
    ap.add_argument("--lexsort-one", type=int, help=argparse.SUPPRESS)  # section 8's fresh process
    args = ap.parse_args(argv)
    quick = args.quick
    if args.lexsort_one:
        row = lexsort_one(args.lexsort_one)
        print(json.dumps(row))
        return row
    if args.public_api:
        return public_api([10_000] if quick else [10_000, 100_000])
    only = None if args.only is None else {x.strip() for x in args.only.split(",") if x.strip()}
    if only is not None and not only <= set(SECTIONS):
        ap.error(f"--only: unknown section(s) {sorted(only - set(SECTIONS))}; known: {', '.join(SECTIONS)}")
    wanted = set(SECTIONS) if only is None else only
    if quick and only is None:
        wanted -= {"huge"}
    budget = 2.0 if quick else 60.0
    started = time.time()
    out_path = RESULTS / "solver.json"
    res: dict[str, Any]
    if only is not None and out_path.exists():
        res = json.loads(out_path.read_text())
    else:
        res = {
            "format": "falkirk-bench-solver/1",
            "mode": "quick" if quick else "full",
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "numpy": np.__version__,
                "platform": platform.platform(),
                "load_average_at_start": os.getloadavg(),
            },
            "timing": "best of 1-3 runs; *_s wall (perf_counter), *_cpu_s process CPU time; GC disabled while timed",
        }
    runs = res.setdefault("runs", {})

    def record(section: str, **extra: Any) -> dict[str, Any]:
        entry = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "mode": "quick" if quick else "full",
            "load_average_at_start": os.getloadavg(),
            **extra,
        }
        runs[section] = entry
        return entry

    header = "(cpu s; > = round robin stopped at the budget: a lower bound)"
    if "rr" in wanted:
        sizes = args.sizes or ([100, 300, 1000, 3000] if quick else [100, 1000, 10_000, 100_000])
        run = record("rr", sizes=sizes, budget_cpu_s=budget)
        print(f"{'worklist vs round robin':22s} {ROW_HEADER}   {header}")
        rows = worklist_vs_round_robin(
            sizes, budget, vectorised=True, memory=not quick and args.sizes is None
        )
        prev = res.get("worklist_vs_round_robin")
        res["worklist_vs_round_robin"] = rows if only is None or not prev else _merge_rows(prev, rows)
        run["load_average_at_end"] = os.getloadavg()
    if "po" in wanted:
        sizes = args.sizes or ([100, 1000] if quick else [1000, 10_000])
        run = record("po", sizes=sizes, budget_cpu_s=budget)
        print(f"\n{'partial orders':22s} {ROW_HEADER}   {header}")
        rows = partial_orders(sizes, budget)
        prev = res.get("partial_orders")
        res["partial_orders"] = rows if only is None or not prev else _merge_rows(prev, rows)
        scale = [1000, 10_000] if quick else [1000, 10_000, 100_000]
        run["loop_scale_sizes"] = scale
        print(f"\n{loops.HEADER}")
        res["loop_scale"] = loops.run(scale, repeat=1 if quick else 2)
        run["load_average_at_end"] = os.getloadavg()
    if "arrays" in wanted:
        record("arrays")
        print(
            f"\n{'vectorised/arrays':17s} {'procs':>7s} {'edges':>8s} {'problem':>8s} {'solve':>8s} {'total':>8s} {'rounds':>6s} {'peak MB':>8s}   (cpu s)"
        )
        res["vectorised"] = vectorised_from_arrays(
            [10_000, 100_000] if quick else [1000, 10_000, 100_000],
            memory=not quick,
            repeat=1 if quick else 3,
        )
    if "stages" in wanted:
        record("stages")
        print()
        res["compressed"] = compressed([10] if quick else [1, 10, 100], memory=not quick)
    if "huge" in wanted:
        record("huge")
        print()
        res["huge_dataflow"] = huge_dataflow(100_000)
    if "lexsort" in wanted:
        n = 10_000 if quick else 100_000
        run = record("lexsort", processors=n)
        print()
        res["lexsort"] = lexsort_ratio(n)
        run["load_average_at_end"] = os.getloadavg()
    if only is None and not quick:
        print()
        res["public_api"] = public_api([10_000, 100_000])["rows"]
    res["targets"] = summary(res)
    if only is None:
        res["machine"]["load_average_at_end"] = os.getloadavg()
        res["machine"]["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        res["elapsed_s"] = time.time() - started
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(res, indent=1) + "\n")
    print("\ntargets:", json.dumps(res["targets"], indent=1))
    print(f"wrote {out_path} in {time.time() - started:.0f}s")
    if not args.no_plots:
        from benchmarks.plot_solver import plot

        for path in plot(res, RESULTS):
            print(f"wrote {path}")
    return res


if __name__ == "__main__":
    main()
