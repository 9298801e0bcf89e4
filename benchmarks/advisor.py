"""How long ``advise`` takes on synthetic pipelines of 8, 20 and 50 steps (pure Python, no Spark).

Each pipeline is a random layered DAG (seeded): one input, then steps that
read one or two earlier nodes, a third Lazy, a third Eager, a third
Ephemeral, an output at the end; costs are drawn per step. For each size,
seed and failure rate, ``advise`` runs ``--repeats`` times in this process
(the median and the slowest are reported: the search is deterministic, so
the spread is the machine's); a higher failure rate moves more steps, so
the descent takes more passes. Prints one line per case and writes
``results/advisor.json`` (``--out``) with the load average before and
after. Run: ``python benchmarks/advisor.py [STEPS ...] [--seeds 1,2,3,7]
[--rates 0.01,0.2] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from falkirk.spark import Costs, Eager, Ephemeral, Lazy, NodeCosts, Pipeline
from falkirk.spark.pipeline.plan.advising import advise


def synthetic(steps: int, seed: int = 7) -> tuple[Pipeline, Costs]:
    """A random ``steps``-step pipeline on a memory root, and costs for it."""
    rng = random.Random(seed)
    pipe = Pipeline(f"memory://falkirk-bench/advisor-{steps}-{seed}")
    pipe.input("src", "a BIGINT")
    names = ["src"]
    nodes = {"src": NodeCosts(compute=0.05, log_read=0.05)}
    for i in range(steps - 1):
        reads = rng.sample(names[-6:], min(len(names[-6:]), rng.choice((1, 1, 2))))
        name = f"s{i:02d}"
        kind = i % 3
        if kind == 0:
            src = f"def {name}({', '.join(reads)}, epoch=None): return None"
            regime = Ephemeral()
        else:
            src = f"def {name}({', '.join(reads)}, *, state, epoch=None): return None, None"
            regime = Lazy(every=2) if kind == 1 else Eager()
        ns: dict[str, object] = {}
        exec(src, ns)  # noqa: S102 - a generated step function
        pipe.step(ns[name], inputs=reads, regime=regime)
        names.append(name)
        nodes[name] = NodeCosts(compute=rng.uniform(0.05, 3.0), log_write=rng.uniform(0.05, 0.4),
                                log_bytes=rng.uniform(1e5, 1e7), state_write=rng.uniform(0.1, 2.0),
                                state_bytes=rng.uniform(1e6, 1e8))
    pipe.output("out", inputs=[names[-1]])
    nodes["out"] = NodeCosts(compute=0.1)
    return pipe, Costs(nodes, unit="cpu", source="synthetic")


def one(steps: int, seed: int, rate: float, repeats: int) -> dict[str, Any]:
    """``advise`` on ``synthetic(steps, seed)`` at ``rate``, ``repeats`` times: seconds and what it found."""
    pipe, costs = synthetic(steps, seed)
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        advice = advise(pipe, costs, rate)
        seconds.append(time.perf_counter() - t0)
    return {"steps": steps, "seed": seed, "failure_rate": rate, "seconds": [round(x, 3) for x in seconds],
            "median_s": round(statistics.median(seconds), 3), "max_s": round(max(seconds), 3),
            "pricing": "exact" if advice.exact else "closure", "evaluated": len(advice.evaluated),
            "search": advice.search, "current_total": advice.current.total, "advised_total": advice.advised.total,
            "changed": len(advice.regimes())}


def main(sizes: list[int], *, seeds: tuple[int, ...] = (7,), rates: tuple[float, ...] = (0.01,), repeats: int = 1,
         out: Path | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"format": "falkirk-bench-advisor/1", "python": sys.version.split()[0],
                           "machine": platform.machine(), "cpus": os.cpu_count(),
                           "load_average_at_start": os.getloadavg(), "repeats": repeats, "rows": []}
    for steps in sizes:
        for seed in seeds:
            for rate in rates:
                row = one(steps, seed, rate, repeats)
                res["rows"].append(row)
                print(f"{steps:3d} steps, seed {seed}, rate {rate}: advise {row['median_s']:5.2f} s median, "
                      f"{row['max_s']:5.2f} s slowest ({row['pricing']} pricing, {row['evaluated']} assignments "
                      f"evaluated); total {row['current_total']:.3f} -> {row['advised_total']:.3f} per epoch; "
                      f"{row['changed']} step(s) changed", flush=True)
    res["load_average_at_end"] = os.getloadavg()
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {out}")
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[8, 20, 50])
    ap.add_argument("--seeds", default="1,2,3,7", help="comma-separated seeds of the synthetic pipelines")
    ap.add_argument("--rates", default="0.01,0.2", help="comma-separated failure rates (per epoch)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "advisor.json")
    a = ap.parse_args()
    main(a.sizes, seeds=tuple(int(x) for x in a.seeds.split(",")),
         rates=tuple(float(x) for x in a.rates.split(",")), repeats=a.repeats, out=a.out)
