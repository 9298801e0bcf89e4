"""Which solver ``strategy="auto"`` should pick (issue 34): the grid, and auto against the best strategy.

Run from the repository root::

    .venv/bin/python benchmarks/dispatch.py --quick      # 10^2-10^4 processors
    .venv/bin/python benchmarks/dispatch.py              # 10^2-10^6 processors (an hour or more on a loaded machine)
    .venv/bin/python benchmarks/dispatch.py --markdown   # the table of results/dispatch.json

For every shape, size and failed fraction of the grid it times
``solve_frontiers(df, failed, strategy=S)`` for ``S`` in ``"auto"``,
``"worklist"`` and ``"vectorised"``, each on a **fresh** Dataflow (built
untimed by ``Dataflow.from_arrays``, which gives the same columns and the
same solve times as the object constructors), the strategies taking turns,
best CPU time of a few runs (garbage collector collected before and disabled
during each solve). It prints one table and writes
``benchmarks/results/dispatch.json``: per cell the three CPU times, the
strategy ``auto`` chose (:func:`falkirk.solver.dispatch.choose`), and
**auto ÷ best**, the ratio the rule is judged by (target: ``auto ≤ 1.2 ×
best + 10 ms``). This is a regression benchmark, not a test: nothing is
asserted, a cell over the target is flagged ``MISS`` in the table and listed
under ``misses`` in the JSON — unless the worklist was stopped (below) and
its lower bound is what auto is over: then the best is not known, and the
cell is flagged ``?`` and listed under ``unsure``. Each row also records
the *region*, the fraction of processors a rollback of the failed ones can
reach (:func:`falkirk.solver.dispatch.rollback_region`), which the rule reads.

The grid (all-epoch, 3 checkpoints per processor, 20 % of the edges logged,
20 % of the processors stateless, as the issue's job):

* shapes — ``chain``; binary ``tree(in)`` (fan-in: leaves to root) and
  ``tree(out)`` (fan-out); ``sparse_dag`` (about 1.1 edges per processor);
  ``random_dag(d=10)`` (dense, about 9.5 edges per processor);
  ``diamonds``; ``loops(8)`` (cycles in the epoch domain);
  ``shuffle(w=10)`` (stages of 10 tasks, all-to-all between stages: a stage
  job declared as a Dataflow; a :class:`~falkirk.solver.StageGraph` itself
  is always solved by the vectorised engine, no choice is made);
* sizes — 10^2 to 10^6 processors (``--quick``: to 10^4);
* failed — 0.1 % and 1 % of the processors (at least one), and ``"all"``
  (the low-watermarks of garbage collection: 100 %).

The worklist stops after a budget (``--budget``, 5 wall seconds);
its CPU time is then a lower bound (``>``), which is enough to name the best
strategy when the vectorised solver took less. Jobs under 500 processors
are solved ``500 // n`` times in a row per timing (each on its own fresh
Dataflow) and the mean kept.

``--general`` adds the dataflows the vectorised solver must first convert
(:mod:`falkirk.solver.vectorised.build`: not plain epoch columns): the same
epoch shapes where every processor that did not fail carries live metadata,
as :meth:`Monitor.plan_rollback <falkirk.solver.Monitor.plan_rollback>` and a
spark pipeline's what-if pass them, to 10^4 processors (``--live-to``;
``--columns-to 0`` runs only these). Both paths go through the same
dispatch. ``--fractions`` and ``--repeat`` (timings per strategy up to 10^4
processors, 2) narrow a run on a loaded machine without dropping shapes.

Each run records the load average; compare ratios within one run (the
machine is shared: CPU times are fairer than wall times there).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.graphs import Graph, make  # noqa: E402
from falkirk.solver import Checkpoint, Dataflow, solve_frontiers  # noqa: E402
from falkirk.solver.dispatch import choose, rollback_region  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"

#: (label, family, options) of the grid's shapes.
SHAPES: list[tuple[str, str, dict[str, Any]]] = [
    ("chain", "chain", {}),
    ("tree(in)", "tree", {"fan": "in"}),
    ("tree(out)", "tree", {"fan": "out"}),
    ("sparse_dag", "sparse_dag", {}),
    ("random_dag(d=10)", "random_dag", {"degree": 10}),
    ("diamonds", "diamonds", {}),
    ("loops(8)", "loops", {"length": 8}),
    ("shuffle(w=10)", "shuffle", {"width": 10}),
]
SIZES = [100, 1000, 10_000, 100_000, 1_000_000]
QUICK_SIZES = [100, 1000, 10_000]
#: Failed fractions; 1.0 is ``failed="all"``.
FRACTIONS = [0.001, 0.01, 1.0]
TIMED = ("auto", "worklist", "vectorised")
#: The target: auto within this factor of the best strategy, plus :data:`SLACK` seconds.
FACTOR, SLACK = 1.2, 0.010


class OverBudget(Exception):
    """The worklist ran out of its CPU budget."""


def _alarm(signum: int, frame: Any) -> None:
    raise OverBudget


def timed(fn: Callable[[], Any], budget: float | None = None) -> tuple[Any, float, bool]:
    """``(result, CPU seconds, finished)`` of one run of ``fn``, garbage collector off.

    ``budget`` stops it after that many *wall* seconds (``ITIMER_REAL``: on
    this VM an armed ``ITIMER_PROF`` upsets ``time.process_time``); its CPU
    time so far is then a lower bound.
    """
    if COLLECT:
        gc.collect()
    gc.disable()
    if budget is not None:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, budget)
    c = time.process_time()
    try:
        out, done = fn(), True
    except OverBudget:
        out, done = None, False
    finally:
        c = time.process_time() - c
        if budget is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
        gc.enable()
    return out, c, done


def graph(family: str, n: int, fraction: float, options: dict[str, Any], seed: int = 1) -> Graph:
    """The grid's job: ``family`` at ``n`` processors, ``fraction`` of them failed (all: ``1.0``)."""
    failures = 0 if fraction >= 1 else max(math.ceil(fraction * n), 1)
    return make(family, n, seed=seed, checkpoints=(3, 3), logged=0.2, failures=failures, **options)


