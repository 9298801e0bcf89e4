"""YSB's and the mixed application's numbers from one paced run's clocks (see :mod:`.ysb`, whose docstring
defines them): per-epoch latency, CPU and service time, window latency, steady figures, what a failure cost,
and the issue's targets.

A run is described by ``commits`` (``epoch → when its output was committed``, wall clock), ``releases``
(``epoch → when its input was released``), ``series`` (the driver tree's CPU over time, :class:`.ysb_input.CpuSampler`)
and ``t0``. Everything else is derived here, so both systems are measured the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .ysb_input import caught_up, cpu_at, percentile, window_latency

#: "caught up": the latency is back at most this factor of the failure-free run's steady p99 for good
SLACK = 1.2


def per_epoch(commits: Mapping[int, float], releases: Mapping[int, float],
              series: Sequence[tuple[float, float]]) -> dict[str, dict[int, float]]:
    """``latency`` (commit − release), ``service`` (commit − the later of the release and the previous commit:
    the time the epoch had the system to itself) and ``cpu`` (the tree's CPU between the previous commit and
    this one; epochs ``>= 1``) of each committed epoch; ``cpu`` split into ``cpu_service`` (during the service
    time: the epoch's own work up to its commit) and ``cpu_between`` (from the previous commit until the epoch
    was released or that commit: what a system does after a commit — falkirk's deferred states — and idling)."""
    lat = {e: commits[e] - releases[e] for e in sorted(commits) if e in releases}
    service = {e: commits[e] - max(releases[e], commits.get(e - 1, releases[e])) for e in lat}
    cpu = {e: cpu_at(series, commits[e]) - cpu_at(series, commits[e - 1]) for e in sorted(commits)
           if e - 1 in commits and series}
    busy = {e: cpu_at(series, commits[e]) - cpu_at(series, commits[e] - service[e]) for e in cpu if e in service}
    return {"latency": lat, "service": service, "cpu": cpu, "cpu_service": busy,
            "cpu_between": {e: cpu[e] - busy[e] for e in busy}}


def stats(values: Any) -> dict[str, float | None]:
    xs = list(values)
    return {"p50": percentile(xs, 50), "p99": percentile(xs, 99), "max": max(xs, default=None), "n": len(xs)}


def steady(run: Mapping[str, Any], warmup: int, until: int | None = None) -> dict[str, Any]:
    """A run's steady figures over epochs ``warmup..until-1``: CPU per epoch (median), service time (median),
    epoch latency and window latency (p50, p99) — windows closed by those epochs."""
    keep = lambda d: {e: v for e, v in d.items() if e >= warmup and (until is None or e < until)}  # noqa: E731
    lat, cpu, service = keep(run["latency"]), keep(run["cpu"]), keep(run["service"])
    wins = [v for k, v in run["window_latency"].items() if run["window_epoch"][k] in lat]
    split = {k: keep(run.get(k, {})) for k in ("cpu_service", "cpu_between")}  # absent in older results
    return {"cpu_median_s": statistics.median(cpu.values()) if cpu else None,
            "cpu_mean_s": statistics.fmean(cpu.values()) if cpu else None,
            **{f"{k}_median_s": statistics.median(v.values()) if v else None for k, v in split.items()},
            "service_median_s": statistics.median(service.values()) if service else None,
            "latency": stats(lat.values()), "window_latency": stats(wins)}


def describe_run(commits: Mapping[int, float], releases: Mapping[int, float], series: Sequence[tuple[float, float]],
                 t0: float, updates: Mapping[int, Any], size: Mapping[str, Any]) -> dict[str, Any]:
    """Everything per epoch and per window of one run (JSON-ready: epochs as keys)."""
    out: dict[str, Any] = per_epoch(commits, releases, series)
    wl = window_latency(updates, commits, t0, size)
    last = {f"{r[0]} {int(r[1])}": e for e in sorted(updates) for r in updates[e]}
    out.update(window_latency=wl, window_epoch={k: last[k] for k in wl}, commits=dict(commits),
               releases=dict(releases), t0=t0)
    return out


def revive(run: Mapping[str, Any]) -> dict[str, Any]:
    """A run read back from JSON: epochs are keys again (JSON made them strings)."""
    out = dict(run)
    for k in ("latency", "service", "cpu", "cpu_service", "cpu_between", "commits", "releases"):
        out[k] = {int(e): v for e, v in run.get(k, {}).items()}
    return out


def after_failure(run: Mapping[str, Any], ref: Mapping[str, Any], at: int, warmup: int,
                  extra_cpu: float = 0.0, last: int | None = None) -> dict[str, Any]:
    """What a failure at epoch ``at`` cost, against the failure-free ``ref`` of the same configuration:
    the failed epoch's service time and latency, epochs until caught up (:data:`SLACK`), the excess CPU — the
    run's CPU from the commit of ``at - 1`` to the last epoch's (plus ``extra_cpu``: what a killed driver spent
    that no sample after it shows) less ``ref``'s over the same epochs — and the latency p99 from ``at`` on."""
    last = max(run["commits"]) if last is None else last
    bound = SLACK * (steady(ref, warmup)["latency"]["p99"] or 0.0)
    lat = run["latency"]
    return {"failed_epoch": at, "failed_epoch_service_s": run["service"].get(at),
            "failed_epoch_latency_s": lat.get(at),
            "epochs_until_caught_up": caught_up({e: v for e, v in lat.items() if e <= last}, at, bound),
            "caught_up_bound_s": bound,
            "latency_after": stats(v for e, v in lat.items() if e >= at),
            "excess_cpu_s": span_cpu(run, at - 1, last) + extra_cpu - span_cpu(ref, at - 1, last)}


def span_cpu(run: Mapping[str, Any], a: int, b: int) -> float:
    """CPU between the commits of epochs ``a`` and ``b`` (the sum of the per-epoch figures ``a+1..b``)."""
    return sum(v for e, v in run["cpu"].items() if a < e <= b)


def targets(summary: Mapping[str, Mapping[str, Any]], stream: str | None = None) -> dict[str, Any]:
    """Issue 53's targets for YSB, each falkirk configuration against the micro-batch stream at its strongest:
    per figure the best of the stream's micro-batch configurations measured (``streaming``, and
    ``streaming-c1`` where it ran: the same query, its JVM with the client JIT only), or ``stream`` alone.
    ``stream_config`` says which configuration each figure was compared with."""
    names = [stream] if stream is not None else [
        n for n, v in summary.items() if v.get("system") == "streaming" and n != "streaming-rtm"]
    streams = {n: summary[n] for n in names if n in summary}
    if not streams:
        return {}
    out: dict[str, Any] = {}

    def le(a: Any, b: Any) -> bool | None:
        return None if a is None or b is None else a <= b

    def later(a: int | None, b: int | None) -> bool | None:  # "caught up no later": never (None) is the latest
        return (b is None) if a is None else (True if b is None else a <= b)

    def missing_last(v: float | None) -> float:  # lower is better; not measured (never caught up) is worst
        return float("inf") if v is None else v

    figures = {  # name: (its value in a configuration's summary, how falkirk's is compared with the stream's)
        "steady_p99_latency": (lambda v: v["steady"]["latency"]["p99"], le),
        "steady_cpu_per_epoch": (lambda v: v["cpu_median_s"], le),
        "exception_caught_up": (lambda v: v.get("exception", {}).get("epochs_until_caught_up"), later),
        "exception_excess_cpu": (lambda v: v.get("exception", {}).get("excess_cpu_s"), le),
        "kill_first_output": (lambda v: v.get("kill", {}).get("first_output_s"), le),
        "kill_excess_cpu": (lambda v: v.get("kill", {}).get("excess_cpu_s"), le),
    }
    best: dict[str, tuple[str, Any]] = {}
    for figure, (value, _) in figures.items():
        best[figure] = min(((n, value(v)) for n, v in streams.items()), key=lambda nv: missing_last(nv[1]))
    for n, f in summary.items():
        if f.get("system") != "falkirk":
            continue
        out[n] = {figure: compare(value(f), best[figure][1]) for figure, (value, compare) in figures.items()}
        out[n]["stream_config"] = {figure: best[figure][0] for figure in figures}
        if "streaming-rtm" in summary:
            out[n]["steady_p99_latency_vs_real_time_mode"] = le(
                f["steady"]["latency"]["p99"], summary["streaming-rtm"]["steady"]["latency"]["p99"])
    return out
