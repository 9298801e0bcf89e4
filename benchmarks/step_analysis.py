"""What building a step's DataFrames costs each epoch: YSB's steps analysed again, against planning them (issue 53).

``python -m benchmarks.step_analysis [--reps 100] [--rounds 3] [--warm 30] [--out FILE]``

falkirk calls a step's function every epoch, so every DataFrame operation in it is analysed again each epoch
(Spark analyses a classic DataFrame when it is made); a Structured Streaming query analyses its plan once and
re-plans it each micro-batch. This measures that difference's size on the matrix's YSB code, unchanged: the
``views`` and ``counts`` step functions of :func:`~.spark_matrix.ysb.ysb_pipeline` (taken from the declared
pipeline, ``Pipeline.steps[name].fn``) and the output's selection, over one epoch of the matrix's events
(:func:`~.spark_matrix.ysb_input.events_table`, 20,000) and a state of the counts, both Parquet files written
before the timing. Nothing is executed: no Spark job runs.

Per repetition, in one warm driver (``--warm`` repetitions of each case first, then the cases alternated, each
``--reps`` times per round, ``--rounds`` rounds), the driver's process tree's CPU (Python and JVM,
:class:`~falkirk.spark.pipeline.run.cpu.TreeMeter`) and the py4j calls of:

* ``read``: the epoch's two DataFrames read with Spark's Parquet reader and their schemas given, as falkirk's
  input-log and checkpoint readers do each epoch (the events; the state);
* ``steps``: the step functions and the output's selection over the inputs read once, before the timing (the
  operations a step function makes every epoch);
* ``steps_planned``: ``steps`` plus the optimised physical plans of the state and the output (what any
  execution of them plans, the stream's micro-batch included);
* ``select``: one ``select("*")`` over the events, the smallest analysis, for scale.

Results: the median of each case's per-round means, per repetition, with the load average before and after and
the commit (``results/step_analysis.json``). Run it alone on the machine: CPU time of a JVM is noisy under load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import result_header

HERE = Path(__file__).resolve().parent
CASES = ("read", "steps", "steps_planned", "select")


class Py4jCalls:
    """Counts the py4j commands this driver sends while entered (patched into py4j's client-server connection,
    restored on exit)."""

    def __init__(self) -> None:
        self.n = 0

    def __enter__(self) -> Py4jCalls:
        import py4j.clientserver as cs

        self._original = original = cs.ClientServerConnection.send_command

        def counted(conn: Any, command: str) -> Any:
            self.n += 1
            return original(conn, command)

        cs.ClientServerConnection.send_command = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        import py4j.clientserver as cs

        cs.ClientServerConnection.send_command = self._original  # type: ignore[method-assign]


def prepare(spark: Any, work: Path, size: dict[str, Any]) -> tuple[Any, dict[str, str], dict[str, Any]]:
    """The declared YSB pipeline, and the events and state files of one epoch (written here, untimed)."""
    import pyarrow.parquet as pq

    from .spark_matrix.ysb import ysb_pipeline
    from .spark_matrix.ysb_input import EVENTS_SCHEMA, events_table

    pipe = ysb_pipeline(work / "root", spark, size, paced=False)
    events = str(work / "events.parquet")
    pq.write_table(events_table(1, size), events)
    views = pipe.steps["views"].fn
    counts = pipe.steps["counts"].fn
    ev = spark.read.schema(EVENTS_SCHEMA).parquet(events)
    _, kept = counts(views(ev), state=None, epoch=0)
    state = str(work / "state")
    kept.write.parquet(state)
    schemas = {"events": EVENTS_SCHEMA, "state": spark.read.parquet(state).schema}
    return pipe, {"events": events, "state": state}, schemas


def cases(spark: Any, pipe: Any, files: dict[str, str], schemas: dict[str, Any]) -> dict[str, Any]:
    """Each case as a function of no arguments."""
    views, counts = pipe.steps["views"].fn, pipe.steps["counts"].fn

    def read() -> tuple[Any, Any]:
        return (spark.read.schema(schemas["events"]).parquet(files["events"]),
                spark.read.schema(schemas["state"]).parquet(files["state"]))

    events, state = read()

    def steps() -> tuple[Any, Any]:
        output, kept = counts(views(events), state=state, epoch=2)
        return output(kept), kept

    def steps_planned() -> None:
        for df in steps():
            df._jdf.queryExecution().executedPlan()

    return {"read": read, "steps": steps, "steps_planned": steps_planned, "select": lambda: events.select("*")}


def measure(fn: Any, reps: int, meter: Any, calls: Py4jCalls) -> tuple[float | None, float]:
    """``fn`` run ``reps`` times: the tree's CPU-s (``None``: not readable here) and the py4j calls per
    repetition."""
    import gc

    gc.collect()
    c0, n0 = meter(), calls.n
    for _ in range(reps):
        fn()
    gc.collect()  # the py4j objects' release is part of the cost
    c1 = meter()
    return None if c0 is None or c1 is None else (c1 - c0) / reps, (calls.n - n0) / reps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=int, default=30)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "step_analysis.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from falkirk.spark.pipeline.run.cpu import TreeMeter
    from falkirk.spark.pipeline.run.session import SMALL_DATA, sql_conf

    from .spark_matrix.configs import SIZES
    from .spark_matrix.measure import session

    load_before, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    size = dict(SIZES["quick"]["YSB"])
    spark, meter = session({}), TreeMeter()
    per: dict[str, list[tuple[float, float]]] = {c: [] for c in CASES}
    try:
        if meter() is None:
            raise SystemExit("the process tree's CPU cannot be read here (/proc): nothing measured")
        with tempfile.TemporaryDirectory(prefix="step-analysis-") as tmp, sql_conf(spark, SMALL_DATA), \
                Py4jCalls() as calls:
            pipe, files, schemas = prepare(spark, Path(tmp), size)
            fns = cases(spark, pipe, files, schemas)
            for c in CASES:
                measure(fns[c], args.warm, meter, calls)
            for r in range(args.rounds):
                for c in CASES if r % 2 == 0 else reversed(CASES):
                    cpu, py4j = measure(fns[c], args.reps, meter, calls)
                    assert cpu is not None  # readable at the start
                    per[c].append((cpu, py4j))
                    print(f"round {r + 1} {c:14s} {1000 * per[c][-1][0]:6.1f} ms CPU {per[c][-1][1]:6.1f} py4j calls",
                          flush=True)
    finally:
        spark.stop()
    summary = {c: {"cpu_ms": 1000 * statistics.median(x for x, _ in v), "py4j": statistics.median(n for _, n in v),
                   "rounds_cpu_ms": [round(1000 * x, 2) for x, _ in v]} for c, v in per.items()}
    for c, s in summary.items():
        print(f"{c:14s} {s['cpu_ms']:6.1f} ms CPU per repetition, {s['py4j']:.0f} py4j calls (rounds: "
              f"{', '.join(f'{x:.1f}' for x in s['rounds_cpu_ms'])})")
    args.out.write_text(json.dumps({
        **result_header("step_analysis", argv, started, load_before), "events": size["events"], "reps": args.reps, "rounds": args.rounds, "warm": args.warm,
        "summary": summary}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
