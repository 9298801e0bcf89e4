"""Measuring points: input written before any timing, every configuration in driver processes of its own,
round-robin over ``--drivers`` rounds (the matrix's :func:`~benchmarks.spark_matrix.pooling.round_robin` and
:func:`~benchmarks.spark_matrix.pooling.pooled`: every number the median of the drivers')."""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import time
from pathlib import Path
from typing import Any

from ..spark_matrix.measure import child
from ..spark_matrix.pooling import pooled, round_robin
from ..spark_vs_streaming import frontier
from .phases import adapter
from .plan import Point, configurations, spark_conf

MODULE = __package__
FIGURES = ("recovery_s", "recovery_cpu_s", "records_recomputed", "source_rows", "log_rows", "failure_cpu_s")


def window(values: list[float], warmup: int) -> list[float]:
    """The epochs a per-epoch figure is taken over: from ``warmup`` on (the last one at least)."""
    return values[min(warmup, len(values) - 1):]


def driver_spec(p: Point, name: str, opt: dict[str, Any], work: Path, input_dir: Path,
                form: Any) -> dict[str, Any]:
    """The spec of a driver process measuring configuration ``name`` (options ``opt``) at point ``p``."""
    system = "streaming" if opt.get("stream") else "falkirk"
    return {"workload": p.workload, "system": system, "size": p.size, "base": str(work / f"{p.id}-{name}"),
            "input": str(input_dir), "conf": spark_conf(p, opt), "form": form,
            "regimes": opt.get("regimes"), "off": bool(opt.get("off"))}


def recovery_figures(prefix: str, got: dict[str, Any]) -> dict[str, Any]:
    """A recovery phase's result as a driver's figures: ``PREFIX_<figure>`` for :data:`FIGURES`, the rest under
    ``PREFIX``."""
    return {**{f"{prefix}_{k}": got[k] for k in FIGURES if k in got},
            prefix: {k: v for k, v in got.items() if k not in FIGURES}}


def summarise(run: dict[str, Any], kill: dict[str, Any] | None, fail: dict[str, Any] | None, epochs: int,
              warmup: int) -> dict[str, Any]:
    """One driver's figures: medians over epochs ``warmup``.. of the failure-free run, and the CPU's mean over
    them (``cpu_mean_s``); bytes per epoch by kind, peaks, and each recovery's figures prefixed ``kill_`` (a) and
    ``fail_`` (b).

    The median leaves out the epochs that checkpoint when they are fewer than half the window (a ``Lazy(every=3)``
    step's 2 of 5), the mean counts them: the mean is what a long run pays per epoch, within the window's share of
    checkpointing epochs (the quick plan's 5-epoch window holds 2 of a ``Lazy(every=3)`` step's, against 1 in 3 in
    a long run; the stream's RocksDB snapshots every 10 batches by default, so its window may hold none).

    >>> s = summarise({"walls": [5, 1, 2, 1], "cpus": [9, 2, 2, 5], "jits": [1, 0, 1, 0],
    ...                "driver_cpus": [1, .1, .3, .1], "bytes": {"state": 30, "log": 3}, "peak_rss": 7},
    ...               {"recovery_s": 4, "recovery_cpu_s": 6, "identical": True},
    ...               {"recovery_s": 2, "identical": False}, 3, 1)
    >>> s["cpu_median_s"], s["cpu_mean_s"], s["state_bytes_per_epoch"], s["kill_recovery_s"], s["identical"]
    (2, 3.0, 10.0, 4, False)
    """
    out: dict[str, Any] = {k: v for k, v in run.items()}
    nojit = [c - j for c, j in zip(run["cpus"], run["jits"], strict=True)]
    out.update(wall_median_s=statistics.median(window(run["walls"], warmup)),
               cpu_median_s=statistics.median(window(run["cpus"], warmup)),
               cpu_mean_s=statistics.fmean(window(run["cpus"], warmup)),
               cpu_nojit_median_s=statistics.median(window(nojit, warmup)),
               driver_cpu_median_s=statistics.median(window(run["driver_cpus"], warmup)),
               bytes_per_epoch=sum(run["bytes"].values()) / epochs,
               **{f"{k}_bytes_per_epoch": run["bytes"].get(k, 0) / epochs for k in ("state", "log", "metadata")})
    ok = True
    for prefix, got in (("kill", kill), ("fail", fail)):
        if got is None:
            continue
        out.update(recovery_figures(prefix, got))
        ok = ok and bool(got["identical"])
    out["identical"] = ok
    if kill is not None:  # the matrix's recovery axis (its pooling's per-driver ratios read it)
        out["recovery_cpu_s"] = out["kill_recovery_cpu_s"]
    return out


