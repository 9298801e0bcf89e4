"""The command line: the parent measuring the workloads (:func:`main`) and, with ``--phase``, one
driver process of a configuration (:func:`run_phase`).
"""

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

from ..spark_vs_streaming import STREAMING_CONF, as_text, jvm_pid
from .configs import CONFIGS, IMPLEMENTED, RESULTS, SIZES
from .latency_report import plot_mixed_latency, plot_ysb_latency
from .measure import ROOTS, cluster_session, session
from .mixed import measure_mixed, mixed_targets, phase_mixed
from .pooling import verdict
from .report import TITLES, markdown, plot, rows_of
from .w1 import measure_w1
from .w2_w3 import measure_keyed, phase_keyed_restart, phase_keyed_run
from .w4 import measure_w46, phase_w4, phase_w4_advise
from .w5 import measure_w5, phase_w5
from .w6 import phase_w6
from .ysb import measure_ysb, phase_ysb, phase_ysb_restart, ysb_targets
from .ysb_rtm import phase_rtm

PHASES = {"W4": phase_w4, "W4:advise": phase_w4_advise, "W6": phase_w6, "keyed:run": phase_keyed_run,
          "keyed:restart": phase_keyed_restart, "W5": phase_w5, "YSB": phase_ysb, "YSB:restart": phase_ysb_restart, "YSB:rtm": phase_rtm,
          "MIXED": phase_mixed}

LATENCY_PLOTS = {"YSB": plot_ysb_latency, "MIXED": plot_mixed_latency}


def run_phase(phase: str, spec_path: Path) -> None:
    spec = json.loads(spec_path.read_text())
    if spec.get("cluster"):
        ROOTS[:] = spec["cluster"]["roots"]
        spark = cluster_session(spec["cluster"], spec.get("conf"))
    else:
        spark = session(spec.get("conf"))
    if spec.get("pids"):
        Path(spec["pids"]).write_text(json.dumps({"jvm_pid": jvm_pid(spark), "driver_pid": os.getpid()}))
    out = PHASES[phase](spec, spark)
    Path(spec["result"]).write_text(json.dumps(out, default=str))
    spark.stop()


def kept_configurations(new: dict[str, Any], old: dict[str, Any], run: dict[str, Any]) -> None:
    """``--merge --configs``: each re-run workload keeps the configurations not run now from the earlier result,
    marked ``earlier_run`` (that run's machine and load), and its verdict is taken again over all of them."""
    for w, block in new.items():
        earlier = {n: {**s, "earlier_run": s.get("earlier_run") or run}
                   for n, s in old.get(w, {}).get("summary", {}).items() if n not in block["summary"]}
        if earlier:
            block["summary"] = {**block["summary"], **earlier}
            block["verdict"] = verdict(block["summary"])


