"""W1, the flagship: the driver SIGKILLed in the stateful step, restarted.

``W1`` — **the flagship** (the paper's Figure 1 application), driver SIGKILLed
mid-way through its stateful step, then restarted. This is
:mod:`benchmarks.spark_vs_streaming` run as a library (its docstring has the
full definitions): ``streaming`` and ``falkirk``/``falkirk-tuned`` run the
same union–find ``cc``; ``streaming-spark-cc`` and ``falkirk-propagation``
run label propagation on both sides (the second row). ``streaming-snap2`` is
``streaming`` with a RocksDB snapshot every 2 deltas. ``falkirk-advised``
runs the regimes the advisor chooses for a driver failure from a profile
taken in the first driver (issue 33; defined there). ``falkirk-eager``
(since 2026-11-27 04:30 UTC) persists every step every epoch (``cc``
checkpointed each epoch, every Ephemeral step logged): falkirk's cheapest
recovery for more steady cost, the trade a user makes by hand.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import spark_vs_streaming as svs
from .configs import CONFIGS
from .pooling import report_advice, round_robin


def measure_w1(configs: list[str], size: dict[str, int], work: Path, warmup: int, drivers: int = 1) -> dict[str, Any]:
    """W1: each configuration in ``drivers`` measurements (each a killed driver and its restart), taken round-robin
    over the configurations so that the machine's drift falls on all alike; with several, :func:`pooled`."""
    args = argparse.Namespace(epochs=size["epochs"], crash=size["crash"], warmup=warmup, events=size["events"],
                              queries=size["queries"], cc="unionfind")
    input_dir = work / "w1-input"
    svs.write_stream_input(input_dir, svs.sizes(args), args.epochs)

    def one(name: str, d: int) -> dict[str, Any]:
        opt = CONFIGS["W1"][name]
        tag = f"w1-{name}" if d == 0 else f"w1-{name}-d{d + 1}"
        advice = work / f"w1-{name}" / "advice.json" if d and name == "falkirk-advised" else None
        res = svs.measure(opt["base"], args, work, input_dir, name=tag, conf=opt.get("conf"), advice=advice)
        res.pop("_ref", None)
        res["system"] = "streaming" if name.startswith("streaming") else "falkirk"
        res["peak_rss"] = None
        return res

    out = round_robin(configs, drivers, one)
    report_advice(out, "journal_failure_cpu_s")  # redo + the cold start's excess (svs.failure_cpu)
    return out
