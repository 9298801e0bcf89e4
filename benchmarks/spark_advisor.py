"""The regime advisor's predictions against a real run of the flagship (issue 33's targets, small scale).

0. A durable run of ``--warmup`` epochs (3) warms the JVM and Spark up.
1. ``Pipeline.profile``: the flagship with its declared regimes runs ``EPOCHS``
   epochs on a scratch root, ``--fail STEP`` failing after epoch
   ``EPOCHS/2 - 1`` (its recovery measures how fast epochs run again; with
   ``--profile-failures K``, after K epochs spread over the run, whose
   recoveries the profile pools); the costs come from its journal.
2. ``advise``: the advice for ``--failure-rate`` (each step failing alone).
3. The flagship runs again on fresh roots with the current and (if they
   differ) the advised regimes, ``--fail STEP`` failing after epoch
   ``EPOCHS - 2``.
   Each configuration runs ``--repeats`` times (3), each on a fresh root.
4. Measured against predicted, for each: the steady cost per epoch (the
   median over epochs 1..EPOCHS-3 of Σ step executions; in CPU less the
   JVM's JIT compilers', as the advisor prices it since 2026-11-28 — the
   figures with JIT are in ``each_with_jit`` and ``each_cpu_with_jit``), and the recovery's
   redone executions (and its replay/recompute wall time) against the
   model's price of that one failure at that boundary (its redo, restores
   and replays). The error is that of the median over the repeats; every
   repeat's figures are in the JSON (``each``), and per step the profile's
   ``compute`` beside the measured runs' median first execution
   (``steady_by_step``). One recovery is a handful of
   step executions, each of which varies by ±50 % between identical epochs
   on this machine, so a single recovery says little about the model.

The unit is the costs' (``unit`` in the JSON): CPU seconds of the process
tree per step execution, which a ``local`` master's journal records
(:mod:`falkirk.spark.pipeline.run.cpu`), priced with the ``cpu`` objective;
wall seconds where CPU was not recorded.

With ``--drivers N`` the measuring is done by N driver processes one after
another (each its own session and warm-up, the configurations alternated
``--repeats`` times), every figure the median of the drivers' medians; with
``--profiles P`` as well, P processes profile and the advice is priced from
the median of their costs (:meth:`Costs.median`): the same code profiled in
two processes here priced the steady epoch 22 % apart.

``--check``: the advisor checked from at least three independent profiles
on several pipelines, each profile's own advice and every prediction
against measured runs (:mod:`benchmarks.advisor_check`, its options).

Run: ``python benchmarks/spark_advisor.py [--epochs 9] [--failure-rate 0.05] [--fail cc] [--repeats 3]
[--drivers N [--profiles P]]`` or ``python benchmarks/spark_advisor.py --check [...]``;
writes ``benchmarks/results/spark_advisor.json`` with the load average. One
local session: the figures carry the machine's noise (wall time on a shared
2-core machine shows ±20 % between identical runs; CPU time less).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SIZES: dict[str, Any] = {"events_per_epoch": 3000, "queries_per_epoch": 40, "users": 200, "nodes": 800,
                         "cc_every": 3, "seed": 11}


def spent(x: Any, unit: str, *, jit: bool = True) -> float:
    """An execution's cost in ``unit``: CPU seconds of the process tree (``cpu``; ``jit=False``: less the JVM's JIT
    compilers', as the advisor prices steady work) or wall seconds."""
    if unit != "cpu":
        return float(x.seconds)
    return float(x.cpu if jit else x.cpu_less_jit)


def first_executions(result: Any, until: int) -> list[Any]:
    """The first executions of epochs 1..until-1 in ``result``'s journal (no redo)."""
    return [x for x in result.journal.executions if not x.redo and 0 < x.epoch < until]


def steady(result: Any, until: int, unit: str, *, jit: bool = False) -> float:
    """Median over epochs 1..until-1 of the summed cost (``unit``; CPU less JIT unless ``jit``) of each epoch's
    first executions."""
    per: dict[int, float] = {}
    for x in first_executions(result, until):
        per[x.epoch] = per.get(x.epoch, 0.0) + spent(x, unit, jit=jit)
    return statistics.median(per.values())