def main() -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {__package__}",
                                 description=sys.modules[__package__].__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="the small sizes (≤ 30 min on 2 cores)")
    g.add_argument("--full", action="store_true", help="the documented full sizes")
    ap.add_argument("--only", default=",".join(IMPLEMENTED), help="workloads, e.g. W1,W4")
    ap.add_argument("--configs", default="", help="only these configurations (names as in the table)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--drivers", type=int, default=1,
                    help="W1-W4, W6, YSB, MIXED: measure each configuration in this many drivers, round-robin; "
                         "report medians")
    ap.add_argument("--warm", type=int, default=None,
                    help="YSB, MIXED: epochs of the unmeasured paced run each driver makes first (default: the "
                         "size's, 3); e.g. 30 to measure after the JVM's JIT has compiled what the epochs run")
    ap.add_argument("--jvm-options", default="",
                    help="Java options for every driver's JVM, both systems alike (SPARK_SUBMIT_OPTS), recorded in "
                         "the results; e.g. --jvm-options=-XX:TieredStopAtLevel=1 (with =) to measure with the client JIT only")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--markdown", action="store_true", help="print the results JSON as a Markdown table and stop")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other workloads of the existing results JSON (replace only those run now); with "
                         "--configs, also a re-run workload's other configurations (marked earlier_run)")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        run_phase(args.phase, args.spec)
        return 0
    if args.markdown:
        print(markdown(json.loads((args.out / "spark_matrix.json").read_text())))
        return 0
    sizes = SIZES["quick" if args.quick else "full" if args.full else "default"]
    if args.warm is not None:  # recorded in the results with the size
        sizes = {w: {**s, "warm": args.warm} if "warm" in s else s for w, s in sizes.items()}
    only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    bad = [w for w in only if w not in IMPLEMENTED]
    if bad:
        ap.error(f"{', '.join(bad)}: not implemented (implemented: {', '.join(IMPLEMENTED)})")
    pick = {c.strip() for c in args.configs.split(",") if c.strip()}
    if args.jvm_options:  # inherited by every driver process (child_env), before any session starts
        os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {args.jvm_options}".strip()
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="spark-matrix-"))
    workloads: dict[str, Any] = {}
    try:
        for w in only:
            configs = [c for c in CONFIGS[w] if not pick or c in pick]
            extra: dict[str, Any] = {}
            if w == "W1":
                summary = measure_w1(configs, sizes[w], work, args.warmup, args.drivers)
            elif w == "YSB":
                summary = measure_ysb(configs, sizes[w], work, args.warmup, args.drivers)
                extra["targets"] = ysb_targets(summary)
            elif w == "MIXED":
                summary = measure_mixed(configs, sizes[w], work, args.warmup, args.drivers)
                extra["targets"] = mixed_targets(summary)
            elif w in ("W2", "W3"):
                summary = measure_keyed(w, configs, sizes[w], work, args.warmup, args.drivers)
            elif w == "W5":
                try:
                    summary = measure_w5(configs, sizes[w], work, args.warmup)
                except SystemExit as exc:  # no cluster here: an error when asked for by name, else skipped
                    if "--only" in sys.argv or not str(exc).startswith("W5 needs a Spark standalone cluster"):
                        raise
                    print(f"W5 skipped: {exc}", flush=True)
                    continue
            else:
                summary = measure_w46(w, configs, sizes[w], work, args.warmup, args.drivers)
            judged = {n: s for n, s in summary.items() if s.get("recovery_cpu_s") is not None}  # RTM: steady only
            workloads[w] = {"size": sizes[w], "summary": summary, "verdict": verdict(judged), **extra}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import pyspark

    load = os.getloadavg()
    doc = {"benchmark": "spark_matrix", "sizes": "quick" if args.quick else "full" if args.full else "default",
           "warmup": args.warmup, "wall_s": time.perf_counter() - t0, "streaming_conf": STREAMING_CONF,
           "jvm_options": os.environ.get("SPARK_SUBMIT_OPTS", ""),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "spark": pyspark.__version__, "load_average": load, "load_average_start": load0},
           "workloads": workloads}
    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge and (args.out / "spark_matrix.json").exists():
        old = json.loads((args.out / "spark_matrix.json").read_text())
        if pick:
            kept_configurations(workloads, old.get("workloads", {}), {k: old.get(k) for k in ("wall_s", "machine")})
        doc["workloads"] = {**old.get("workloads", {}), **workloads}
        doc["earlier_runs"] = [*old.get("earlier_runs", []), {k: old.get(k) for k in ("sizes", "wall_s", "machine")}]
    (args.out / "spark_matrix.json").write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n",
                                                encoding="utf-8")
    for w, block in workloads.items():
        try:
            plot(w, {n: s for n, s in block["summary"].items() if s.get("recovery_cpu_s") is not None},
                 block["verdict"]["frontier"], args.out / f"spark_matrix_{w}.png", TITLES[w])
            if w in LATENCY_PLOTS:
                LATENCY_PLOTS[w](block, args.out / f"spark_matrix_{w}_latency.png")
        except ImportError as exc:
            print(f"no picture: {exc}")
    print()
    print(as_text(rows_of({**doc, "workloads": workloads})))
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (start {load0[0]:.1f} / {load0[1]:.1f} / "
          f"{load0[2]:.1f}); wrote {args.out / 'spark_matrix.json'}")
    bad_runs = [f"{w}:{n}" for w, b in workloads.items() for n, s in b["summary"].items() if not s["identical"]]
    if bad_runs:
        print(f"OUTPUTS DIFFER from the failure-free run: {', '.join(bad_runs)}", file=sys.stderr)
        return 1
    return 0
