"""The mixed application: YSB's counts beside a heavy branch over all history, sharing the filtered stream;
the heavy branch fails.

``MIXED`` — YSB (:mod:`.ysb`: the same paced producer, the same ``views`` — filter, projection, join — and
``counts`` per campaign per 10-s window) plus a **heavy branch** reading the same ``views``: it keeps every
view since epoch 0 (``campaign_id, user_id, event_time``) and every ``heavy_every`` epochs (at epochs ``e``
with ``(e + 1) % heavy_every == 0``) computes, per campaign over **all history**, the exact p50/p90/p99 of the
time between a user's consecutive views of the campaign (a window function and a sort over everything seen),
written to the output ``heavy_stats`` (empty at the other epochs). **The failure**: the heavy branch raises a
``ConnectionError`` at epoch ``fail`` (one of its computing epochs), once. What is measured is what it does
to the YSB outputs: their **latency during the heavy branch's recovery** (every ``campaign_counts`` epoch
whose release-to-commit span overlaps the span from the exception to ``heavy_stats``' epoch ``fail``
committed) against the failure-free run's steady p99 — the issue's target is ≤ 1.5× — and which steps
rolled back.

Configurations
--------------
* ``falkirk`` — ``views`` ``Ephemeral()`` (unlogged), ``counts`` ``Lazy(every=3, key="campaign_id")``,
  ``heavy`` ``Lazy(every=heavy_every, append=True)`` (it returns each epoch's views to append to its history,
  made once; the views appended since are checkpointed at its computing
  epochs; at the others its output is ``limit(0)``: an empty output with no job), two outputs; sequential. An unlogged shared step makes the heavy branch's rollback spread to
  ``views`` and from there to ``counts`` (C1–C4: ``counts`` consumed ``views``' epochs that would be sent
  again). The failure here is transient and loses nothing, so it is retried in place (since 2026-12-01): no
  step rolls back, and the domino is that of a failure that loses ``heavy``'s memory.
* ``falkirk-logged`` — ``views`` ``Ephemeral(log=True)``: the heavy branch replays ``views``' log, only it rolls
  back; sequential (the counts still wait for the heavy redo: one execution at a time). Retried in place
  here too.
* ``falkirk-logged-concurrent`` — the same with ``concurrency=3``: ``counts`` and its output go on while the
  heavy branch recovers.
* ``falkirk-logged-concurrent-rollback`` — the same with ``retry_in_place=False``. The heavy branch's
  ``ConnectionError`` is transient and loses nothing, so the other falkirk configurations run its epoch again
  in place; this one rolls the branch back and replays ``views``' log, the path of a failure that lost the
  step's memory.
* ``streaming-two-queries`` — Structured Streaming as a Spark user splits it (one query per stateful part,
  SPARK-28074): query 1 is YSB's (:class:`.ysb_streaming.StreamingYSB`); query 2 reads the same files, keeps
  ``views`` per batch as a Parquet table (``history/batch=N``, overwritten: idempotent) and at its computing
  batches reads the whole table and writes the same percentiles — all history kept the way a Spark user
  keeps it, since no stateful operator holds it. Each query in its own FAIR scheduler pool (the peer at its
  strongest: the counts' small jobs are not queued behind the heavy ones). The exception stops query 2, which
  is restarted in the same session; query 1 never stops.

Each configuration's driver runs a warm-up, the failure-free reference and the failing run, all paced
(:func:`.ysb.paced`); outputs are compared epoch by epoch as multisets with the reference (``heavy_stats``:
its non-empty epochs) and the counts with the pure-Python oracle.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from .measure import child
from .pooling import configured, round_robin
from .ysb import OUTPUT, compare, described, expected_counts, falkirk_commits, outputs, paced, ysb_pipeline
from .ysb_input import percentile
from .ysb_metrics import after_failure, revive, stats, steady
from .ysb_streaming import Failure, StreamingYSB, ad_table, views_of

HEAVY = "heavy_stats"
STATS_SCHEMA = "campaign_id STRING, p50 DOUBLE, p90 DOUBLE, p99 DOUBLE, n BIGINT"


def heavy_stats(history: Any) -> Any:
    """Per campaign over ``history`` (``campaign_id, user_id, et``): exact p50/p90/p99 of the gaps between a
    user's consecutive views of the campaign, and how many gaps."""
    from pyspark.sql import functions as F

    gaps = history.selectExpr(
        "campaign_id", "et - lag(et) OVER (PARTITION BY campaign_id, user_id ORDER BY et) AS gap").where("gap IS NOT NULL")
    stats = gaps.groupBy("campaign_id").agg(F.expr("percentile(gap, array(0.5, 0.9, 0.99)) AS p"), F.expr("count(*) AS n"))
    return stats.selectExpr("campaign_id", "p[0] AS p50", "p[1] AS p90", "p[2] AS p99", "n")