def steady_by_step(result: Any, until: int, unit: str) -> dict[str, float]:
    """Per step, the median over epochs 1..until-1 of its first executions' cost (``unit``, CPU less JIT): what
    the model's per-step ``compute`` (plus the writes each epoch's execution includes) predicts."""
    per: dict[str, list[float]] = {}
    for x in first_executions(result, until):
        per.setdefault(x.step, []).append(spent(x, unit, jit=False))
    return {n: statistics.median(xs) for n, xs in per.items()}


def predict(pipe: Any, costs: Any, regimes: dict[str, Any], fail: str, at: int) -> Any:
    """The advisor's prediction (:meth:`Pipeline.predict <falkirk.spark.Pipeline.predict>`) of ``fail`` striking
    between epochs ``at`` and ``at + 1`` (what ``STEP@at:after`` injects) under ``regimes``."""
    own = {n: s.regime for n, s in pipe.steps.items()}
    return pipe.predict(fail, regimes={n: r for n, r in regimes.items() if r != own.get(n)}, at=at, costs=costs)


def one_run(pipe: Any, unit: str, names: tuple[str, ...], epochs: int, fail: str, at: int) -> dict[str, Any]:
    """``pipe`` run for ``epochs`` with ``fail`` injected after ``at``: its steady cost and its recovery's."""
    result = pipe.run(epochs, fail=f"{fail}@{at}:after")
    recovery = [r for r in result.journal.recoveries if not r.restart][0]
    return {
        "steady": steady(result, at, unit),
        "steady_with_jit": steady(result, at, unit, jit=True),
        "steady_by_step": steady_by_step(result, at, unit),
        "replay_recompute": recovery.phases()["replay/recompute"],  # wall time, whatever the unit
        # CPU of the process tree from the failure until every step was back (unit cpu), less the JIT's as the
        # model prices an in-driver recovery, and with it
        "recovery_cpu": recovery.cpu_less_jit,
        "recovery_cpu_with_jit": recovery.cpu_seconds,
        "redo": {n: sum(spent(x, unit, jit=False) for x in result.journal.executions
                        if x.step == n and x.redo and x.recovery == recovery.index) for n in names},
    }


def measure(make: Callable[[int], Any], costs: Any, regimes: dict[str, Any], advice: Any, which: str,
            epochs: int, fail: str, at: int, repeats: int) -> dict[str, Any]:
    """Run ``make(i)`` (the flagship with ``regimes`` on a fresh root) ``repeats`` times in this driver with
    ``fail`` injected after ``at``: steady cost and recovery, measured (median over the repeats, and each) and
    predicted."""
    runs: list[dict[str, Any]] = []
    prediction = None
    for i in range(repeats):
        pipe = make(i)
        if prediction is None:
            prediction = predict(pipe, costs, regimes, fail, at)
        runs.append(one_run(pipe, costs.unit, tuple(pipe.order), epochs, fail, at))
    assert prediction is not None
    return summary([runs], prediction, regimes, getattr(advice, which), costs)


