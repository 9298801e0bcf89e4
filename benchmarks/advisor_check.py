"""The regime advisor checked from independent profiles against measured runs, pipeline by pipeline (issue 59).

For each pipeline of ``--pipelines`` (a :class:`Target`):

1. ``--profiles P`` (at least 3) driver processes each profile it on a root
   of their own, one after another: a fresh SparkSession, then
   :meth:`Pipeline.profile <falkirk.spark.Pipeline.profile>` — its epochs
   with the target's failures injected, a restart on the same root, and
   (``--session``, the default) a driver's session start measured in a
   process of its own.
2. Each profile **alone** advises (``advise(--failure-rate)``, each step
   failing alone, and the driver): its regimes, its verdict, its saving with
   its uncertainty. So does their pool (:meth:`Costs.median`), from which
   the check's runs are chosen. "Same advice" means the same regimes from
   every profile.
3. Each profile, and the pool, predicts for the current regimes (and the
   pool's advised ones, where they differ), with ± two standard errors:
   the steady cost per epoch; one failure of the target's step ``fail``
   after epoch ``at`` (``STEP@at:after``: an in-driver recovery); one driver
   failure, the driver killed before ``kill`` starts epoch ``at + 1``
   (``STEP@at+1:kill``) and a new driver process started on the root.
4. ``--drivers D`` measuring driver processes, one after another, each run
   every configuration ``--repeats R`` times on fresh roots with the step
   failure (steady: the median over epochs ``1 .. at-1`` of the epoch's
   summed step executions, CPU less the JVM's JIT, as the advisor prices
   it; the recovery: ``Recovery.cpu_less_jit``, from the failure until every
   step was back); then, ``D`` times per configuration, a driver is killed
   and a new process restarts it (the driver failure: its process tree's
   CPU from its start — imports, JVM, session, the executor rebuilt from the
   root, the plan, validation, restores and redone executions, JIT
   included: a new driver pays it — until every step was back). Each
   measured figure is the median over the drivers of each driver's median.
5. Every prediction against its measurement: ``(measured − predicted) ÷
   predicted``, within ``--tolerance`` (±25 %)?

CPU seconds of the process tree (a ``local`` master). Results:
``benchmarks/results/spark_advisor_check.json`` (``--out``) with the load
average before and after; a run whose load average exceeded 2.5 is marked
``provisional``.

Pipelines: ``flagship`` (:mod:`falkirk.spark.pipeline.tools.flagship`),
``w4`` (the matrix's W4, :mod:`benchmarks.spark_matrix.w4`), and any other
name ``N`` as ``benchmarks/spark_matrix/N.py`` defining ``advisor_target(size)
-> Target`` — e.g. ``ysb`` once ``benchmarks/spark_matrix/ysb.py`` lands (or
``module:function``).

Run: ``python benchmarks/spark_advisor.py --check [--pipelines flagship,w4,ysb] [--size quick|full]
[--profiles 3] [--drivers 3] [--repeats 2] [--failure-rate 0.05]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attrs import frozen

#: a run whose load average (1 min, at its start or end) exceeds this is provisional
QUIET = 2.5
#: where the parent declares a pipeline to price it (nothing is run or written there)
DECLARED: Any = "memory://falkirk-advisor-check/declared"


@frozen
class Target:
    """A pipeline the check runs: ``build(root, spark, regimes)`` declares it on a fresh ``root`` (``regimes``:
    ``{step: Regime}`` over its own, or ``None``); it runs ``epochs`` epochs; ``fail`` fails after epoch ``at``;
    the driver is killed before ``kill`` starts epoch ``at + 1``; the profile injects ``profile_fail``."""

    name: str
    build: Callable[[Any, Any, dict[str, Any] | None], Any]
    epochs: int
    at: int
    fail: str
    kill: str
    profile_fail: tuple[str, ...] = ()


def flagship(size: str) -> Target:
    """The Figure 1 application (``cc`` fails; the driver is killed in ``cc``)."""
    from falkirk.spark.pipeline.tools.flagship import build

    sizes: dict[str, Any] = {"events_per_epoch": 3000, "queries_per_epoch": 40, "users": 200, "nodes": 800,
                             "cc_every": 3, "seed": 11}
    epochs = 9 if size == "quick" else 14

    def make(root: Path, spark: Any, regimes: dict[str, Any] | None) -> Any:
        return build(root, spark, regimes=regimes, **sizes)

    return Target("flagship", make, epochs, epochs - 2, "cc", "cc",
                  tuple(f"cc@{e}:after" for e in (1, epochs // 2, epochs - 2)))


def w4(size: str) -> Target:
    """The matrix's W4: a heavy logged aggregate, a stateful branch (``totals``) and an exactly-once SQLite sink
    (``sink`` fails; the driver is killed in ``totals``)."""
    from .spark_matrix.configs import SIZES
    from .spark_matrix.w4 import falkirk_w4

    dims = dict(SIZES["quick" if size == "quick" else "default"]["W4"])
    epochs = int(dims["epochs"])

    def make(root: Path, spark: Any, regimes: dict[str, Any] | None) -> Any:
        pipe = falkirk_w4(root, spark, dims, "lazy")
        return pipe.apply(regimes) if regimes else pipe

    return Target("w4", make, epochs, epochs - 2, "sink", "totals",
                  tuple(f"sink@{e}:after" for e in (1, epochs // 2)))


TARGETS: dict[str, Callable[[str], Target]] = {"flagship": flagship, "w4": w4}


def target(name: str, size: str) -> Target:
    """The :class:`Target` named ``name`` at ``size``: a built-in one, ``benchmarks/spark_matrix/NAME.py``'s
    ``advisor_target(size)``, or ``module:function``."""
    if name in TARGETS:
        return TARGETS[name](size)
    module, colon, function = name.partition(":")
    module = module if colon else f"benchmarks.spark_matrix.{module}"
    try:
        found = getattr(importlib.import_module(module), function or "advisor_target")
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"pipeline {name!r}: no built-in target, and {module}.{function or 'advisor_target'} "
                         f"cannot be loaded ({exc}); a pipeline plugs in by defining advisor_target(size) -> "
                         "benchmarks.advisor_check.Target in benchmarks/spark_matrix/<name>.py") from None
    got: Target = found(size)
    return got


# -- predictions -------------------------------------------------------------------------------------------------
def predictions(t: Target, costs: Any, regimes: dict[str, Any]) -> dict[str, Any]:
    """What ``costs`` predict for ``regimes`` (over the pipeline's own): the steady cost, the step failure and the
    driver failure, each ``{"value", "se"}``; the driver's restart parts too."""
    pipe = t.build(DECLARED, None, None)
    step = pipe.predict(t.fail, regimes=regimes, at=t.at, costs=costs)
    driver = pipe.predict("driver", regimes=regimes, at=(t.at, t.kill), costs=costs)
    return {"steady": step.steady.to_json(), "step_failure": step.recovery.to_json(),
            "driver_failure": driver.recovery.to_json(), "restart_parts": dict(driver.restart_parts),
            # where a measured run is expected: ± two standard errors widened by the model's own error
            "range": {"steady": list(step.range("steady")), "step_failure": list(step.range()),
                      "driver_failure": list(driver.range())}}


def advice_of(t: Target, costs: Any, rate: float) -> dict[str, Any]:
    """The advice ``costs`` alone give: regimes, verdict, saving and its uncertainty."""
    pipe = t.build(DECLARED, None, None)
    advice = pipe.advise(rate, failures=["each-step", "driver"], costs=costs)
    return {"regimes": {n: r.describe() for n, r in advice.regimes().items()}, "verdict": advice.verdict,
            "saving": advice.saving.to_json(), "current_total": advice.current.total, "table": advice.table()}


# -- driver processes --------------------------------------------------------------------------------------------
def child(phase: str, spec: dict[str, Any], where: Path, *, expect: int = 0) -> dict[str, Any]:
    """This module as a driver process of its own (``--phase``) in ``where``: what it wrote to ``out.json``."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{phase}.spec.json"
    path.write_text(json.dumps({**spec, "dir": str(where)}))
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root),
                                                       os.environ.get("PYTHONPATH", "")])}
    with (where / f"{phase}.log").open("w") as log:
        p = subprocess.run([sys.executable, "-m", "benchmarks.advisor_check", "--phase", phase, "--spec", str(path)],
                           stdout=log, stderr=subprocess.STDOUT, check=False, env=env, cwd=root)
    leftover(where / f"{phase}.pids")
    if p.returncode != expect:
        tail = (where / f"{phase}.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"{phase} driver in {where} exited with {p.returncode}, expected {expect}:\n{tail}")
    out = where / f"{phase}.out.json"
    return dict(json.loads(out.read_text())) if out.exists() else {}


def leftover(pids: Path) -> None:
    """Kill the JVM of a driver process that was killed (it normally exits when its Python parent dies)."""
    try:
        jvm = int(json.loads(pids.read_text())["jvm"])
    except (OSError, ValueError, KeyError):
        return
    for _ in range(50):
        try:
            os.kill(jvm, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(jvm, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _session(spec: dict[str, Any], phase: str) -> Any:
    from falkirk.spark import local_session

    spark = local_session()
    jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    Path(spec["dir"], f"{phase}.pids").write_text(json.dumps({"jvm": jvm, "driver": os.getpid()}))
    return spark


def _regimes(described: dict[str, Any] | None) -> dict[str, Any] | None:
    from falkirk.spark.pipeline.declare.regimes import from_description

    return {n: from_description(n, d) for n, d in described.items()} if described else None


def phase_profile(spec: dict[str, Any]) -> None:
    """A profiling driver: its own session, the profile (restart and session start included), its costs out."""
    t = target(spec["target"], spec["size"])
    spark = _session(spec, "profile")
    pipe = t.build(Path(spec["dir"]) / "root", spark, None)
    t0 = time.perf_counter()
    costs = pipe.profile(epochs=t.epochs, fail=list(t.profile_fail), restart=True, session=spec["session"])
    Path(spec["dir"], "profile.out.json").write_text(json.dumps({"costs": costs.to_json(),
                                                                 "seconds": time.perf_counter() - t0}))


def steady_of(result: Any, until: int) -> float:
    """Median over epochs ``1 .. until-1`` of the summed first executions, CPU less the JIT (else wall)."""
    per: dict[int, float] = {}
    for x in result.journal.executions:
        if not x.redo and 0 < x.epoch < until:
            per[x.epoch] = per.get(x.epoch, 0.0) + float(x.seconds if x.cpu is None else x.cpu_less_jit)
    return statistics.median(per.values())


def phase_measure(spec: dict[str, Any]) -> None:
    """A measuring driver: each configuration ``repeats`` times on fresh roots with the step failure."""
    t = target(spec["target"], spec["size"])
    spark = _session(spec, "measure")
    out: dict[str, list[dict[str, Any]]] = {w: [] for w in spec["configs"]}
    for i in range(spec["repeats"]):
        for which, described in spec["configs"].items():
            pipe = t.build(Path(spec["dir"]) / f"{which}-{i}", spark, _regimes(described))
            result = pipe.run(t.epochs, fail=f"{t.fail}@{t.at}:after")
            rec = next(r for r in result.journal.recoveries if not r.restart)
            out[which].append({"steady": steady_of(result, t.at), "step_failure": rec.cpu_less_jit,
                               "step_failure_wall": rec.seconds})
    Path(spec["dir"], "measure.out.json").write_text(json.dumps(out))


def phase_kill(spec: dict[str, Any]) -> None:
    """A driver killed (SIGKILL) before ``kill`` starts epoch ``at + 1``."""
    t = target(spec["target"], spec["size"])
    spark = _session(spec, "kill")
    pipe = t.build(Path(spec["root"]), spark, _regimes(spec["regimes"]))
    pipe.run(t.epochs, fail=f"{t.kill}@{t.at + 1}:kill")
    raise SystemExit("the driver was not killed")


def phase_restart(spec: dict[str, Any]) -> None:
    """The new driver after a kill: its process tree's CPU from its start until every step was back."""
    from falkirk.spark.pipeline.run.cpu import TreeMeter

    meter = TreeMeter()
    c0, t0 = meter.read(), time.perf_counter()
    t = target(spec["target"], spec["size"])
    spark = _session(spec, "restart")
    c1 = meter.read()
    pipe = t.build(Path(spec["root"]), spark, _regimes(spec["regimes"]))
    result = pipe.run(t.epochs)
    rec = next(r for r in result.journal.recoveries if r.restart)
    assert c0 is not None and c1 is not None and rec.cpu_started is not None and rec.cpu_seconds is not None
    redo = [x for x in result.journal.executions if x.recovery == rec.index and x.redo]
    Path(spec["dir"], "restart.out.json").write_text(json.dumps({
        "driver_failure": rec.cpu_started + rec.cpu_seconds - c0[0],
        "session": c1[0] - c0[0], "redo": sum(x.cpu or 0.0 for x in redo),
        "wall": (rec.finished or time.perf_counter()) - t0, "phases": rec.phases()}))


# -- the parent ----------------------------------------------------------------------------------------------------
#: CPU seconds are counted in /proc's clock ticks: two figures closer than half a tick are the same figure
TICK = 0.01


def error(predicted: float, measured: float | None) -> float | None:
    """``(measured − predicted) ÷ predicted``; a prediction of 0 (to a tick) has error 0 when the measurement
    is 0 too and none (``None``: no relative error exists) when it is not; ``None`` when nothing was measured."""
    if measured is None:
        return None
    if abs(predicted) < TICK / 2:
        return 0.0 if abs(measured) < TICK / 2 else None
    return (measured - predicted) / predicted


def score(out: dict[str, Any], tolerance: float) -> None:
    """Each profile's and the pool's predictions against ``out["measured"]``: errors, within ``tolerance``,
    inside ± 2 s.e., inside the range."""
    axes = ("steady", "step_failure", "driver_failure")
    for who in [*out["profiles"], out["pooled"]]:
        who["errors"] = {w: {axis: error(who["predicted"][w][axis]["value"], out["measured"][w][axis])
                             for axis in axes} for w in out["measured"]}
        who["within"] = all(e is not None and abs(e) <= tolerance for w in who["errors"].values()
                            for e in w.values())
        # is each measurement inside what the prediction states: ± 2 s.e. alone, and its range (+ model error)?
        who["inside_se"] = {w: {axis: inside(who["predicted"][w][axis], out["measured"][w][axis])
                                for axis in axes} for w in out["measured"]}
        who["inside_range"] = {w: {axis: inside(who["predicted"][w]["range"][axis], out["measured"][w][axis])
                                   for axis in axes} for w in out["measured"]}


def check_target(t: Target, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Steps 1–5 of the module docstring for one pipeline."""
    from falkirk.spark import Costs

    t0 = time.perf_counter()
    profiles = [Costs.from_json(child("profile", {"target": t.name, "size": args.size, "session": args.session},
                                      work / f"profile-{i}")["costs"]) for i in range(args.profiles)]
    pooled = Costs.median(profiles) if len(profiles) > 1 else profiles[0]
    alone = [advice_of(t, c, args.failure_rate) for c in profiles]
    advice = advice_of(t, pooled, args.failure_rate)
    configs = {"current": None, **({"advised": advice["regimes"]} if advice["regimes"] else {})}
    print(f"{t.name}: {len(profiles)} profiles in {time.perf_counter() - t0:.0f} s; alone: "
          + "; ".join(a["verdict"] for a in alone) + f"; pooled: {advice['verdict']}", flush=True)
    out: dict[str, Any] = {"target": {"name": t.name, "epochs": t.epochs, "at": t.at, "fail": t.fail,
                                      "kill": t.kill, "profile_fail": list(t.profile_fail)},
                           "profiles": [], "pooled": {"advice": advice}}
    for which, described in configs.items():
        regimes = _regimes(described) or {}
        for i, c in enumerate(profiles):
            if which == "current":
                out["profiles"].append({"advice": alone[i], "costs": c.to_json(), "predicted": {}})
            out["profiles"][i]["predicted"][which] = predictions(t, c, regimes)
        out["pooled"].setdefault("predicted", {})[which] = predictions(t, pooled, regimes)
    out["same_advice"] = all(a["regimes"] == alone[0]["regimes"] for a in alone)
    runs: dict[str, list[list[dict[str, Any]]]] = {w: [] for w in configs}
    kills: dict[str, list[dict[str, Any]]] = {w: [] for w in configs}
    for d in range(args.drivers):
        got = child("measure", {"target": t.name, "size": args.size, "repeats": args.repeats, "configs": configs},
                    work / f"driver-{d}")
        for which in configs:
            runs[which].append(got[which])
            root = work / f"driver-{d}" / f"killed-{which}"
            spec = {"target": t.name, "size": args.size, "regimes": configs[which], "root": str(root)}
            child("kill", spec, work / f"driver-{d}" / f"kill-{which}", expect=-signal.SIGKILL)
            kills[which].append(child("restart", spec, work / f"driver-{d}" / f"restart-{which}"))
        print(f"  driver {d}: " + ", ".join(
            f"{w} steady {statistics.median(r['steady'] for r in runs[w][-1]):.3f}, step failure "
            f"{statistics.median(r['step_failure'] or 0.0 for r in runs[w][-1]):.3f}, driver failure "
            f"{kills[w][-1]['driver_failure']:.2f}" for w in configs), flush=True)
    med = statistics.median
    out["measured"] = {w: {"steady": med(med(r["steady"] for r in g) for g in runs[w]),
                           "step_failure": med(med(r["step_failure"] or 0.0 for r in g) for g in runs[w]),
                           "driver_failure": med(k["driver_failure"] for k in kills[w]),
                           "driver_session": med(k["session"] for k in kills[w]),
                           "each": runs[w], "kills": kills[w]} for w in configs}
    score(out, args.tolerance)
    out["seconds"] = time.perf_counter() - t0
    return out


def inside(predicted: Any, measured: float | None) -> bool | None:
    """Whether ``measured`` lies in ``predicted``: an estimate (``{"low", "high"}``: ± 2 s.e.) or a range
    ``[low, high]``, to half a clock tick (:data:`TICK`); ``None`` when nothing was measured."""
    if measured is None:
        return None
    low, high = (predicted["low"], predicted["high"]) if isinstance(predicted, dict) else predicted
    return bool(low - TICK / 2 <= measured <= high + TICK / 2)


def report(doc: dict[str, Any]) -> str:
    """The check as text: per pipeline, each profile's advice and its predictions against the measurements."""
    lines = [f"load average {doc['load_average_start'][0]:.1f} → {doc['load_average_end'][0]:.1f}"
             + (" (provisional: a busy machine)" if doc["provisional"] else "")]
    for name, t in doc["pipelines"].items():
        lines.append(f"{name}: same advice from every profile: {t['same_advice']}")
        for label, who in [*((f"profile {i + 1}", p) for i, p in enumerate(t["profiles"])), ("pooled", t["pooled"])]:
            lines.append(f"  {label}: {who['advice']['verdict']}")
            for w, axes in who["errors"].items():
                cells = []
                for axis, e in axes.items():
                    p = who["predicted"][w][axis]
                    rng = who["predicted"][w].get("range", {}).get(axis)
                    where = "" if rng is None else f", range {rng[0]:.3g}–{rng[1]:.3g}"
                    cells.append(f"{axis} {p['value']:.3g} ± {2 * p['se']:.2g}{where} → {t['measured'][w][axis]:.3g} "
                                 f"({'—' if e is None else f'{100 * e:+.0f} %'})")
                lines.append(f"    {w}: " + "; ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", default="flagship,w4", help="comma-separated (flagship, w4, or a plug-in)")
    parser.add_argument("--size", choices=("quick", "full"), default="quick")
    parser.add_argument("--profiles", type=int, default=3, help="independent profiles per pipeline (>= 3)")
    parser.add_argument("--drivers", type=int, default=3, help="measuring driver processes per pipeline")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each configuration per measuring driver")
    parser.add_argument("--failure-rate", type=float, default=0.05)
    parser.add_argument("--tolerance", type=float, default=0.25)
    parser.add_argument("--session", action=argparse.BooleanOptionalAction, default=True,
                        help="profiles measure a driver's session start (a process of their own)")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") / "spark_advisor_check.json"))
    parser.add_argument("--rescore", action="store_true",
                        help="run nothing: score the predictions and measurements in --out again, and rewrite it")
    parser.add_argument("--phase", choices=("profile", "measure", "kill", "restart"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rescore:
        done = json.loads(Path(args.out).read_text())
        for out in done["pipelines"].values():
            score(out, done["tolerance"])
        done["report"] = report(done)
        print(done["report"])
        Path(args.out).write_text(json.dumps(done, indent=1, sort_keys=True, default=str))
        return
    if args.phase:
        spec = json.loads(Path(args.spec).read_text())
        {"profile": phase_profile, "measure": phase_measure, "kill": phase_kill,
         "restart": phase_restart}[args.phase](spec)
        return
    if args.profiles < 3:
        parser.error("--profiles: the check takes at least 3 independent profiles")
    names = [n for n in args.pipelines.split(",") if n]
    targets = [target(n, args.size) for n in names]
    doc: dict[str, Any] = {"load_average_start": os.getloadavg(), "size": args.size, "profiles": args.profiles,
                           "drivers": args.drivers, "repeats": args.repeats, "failure_rate": args.failure_rate,
                           "tolerance": args.tolerance, "pipelines": {}}
    with tempfile.TemporaryDirectory(prefix="falkirk-advisor-check-") as tmp:
        for t in targets:
            doc["pipelines"][t.name] = check_target(t, args, Path(tmp) / t.name)
    doc["load_average_end"] = os.getloadavg()
    doc["provisional"] = max(doc["load_average_start"][0], doc["load_average_end"][0]) > QUIET
    text = report(doc)
    print(text)
    doc["report"] = text
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True, default=str))


if __name__ == "__main__":
    main()
