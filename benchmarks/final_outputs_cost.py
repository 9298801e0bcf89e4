"""What a final committed output costs (issue 54): one flagship run, printed as one JSON line.

10 epochs, ``cc`` fails mid-step at epoch 7: it restores its epoch-5 checkpoint, and the output
``responses`` had committed epoch 6 (before issue 54 it was written again; now it is kept and what is
sent again for it is discarded). Prints the median steady CPU per epoch (epochs 2–6, step executions' CPU
less JIT), the recovery's CPU less JIT and wall, the output epochs written again and those kept.

Run it alternately against two checkouts, one process per run (``PYTHONPATH=<checkout>/src python
benchmarks/final_outputs_cost.py LABEL``); ``results/final_outputs_cost.json`` holds three pairs, before
(b9a9130^) and after (432ef06).
"""

import json
import statistics
import sys
import tempfile
from pathlib import Path


def main(label: str) -> None:
    from falkirk.spark.pipeline.run.session import local_session
    from falkirk.spark.pipeline.tools.flagship import build

    spark = local_session("local[2,3]", {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
    root = Path(tempfile.mkdtemp())
    pipe = build(root, spark)
    warm = build(Path(tempfile.mkdtemp()), spark)
    warm.run(3)  # JVM warm-up
    res = pipe.run(10, fail="cc@7:mid")
    j = res.journal
    rec = j.recoveries[0]
    per_epoch = {}
    for x in j.executions:
        if x.cpu is not None and not x.redo and 2 <= x.epoch <= 6:
            per_epoch[x.epoch] = per_epoch.get(x.epoch, 0.0) + x.cpu_less_jit
    out = sorted(
        (x.step, x.epoch)
        for x in j.executions
        if x.redo and x.step == "responses" and not getattr(x, "discarded", False)
    )
    print(
        json.dumps(
            {
                "version": label,
                "steady_cpu": statistics.median(per_epoch.values()),
                "recovery_cpu": rec.cpu_less_jit,
                "recovery_s": rec.seconds,
                "responses_rewritten": out,
                "kept": getattr(rec, "discarded", {}),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