def measure_point(p: Point, work: Path, *, drivers: int, warmup: int, spacings: list[int], only: set[str],
                  forms: dict[str, str], off: bool = True) -> dict[str, Any]:
    """Every configuration of point ``p`` measured (see the module docstring); the point's block of the results."""
    wl = adapter({"workload": p.workload})
    size = p.size
    form = wl.stream_form(size, forms.get(p.workload))
    configs = {n: o for n, o in configurations(p.workload, spacings).items() if not only or n in only}
    notes = []
    if form is None:
        notes.append(f"no streaming formulation in this checkout computes {p.workload} at churn {p.churn:g}: "
                     "the stream is not measured at this point")
        configs = {n: o for n, o in configs.items() if not o.get("stream")}
    input_dir = work / f"{p.id}-input"
    t0 = time.perf_counter()
    wl.write_input(input_dir, size)
    prepared_s = time.perf_counter() - t0
    advice: dict[str, Any] | None = None

    def one(name: str, d: int) -> dict[str, Any]:
        nonlocal advice
        opt = configs[name]
        spec = driver_spec(p, name, opt, work, input_dir, form)
        tag = f"{p.id}-{name}" + (f"-d{d + 1}" if d else "")
        if opt.get("advise"):
            if advice is None:  # profiled and advised once per point, by a driver of its own
                advice = child(spec, work, f"{p.id}-{name}-advise", "advise", module=MODULE)
            spec["advice"] = advice
        t = time.perf_counter()
        if opt.get("off"):
            run, kill, fail = child(spec, work, f"{tag}-off", "run", module=MODULE), None, None
        else:
            run = child(spec, work, f"{tag}-run", "run", -signal.SIGKILL, module=MODULE)
            kill = child(spec, work, f"{tag}-restart", "restart", module=MODULE)
            fail = child(spec, work, f"{tag}-fail", "fail", module=MODULE)
        res = summarise(run, kill, fail, p.epochs, warmup)
        res.update(system=spec["system"], benchmark_s=time.perf_counter() - t, load_average=os.getloadavg(),
                   conf=spec["conf"], **({"advice": advice} if opt.get("advise") else {}))
        shutil.rmtree(spec["base"], ignore_errors=True)
        print(said(p, name, res, d, drivers), flush=True)
        return res

    summary = round_robin(list(configs), drivers, one)
    # failure-free only: not in the rounds' per-driver ratios. ``falkirk-changes-off`` (W2's changes form, off)
    # only when named: the bookkeeping of a ``changes=True`` step is ``falkirk-changes`` less it
    offs = {"falkirk-off": "shipped"} if off and (not only or "falkirk-off" in only) else {}
    if off and only and "falkirk-changes-off" in only and p.workload == "W2":
        offs["falkirk-changes-off"] = "changes"
    for name, regimes in offs.items():
        configs[name] = {"regimes": regimes, "off": True}
        summary.update(round_robin([name], drivers, one))
    shutil.rmtree(input_dir, ignore_errors=True)
    return {"workload": p.workload, "n": p.n, "churn": p.churn, "epochs": p.epochs, "crash": p.crash,
            "memory": spark_conf(p, {}), "stream_form": form, "stream_module": stream_module(p.workload),
            "input_prepared_s": prepared_s, "notes": notes, "summary": summary, "verdict": verdict(summary)}


