"""A pipeline driver process for the cluster and Connect tests: ``python driver_process.py SPEC.json RESULT.json``.

It connects to the standalone master (``master``) or the Spark Connect
server (``remote``) named in the spec — one session for all its scenarios,
to pay for one start — runs each
scenario in turn and writes what happened to the result file as JSON:
a ``run`` scenario runs the tiny flagship (or, with ``"pipeline": "keyed"``,
``spark_support.keyed_pipeline`` with the scenario's ``options``, with ``"history"``
``spark_support.history_pipeline``; with
injected failures; ``layers``: settings of ``falkirk.spark.pipeline.run.layers``
set in this process, as the local tests monkeypatch them) and records the recoveries, notes and re-executions; an ``error`` scenario expects a falkirk
error and records its type and message; ``stopped`` (last: it stops the
session) runs a pipeline on the stopped session; ``publish`` writes a frame through
:class:`~falkirk.spark.pipeline.store.storage.Storage` and tries to publish it.
The driver is a separate process so that a test can kill it (SIGKILL) and
start another on the same root, as a user restarting a job would.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any


def _session(spec: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    if "remote" in spec:
        return SparkSession.builder.remote(spec["remote"]).getOrCreate()
    builder = SparkSession.builder.master(spec["master"]).appName(spec.get("app", "falkirk-cluster-test"))
    for key, value in spec.get("conf", {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _executors_gone(spark: Any) -> int | None:
    """How many executors the application has lost so far (its status store keeps the removed ones)."""
    try:
        summaries = spark.sparkContext._jsc.sc().statusStore().executorList(False)
        return sum(1 for i in range(summaries.size()) if not summaries.apply(i).isActive())
    except Exception:  # noqa: BLE001 - Spark Connect (no JVM here) or a stopped context
        return None


def _run(spark: Any, sc: dict[str, Any], small: dict[str, Any]) -> dict[str, Any]:
    from falkirk.spark.pipeline.run import layers
    from falkirk.spark.pipeline.tools.flagship import build

    for name, value in sc.get("layers", {}).items():  # the tests' monkeypatching of layers' settings, in this process
        setattr(layers, name, value)
    if sc.get("pipeline") == "keyed":  # spark_support.keyed_pipeline: keyed state with churn
        from spark_support import keyed_pipeline

        pipe = keyed_pipeline(sc["root"], spark, **sc.get("options", {}))
    elif sc.get("pipeline") == "history":  # spark_support.history_pipeline: a state that only grows
        from spark_support import history_pipeline

        pipe = history_pipeline(sc["root"], spark, **sc.get("options", {}))
    else:
        pipe = build(sc["root"], spark, **{**small, **sc.get("options", {})})  # options: Pipeline(...) too
    t0, gone = time.perf_counter(), _executors_gone(spark)
    result = pipe.run(sc["epochs"], fail=sc.get("fail", []), progress=lambda line: print(line, flush=True))
    after = _executors_gone(spark)
    return {
        "seconds": round(time.perf_counter() - t0, 2),
        "done": result.done,
        "fired": [str(i) for i in result.fired],
        "notes": list(result.journal.notes),
        "redo": [[x.step, x.epoch] for x in result.journal.executions if x.redo],
        # Spark jobs each first execution ran in its own job group (a step its consumer's job computes runs none)
        "jobs": [[x.step, x.epoch, x.jobs] for x in result.journal.executions if not x.redo],
        # executors the application lost during the run (by its status store; None: unknown)
        "executors_lost": None if gone is None or after is None else after - gone,
        "recoveries": [
            {"cause": r.cause, "failed": list(r.failed), "restart": r.restart, "problems": list(r.problems),
             "actions": dict(r.plan.actions) if r.plan is not None else {}}
            for r in result.journal.recoveries
        ],
    }


def _publish(spark: Any, sc: dict[str, Any]) -> dict[str, Any]:
    from falkirk.spark.pipeline.store.storage import Storage

    storage = Storage(sc["root"])
    df = spark.range(1000).repartition(2)
    manifest = storage.write_frame(df, "probe", "checkpoint", 0, 1000)
    storage.put(manifest)
    return {"published": manifest.to_json()}


def _lineage(spark: Any, sc: dict[str, Any]) -> dict[str, Any]:
    """Call the JVM-only lineage features; under Connect each must raise SparkConnectError."""
    from falkirk.spark import SparkConnectError, lineage, lose_outputs

    df = spark.range(10).repartition(2)
    raised = {}
    for name, call in (("lineage", lambda: lineage(df)), ("lose_outputs", lambda: lose_outputs(spark, ["shuffle_0"]))):
        try:
            call()
            raised[name] = None
        except SparkConnectError as exc:
            raised[name] = str(exc)
        except Exception as exc:  # a different error is a failure of the test, reported as such
            raised[name] = f"WRONG {type(exc).__name__}: {exc}"
    return {"raised": raised}


def main(argv: list[str]) -> int:
    spec = json.loads(open(argv[1]).read())
    results: dict[str, Any] = {}
    spark = _session(spec)
    for sc in spec["scenarios"]:
        print(f"== scenario {sc['name']}", flush=True)
        t0 = time.perf_counter()
        try:
            if sc["kind"] == "run":
                out = _run(spark, sc, spec["small"])
            elif sc["kind"] == "lineage":
                out = _lineage(spark, sc)
            elif sc["kind"] == "publish":
                out = _publish(spark, sc)
            elif sc["kind"] == "error":
                out = _run(spark, sc, spec["small"])
            elif sc["kind"] == "stopped":  # the session stopped, then a pipeline run: must be a SessionError
                spark.stop()
                out = _run(spark, sc, spec["small"])
            else:
                raise ValueError(sc["kind"])
            out["ok"] = True
        except Exception as exc:
            out = {"ok": False, "error": type(exc).__name__, "message": str(exc), "module": type(exc).__module__,
                   "traceback": traceback.format_exc()[-4000:]}
            print(f"   {type(exc).__name__}: {exc}", flush=True)
        out["wall"] = round(time.perf_counter() - t0, 2)
        results[sc["name"]] = out
        with open(argv[2], "w") as f:
            json.dump(results, f, indent=1)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
