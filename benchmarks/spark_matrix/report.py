"""The matrix's outputs: one picture per workload and the table of every configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..spark_vs_streaming import as_markdown
from .latency_report import latency_markdown
from .w6 import REDO


def plot(workload: str, summary: dict[str, Any], front: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.6))
    for name, s in summary.items():
        x, y = s["cpu_median_s"], s["recovery_cpu_s"]
        ax.scatter([x], [y], s=60, color="tab:orange" if s["system"] == "streaming" else "tab:blue", zorder=3)
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8)
    fx = [summary[n]["cpu_median_s"] for n in front]
    fy = [summary[n]["recovery_cpu_s"] for n in front]
    ax.step(fx, fy, where="post", color="gray", linestyle="--")
    ax.scatter(fx, fy, s=180, facecolors="none", edgecolors="black", zorder=4, label="non-dominated")
    ax.set_xlabel("steady state: median CPU s per epoch (driver, JVM, workers)")
    ax.set_ylabel("recovery CPU s")
    ax.set_title(f"{workload}: {title}\nlower left is better; orange: Structured Streaming, blue: falkirk", fontsize=9)
    ax.grid(alpha=0.3)
    ax.margins(x=0.15, y=0.15)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


TITLES = {"W1": "flagship, driver SIGKILLed in the stateful step, restarted",
          "W4": "heavy logged aggregate → stateful branch + exactly-once SQLite sink; the sink fails once",
          "W6": f"code change of the stateful step; its last {REDO} epochs recomputed",
          "W2": "large slowly changing keyed state (1 % of keys per epoch), driver SIGKILLed, restarted",
          "W3": "high-churn keyed state (every key every epoch), driver SIGKILLed, restarted",
          "W5": "W2's keyed state on a standalone cluster; executor with most state SIGKILLed mid-step",
          "YSB": "YSB, paced; driver SIGKILLed, restarted (y: its excess CPU)",
          "MIXED": "YSB + a heavy branch over all history; the heavy branch fails (y: excess CPU)"}


def rows_of(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [("workload", "configuration", "CPU / epoch", "wall / epoch", "state+log kB / epoch", "recovery CPU",
             "recovery wall", "records recomputed", "input rows re-read", "log rows replayed", "peak RSS MB",
             "peak executor MB", "identical", "non-dominated")]
    for w, block in doc["workloads"].items():
        for n, s in block["summary"].items():
            rss = s.get("peak_rss")
            rows.append((w, n + (" (earlier run)" if s.get("earlier_run") else ""), f"{s['cpu_median_s']:.2f} s", f"{s['wall_median_s']:.2f} s",
                         f"{s['bytes_per_epoch'] / 1e3:.0f}",
                         "-" if s["recovery_cpu_s"] is None else f"{s['recovery_cpu_s']:.2f} s",
                         "-" if s["recovery_s"] is None else f"{s['recovery_s']:.2f} s",
                         f"{s['records_recomputed']:,}", f"{s['source_rows']:,}", f"{s.get('log_rows', 0):,}",
                         "-" if not rss else f"{rss / 1e6:.0f}",
                         f"{s['peak_executor_rss'] / 1e6:.0f}" if s.get("peak_executor_rss") else "-", str(s["identical"]),
                         "yes" if n in block["verdict"]["frontier"] else "no"))
    return rows


def markdown(doc: dict[str, Any]) -> str:
    lines = [as_markdown(rows_of(doc)), ""]
    for w, block in doc["workloads"].items():
        v = block["verdict"]
        strongest = v.get("streaming_frontier")
        lines.append(f"* {w}: non-dominated {', '.join(v['frontier'])}; "
                     + (f"strongest Structured Streaming {', '.join(strongest)}; " if strongest else "")
                     + "falkirk configurations strictly dominating every Structured Streaming one: "
                     f"{', '.join(v['falkirk_dominates_all_streaming']) or 'none'}")
        for twin in v.get("same_regimes", {}).values():
            lines.append(f"  * {', '.join(twin['labels'])} ran the same regimes: over their {twin['drivers']} drivers "
                         f"{twin['cpu_median_s']:.2f} s / {twin['recovery_cpu_s']:.2f} s; as one configuration, "
                         f"non-dominated {', '.join(v['frontier_same_regimes_pooled'])}")
    for w, block in doc["workloads"].items():
        if w in ("YSB", "MIXED"):
            lines += ["", latency_markdown(w, block)]
    la = doc["machine"]["load_average"]
    lines.append(f"\nLoad average at the end {la[0]:.1f} / {la[1]:.1f} / {la[2]:.1f} (1 / 5 / 15 min).")
    return "\n".join(lines)