def remeasure_fail(block: dict[str, Any], work: Path, *, drivers: int, only: set[str], run: int) -> None:
    """Recovery (b) alone — a failure inside one step — measured again for every configuration of the point
    ``block`` (not ``falkirk-off``; each first runs its failure-free reference, untimed), round-robin over
    ``drivers`` rounds, pooled as a point's figures are: each
    configuration's ``fail_*`` figures replaced (each driver's too), what they were kept under ``fail_earlier``
    with the run that measured them, ``fail_run`` the run measuring them now; the verdicts recomputed. For a
    change that moves only that recovery (a retry in place): both systems' figures again in one run."""
    p = Point(block["workload"], block["n"], block["churn"], block["epochs"], block["crash"])
    wl = adapter({"workload": p.workload})
    names = [n for n in block["summary"] if not n.endswith("-off") and (not only or n in only)]
    opts = configurations(p.workload, [int(n.removeprefix("streaming-snap")) for n in block["summary"]
                                       if n.startswith("streaming-snap")])
    input_dir = work / f"{p.id}-input"
    wl.write_input(input_dir, p.size)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for d in range(drivers):
        for name in names:
            opt = opts[name]
            spec = driver_spec(p, name, opt, work, input_dir, block["stream_form"])
            if opt.get("advise"):  # the point's advice, as its drivers ran it
                spec["advice"] = block["summary"][name]["advice"]
            if d == 0:  # the failure-free reference its failing runs are compared with, kept over the rounds
                child(spec, work, f"{p.id}-{name}-reference", "reference", module=MODULE)
            t = time.perf_counter()
            got = child(spec, work, f"{p.id}-{name}" + (f"-d{d + 1}" if d else "") + "-fail", "fail", module=MODULE)
            res = {**recovery_figures("fail", got), "identical": bool(got["identical"])}
            runs[name].append(res)
            print(f"{p.id:18} {name:18} recovery (b) {res['fail_recovery_s']:.2f} s / "
                  f"{res['fail_recovery_cpu_s']:.2f} CPU-s, identical {res['identical']} "
                  f"({time.perf_counter() - t:.0f} s, driver {d + 1} of {drivers}, load {os.getloadavg()[0]:.1f})"
                  + ("" if res["identical"] else f"; differences: {got.get('differences')}"), flush=True)
    shutil.rmtree(input_dir, ignore_errors=True)
    for name in names:
        shutil.rmtree(work / f"{p.id}-{name}", ignore_errors=True)
    merge_fail(block, runs, run)


def merge_fail(block: dict[str, Any], runs: dict[str, list[dict[str, Any]]], run: int) -> None:
    """Each configuration's recovery (b) measured again (``runs``: its drivers' figures) into the point ``block``
    (see :func:`remeasure_fail`).

    >>> block = {"run": 0, "summary": {"falkirk": {"system": "falkirk", "identical": True, "fail_recovery_s": 6.0,
    ...          "fail_recovery_cpu_s": 9.0, "fail": {"rows": 1}, "drivers": [{"fail_recovery_s": 6.0}] * 2}}}
    >>> merge_fail(block, {"falkirk": [{"fail_recovery_s": s, "fail_recovery_cpu_s": 2 * s, "fail": {"rows": 2},
    ...                                 "identical": True} for s in (1.0, 3.0)]}, run=4)
    >>> s = block["summary"]["falkirk"]
    >>> s["fail_recovery_s"], s["fail_run"], s["fail_earlier"]["fail_recovery_s"], s["fail_earlier"]["run"]
    (2.0, 4, 6.0, 0)
    >>> [d["fail_recovery_s"] for d in s["drivers"]], s["identical"]
    ([1.0, 3.0], True)
    """
    for name, rs in runs.items():
        new = pooled(rs) if len(rs) > 1 else {**rs[0], "drivers": [rs[0]]}
        s = block["summary"][name]
        keys = [k for k in s if k.startswith("fail_") and k not in ("fail_earlier", "fail_run")]
        s["fail_earlier"] = {**{k: s[k] for k in keys}, "fail": s.get("fail"),
                             "run": s.get("fail_run", block.get("run"))}
        s.update({k: new[k] for k in new if k.startswith("fail_")}, fail=new["fail"], fail_run=run)
        s["identical"] = bool(s["identical"] and new["identical"])
        s["drivers"] = [{**old, **{k: v for k, v in fresh.items() if k.startswith("fail_")}}
                        for old, fresh in zip(s.get("drivers", []), new["drivers"], strict=False)]
    block["verdict"] = verdict(block["summary"])


