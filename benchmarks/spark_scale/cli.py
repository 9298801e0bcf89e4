"""The command line: the parent measuring the points (:func:`main`) and, with ``--phase``, one driver process."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from ..spark_matrix.configs import RESULTS
from ..spark_vs_streaming import STREAMING_CONF, as_text, jvm_pid
from .fit import fits
from .plan import PLANS, WORKLOADS, points
from .report import groups, markdown, plot, rows_of, targets


def run_phase(phase: str, spec_path: Path) -> None:
    from ..spark_matrix.measure import session
    from .phases import PHASES

    spec = json.loads(spec_path.read_text())
    spark = session(spec.get("conf"))
    if spec.get("pids"):
        Path(spec["pids"]).write_text(json.dumps({"jvm_pid": jvm_pid(spark), "driver_pid": os.getpid()}))
    out = PHASES[phase](spec, spark)
    Path(spec["result"]).write_text(json.dumps(out, default=str))
    spark.stop()


def finish(doc: dict[str, Any], out: Path) -> None:
    """Fits, targets, pictures and the JSON, from the points measured so far."""
    from .points import backfill_means

    backfill_means(doc)
    doc["fits"] = fits(doc["points"])
    doc["targets"] = targets(doc)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spark_scale.json").write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n",
                                          encoding="utf-8")
    for key, ps in groups(doc["points"]).items():
        try:
            plot(key, ps, doc["fits"].get(key, {}), out / f"spark_scale_{key}.png")
        except ImportError as exc:
            print(f"no picture: {exc}")


def main() -> int:
    from .points import measure_point

    ap = argparse.ArgumentParser(prog=f"python -m {__package__}",
                                 description=sys.modules[__package__].__doc__.splitlines()[0])
    ap.add_argument("--plan", choices=sorted(PLANS), default="quick")
    ap.add_argument("--only", default=",".join(WORKLOADS), help="workloads, e.g. W2,ysb")
    ap.add_argument("--sizes", default="", help="only these n (e.g. 10000,100000)")
    ap.add_argument("--churn", default="", help="only these churns (keyed), e.g. 0.01")
    ap.add_argument("--configs", default="", help="only these configurations")
    ap.add_argument("--drivers", type=int, default=3, help="driver processes per configuration and point (medians)")
    ap.add_argument("--warmup", type=int, default=2, help="epochs left out of the per-epoch medians")
    ap.add_argument("--epochs", type=int, help="epochs per run instead of the plan's (a longer window: a long run's "
                                               "share of checkpointing epochs)")
    ap.add_argument("--crash", type=int, help="the epoch the failures strike instead of the plan's")
    ap.add_argument("--spacings", default="2", help="RocksDB snapshot spacings measured beside Spark's default")
    ap.add_argument("--stream-form", action="append", default=[], metavar="W=FORM",
                    help="a keyed workload's streaming formulation (default: the strongest this checkout has)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--resume", action="store_true", help="keep the points already in the results; measure the rest")
    ap.add_argument("--report", action="store_true", help="fit, draw and print from the results JSON, and stop")
    ap.add_argument("--remeasure-fail", action="store_true",
                    help="measure recovery (b), a failure inside one step, again at the points already in the "
                         "results (both systems, round-robin), keeping what it was")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        run_phase(args.phase, args.spec)
        return 0
    path = args.out / "spark_scale.json"
    if args.report:
        doc = json.loads(path.read_text())
        finish(doc, args.out)
        print(markdown(doc))
        print(json.dumps(doc["targets"], indent=1, default=str))
        return 0
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    bad = [w for w in only if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown workloads {', '.join(bad)} (known: {', '.join(WORKLOADS)})")
    sizes = {int(float(x)) for x in args.sizes.split(",") if x}
    churns = {float(x) for x in args.churn.split(",") if x}
    todo = [p for p in points(args.plan, only) if (not sizes or p.n in sizes)
            and (not churns or p.churn is None or p.churn in churns)]
    if args.epochs is not None or args.crash is not None:
        todo = [attrs.evolve(p, epochs=args.epochs or p.epochs, crash=args.crash or p.crash) for p in todo]
        if any(not args.warmup < p.crash < p.epochs for p in todo):
            ap.error("--crash must fall after --warmup and before --epochs")
    forms = dict(f.split("=", 1) for f in args.stream_form)
    pick = {c.strip() for c in args.configs.split(",") if c.strip()}
    import pyspark

    doc: dict[str, Any] = {"benchmark": "spark_scale", "plan": args.plan, "points": [], "runs": []}
    if args.resume and path.exists():
        doc = json.loads(path.read_text())
    done = {(p["workload"], p["n"], p.get("churn")) for p in doc["points"]}
    run = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "load_average_start": os.getloadavg(),
           "argv": sys.argv[1:], "drivers": args.drivers, "warmup": args.warmup, "streaming_conf": STREAMING_CONF,
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "spark": pyspark.__version__, "memory_gb": os.sysconf("SC_PAGE_SIZE") *
                       os.sysconf("SC_PHYS_PAGES") / 2**30}}
    doc["runs"].append(run)
    work = Path(tempfile.mkdtemp(prefix="spark-scale-"))
    spacings = [int(k) for k in args.spacings.split(",") if k]
    try:
        if args.remeasure_fail:
            from .points import remeasure_fail

            chosen = {(p.workload, p.n, p.churn) for p in todo}
            for block in doc["points"]:
                if (block["workload"], block["n"], block.get("churn")) not in chosen:
                    continue
                load0 = os.getloadavg()
                remeasure_fail(block, work, drivers=args.drivers, only=pick, run=len(doc["runs"]) - 1)
                block["fail_remeasured"] = {"run": len(doc["runs"]) - 1, "load_average_start": load0,
                                            "load_average_end": os.getloadavg(),
                                            "provisional": max(load0[0], os.getloadavg()[0]) > 2.5}
                finish(doc, args.out)
            todo = []
        for p in todo:
            if (p.workload, p.n, p.churn) in done:
                print(f"{p.id}: kept from the earlier run", flush=True)
                continue
            load0 = os.getloadavg()
            block = measure_point(p, work, drivers=args.drivers, warmup=args.warmup, spacings=spacings, only=pick,
                                  forms=forms)
            block.update(load_average_start=load0, load_average_end=os.getloadavg(),
                         provisional=max(load0[0], os.getloadavg()[0]) > 2.5, run=len(doc["runs"]) - 1)
            doc["points"].append(block)
            finish(doc, args.out)  # after every point: a long run keeps what it measured
    finally:
        shutil.rmtree(work, ignore_errors=True)
    run["load_average_end"] = os.getloadavg()
    finish(doc, args.out)
    print()
    print(as_text(rows_of(doc["points"])))
    print(json.dumps(doc["targets"], indent=1, default=str))
    bad_runs = [f"{p['workload']}-n{p['n']}:{n}" for p in doc["points"] for n, s in p["summary"].items()
                if not s["identical"]]
    if bad_runs:
        print(f"OUTPUTS DIFFER from the failure-free run (invalid points): {', '.join(bad_runs)}", file=sys.stderr)
        return 1
    return 0