def computes(epoch: int, size: dict[str, Any]) -> bool:
    return (epoch + 1) % size["heavy_every"] == 0


def mixed_pipeline(root: Path, spark: Any, size: dict[str, Any], *, concurrency: int = 1, log_views: bool = False,
                   failure: Failure | None = None) -> Any:
    """MIXED on falkirk: :func:`.ysb.ysb_pipeline` and the heavy branch (``failure``: in ``heavy``)."""
    from falkirk.spark import Lazy

    pipe = ysb_pipeline(root, spark, size, concurrency=concurrency, log_views=log_views)
    fail = failure or Failure(None, where="heavy")

    def heavy(views: Any, *, state: Any, epoch: int, spark: Any) -> Any:
        fail.maybe(epoch)
        hist = views if state is None else state.unionByName(views)
        # nothing at the other epochs: ``limit(0)``, which falkirk knows is empty without a job (the stream's
        # query 2 writes nothing then)
        out = heavy_stats(hist) if computes(epoch, size) else spark.createDataFrame([], STATS_SCHEMA).limit(0)
        return out, views  # append=True: its new state is the epoch's views, appended to the history

    pipe.step(heavy, inputs=["views"], regime=Lazy(every=size["heavy_every"], append=True))
    pipe.output(HEAVY, inputs=["heavy"])
    return pipe


