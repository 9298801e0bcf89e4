"""Pooling the drivers' figures: per-configuration summaries, medians over several drivers,
the frontier and verdict, and the check of the advisor's predictions.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import frontier
from .configs import CONFIGS


def summarise(raw: dict[str, Any], warmup: int, epochs: int) -> dict[str, Any]:
    persisted = sum(v for k, v in raw["bytes"].items() if k != "input log")
    w = min(warmup, len(raw["walls"]) - 1)
    return {**{k: v for k, v in raw.items() if not k.startswith("reference_")},
            "wall_median_s": statistics.median(raw["walls"][w:]), "cpu_median_s": statistics.median(raw["cpus"][w:]),
            "bytes_per_epoch": persisted / epochs, "load_average": os.getloadavg()}


def round_robin(configs: list[str], drivers: int, one: Callable[[str, int], dict[str, Any]],
                nested: Sequence[str] = ()) -> dict[str, Any]:
    """``one(name, d)`` — configuration ``name`` measured by its driver ``d`` — for ``drivers`` rounds over the
    configurations; each configuration's result (with several drivers :func:`pooled`, ``nested`` as it says, and
    :func:`per_driver`)."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    for d in range(drivers):
        for name in configs:
            runs[name].append(one(name, d))
    out = {name: rs[0] if drivers == 1 else pooled(rs, nested) for name, rs in runs.items()}
    per_driver(out, runs)
    return out


def per_driver(out: dict[str, Any], runs: dict[str, list[dict[str, Any]]]) -> None:
    """With several drivers per configuration: each falkirk driver's ratios (CPU per epoch, recovery CPU) to each
    streaming configuration's driver of the same round, under ``per_driver_over``."""
    if len(next(iter(runs.values()))) < 2:
        return
    st = [s for s in runs if s.startswith("streaming")]
    for name, res in out.items():
        if name.startswith("streaming"):
            continue
        res["per_driver_over"] = {
            s: {axis: [a[key] / b[key] if b[key] else None for a, b in zip(runs[name], runs[s], strict=True)]
                for axis, key in (("cpu", "cpu_median_s"), ("recovery_cpu", "recovery_cpu_s"))} for s in st}


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _median_tree(values: list[Any], key: str = "") -> Any:
    """The drivers' ``values`` of one field: dicts field by field, numbers their median; a ``…caught_up`` count
    that is ``None`` somewhere (never caught up: the latest) counted as infinite; anything else the first's."""
    first = values[0]
    if isinstance(first, dict) and all(isinstance(v, dict) for v in values):
        return {k: _median_tree([v[k] for v in values], k) if all(k in v for v in values) else first[k]
                for k in first}
    if all(_number(v) for v in values):
        return statistics.median(values)
    if key.endswith("caught_up") and all(v is None or _number(v) for v in values):
        m = statistics.median([math.inf if v is None else v for v in values])
        return None if m == math.inf else m
    return first


def pooled(runs: list[dict[str, Any]], nested: Sequence[str] = ()) -> dict[str, Any]:
    """One configuration measured by several drivers: every number the median of the drivers' (so ``cpu_median_s`` is
    the median of their per-epoch medians), ``identical`` only if every driver's was; the dicts named in ``nested``
    (YSB's ``steady``, ``exception``, ``kill``: the figures its targets compare) field by field the same way
    (:func:`_median_tree`); the rest (regimes, advice, per-epoch lists) the first driver's, and each driver's
    numbers — its ``nested`` dicts too — under ``drivers``.

    >>> p = pooled([{"cpu_median_s": 3.0, "identical": True, "cc": "unionfind"},
    ...             {"cpu_median_s": 2.0, "identical": True, "cc": "unionfind"},
    ...             {"cpu_median_s": 9.0, "identical": False, "cc": "unionfind"}])
    >>> p["cpu_median_s"], p["identical"], p["cc"], [d["cpu_median_s"] for d in p["drivers"]]
    (3.0, False, 'unionfind', [3.0, 2.0, 9.0])
    >>> q = pooled([{"identical": True, "kill": {"first_output_s": s, "epochs_until_caught_up": c}}
    ...             for s, c in ((23.0, None), (27.7, 4), (27.5, None))], nested=["kill"])
    >>> q["kill"], q["drivers"][1]["kill"]["first_output_s"]
    ({'first_output_s': 27.5, 'epochs_until_caught_up': None}, 27.7)
    """
    scalars = [k for k, v in runs[0].items() if _number(v) and all(_number(r.get(k)) for r in runs)]
    trees = [k for k in nested if all(isinstance(r.get(k), dict) for r in runs)]
    out = {**runs[0], **{k: statistics.median(r[k] for r in runs) for k in scalars},
           **{k: _median_tree([r[k] for r in runs], k) for k in trees}}
    out["identical"] = all(r["identical"] for r in runs)
    out["drivers"] = [{k: r[k] for k in (*scalars, *trees)} | {"identical": r["identical"]} for r in runs]
    return out