def summary(groups: list[list[dict[str, Any]]], prediction: Any, regimes: dict[str, Any], totals: Any,
            costs: Any) -> dict[str, Any]:
    """Measured against predicted for runs grouped by driver process: each measured number is the median over the
    drivers of each driver's median over its runs (one driver: the median over the runs); every run's figures
    are kept (``each``), and with several drivers each driver's medians and their errors (``drivers``). The
    predictions (a :class:`~falkirk.spark.Prediction`) carry their standard errors (``se``)."""
    med = statistics.median

    def pooled(f: Callable[[dict[str, Any]], float]) -> float:
        return med(med(f(r) for r in g) for g in groups)

    runs = [r for g in groups for r in g]
    steady_measured = pooled(lambda r: r["steady"])
    rec_measured = pooled(lambda r: r["replay_recompute"])
    rec_cpu = pooled(lambda r: r["recovery_cpu"] or 0.0)
    predicted = float(prediction.recovery.value)
    out = {
        "regimes": {n: r.describe() if hasattr(r, "describe") else r for n, r in regimes.items()},
        "repeats": len(groups[0]),
        "steady": {"predicted": totals.steady, "se": float(totals.se.get("steady", 0.0)),
                   "measured": steady_measured,
                   "error": (steady_measured - totals.steady) / totals.steady,
                   "each": [r["steady"] for r in runs],
                   # the same executions' CPU with the JVM's JIT compilers' (what the advisor no longer prices)
                   "each_with_jit": [r["steady_with_jit"] for r in runs]},
        "recovery": {"predicted": predicted, "se": float(prediction.recovery.se),
                     "measured_replay_recompute": rec_measured,
                     "measured_redo_executions": pooled(lambda r: sum(r["redo"].values())),
                     "measured_cpu": rec_cpu,
                     "each_cpu": [r["recovery_cpu"] for r in runs],
                     "each_cpu_with_jit": [r["recovery_cpu_with_jit"] for r in runs],
                     "error": None if not predicted else (
                         (rec_cpu if costs.unit == "cpu" else rec_measured) - predicted) / predicted},
        "recovery_by_step": {n: {"predicted": float(value),
                                 "measured_redo": pooled(lambda r, n=n: r["redo"][n]),
                                 "each": [r["redo"][n] for r in runs]}
                             for n, value in prediction.by_step.items()},
        # per step: the profile's compute (what a redone epoch is priced from, before the recompute factor)
        # against the median first execution of the measured runs' steady epochs
        "steady_by_step": {n: {"profile_compute": costs.nodes[n].compute if n in costs.nodes else None,
                               "measured": pooled(lambda r, n=n: r["steady_by_step"].get(n, 0.0)),
                               "each": [r["steady_by_step"].get(n) for r in runs]}
                           for n in prediction.by_step},
    }
    if len(groups) > 1:
        out["drivers"] = [{"steady": med(r["steady"] for r in g), "recovery_cpu": med(r["recovery_cpu"] or 0.0
                                                                                         for r in g)}
                          for g in groups]
        for key, predicted_value in (("steady", totals.steady), ("recovery_cpu", predicted)):
            for d in out["drivers"]:
                d[f"{key}_error"] = (d[key] - predicted_value) / predicted_value if predicted_value else None
    return out


