"""The paper's Figure 1 application on PySpark, with one failure and falkirk's selective recovery.

The application itself — the step functions and how they are wired, each with
its checkpoint regime — is ``src/falkirk/spark/pipeline/tools/flagship.py``; read it first:
every step is a plain Python function from DataFrames to a DataFrame::

    pipe = Pipeline(root, spark)
    pipe.input("events", EVENT_SCHEMA, partitions=2, key="user", source=...)
    pipe.step(parse_batch, regime=Ephemeral())     # inputs = its parameter names
    pipe.step(heavy, regime=Batch())               # output logged: a firewall
    pipe.step(cc, regime=Lazy(every=3))            # fn(parse_graph, *, state, spark)
    pipe.step(stats, regime=Eager(database="stats.sqlite", tables={"answer_stats": "epoch"}))
    pipe.output("responses", inputs=["answer"])

This script drives it the way a user would: it builds its own SparkSession
(falkirk does not hide Spark), runs ten epochs with the iterative step ``cc``
failing half-way through epoch 7, prints what falkirk did, and then looks at
the outputs with plain Spark and sqlite3. ``python -m falkirk.spark.demo`` (or
``bash scripts/run.sh``) does the same plus the comparison with a failure-free
run.

Run: ``.venv/bin/python examples/flagship.py [ROOT]``
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from falkirk.spark.pipeline.tools.flagship import build
from falkirk.spark.pipeline.tools.report import format_recovery


def main(root: Path) -> None:
    spark = (
        SparkSession.builder.master("local[2,3]")  # 3 attempts per task: Spark retries a failed task itself
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pipe = build(root, spark)
    print(pipe, "in", root)

    result = pipe.run(10, fail="cc@7:mid", progress=print)

    stateful = [n for n in pipe.steps if not pipe.stateless(n)]
    for rec in result.journal.recoveries:
        print()
        print(format_recovery(result.journal, rec, inputs=set(pipe.inputs), stateful=stateful))
        print()
        print(rec.plan.table())  # the falkirk-plan/1 view of the same plan

    print("\nresponses per epoch (external output, one Parquet partition per epoch):")
    spark.read.parquet(str(root / "output" / "responses")).groupBy("epoch").count().orderBy("epoch").show()
    print("statistics in SQLite (eager step, one transaction per epoch):")
    with sqlite3.connect(root / "stats.sqlite") as db:
        for row in db.execute("SELECT epoch, queries, answered, spend, components, cumulative FROM answer_stats ORDER BY epoch"):
            print("  ", row)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="falkirk-flagship-")))