def report_advice(out: dict[str, Any], recovery: str = "recovery_cpu_s", window: Sequence[str] = (),
                  whole: str = "recovery_cpu_s") -> None:
    """With ``falkirk-advised`` among the configurations: its advice checked (:func:`advice_check`), and printed."""
    if "falkirk-advised" in out:
        out["falkirk-advised"]["advice"]["check"] = advice_check(out, recovery, window, whole)
        print(out["falkirk-advised"]["advice"]["table"], json.dumps(out["falkirk-advised"]["advice"]["check"]),
              sep="\n", flush=True)


def _error(pred: float, got: float | None) -> dict[str, Any]:
    return {"predicted": pred, "measured": got, "error": None if not pred or got is None else (got - pred) / pred,
            "abs_error": None if got is None else got - pred}  # read abs_error where pred is near 0


def advice_check(summary: dict[str, Any], recovery: str = "recovery_cpu_s",
                 window: Sequence[str] = (), whole: str = "recovery_cpu_s") -> dict[str, Any]:
    """The advisor's predictions against the measurements: the advised regimes in ``falkirk-advised``'s runs, the
    shipped ones in ``falkirk``'s (when it ran); relative errors (measured − predicted) ÷ predicted. Steady: the
    journal's sum of step executions per epoch; recovery: the figure named ``recovery``. With ``window`` (W4: the
    failed step and the steps after it in the epoch), also ``recovery_window_cpu_s``: the whole ``recovery_cpu_s``
    against the predicted recovery plus those steps' compute in the profile (what they run in any run)."""
    advice = summary["falkirk-advised"]["advice"]
    out: dict[str, Any] = {"recovery_measured_as": recovery}
    for which, name in (("advised", "falkirk-advised"), ("current", "falkirk")):
        if name not in summary:
            continue
        row: dict[str, Any] = {"config": name}
        for axis, measured in (("steady_cpu_s", "journal_steady_cpu_s"), ("recovery_cpu_s", recovery)):
            row[axis] = _error(advice["predicted"][which][axis], summary[name].get(measured))
        if window:
            rest = sum(advice["costs"]["nodes"][n]["compute"] for n in window)
            row["recovery_window_cpu_s"] = _error(advice["predicted"][which]["recovery_cpu_s"] + rest,
                                                  summary[name].get(whole))
        out[which] = row
    return out


