"""The regime advisor's predictions against a real run of the flagship (issue 33's targets, small scale).

1. ``Pipeline.profile``: the flagship with its declared regimes runs ``EPOCHS``
   epochs on a scratch root, ``--fail STEP`` failing after epoch
   ``EPOCHS/2 - 1`` (its recovery measures how fast epochs run again); the
   costs come from its journal (wall seconds).
2. ``advise``: the advice for ``--failure-rate`` (each step failing alone).
3. The flagship runs again on a second scratch root with the advised regimes,
   and ``--fail STEP`` fails after epoch ``EPOCHS - 2``.
4. Measured against predicted: the steady wall time per epoch of both runs
   (the median over the epochs after the first of Σ step executions), and the
   recovery's replay/recompute wall time against the model's price of that
   one failure at that boundary (its redo, restores and replays).

Run: ``python benchmarks/spark_advisor.py [--epochs 8] [--failure-rate 0.05] [--fail cc]``;
writes ``benchmarks/results/spark_advisor.json``. Wall time, one local
session: the figures carry the machine's noise (a shared 2-core machine
shows ±20 % between identical runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

SIZES: dict[str, Any] = {"events_per_epoch": 3000, "queries_per_epoch": 40, "users": 200, "nodes": 800,
                         "cc_every": 3, "seed": 11}


def steady(result: Any, until: int) -> float:
    """Median over epochs 1..until-1 of the summed wall seconds of each epoch's first executions."""
    per: dict[int, float] = {}
    for x in result.journal.executions:
        if not x.redo and 0 < x.epoch < until:
            per[x.epoch] = per.get(x.epoch, 0.0) + x.seconds
    return statistics.median(per.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--failure-rate", type=float, default=0.05)
    parser.add_argument("--fail", default="cc")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") / "spark_advisor.json"))
    args = parser.parse_args()

    from falkirk.spark import local_session
    from falkirk.spark.pipeline.plan.advisor import Model
    from falkirk.spark.pipeline.tools.flagship import build

    spark = local_session()
    with tempfile.TemporaryDirectory(prefix="falkirk-advisor-") as tmp:
        build(Path(tmp) / "warm-up", spark, durable=False, **SIZES).run(2)  # the JVM's warm-up, outside the figures
        t0 = time.perf_counter()
        profiled = build(Path(tmp) / "profile", spark, **SIZES)
        costs = profiled.profile(epochs=args.epochs, fail=f"{args.fail}@{args.epochs // 2 - 1}:after")
        profile_seconds = time.perf_counter() - t0
        measured_current = steady_of_root(profiled, args.epochs)
        advice = profiled.advise(args.failure_rate, costs=costs, objective="wall")
        print(advice.table())

        advised = build(Path(tmp) / "advised", spark, regimes=advice.regimes(), **SIZES)
        at = args.epochs - 2
        result = advised.run(args.epochs, fail=f"{args.fail}@{at}:after")
        measured_advised = steady(result, at)
        recovery = [r for r in result.journal.recoveries if not r.restart][0]
        redone = sum(x.seconds for x in result.journal.executions if x.redo and x.recovery == recovery.index)
        model = Model(advised, costs, [(args.fail,)], moments=[at])
        ev = model.evaluate([{n: s.regime for n, s in advised.steps.items()}], exact=True)
        predicted_recovery = float(ev.recovery[0, 0])
        per_step = {n: {"predicted": float(ev.node_recovery[i, 0, 0]),
                        "measured_redo": sum(x.seconds for x in result.journal.executions
                                             if x.step == n and x.redo and x.recovery == recovery.index)}
                    for i, n in enumerate(model.graph.names)}
    out = {
        "sizes": SIZES, "epochs": args.epochs, "failure_rate": args.failure_rate, "fail": f"{args.fail}@{at}:after",
        "advised_regimes": {n: r.describe() for n, r in advice.regimes().items()},
        "steady_current": {"predicted": advice.current.steady, "measured": measured_current},
        "steady_advised": {"predicted": advice.advised.steady, "measured": measured_advised},
        "recovery": {"predicted": predicted_recovery, "measured_replay_recompute": recovery.phases()["replay/recompute"],
                     "measured_redo_executions": redone},
        "recovery_by_step": per_step,
        "profile_seconds": profile_seconds,
        "costs": costs.to_json(),
    }
    for key in ("steady_current", "steady_advised"):
        p, m = out[key]["predicted"], out[key]["measured"]
        out[key]["error"] = (m - p) / p if p else None
    print(json.dumps(out, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2, sort_keys=True))


def steady_of_root(pipe: Any, epochs: int) -> float:
    """The steady wall time per epoch of the run recorded under ``pipe``'s root (its execution records)."""
    per: dict[int, float] = {}
    for step in pipe.order:
        for name in pipe.location.listdir(f"journal/{step}"):
            if name.endswith(".json") and name[:-5].isdigit():
                doc = json.loads(pipe.location.read_bytes(f"journal/{step}/{name}"))
                if 0 < doc["epoch"] < epochs and not doc["redo"]:
                    per[doc["epoch"]] = per.get(doc["epoch"], 0.0) + float(doc.get("first_seconds") or doc["seconds"])
    return statistics.median(per.values())


if __name__ == "__main__":
    main()
