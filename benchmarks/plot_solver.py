"""Plots of ``benchmarks/results/solver.json`` (time vs size for each solver).

``python benchmarks/plot_solver.py`` redraws the PNGs from the JSON
(``--markdown`` prints the tables instead); ``benchmarks/solver.py`` calls
:func:`plot` after a run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _series(rows: list[dict[str, Any]], key: str) -> dict[str, tuple[list[int], list[float]]]:
    out: dict[str, tuple[list[int], list[float]]] = {}
    for r in rows:
        if key in r:
            xs, ys = out.setdefault(r["family"], ([], []))
            xs.append(r["processors"])
            ys.append(r[key])
    return out


def plot(res: dict[str, Any], where: Path = RESULTS) -> list[Path]:
    """Write ``solver_times.png`` and ``solver_fast_paths.png``; return their paths."""
    rows = res["worklist_vs_round_robin"]
    fams = list(dict.fromkeys(r["family"] for r in rows))
    colours = {f: plt.get_cmap("tab10")(i) for i, f in enumerate(fams)}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.2))
    for f in fams:
        mine = [r for r in rows if r["family"] == f]
        n = [r["processors"] for r in mine]
        ax.plot(n, [r["worklist_cpu_s"] for r in mine], "-o", color=colours[f], label=f"{f}: worklist")
        ax.plot(n, [r["round_robin_cpu_s"] for r in mine], "--", color=colours[f], label=f"{f}: round robin")
        for r in mine:
            ax.plot(
                r["processors"],
                r["round_robin_cpu_s"],
                "s" if r["round_robin_complete"] else "^",
                color=colours[f],
                mfc="none",
            )
        bx.plot(n, [r["ratio"] for r in mine], "-o", color=colours[f], label=f)
        for r in mine:
            if not r["round_robin_complete"]:
                bx.plot(r["processors"], r["ratio"], "^", color=colours[f], ms=9, zorder=3)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="processors",
        ylabel="CPU seconds",
        title="solve time: worklist (solid) vs literal round robin (dashed; \u25b2 = stopped at the budget, a lower bound)",
    )
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    bx.axhline(20, color="grey", lw=1, ls="--")
    bx.text(min(r["processors"] for r in rows), 21, "target 20x", fontsize=8, color="grey", va="bottom")
    bx.set(
        xscale="log",
        yscale="log",
        xlabel="processors",
        ylabel="round robin / worklist",
        title="speed-up of the worklist over the round robin (\u25b2 = lower bound)",
    )
    bx.title.set_fontsize(9)
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=7)
    fig.tight_layout()
    first = where / "solver_times.png"
    fig.savefig(first, dpi=110)
    plt.close(fig)

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.2))
    for f in fams:  # left: on a Dataflow, the worklist and the vectorised solver (conversion included)
        mine = [r for r in rows if r["family"] == f and "vectorised_cpu_s" in r]
        n = [r["processors"] for r in mine]
        ax.plot(n, [r["worklist_cpu_s"] for r in mine], ":", color=colours[f])
        ax.plot(n, [r["vectorised_cpu_s"] for r in mine], "-o", ms=4, color=colours[f], label=f)
    ax.plot([], [], "k:", label="worklist (dotted)")
    ax.plot([], [], "k-o", ms=4, label="vectorised, conversion included (solid)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="processors",
        ylabel="CPU seconds",
        title="on a Dataflow: worklist (dotted) vs vectorised solver, conversion included (solid)",
    )
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    vec = res.get("vectorised", [])
    cmap = plt.get_cmap("tab10")
    for i, (f, (xs, ys)) in enumerate(_series(vec, "total_cpu_s").items()):
        edges = max(r["edges"] for r in vec if r["family"] == f)
        bx.plot(xs, ys, "-o", color=cmap(i), label=f"{f} ({edges:,} edges at 10^5)")
    stars = res.get("compressed", [])
    for r in stars:
        total = r["declare_cpu_s"] + r["solve_cpu_s"]
        bx.plot(
            sum(r["stages"]),
            total,
            "*",
            ms=12,
            color="black",
            label="10,000 x 6,000 all-to-all stage job" if r is stars[0] else None,
        )
        bx.annotate(
            f"k={r['checkpoints_per_task']}",
            (sum(r["stages"]), total),
            fontsize=7,
            xytext=(7, -3),
            textcoords="offset points",
        )
    along = bx.get_yaxis_transform()  # x in axes fractions, y in data
    bx.axhline(2, color="grey", lw=1, ls="--")
    bx.text(
        0.98,
        2.1,
        "target: 10^5 processors, 10^6 edges < 2 s",
        transform=along,
        fontsize=7,
        color="grey",
        va="bottom",
        ha="right",
    )
    bx.axhline(4, color="grey", lw=1, ls=":")
    bx.text(
        0.98,
        4.2,
        "target: 10,000 x 6,000 all-to-all < 4 s",
        transform=along,
        fontsize=7,
        color="grey",
        va="bottom",
        ha="right",
    )
    bx.set(
        xscale="log",
        yscale="log",
        xlabel="processors (tasks)",
        ylabel="CPU seconds (arrays built + solved)",
        title="from arrays: vectorised solver (lines), stage graph (stars; k checkpoints per task)",
    )
    bx.title.set_fontsize(9)
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, 0.86))
    fig.tight_layout()
    second = where / "solver_fast_paths.png"
    fig.savefig(second, dpi=110)
    plt.close(fig)
    return [first, second]


def _row(r: dict[str, Any]) -> str:
    """One worklist-vs-round-robin row (sections 1 and 7) in Markdown."""
    low = "" if r["round_robin_complete"] else "> "
    vec = f"{r['vectorised_cpu_s']:.3f}" if "vectorised_cpu_s" in r else "-"
    first = f"{r['worklist_first_cpu_s']:.3f}" if "worklist_first_cpu_s" in r else "-"
    checks = f"{r['worklist_checks']:,}" if r.get("worklist_checks") is not None else "-"
    per = f"{r['us_per_check']:.1f}" if r.get("us_per_check") is not None else "-"
    return (
        f"| {r['family']} | {r['processors']:,} | {r['edges']:,} | {r.get('rolled_back', 0):,} | {r['worklist_cpu_s']:.3f} | "
        f"{low}{r['round_robin_cpu_s']:.3f} | {r['round_robin_sweeps']} | {low}{r['ratio']:.1f}× | {vec} | "
        f"{first} | {checks} | {per} |"
    )


def markdown(res: dict[str, Any]) -> str:
    """The result tables in Markdown (for the README)."""
    out = [
        "| family | processors | edges | rolled back | worklist (s) | round robin (s) | sweeps | ratio | vectorised (s) "
        "| first solve (s) | checks | µs/check |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    out += [_row(r) for r in res["worklist_vs_round_robin"]]
    if res.get("partial_orders"):
        out += [
            "",
            "| partial orders | processors | edges | rolled back | worklist (s) | round robin (s) | sweeps | ratio | "
            "- | first solve (s) | checks | µs/check |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        out += [_row(r) for r in res["partial_orders"]]
    if res.get("lexsort"):
        lx = res["lexsort"]
        out += [
            "",
            f"`Dataflow.from_arrays` + `solve_frontiers`, {lx['processors']:,} processors / {lx['edges']:,} edges: "
            f"{lx['from_arrays_cpu_s']:.2f} s + {lx['solve_cpu_s']:.2f} s = {lx['total_cpu_s']:.2f} s; one "
            f"`numpy.lexsort((src, dst))`: {lx['lexsort_cpu_s'] * 1e3:.1f} ms; ratio {lx['ratio_to_lexsort']:.0f}×.",
        ]
    out += [
        "",
        "| family (arrays) | processors | edges | build (s) | solve (s) | total (s) | rounds | peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res.get("vectorised", []):
        peak = f"{r['peak_mb']:.0f}" if "peak_mb" in r else "-"
        out.append(
            f"| {r['family']} | {r['processors']:,} | {r['edges']:,} | {r['problem_cpu_s']:.3f} | {r['solve_cpu_s']:.3f} | "
            f"{r['total_cpu_s']:.3f} | {r['rounds']} | {peak} |"
        )
    out += [
        "",
        "| stage job | logical edges | checkpoints/task | declare (s) | solve (s) | peak MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in res.get("compressed", []):
        peak = f"{r['peak_mb']:.0f}" if "peak_mb" in r else "-"
        out.append(
            f"| {r['stages'][0]:,} × {r['stages'][1]:,} | {r['logical_edges']:,} | {r['checkpoints_per_task']} | "
            f"{r['declare_cpu_s']:.3f} | {r['solve_cpu_s']:.3f} | {peak} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--markdown"]
    src = Path(args[0]) if args else RESULTS / "solver.json"
    data = json.loads(src.read_text())
    if "--markdown" in sys.argv:
        print(markdown(data))
    else:
        for p in plot(data, src.parent):
            print(f"wrote {p}")