def configured(workload: str, name: str, size: dict[str, Any], base: Path, input_dir: Path,
               **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Configuration ``name`` of ``workload``: its options and the spec its driver process runs."""
    opt = CONFIGS[workload][name]
    system = "streaming" if name.startswith("streaming") else "falkirk"
    spec = {"workload": workload, "system": system, "size": size, "base": str(base), "input": str(input_dir),
            **extra, **opt}
    return opt, spec


def summarised(raw: dict[str, Any], spec: dict[str, Any], opt: dict[str, Any], warmup: int, t0: float) -> dict[str, Any]:
    """:func:`summarise` of one configuration's raw figures, with its system, time and Spark configuration."""
    res = summarise(raw, warmup, spec["size"]["epochs"])
    res.update(system=spec["system"], benchmark_s=time.perf_counter() - t0, conf=opt.get("conf", {}))
    return res


def said(workload: str, name: str, res: dict[str, Any], more: str = "", tail: str = "") -> str:
    """The line printed for one measured configuration (``more``: after the recovery; ``tail``: in the brackets)."""
    return (f"{workload} {name:16} cpu {res['cpu_median_s']:.2f} s/epoch, wall {res['wall_median_s']:.2f} s/epoch, "
            f"{res['bytes_per_epoch'] / 1e3:.0f} kB/epoch, recovery CPU {res['recovery_cpu_s']:.2f} s "
            f"(wall {res['recovery_s']:.2f} s{more}), recomputed {res['records_recomputed']}, "
            f"input rows {res['source_rows']}, identical {res['identical']} ({res['benchmark_s']:.0f} s{tail})")


def verdict(summary: dict[str, Any]) -> dict[str, Any]:
    """Frontier, the strongest streaming configurations (``streaming_frontier``: those no other streaming one
    dominates), and the falkirk configurations that strictly dominate every streaming one. A configuration
    measured in steady state only (no recovery figure: YSB's real-time mode) is left out."""
    summary = {n: s for n, s in summary.items() if s.get("recovery_cpu_s") is not None}
    points = {n: (s["cpu_median_s"], s["recovery_cpu_s"]) for n, s in summary.items()}
    front = frontier(points)
    fk = [n for n in summary if summary[n]["system"] == "falkirk"]
    st = [n for n in summary if summary[n]["system"] == "streaming"]
    dominating = [f for f in fk if st and all(points[f][0] < points[s][0] and points[f][1] < points[s][1] for s in st)]
    ratios = {f: {s: {"cpu": points[f][0] / points[s][0] if points[s][0] else None,
                      "recovery_cpu": points[f][1] / points[s][1] if points[s][1] else None} for s in st} for f in fk}
    out = {"frontier": front, "streaming_frontier": frontier({n: points[n] for n in st}) if st else [],
           "falkirk_on_frontier": [n for n in front if n in fk],
           "falkirk_dominates_all_streaming": dominating, "falkirk_over_streaming": ratios}
    twins = same_regimes(summary)
    if twins:  # one configuration under several labels: also its figures over all their drivers, and that frontier
        merged = {n: p for n, p in points.items() if not any(n in g for g in twins)}
        for group in twins:
            runs = [d for n in group for d in summary[n].get("drivers") or [summary[n]]]
            merged["=".join(group)] = (statistics.median(d["cpu_median_s"] for d in runs),
                                       statistics.median(d["recovery_cpu_s"] for d in runs))
        out["same_regimes"] = {"=".join(g): {"labels": g, "drivers": sum(len(summary[n].get("drivers") or [1])
                                                                         for n in g),
                                             "cpu_median_s": merged["=".join(g)][0],
                                             "recovery_cpu_s": merged["=".join(g)][1]} for g in twins}
        out["frontier_same_regimes_pooled"] = frontier(merged)
    return out


def same_regimes(summary: dict[str, Any]) -> list[list[str]]:
    """The falkirk labels that ran the same regimes (``falkirk-advised`` when the advice kept the shipped ones):
    groups of two or more, in the summary's order.

    >>> same_regimes({"falkirk": {"system": "falkirk", "regimes": {"a": "x"}}, "streaming": {"system": "streaming"},
    ...               "falkirk-advised": {"system": "falkirk", "regimes": {"a": "x"}},
    ...               "falkirk-inc": {"system": "falkirk", "regimes": {"a": "y"}}})
    [['falkirk', 'falkirk-advised']]
    """
    groups: dict[str, list[str]] = {}
    for n, res in summary.items():
        if res.get("system") == "falkirk" and res.get("regimes") is not None:
            groups.setdefault(json.dumps(res["regimes"], sort_keys=True), []).append(n)
    return [g for g in groups.values() if len(g) > 1]
