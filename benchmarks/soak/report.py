"""The soak's report, computed from its event log alone: ``soak_<variant>.json`` and a picture.

Figures: faults by kind and outcome; recoveries; epochs per hour; findings (silent losses — an output epoch
or the Eager table differing from the reference, a committed epoch changed — and unexplained stops); the
trends, each a least-squares slope with its 95 % interval (:func:`~benchmarks.soak.checks.slope`):

* CPU seconds per epoch over the epoch number (steady epochs: no recovery in them, a driver's 4th epoch on,
  epochs never completed before), and inside drivers (one intercept per driver: a leak);
* the driver's RSS (Python, JVM) over the epoch number, and inside drivers over the driver's age in epochs
  (from a driver's :data:`RSS_AGE`-th epoch on);
* a restarted driver's time to its first epoch (session, restart recovery, the epoch) over the epoch it
  restarted at: what a restart reads grows with what the root keeps (every committed output epoch is checked);
* the root's bytes and files (outputs and an Eager step's database apart: theirs grow by design) over the epoch number, after warm-up;
* bytes per epoch of metadata: each manifest (by step and kind), each execution record, and ``meta.sqlite``.

A trend is reported as **growing** when its interval lies above zero *and* it would add more than
:data:`NOISE` of the series' mean over the run (a within-driver fit, whose slope is per epoch of a driver's
age: over the longest life a driver had; the key keeps its name, ``growth_over_run``); otherwise as flat.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from benchmarks.soak.checks import slope, within_slope

__all__ = ["summarise", "write", "NOISE"]

#: A trend is growth when it adds more than this fraction of the series' mean over the run.
NOISE = 0.05
#: Epochs before the root's size is expected to be steady (retention reached): the journal keeps each step's
#: newest ``Journal.KEEP`` (32) execution records whatever the watermarks, so it fills for 32 epochs (the first
#: cluster soak fitted from epoch 20 and took that fill for growth: 88 records at epoch 10, 256 from epoch 32 on).
WARMUP = 40
#: A driver's epochs before its RSS is fitted (the JVM's heap grows towards its limit meanwhile).
RSS_AGE = 10
#: A driver's epochs before its live heap (``--live-heap``) is fitted: the JVM warms up its classes, code
#: caches and Spark's plan caches over its first tens of epochs (74 MB live at epoch 0, 90–130 MB from
#: epoch 10 on in the first such run); the first WARMUP epochs' values stay in the event log.
HEAP_AGE = WARMUP


def _trend(fit: dict[str, Any], span: float) -> dict[str, Any]:
    out = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in fit.items()}
    if fit.get("slope") is None or not fit.get("mean"):
        out["verdict"] = "too few points"
        return out
    growth = fit["slope"] * span / abs(fit["mean"])
    out["growth_over_run"] = round(growth, 4)
    out["verdict"] = "growing" if fit["lo"] > 0 and growth > NOISE else "flat"
    return out


def _load(epochs: list[dict[str, Any]]) -> dict[str, float] | None:
    """The machine's 1-minute load average at the epochs' ends: median, 90th percentile and maximum (a soak
    runs alone on the machine; a high load says something else ran beside it)."""
    loads = sorted(e["load"] for e in epochs if e.get("load") is not None)  # logs before it was recorded: none
    if not loads:
        return None
    return {"median": statistics.median(loads), "p90": loads[min(len(loads) - 1, int(0.9 * len(loads)))],
            "max": loads[-1]}


def summarise(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything the report says, from the events that count (:meth:`EventLog.events`)."""
    head = next(e for e in events if e["event"] == "soak")
    scheduled = {f["id"]: f for s in head["slices"] for f in s["faults"]}
    outcomes = {e["fault"]: e for e in events if e["event"] == "outcome"}
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for fid, f in scheduled.items():
        by_kind[f["kind"]][outcomes[fid]["outcome"] if fid in outcomes else "not run"] += 1
    findings = [e for e in events if e["event"] == "finding"]
    epochs = [e for e in events if e["event"] == "epoch"]
    progress = max((e["epoch"] for e in epochs), default=-1)
    t0 = events[0]["t"]
    t1 = events[-1]["t"]
    hours = max(1e-9, (t1 - t0) / 3600)
    steady = [e for e in epochs if e["steady"] and e["cpu"] is not None]
    span = max(1, progress)
    # a within-driver slope is per epoch of a driver's age: its growth is over the longest life a driver had,
    # not over the run (earlier reports scaled it by the run's epochs, ~7x too much in the S3 soak); the
    # late-life fit keeps each driver's second half only, where a warmed-up heap has settled and a leak has not
    life: dict[int, int] = {}
    for e in epochs:
        life[e["driver"]] = max(life.get(e["driver"], 0), e["age"])
    longest = max(life.values(), default=1)
    trends: dict[str, Any] = {
        "cpu_per_epoch": _trend(slope([e["epoch"] for e in steady], [e["cpu"] for e in steady]), span),
        "cpu_per_epoch_within_drivers": _trend(within_slope((e["driver"], e["age"], e["cpu"]) for e in steady),
                                               longest),
    }
    for key in ("rss_py", "rss_jvm"):
        later = [e for e in epochs if e["age"] >= RSS_AGE]
        trends[key] = _trend(slope([e["epoch"] for e in later], [e[key] for e in later]), span)
        trends[f"{key}_within_drivers"] = _trend(within_slope((e["driver"], e["age"], e[key]) for e in later),
                                                 longest)
        late = [e for e in later if e["age"] >= life[e["driver"]] / 2]
        trends[f"{key}_within_drivers_late_life"] = _trend(
            within_slope((e["driver"], e["age"], e[key]) for e in late), longest)
    heap = [e for e in epochs if e.get("heap_live") is not None and e["age"] > HEAP_AGE]  # --live-heap runs
    if heap:
        trends["heap_live"] = _trend(slope([e["epoch"] for e in heap], [e["heap_live"] for e in heap]), span)
        trends["heap_live_within_drivers"] = _trend(
            within_slope((e["driver"], e["age"], e["heap_live"]) for e in heap), longest)
    starts = [e for e in events if e["event"] == "driver-start"]
    first: dict[int, float] = {}
    load: dict[int, Any] = {}  # at the end of each driver's first epoch
    for e in epochs:
        first.setdefault(e["driver"], e["t"])
        load.setdefault(e["driver"], e.get("load"))
    restarts = [(s["progress"], first[s["driver"]] - s["t"], load[s["driver"]])
                for s in starts if s["driver"] in first and s["progress"] >= 0]
    trends["restart_seconds"] = _trend(slope([r[0] for r in restarts], [r[1] for r in restarts]), span)
    # wall seconds and a process tree's CPU both rise with what else runs on the machine: the same fits with
    # the 1-minute load average held fixed say whether a rise is the run's own or the machine's
    loaded = [r for r in restarts if r[2] is not None]
    trends["restart_seconds_given_load"] = _trend(
        slope([r[0] for r in loaded], [r[1] for r in loaded], controls=[[r[2] for r in loaded]]), span)
    steady_loaded = [e for e in steady if e.get("load") is not None]
    trends["cpu_per_epoch_given_load"] = _trend(
        slope([e["epoch"] for e in steady_loaded], [e["cpu"] for e in steady_loaded],
              controls=[[e["load"] for e in steady_loaded]]), span)
    censuses = [e for e in events if e["event"] == "census"]
    steady_census = [c for c in censuses if c["progress"] >= WARMUP]
    for key in ("bytes", "files", "meta_bytes"):
        trends[f"root_{key}"] = _trend(slope([c["progress"] for c in steady_census],
                                             [c[key] for c in steady_census]), span)
    trends["output_bytes_per_epoch"] = round(censuses[-1]["output_bytes"] / max(1, progress + 1)) if censuses else None
    meta: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for c in censuses:
        for rel, size in c.get("new", {}).items():
            parts = rel.split("/")
            try:
                epoch = int(parts[-1].split(".")[0])
            except ValueError:
                continue
            group = "journal" if parts[0] == "journal" else f"manifest {parts[1]}/{parts[2]}"
            meta[group].append((epoch, size))
    metadata = {g: _trend(slope([p[0] for p in pts if p[0] >= WARMUP], [p[1] for p in pts if p[0] >= WARMUP]), span)
                for g, pts in sorted(meta.items())}
    journal_sizes = [size for e, size in meta.get("journal", [])]
    silent = [f for f in findings if f["kind"] in ("silent", "changed")]
    unexplained = [f for f in findings if f["kind"] in ("unexplained", "hang")]
    growing = sorted(k for k, v in {**trends, **metadata}.items() if isinstance(v, dict) and v["verdict"] == "growing")
    return {
        "variant": head["variant"], "seed": head["seed"], "epochs_planned": head["epochs"],
        "epochs_done": progress + 1, "hours": round(hours, 3), "epochs_per_hour": round((progress + 1) / hours, 1),
        "load_average": _load(epochs),
        "drivers": len(starts), "longest_driver_life": longest,
        "recoveries": sum(1 for e in events if e["event"] == "recovery"),
        "faults": {k: dict(v) for k, v in sorted(by_kind.items())},
        "faults_fired": sum(1 for o in outcomes.values() if o["outcome"] not in ("not-reached",)),
        "needed_a_human": [{"fault": o["fault"], "kind": o["kind"], "epoch": o["epoch"], "detail": o["detail"]}
                           for o in outcomes.values() if o["outcome"] == "human"],
        "silent_losses": len(silent), "unexplained": len(unexplained),
        "findings": [{"kind": f["kind"], "text": f["text"][:2000]} for f in findings],
        "committed_epochs_checked": sum(1 for e in events if e["event"] == "committed"),
        "db_checks": sum(1 for e in events if e["event"] == "db-check"),
        "root_bounded": not any(k.startswith("root_") for k in growing),
        "growing": growing,
        "trends": trends, "metadata_bytes_per_epoch": metadata,
        "journal_record_bytes_median": statistics.median(journal_sizes) if journal_sizes else None,
        "root_over_time": [[round(c["t"] - t0, 1), c["progress"], c["bytes"], c["files"], c["output_bytes"],
                            c["meta_bytes"]] for c in censuses],
        "fault_times": [[round(e["t"] - t0, 1), e["fault"]] for e in events if e["event"] == "fired"],
    }