def main() -> None:
    if "--check" in sys.argv[1:]:  # the check from independent profiles, on several pipelines (advisor_check.py)
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from benchmarks.advisor_check import main as check

        check([a for a in sys.argv[1:] if a != "--check"])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--failure-rate", type=float, default=0.05)
    parser.add_argument("--fail", default="cc")
    parser.add_argument("--warmup", type=int, default=3, help="epochs of a durable warm-up run before the profile")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs of each configuration (medians)")
    parser.add_argument("--drivers", type=int, default=1,
                        help="driver processes measuring (each its own session, warm-up and --repeats runs of each "
                             "configuration); the figures are the medians of the drivers' medians")
    parser.add_argument("--profile-failures", type=int, default=1,
                        help="failures of --fail the profile injects, spread over its epochs (its recompute factor "
                             "pools their recoveries)")
    parser.add_argument("--profiles", type=int, default=1,
                        help="driver processes that profile (this one and P-1 more, each its own session and "
                             "warm-up); the advice is priced from the median of their costs (Costs.median)")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") / "spark_advisor.json"))
    parser.add_argument("--phase", choices=["measure", "profile"], help=argparse.SUPPRESS)  # --drivers, --profiles
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profiles > 1 and args.drivers < 2:
        parser.error("--profiles P > 1 stops this process's session: measure with --drivers N > 1")
    if args.phase == "measure":
        measuring_driver(json.loads(Path(args.spec).read_text()))
        return
    if args.phase == "profile":
        profiling_driver(json.loads(Path(args.spec).read_text()))
        return

    from falkirk.spark import Costs, local_session
    from falkirk.spark.pipeline.tools.flagship import build

    load0 = os.getloadavg()
    spark = local_session()
    at = args.epochs - 2
    with tempfile.TemporaryDirectory(prefix="falkirk-advisor-") as tmp:
        build(Path(tmp) / "warm-up", spark, **SIZES).run(args.warmup)  # the JVM's and Spark's warm-up, outside
        t0 = time.perf_counter()
        profiled = build(Path(tmp) / "profile", spark, **SIZES)
        profile_fail = [f"{args.fail}@{e}:after" for e in profile_failures(args.epochs, args.profile_failures)]
        costs = profiled.profile(epochs=args.epochs, fail=profile_fail)
        profile_seconds = time.perf_counter() - t0
        each_profile = [costs.to_json()]
        if args.profiles > 1:  # more profiles, each in a process of its own, pooled by their median
            spark.stop()
            each_profile += [child(Path(tmp) / f"profile-{i}", "profile",
                                   {"epochs": args.epochs, "warmup": args.warmup, "fail": profile_fail})["costs"]
                             for i in range(1, args.profiles)]
            costs = Costs.median([Costs.from_json(c) for c in each_profile])
        advice = profiled.advise(args.failure_rate, costs=costs, objective="cpu" if costs.unit == "cpu" else "wall")
        print(advice.table())
        out: dict[str, Any] = {
            "sizes": SIZES, "epochs": args.epochs, "failure_rate": args.failure_rate, "fail": f"{args.fail}@{at}:after",
            "unit": costs.unit, "warmup": args.warmup, "load_average_start": load0,
            "profile_fail": profile_fail,
            "profile_steady_measured": steady_of_root(profiled, args.epochs, costs.unit),
            "profile_seconds": profile_seconds,
            "advised_regimes": {n: r.describe() for n, r in advice.regimes().items()},
            "totals": {"current": advice.current.to_json(), "advised": advice.advised.to_json()},
            "drivers": args.drivers, "profiles": args.profiles,
        }
        current = {n: s.regime for n, s in profiled.steps.items()}
        # each profile's steady epoch as the model prices the current regimes (Σ compute + what each persists)
        out["each_profile_steady"] = [predict(profiled, Costs.from_json(c), current, args.fail, at).steady.value
                                      for c in each_profile]
        advised = {**current, **advice.regimes()} if advice.regimes() else None
        if args.drivers <= 1:
            out["current"] = measure(lambda i: build(Path(tmp) / f"current-{i}", spark, **SIZES), costs, current,
                                     advice, "current", args.epochs, args.fail, at, args.repeats)
            if advised is not None:
                out["advised"] = measure(
                    lambda i: build(Path(tmp) / f"advised-{i}", spark, regimes=advice.regimes(), **SIZES), costs,
                    advised, advice, "advised", args.epochs, args.fail, at, args.repeats)
        else:
            if args.profiles <= 1:
                spark.stop()  # the measuring drivers have the machine to themselves
            groups = drivers(Path(tmp), args, at, costs.unit, out["advised_regimes"] if advised is not None else None)
            for which, regimes in (("current", current), ("advised", advised)):
                if regimes is not None:
                    out[which] = summary(groups[which], predict(profiled, costs, regimes, args.fail, at), regimes,
                                         getattr(advice, which), costs)
        out["costs"] = costs.to_json()
        out["load_average_end"] = os.getloadavg()
    print(json.dumps({k: v for k, v in out.items() if k != "costs"}, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2, sort_keys=True))


def child(where: Path, phase: str, spec: dict[str, Any]) -> dict[str, Any]:
    """This script as a driver process of its own (``--phase``), in ``where``: what it wrote to ``out.json``."""
    where.mkdir(parents=True)
    path = where / "spec.json"
    path.write_text(json.dumps({**spec, "dir": str(where)}))
    with (where / "driver.log").open("w") as log:
        p = subprocess.run([sys.executable, __file__, "--phase", phase, "--spec", str(path)],
                           stdout=log, stderr=subprocess.STDOUT, check=False)
    if p.returncode != 0:
        tail = (where / "driver.log").read_text()[-3000:]
        raise SystemExit(f"{phase} driver in {where} exited with {p.returncode}:\n{tail}")
    return dict(json.loads((where / "out.json").read_text()))