def stream_module(workload: str) -> str:
    from .streams import keyed_module

    return {"flagship": "benchmarks.spark_vs_streaming", "ysb": "benchmarks.spark_scale.ysb"}.get(
        workload, keyed_module().__name__)


def verdict(summary: dict[str, Any], cpu: str = "cpu_median_s") -> dict[str, Any]:
    """Per failure kind, the (CPU per epoch × recovery CPU) frontier and the falkirk configurations on it; the CPU
    per epoch is the figure named ``cpu`` (the median, or ``cpu_mean_s``)."""
    out = {}
    measured = {n: s for n, s in summary.items() if "kill_recovery_cpu_s" in s and s.get(cpu) is not None}
    for kind in ("kill", "fail"):
        points = {n: (s[cpu], s[f"{kind}_recovery_cpu_s"]) for n, s in measured.items()}
        front = frontier(points) if points else []
        out[kind] = {"frontier": front, "falkirk_on_frontier": [n for n in front if summary[n]["system"] == "falkirk"]}
    return out


def backfill_means(doc: dict[str, Any]) -> None:
    """``cpu_mean_s`` for the configurations measured before it was kept: the mean over the window of the first
    driver's epochs (the only per-epoch list kept), and ``cpu_mean_of`` saying so; measured ones say ``drivers``
    (the median of the drivers' means). Then each point's ``verdict_mean``: the frontier by the mean."""
    for p in doc["points"]:
        warmup = doc["runs"][p.get("run", 0)].get("warmup", 2) if doc.get("runs") else 2
        for s in p["summary"].values():
            if s.get("cpu_mean_of") is None:
                if s.get("cpu_mean_s") is not None:
                    s["cpu_mean_of"] = "drivers"
                elif s.get("cpus"):
                    s["cpu_mean_s"] = statistics.fmean(window(s["cpus"], warmup))
                    s["cpu_mean_of"] = "first driver"
        p["verdict_mean"] = verdict(p["summary"], "cpu_mean_s")


def said(p: Point, name: str, res: dict[str, Any], d: int, drivers: int) -> str:
    rec = "" if "kill_recovery_s" not in res else (
        f", recovery (a) {res['kill_recovery_s']:.1f} s / {res['kill_recovery_cpu_s']:.1f} CPU-s, "
        f"(b) {res['fail_recovery_s']:.1f} s / {res['fail_recovery_cpu_s']:.1f} CPU-s")
    if res.get("kill_failure_cpu_s") is not None:
        rec += f", (a) by the journal {res['kill_failure_cpu_s']:.1f} CPU-s"
        if res.get("advice"):
            rec += f" (predicted {res['advice']['predicted']['advised']['recovery_cpu_s']:.1f})"
    return (f"{p.id:18} {name:18} cpu {res['cpu_median_s']:.2f} s/epoch (mean {res['cpu_mean_s']:.2f}, "
            f"driver {res['driver_cpu_median_s']:.3f}), "
            f"wall {res['wall_median_s']:.2f} s, {res['bytes_per_epoch'] / 1e6:.2f} MB/epoch{rec}, "
            f"identical {res['identical']} ({res['benchmark_s']:.0f} s, driver {d + 1} of {drivers}, "
            f"load {os.getloadavg()[0]:.1f})")