class StreamingMixed(StreamingYSB):
    """MIXED as two queries (module docstring); ``failure`` strikes query 2 (the heavy one)."""

    def __init__(self, spark: Any, base: Path, size: dict[str, Any], *, failure: Failure | None = None,
                 on_commit: Any = None) -> None:
        super().__init__(spark, base, size, on_commit=on_commit)
        self.heavy_failure = failure or Failure(None, where="heavy")
        self.heavy_commits: dict[int, float] = {}

    def heavy_writer(self) -> Any:
        views = views_of(self.source(), ad_table(self.spark, self.size))
        return (views.writeStream.foreachBatch(self.heavy_batch)
                .option("checkpointLocation", str(self.base / "checkpoint-heavy"))
                .trigger(processingTime=f"{self.size['interval']} seconds"))

    def heavy_batch(self, df: Any, batch_id: int) -> None:
        self.heavy_failure.maybe(batch_id, self.victims)
        history = self.base / "history"
        df.write.mode("overwrite").parquet(str(history / f"batch={batch_id}"))
        target = str(self.base / "output" / HEAVY / f"epoch={batch_id}")
        if computes(batch_id, self.size):
            hist = self.spark.read.parquet(str(history)).where(f"batch <= {batch_id}").drop("batch")
            heavy_stats(hist).write.mode("overwrite").parquet(target)
        at = time.time()
        self.heavy_commits[batch_id] = at
        with open(self.base / "heavy_commits.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"epoch": batch_id, "at": at}) + "\n")

    def run(self, epochs: int, timeout: float = 1800.0) -> None:
        """Both queries, each in its own scheduler pool, until both committed batch ``epochs - 1``; query 2 is
        restarted once (same session, same checkpoint) when it fails."""
        from pyspark.errors import StreamingQueryException

        from falkirk.spark.pipeline.run.session import SMALL_DATA, sql_conf

        from ..spark_vs_streaming import STREAMING_CONF
        from .ysb_streaming import STREAM_EXTRA

        sc, end = self.spark.sparkContext, time.time() + timeout
        with sql_conf(self.spark, {**STREAMING_CONF, **SMALL_DATA, **STREAM_EXTRA}):
            sc.setLocalProperty("spark.scheduler.pool", "ysb")
            q1 = self.writer().start()
            sc.setLocalProperty("spark.scheduler.pool", "heavy")
            q2 = self.heavy_writer().start()
            sc.setLocalProperty("spark.scheduler.pool", None)
            restarted = False
            try:
                while epochs - 1 not in self.commits or epochs - 1 not in self.heavy_commits:
                    if q1.exception() is not None:
                        raise RuntimeError(f"query 1 failed: {q1.exception()}")
                    try:
                        q2.awaitTermination(0.2)
                    except StreamingQueryException:
                        if restarted:
                            raise
                        self.progress += [{**json.loads(p.json), "attempt": 0} for p in q2.recentProgress]
                        sc.setLocalProperty("spark.scheduler.pool", "heavy")
                        q2, restarted = self.heavy_writer().start(), True
                        sc.setLocalProperty("spark.scheduler.pool", None)
                    if time.time() > end:
                        raise TimeoutError(f"batch {epochs - 1} not committed by both queries within {timeout} s")
            finally:
                q1.stop()
                q2.stop()


def heavy_commits(run: dict[str, Any], spec: dict[str, Any], epochs: int) -> dict[int, float]:
    if spec["system"] == "falkirk":
        return falkirk_commits(run["dir"], run["pipe"], epochs, HEAVY)
    return dict(run["stream"].heavy_commits)


def nonempty(rows: dict[int, Any]) -> dict[int, Any]:
    return {e: c for e, c in rows.items() if c}


def phase_mixed(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """One configuration's driver: warm-up, the failure-free reference, the run whose heavy branch fails."""
    size, base, c = spec["size"], Path(spec["base"]), spec["size"]["fail"]
    build = mixed_pipeline if spec["system"] == "falkirk" else StreamingMixed
    if size.get("warm"):
        shutil.rmtree(paced(spark, base, spec, "warm", epochs=size["warm"], build=build)["dir"], ignore_errors=True)
    out: dict[str, Any] = {}
    rows: dict[str, Any] = {}
    for kind in ("reference", "failure"):
        failure = Failure(c, where="heavy") if kind == "failure" else None
        run = paced(spark, base, spec, kind, failure=failure, build=build)
        counts, heavy = outputs(spark, run["dir"]), nonempty(outputs(spark, run["dir"], HEAVY))
        rows[kind] = (counts, heavy)
        out[kind] = described(run, counts, size)
        out[kind]["bytes"] = run["bytes"]
        out[kind]["heavy_commits"] = heavy_commits(run, spec, size["epochs"])
        if failure is not None:
            out[kind]["failed_at"] = failure.at
            if spec["system"] == "falkirk":
                rec = run["result"].journal.recoveries
                out["actions"] = [dict(r.plan.actions) for r in rec]
                out["phases"] = [r.phases() for r in rec]
                out["redone"] = sorted({x.step for x in run["result"].journal.executions if x.redo})
                from falkirk.spark.pipeline.tools.report import costs

                pipe = run["pipe"]
                mine = costs(run["result"].journal, rec[0], inputs=set(pipe.inputs),
                             stateful=[n for n in pipe.steps if not pipe.stateless(n)])[0]
                out["recomputed"] = {"records_recomputed": mine.recomputed, "source_rows": mine.source_rows,
                                     "log_rows": mine.log_rows}
    (counts, heavy), (rc, rh) = rows["failure"], rows["reference"]
    want = [e for e in range(size["epochs"]) if computes(e, size)]
    out["differences"] = (compare(counts, rc, size["epochs"]) + compare(heavy, rh, len(want), HEAVY)
                          + compare(rc, expected_counts(size), size["epochs"]))
    if sorted(rh) != want:
        out["differences"].append(f"{HEAVY}: reference epochs {sorted(rh)}, expected {want}")
    return out


def summarise_mixed(raw: dict[str, Any], size: dict[str, Any], warmup: int) -> dict[str, Any]:
    ref, run, c = revive(raw["reference"]), revive(raw["failure"]), size["fail"]
    st = steady(ref, warmup)
    hc = {int(e): t for e, t in run["heavy_commits"].items()}
    start, end = run["failed_at"], hc.get(c)
    during = {e: v for e, v in run["latency"].items()
              if end is not None and run["releases"][e] <= end and run["commits"][e] >= start}
    p99 = st["latency"]["p99"]
    worst = max(during.values(), default=None)
    fail = after_failure(run, ref, c, warmup)
    return {"cpu_median_s": st["cpu_median_s"], "wall_median_s": st["service_median_s"], "steady": st,
            "heavy_latency": stats(t - ref["releases"][int(e)] for e, t in ref["heavy_commits"].items()
                                   if computes(int(e), size) and int(e) in ref["releases"]),
            "heavy_recovery_s": None if end is None else end - start,
            "during_recovery": {"epochs": sorted(during), "latency": stats(during.values()),
                                "p99_over_steady_p99": None if worst is None or not p99 else
                                percentile(during.values(), 99) / p99},
            "failure": fail, "recovery_cpu_s": fail["excess_cpu_s"], "recovery_s": None if end is None else end - start,
            "bytes_per_epoch": sum(raw["reference"]["bytes"].values()) / size["epochs"],
            "bytes": raw["reference"]["bytes"], "records_recomputed": 0, "source_rows": 0, "log_rows": 0,
            **raw.get("recomputed", {}), "actions": raw.get("actions"), "phases": raw.get("phases"), "redone": raw.get("redone"),
            "identical": not raw["differences"], "differences": raw["differences"],
            "timeline": {"reference": ref["latency"], "failure": run["latency"], "failed_at": start - run["t0"],
                         "heavy_recovered_at": None if end is None else end - run["t0"]}}


def measure_mixed(configs: list[str], size: dict[str, Any], work: Path, warmup: int, drivers: int = 1) -> dict[str, Any]:
    """MIXED: each configuration in ``drivers`` driver processes, round-robin."""
    import os

    warmup = max(warmup, size.get("warmup", 0))

    def one(name: str, d: int) -> dict[str, Any]:
        tag = f"MIXED-{name}" + (f"-d{d + 1}" if d else "")
        opt, spec = configured("MIXED", name, size, work / tag, work)
        t0 = time.perf_counter()
        res = summarise_mixed(child(spec, work, tag, "MIXED"), size, warmup)
        res.update(system=spec["system"], benchmark_s=time.perf_counter() - t0, conf=opt.get("conf", {}),
                   load_average=os.getloadavg())
        shutil.rmtree(work / tag, ignore_errors=True)
        r, f = res["during_recovery"], lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"MIXED {name:26} cpu {f(res['cpu_median_s'])} s/epoch, counts latency p99 "
              f"{f(res['steady']['latency']['p99'])} s, during the heavy recovery p99 {f(r['latency']['p99'])} s "
              f"({f(r['p99_over_steady_p99'])}×), heavy recovered in {f(res['heavy_recovery_s'])} s, redone "
              f"{res['redone']}, identical {res['identical']} ({res['benchmark_s']:.0f} s, driver {d + 1} of {drivers})",
              flush=True)
        return res

    return round_robin(configs, drivers, one)


def mixed_targets(summary: dict[str, Any]) -> dict[str, Any]:
    """The issue's target: the YSB outputs' p99 during the heavy branch's recovery ≤ 1.5× their steady p99."""
    return {n: {"during_recovery_p99_le_1.5x_steady": None if (x := s["during_recovery"]["p99_over_steady_p99"])
                is None else x <= 1.5} for n, s in summary.items()}


__all__ = ["HEAVY", "OUTPUT", "measure_mixed", "mixed_pipeline", "mixed_targets", "phase_mixed"]