def drivers(tmp: Path, args: argparse.Namespace, at: int, unit: str, advised: dict[str, str] | None,
            ) -> dict[str, list[list[dict[str, Any]]]]:
    """``args.drivers`` driver processes, one after another, each measuring the current regimes and (if any)
    ``advised`` ``args.repeats`` times, alternately: their runs by configuration, grouped by driver."""
    out: dict[str, list[list[dict[str, Any]]]] = {"current": [], "advised": []}
    for d in range(args.drivers):
        t0 = time.perf_counter()
        runs = child(tmp / f"driver-{d}", "measure", {"epochs": args.epochs, "fail": args.fail, "at": at,
                                                       "repeats": args.repeats, "warmup": args.warmup,
                                                       "advised": advised, "unit": unit})
        for which, rs in runs.items():
            out[which].append(rs)
        print(f"driver {d}: {time.perf_counter() - t0:.0f} s, steady "
              + ", ".join(f"{w} {statistics.median(r['steady'] for r in rs):.3f}" for w, rs in runs.items()),
              flush=True)
    return out


def profiling_driver(spec: dict[str, Any]) -> None:
    """One more profile (``--profiles``): its own session and warm-up, then the profile; its costs to ``out.json``."""
    from falkirk.spark import local_session
    from falkirk.spark.pipeline.tools.flagship import build

    spark = local_session()
    d = Path(spec["dir"])
    build(d / "warm-up", spark, **SIZES).run(spec["warmup"])
    costs = build(d / "profile", spark, **SIZES).profile(epochs=spec["epochs"], fail=spec["fail"])
    (d / "out.json").write_text(json.dumps({"costs": costs.to_json()}))


def measuring_driver(spec: dict[str, Any]) -> None:
    """One measuring driver (``--drivers``): its own session and warm-up, then ``repeats`` rounds of the current
    and (if any) the advised regimes, each on a fresh root; every run's figures to ``out.json``."""
    from falkirk.spark import local_session
    from falkirk.spark.pipeline.tools.flagship import build

    spark = local_session()
    d = Path(spec["dir"])
    build(d / "warm-up", spark, **SIZES).run(spec["warmup"])
    configs = {"current": None, **({"advised": spec["advised"]} if spec["advised"] else {})}
    runs: dict[str, list[dict[str, Any]]] = {w: [] for w in configs}
    for i in range(spec["repeats"]):
        for which, regimes in configs.items():
            pipe = build(d / f"{which}-{i}", spark, regimes=regimes, **SIZES)  # None: as declared
            runs[which].append(one_run(pipe, spec["unit"], tuple(pipe.order),
                                       spec["epochs"], spec["fail"], spec["at"]))
    (d / "out.json").write_text(json.dumps(runs))


def profile_failures(epochs: int, k: int) -> list[int]:
    """The epochs after which the profile fails: ``epochs // 2 - 1`` for one failure, else ``k`` spread evenly
    over epochs 1 .. epochs - 2.

    >>> profile_failures(9, 1), profile_failures(9, 3), profile_failures(12, 4)
    ([3], [1, 4, 7], [1, 4, 7, 10])
    """
    if k <= 1:
        return [epochs // 2 - 1]
    return sorted({1 + round(i * (epochs - 3) / (k - 1)) for i in range(k)})


def steady_of_root(pipe: Any, epochs: int, unit: str) -> float:
    """The steady cost per epoch (``unit``; CPU less JIT) of the run recorded under ``pipe``'s root (its execution
    records)."""
    per: dict[int, float] = {}
    for step in pipe.order:
        for name in pipe.location.listdir(f"journal/{step}"):
            if name.endswith(".json") and name[:-5].isdigit():
                doc = json.loads(pipe.location.read_bytes(f"journal/{step}/{name}"))
                if 0 < doc["epoch"] < epochs:  # a redone epoch's record keeps its first execution's cost
                    first = (doc["first_cpu"] - (doc.get("first_jit") or 0.0) if unit == "cpu"
                             else doc.get("first_seconds") or doc["seconds"])
                    per[doc["epoch"]] = per.get(doc["epoch"], 0.0) + float(first)
    return statistics.median(per.values())


if __name__ == "__main__":
    main()
