"""How long ``advise`` takes on synthetic pipelines of 8, 20 and 50 steps (pure Python, no Spark).

Each pipeline is a random layered DAG (seeded): one input, then steps that
read one or two earlier nodes, a third Lazy, a third Eager, a third
Ephemeral, an output at the end; costs are drawn per step. Prints the
seconds of ``advise`` (the search, then the final pricing: exact by the
planner where it takes at most ``EXACT_SOLVES`` solves) and the predicted
saving. Run: ``python benchmarks/advisor.py [STEPS ...]``.
"""

from __future__ import annotations

import random
import sys
import time

from falkirk.spark import Costs, Eager, Ephemeral, Lazy, NodeCosts, Pipeline
from falkirk.spark.pipeline.plan.advice import advise


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


def main(sizes: list[int]) -> None:
    for steps in sizes:
        pipe, costs = synthetic(steps)
        t0 = time.perf_counter()
        advice = advise(pipe, costs, 0.01)
        seconds = time.perf_counter() - t0
        print(f"{steps:3d} steps: advise {seconds:6.2f} s ({'exact' if advice.exact else 'closure'} pricing, "
              f"{len(advice.evaluated)} assignments evaluated); total {advice.current.total:.3f} -> "
              f"{advice.advised.total:.3f} per epoch; {len(advice.regimes())} step(s) changed")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [8, 20, 50])
