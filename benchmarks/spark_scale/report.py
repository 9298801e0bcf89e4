"""The results: one log–log picture per workload (both systems, every configuration, the fits), the table,
and the issue's targets checked against what was measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..spark_vs_streaming import as_markdown

PANELS = (("cpu_mean_s", "CPU s per epoch (mean over the window)"),
          ("kill_recovery_cpu_s", "recovery CPU s: (a) driver killed"),
          ("fail_recovery_cpu_s", "recovery CPU s: (b) failure in one step"),
          ("state_bytes_per_epoch", "state bytes per epoch"))


def groups(points: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        out.setdefault(p["workload"] + (f"-c{p['churn']:g}" if p.get("churn") is not None else ""), []).append(p)
    return {k: sorted(v, key=lambda p: p["n"]) for k, v in out.items()}


def plot(key: str, points: list[dict[str, Any]], fits: dict[str, Any], path: Path) -> None:
    """``key``'s picture: a log–log panel per figure of :data:`PANELS`, a line per configuration (orange: the
    stream, blue: falkirk), its fit ``a + b·n`` dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    configs = sorted({c for p in points for c in p["summary"]})
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 4.4))
    blues, oranges = plt.cm.Blues(np.linspace(0.45, 0.95, 5)), plt.cm.Oranges(np.linspace(0.45, 0.95, 4))
    for ax, (metric, label) in zip(axes, PANELS, strict=True):
        bi = oi = 0
        for c in configs:
            rows = [(p["n"], p["summary"][c].get(metric)) for p in points if c in p["summary"]]
            rows = [(n, y) for n, y in rows if y]
            if not rows:
                continue
            stream = c.startswith("streaming")
            color = oranges[oi % 4] if stream else blues[bi % 5]
            oi, bi = oi + stream, bi + (not stream)
            ax.plot([n for n, _ in rows], [y for _, y in rows], "o-", color=color, label=c)
            f = fits.get(c, {}).get(metric, {})
            if f.get("a") is not None:
                xs = np.geomspace(min(n for n, _ in rows), max(n for n, _ in rows), 30)
                ys = f["a"] + f["b"] * xs
                ax.plot(xs[ys > 0], ys[ys > 0], "--", color=color, linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("events per epoch" if key.split("-")[0] in ("flagship", "ysb") else "keys of state")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"{key}: falkirk (blue) and Structured Streaming (orange); dashed: the fit a + b·n", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def rows_of(points: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [("point", "configuration", "CPU / epoch", "mean", "driver CPU / epoch",
                                    "wall / epoch", "state MB / epoch", "all MB / epoch", "(a) recovery CPU",
                                    "(a) wall", "(b) recovery CPU", "(b) wall", "(b) recomputed", "peak JVM MB",
                                    "identical", "frontier (a/b)", "by the mean")]

    def num(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for p in points:
        pid = p["workload"] + f" n={p['n']:.0e}" + (f" c={p['churn']:g}" if p.get("churn") is not None else "")
        v, vm = p["verdict"], p.get("verdict_mean")
        for n, s in p["summary"].items():
            front = "/".join("yes" if n in v[k]["frontier"] else "no" for k in ("kill", "fail"))
            front_mean = "-" if not vm else "/".join("yes" if n in vm[k]["frontier"] else "no"
                                                     for k in ("kill", "fail"))
            mean = num(s.get("cpu_mean_s"), ".2f") + ("¹" if s.get("cpu_mean_of") == "first driver" else "")
            rows.append((pid, n, f"{s['cpu_median_s']:.2f}", mean, f"{s['driver_cpu_median_s']:.3f}",
                         f"{s['wall_median_s']:.2f}", f"{s['state_bytes_per_epoch'] / 1e6:.2f}",
                         f"{s['bytes_per_epoch'] / 1e6:.2f}", num(s.get("kill_recovery_cpu_s"), ".1f"),
                         num(s.get("kill_recovery_s"), ".1f"), num(s.get("fail_recovery_cpu_s"), ".1f"),
                         num(s.get("fail_recovery_s"), ".1f"), num(s.get("fail_records_recomputed"), ","),
                         num((s.get("peak_rss_jvm") or 0) / 1e6, ".0f"), str(s["identical"]),
                         front if "kill_recovery_s" in s else "-", front_mean if "kill_recovery_s" in s else "-"))
    return rows


def markdown(doc: dict[str, Any]) -> str:
    return as_markdown(rows_of(doc["points"])) + (
        "\n\n¹ the first driver's mean (points measured before the mean was kept); the others: the median of the "
        "drivers' means")


def _best(summary: dict[str, Any], system: str, metric: str) -> tuple[str, float] | None:
    got = [(n, s[metric]) for n, s in summary.items() if s["system"] == system and s.get(metric) is not None
           and not n.endswith("-off")]
    return min(got, key=lambda x: x[1]) if got else None


def targets(doc: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, each with what was measured (the largest size measured stands in where the issue names
    10^7 keys and it was not run)."""
    pts = doc["points"]
    out: dict[str, Any] = {}
    out["falkirk_on_frontier_at_every_point"] = {
        f"{p['workload']}-n{p['n']}" + (f"-c{p['churn']:g}" if p.get("churn") is not None else ""):
            {k: p["verdict"][k]["falkirk_on_frontier"] for k in ("kill", "fail")}
            | ({f"{k}_by_mean": p["verdict_mean"][k]["falkirk_on_frontier"] for k in ("kill", "fail")}
               if p.get("verdict_mean") else {}) for p in pts}
    keyed = [p for p in pts if p["workload"] in ("W2", "W3") and p.get("churn") == 0.01]
    big = {}
    for w in ("W2", "W3"):
        ps = [p for p in keyed if p["workload"] == w]
        if not ps:
            continue
        p = max(ps, key=lambda p: p["n"])
        s = p["summary"]
        row: dict[str, Any] = {"n": p["n"]}
        for metric, limit in (("state_bytes_per_epoch", 1.5), ("cpu_median_s", 1.0), ("cpu_mean_s", 1.0)):
            f, st = _best(s, "falkirk", metric), _best(s, "streaming", metric)
            row[metric] = {"falkirk": f, "streaming": st, "limit": limit,
                           "ratio": f[1] / st[1] if f and st and st[1] else None}
        big[w] = row
    out["at_largest_keys_1pct"] = big
    largest = {}
    for key, ps in groups(pts).items():
        p = ps[-1]
        f, st = _best(p["summary"], "falkirk", "fail_recovery_s"), _best(p["summary"], "streaming", "fail_recovery_s")
        largest[key] = {"n": p["n"], "falkirk": f, "streaming": st, "limit": 0.5,
                        "ratio": f[1] / st[1] if f and st and st[1] else None}
    out["fail_recovery_wall_at_largest"] = largest
    book = {}
    for p in pts:
        s = p["summary"]
        point = f"{p['workload']}-n{p['n']}" + (f"-c{p['churn']:g}" if p.get("churn") is not None else "")
        for on, suffix in (("falkirk", ""), ("falkirk-changes", "-changes")):
            if f"{on}-off" in s and on in s:
                book[point + suffix] = s[on]["driver_cpu_median_s"] - s[f"{on}-off"]["driver_cpu_median_s"]
    out["bookkeeping_driver_cpu_per_epoch"] = {"limit": 0.05, "falkirk_minus_off": book}
    return out