def picture(summary: dict[str, Any], path: Path) -> None:
    """Root bytes (outputs and the Eager table apart) over time, with the faults marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["root_over_time"]
    if not rows:
        return
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    hours = [r[0] / 3600 for r in rows]
    top.plot(hours, [r[2] / 1e6 for r in rows], label="root (outputs, Eager table apart), MB")
    top.plot(hours, [r[5] / 1e6 for r in rows], label="meta.sqlite, MB")
    top.plot(hours, [r[4] / 1e6 for r in rows], label="outputs (kept by design), MB", linestyle=":")
    for t, _ in summary["fault_times"]:
        top.axvline(t / 3600, color="red", alpha=0.15, linewidth=0.6)
    top.set_ylabel("MB")
    top.legend(loc="upper left", fontsize=8)
    top.set_title(f"soak {summary['variant']} (seed {summary['seed']}): {summary['epochs_done']} epochs, "
                  f"{summary['faults_fired']} faults (red), {summary['recoveries']} recoveries")
    bottom.plot(hours, [r[3] for r in rows], label="files under the root (outputs, Eager table apart)")
    bottom.set_ylabel("files")
    bottom.set_xlabel("hours")
    bottom.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(events: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """Write ``out`` (JSON) and its picture (``.png`` beside it); the summary."""
    summary = summarise(events)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    picture(summary, out.with_suffix(".png"))
    return summary


def text(summary: dict[str, Any]) -> str:
    """A few lines for the terminal."""
    t = summary["trends"]

    def fit(k: str, unit: str, scale: float = 1.0) -> str | None:
        if k not in t:  # a fit the run has no data for (--live-heap), or a report from before it was added
            return None
        v = t[k]
        if v.get("slope") is None:
            return f"{k}: -"
        return (f"{k}: {v['slope'] * scale:+.3g} {unit}/epoch (95% {v['lo'] * scale:+.3g}..{v['hi'] * scale:+.3g}; "
                f"mean {v['mean'] * scale:.3g} {unit}) {v['verdict']}")

    lines = [
        f"soak {summary['variant']} seed {summary['seed']}: {summary['epochs_done']}/{summary['epochs_planned']} "
        f"epochs in {summary['hours']:.2f} h ({summary['epochs_per_hour']} epochs/h), {summary['drivers']} drivers "
        f"(the longest lived {summary['longest_driver_life']} epochs), "
        f"{summary['recoveries']} recoveries; load average (1 min) at epoch ends {summary.get('load_average')}",
        "faults: " + ", ".join(f"{k} {dict(v)}" for k, v in summary["faults"].items()),
        f"silent losses {summary['silent_losses']}, unexplained {summary['unexplained']}, "
        f"needed a human {len(summary['needed_a_human'])}, root bounded {summary['root_bounded']}, "
        f"growing: {summary['growing'] or 'nothing'}",
        fit("cpu_per_epoch", "CPU-s"), fit("cpu_per_epoch_within_drivers", "CPU-s"),
        fit("rss_py", "MB", 1e-6), fit("rss_jvm", "MB", 1e-6), fit("rss_jvm_within_drivers", "MB", 1e-6),
        fit("rss_jvm_within_drivers_late_life", "MB", 1e-6),
        fit("rss_py_within_drivers_late_life", "MB", 1e-6),
        fit("root_bytes", "kB", 1e-3), fit("root_files", "files"), fit("root_meta_bytes", "kB", 1e-3),
        fit("heap_live", "MB", 1e-6), fit("heap_live_within_drivers", "MB", 1e-6),
        fit("restart_seconds", "s"), fit("restart_seconds_given_load", "s"), fit("cpu_per_epoch_given_load", "CPU-s"),
    ]
    return "\n".join(line for line in lines if line is not None)