def with_live(g: Graph) -> Callable[[], Dataflow]:
    """A builder of ``g``'s Dataflow where every processor that did not fail has (default) live metadata."""
    procs, edges = g.objects()
    failed = set(g.failed_names())
    live = Checkpoint("top")
    procs = [p if p.name in failed else attrs.evolve(p, live=live) for p in procs]
    return lambda: Dataflow(procs, edges, notifications=g.notifications)


#: A full garbage collection before each timing (and after each cell): the heap a timing starts from is the
#: same every time. Its cost grows with the process's heap, not the benchmark's: the grid of the suite's smoke
#: test took 63 s beside 3 million live objects, 1.1 s without the collections (which that test turns off).
COLLECT = True

#: Timings per strategy and cell up to 10^4 processors (``--repeat``; one above, or after one over 2 s).
REPEAT = 2


def _repeat(n: int) -> int:
    return REPEAT if n <= 10_000 else 1


def _batch(n: int) -> int:
    """Solves per timing: small jobs are solved several times in a row (each on its own Dataflow), the mean kept."""
    return max(1, 500 // n)


def _solve_all(dfs: list[Dataflow], failed: Any, strategy: Any) -> Any:
    """Solve every Dataflow of ``dfs``; the last plan."""
    return [solve_frontiers(df, failed, strategy=strategy) for df in dfs][-1]


def cell(
    label: str, g: Graph, fraction: float, build: Callable[[], Dataflow], budget: float, path: str
) -> dict[str, Any]:
    """Time the three strategies on ``g`` (fresh Dataflows from ``build``) into one result row."""
    failed: Any = "all" if fraction >= 1 else g.failed_names()
    names = list(build().processors) if failed == "all" else failed
    df = build()
    t = df.table
    row: dict[str, Any] = {
        "shape": label,
        "path": path,
        "processors": g.n,
        "edges": g.m,
        "failed_fraction": fraction,
        "failed": g.n if failed == "all" else len(failed),
        "chosen": choose(df, failed=names),
        # the processors a rollback can reach (dispatch.rollback_region), a fraction of all
        "region": rollback_region(t, [t.index[p] for p in names], g.n) / g.n,
    }
    del df, t
    best: dict[str, float] = {}
    finished = {s: True for s in TIMED}
    plans: dict[str, Any] = {}
    for k in range(_repeat(g.n)):
        for s in TIMED:
            if not finished[s] or (k and best[s] > 2.0):
                continue  # stopped once, or slow enough that one run is a fair figure
            dfs = [build() for _ in range(_batch(g.n))]
            bud = budget if s == "worklist" or (s == "auto" and row["chosen"] == "worklist") else None
            plan, c, done = timed(partial(_solve_all, dfs, failed, s), bud)
            c /= len(dfs)
            best[s] = min(best.get(s, c), c)
            finished[s] = done
            if done and k == 0 and g.n <= 100_000:
                plans[s] = plan.to_json()
            del dfs, plan
    for s in TIMED:
        row[f"{s}_cpu_s"] = best[s]
        row[f"{s}_complete"] = finished[s]
    row["same_plan"] = len({json.dumps(p, sort_keys=True) for p in plans.values()}) <= 1
    done = [s for s in ("worklist", "vectorised") if finished[s]]
    fastest = min(("worklist", "vectorised"), key=lambda s: best[s])
    row["best"] = fastest
    row["best_cpu_s"] = best[fastest]
    # a stopped worklist is a lower bound: the best is sure only if the vectorised solver beat it
    row["best_sure"] = fastest in done
    row["auto_over_best"] = best["auto"] / max(best[fastest], 1e-9)
    row["within_target"] = best["auto"] <= FACTOR * best[fastest] + SLACK
    return row


def _fmt(row: dict[str, Any]) -> str:
    def t(s: str) -> str:
        return ("" if row[f"{s}_complete"] else "> ") + f"{row[f'{s}_cpu_s']:.3f}"

    frac = "all" if row["failed_fraction"] >= 1 else f"{100 * row['failed_fraction']:g} %"
    # over the target against a stopped worklist: its time is a lower bound, the best is not known
    flag = "" if row["within_target"] else "  MISS" if row["best_sure"] else "  (?: worklist stopped)"
    region = f"{100 * row['region']:.0f} %" if "region" in row else "?"
    return (
        f"| {row['shape']} | {row['path']} | {row['processors']:,} | {row['edges']:,} | {frac} | {region} | "
        f"{t('auto')} ({row['chosen'][0]}) | {t('worklist')} | {t('vectorised')} | "
        f"{row['auto_over_best']:.2f}×{flag} |"
    )


HEADER = (
    "| shape | path | processors | edges | failed | region | auto (s) | worklist (s) | vectorised (s) | auto ÷ best |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def run(
    shapes: list[tuple[str, str, dict[str, Any]]],
    sizes: list[int],
    fractions: list[float],
    budget: float,
    general: bool,
    live_to: int = 10_000,
    save: Callable[[list[dict[str, Any]]], None] = lambda rows: None,
    columns_to: int | None = None,
) -> list[dict[str, Any]]:
    """The grid's rows (printed, and passed to ``save``, as they come).

    Live metadata (``general``) up to ``live_to`` processors, the columns up to ``columns_to`` (``None``: all).
    """
    print(HEADER, flush=True)
    rows = []
    for n in sizes:  # every shape at one size before the next size
        for label, family, options in shapes:
            for fraction in fractions:
                g = graph(family, n, fraction, options)
                if columns_to is None or n <= columns_to:
                    rows.append(cell(label, g, fraction, g.from_arrays, budget, "columns"))
                    print(_fmt(rows[-1]), flush=True)
                if general and n <= live_to and fraction < 1:
                    rows.append(cell(label, g, fraction, with_live(g), budget, "live"))
                    print(_fmt(rows[-1]), flush=True)
                save(rows)
                del g
                if COLLECT:
                    gc.collect()
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    global REPEAT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^2 to 10^4 processors")
    ap.add_argument("--sizes", type=int, nargs="+", help="processors (default: 10^2 to 10^6)")
    ap.add_argument("--shapes", help="comma-separated shape labels (default: all)")
    ap.add_argument("--budget", type=float, help="wall seconds before the worklist is stopped (5)")
    ap.add_argument("--general", action="store_true", help="also dataflows with live metadata (to --live-to)")
    ap.add_argument("--live-to", type=int, default=10_000, help="largest size with live metadata (10^4)")
    ap.add_argument("--fractions", type=float, nargs="+", help="failed fractions, 1 = all (0.001 0.01 1)")
    ap.add_argument("--columns-to", type=int, help="largest size of the columns path (default: every size)")
    ap.add_argument("--repeat", type=int, help=f"timings per strategy up to 10^4 processors ({REPEAT})")
    ap.add_argument("--out", type=Path, default=RESULTS / "dispatch.json", help="where to write the JSON")
    ap.add_argument("--markdown", action="store_true", help="print the table of the written JSON and stop")
    args = ap.parse_args(argv)
    if args.markdown:
        res = json.loads(args.out.read_text())
        print(HEADER, *map(_fmt, res["rows"]), sep="\n")
        return res
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    budget = args.budget or 5.0
    shapes = SHAPES
    if args.shapes:
        wanted = args.shapes.split(",")
        shapes = [s for s in SHAPES if s[0] in wanted]
        if len(shapes) != len(wanted):
            ap.error(f"unknown shape in {wanted}; known: {[s[0] for s in SHAPES]}")
    res: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "load_average_at_start": os.getloadavg(),
        "sizes": sizes,
        "budget_cpu_s": budget,
        "target": f"auto <= {FACTOR} x best + {SLACK} s",
    }
    t0 = time.perf_counter()

    def save(rows: list[dict[str, Any]]) -> None:
        res["load_average_at_end"] = os.getloadavg()
        res["minutes"] = round((time.perf_counter() - t0) / 60, 1)
        res["rows"] = rows
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1) + "\n")

    REPEAT = args.repeat or REPEAT
    res["fractions"] = fractions = args.fractions or FRACTIONS
    res["repeat"] = REPEAT
    rows = run(shapes, sizes, fractions, budget, args.general, args.live_to, save, args.columns_to)
    save(rows)
    res["misses"] = [
        {k: r[k] for k in ("shape", "path", "processors", "failed_fraction", "auto_over_best")}
        for r in rows
        if not r["within_target"] and r["best_sure"]
    ]
    res["unsure"] = [
        {k: r[k] for k in ("shape", "path", "processors", "failed_fraction", "auto_over_best")}
        for r in rows
        if not r["within_target"] and not r["best_sure"]
    ]
    res["worst_auto_over_best"] = max(r["auto_over_best"] for r in rows)
    res["plans_differ"] = [(r["shape"], r["path"], r["processors"]) for r in rows if not r["same_plan"]]
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(
        f"\n{len(rows)} cells, {len(res['misses'])} over the target (auto <= {FACTOR} x best + {SLACK * 1000:g} ms), "
        f"{len(res['unsure'])} over a stopped worklist's lower bound; "
        f"worst auto / best {res['worst_auto_over_best']:.2f}; plans differ in {len(res['plans_differ'])}; "
        f"load average {res['load_average_at_start']} -> {res['load_average_at_end']}; wrote {args.out}"
    )
    return res


if __name__ == "__main__":
    main()
