"""YSB's and the mixed application's latency: the tables (``--markdown``) and the latency-over-time pictures
with the failure marked (``spark_matrix_YSB_latency.png``, ``spark_matrix_MIXED_latency.png``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..spark_vs_streaming import as_markdown


def _f(x: Any, unit: str = " s") -> str:
    return "-" if x is None else f"{x:.2f}{unit}"


def _n(x: Any) -> str:
    return "never" if x is None else str(int(x))


def ysb_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [(
        "configuration", "CPU / epoch", "latency p50", "latency p99", "window latency p50", "window latency p99",
        "exception: epoch's service", "exception: epochs to catch up", "exception: excess CPU",
        "kill: first output after", "kill: epochs to catch up", "kill: excess CPU", "identical")]
    for n, s in summary.items():
        st, ex, k = s["steady"], s["exception"], s["kill"]
        fails = ((_f(ex["failed_epoch_service_s"]), _n(ex["epochs_until_caught_up"]), _f(ex["excess_cpu_s"]),
                  _f(k["first_output_s"]), _n(k["epochs_until_caught_up"]), _f(k["excess_cpu_s"])) if ex
                 else ("not measured",) * 6)
        rows.append((n, _f(s["cpu_median_s"]), _f(st["latency"]["p50"]), _f(st["latency"]["p99"]),
                     _f(st["window_latency"]["p50"]), _f(st["window_latency"]["p99"]), *fails, str(s["identical"])))
    return rows


def mixed_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [(
        "configuration", "CPU / epoch", "counts latency p50", "counts latency p99", "heavy latency p50",
        "counts p99 during the heavy recovery", "× steady p99", "heavy recovered in", "steps redone",
        "excess CPU", "identical")]
    for n, s in summary.items():
        d = s["during_recovery"]
        rows.append((n, _f(s["cpu_median_s"]), _f(s["steady"]["latency"]["p50"]), _f(s["steady"]["latency"]["p99"]),
                     _f(s["heavy_latency"]["p50"]), _f(d["latency"]["p99"]), _f(d["p99_over_steady_p99"], "×"),
                     _f(s["heavy_recovery_s"]), ", ".join(s.get("redone") or []) or "-",
                     _f(s["failure"]["excess_cpu_s"]), str(s["identical"])))
    return rows


def latency_markdown(workload: str, block: dict[str, Any]) -> str:
    rows = ysb_rows(block["summary"]) if workload == "YSB" else mixed_rows(block["summary"])
    lines = [f"{workload}, latency and failures:", "", as_markdown(rows)]
    for n, t in block.get("targets", {}).items():
        against = t.get("stream_config", {})  # which stream configuration each figure was compared with
        lines.append(f"* {n}: " + ", ".join(
            f"{k} {'met' if v else 'not met' if v is not None else 'n/a'}"
            + (f" (against {against[k]})" if against.get(k, "streaming") != "streaming" else "")
            for k, v in t.items() if k != "stream_config"))
    return "\n".join(lines)


def _series(d: dict[Any, float], interval: float) -> tuple[list[float], list[float]]:
    es = sorted(int(e) for e in d)
    return [(e + 1) * interval for e in es], [d[str(e)] if str(e) in d else d[e] for e in es]


def plot_ysb_latency(block: dict[str, Any], path: Path) -> None:
    """Epoch latency over the run (release time of each epoch) per configuration: the exception run and the
    killed run, the failure marked; each configuration's failure-free run dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    size, summary = block["size"], block["summary"]
    t, c = size["interval"], size["fail"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4), sharey=False)
    colors = ["tab:orange", "tab:blue", "tab:green", "tab:purple", "tab:red", "tab:brown"]
    for ax, kind, what in ((axes[0], "exception", f"an exception in counts at epoch {c}"),
                           (axes[1], "kill", f"the driver SIGKILLed in epoch {c}, restarted")):
        for color, (n, s) in zip(colors, summary.items(), strict=False):
            if kind not in s["timeline"]:  # failure-free only (real-time mode)
                rx, ry = _series(s["timeline"]["reference"], t)
                ax.plot(rx, ry, linestyle=":", color=color, alpha=0.6, label=f"{n} (failure-free only)")
                continue
            x, y = _series(s["timeline"][kind], t)
            ax.plot(x, y, marker="o", ms=3, color=color, label=n)
            rx, ry = _series(s["timeline"]["reference"], t)
            ax.plot(rx, ry, linestyle=":", color=color, alpha=0.6)
        ax.axvline((c + 1) * t, color="red", linestyle="--", alpha=0.7)
        ax.annotate("failure", ((c + 1) * t, ax.get_ylim()[1] * 0.95), color="red", fontsize=8, ha="left")
        ax.set_xlabel("epoch released at (s since the run's start)")
        ax.set_ylabel("epoch latency: released → committed (s)")
        ax.set_title(f"YSB, {what}\n(dotted: the same configuration failure-free)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_mixed_latency(block: dict[str, Any], path: Path) -> None:
    """The YSB outputs' epoch latency in the run whose heavy branch fails, per configuration, the span from the
    exception to the heavy branch's recovery shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    size, summary = block["size"], block["summary"]
    fig, axes = plt.subplots(1, len(summary), figsize=(4.2 * len(summary), 4.2), sharey=True, squeeze=False)
    for ax, (n, s) in zip(axes[0], summary.items(), strict=True):
        x, y = _series(s["timeline"]["failure"], size["interval"])
        rx, ry = _series(s["timeline"]["reference"], size["interval"])
        ax.plot(rx, ry, linestyle=":", color="gray", label="failure-free")
        ax.plot(x, y, marker="o", ms=3, color="tab:blue" if s["system"] == "falkirk" else "tab:orange",
                label="heavy branch fails")
        a, b = s["timeline"]["failed_at"], s["timeline"]["heavy_recovered_at"]
        if a is not None and b is not None:
            ax.axvspan(a, b, color="red", alpha=0.15, label="heavy branch recovering")
        ax.set_title(n, fontsize=9)
        ax.set_xlabel("epoch released at (s since the run's start)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("campaign_counts latency (s)")
    fig.suptitle("MIXED: YSB's outputs while the heavy branch recovers", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
