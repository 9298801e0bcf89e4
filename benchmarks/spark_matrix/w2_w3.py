"""W2 and W3: keyed state, slowly changing or churning; the driver SIGKILLed in the stateful step,
restarted.

``W2`` — **large, slowly changing keyed state**: a per-key running aggregate
(``total``, ``n``) over ``keys`` keys (``--full``: 2·10^6), all loaded at
epoch 0, then ``churn`` = 1 % of them updated per epoch (input ``epoch, key,
v``); the output ``changes`` is each epoch's updated keys with their new
aggregate. The failure: the **driver SIGKILLed in the stateful step** at the
crash epoch (falkirk ``agg@C:kill-mid``; Structured Streaming: inside the
``applyInPandasWithState`` function of batch C), then a new driver process
restarted on the same directories, as in W1.

* ``streaming`` / ``streaming-snap2`` — file source → ``groupBy("key")
  .applyInPandasWithState`` on RocksDB with changelog checkpointing on, at
  the default snapshot spacing (10) and at 2 → ``foreachBatch`` writing
  ``output/changes/epoch=N``.
* ``falkirk-inc`` — ``agg`` ``Eager(key="key", incremental=True)``: a delta of
  the changed keys every epoch, a snapshot every 10 (``Lazy(every=k,
  incremental=True)`` is the same: incremental state checkpoints every
  epoch); ``falkirk-lazy3`` — ``Lazy(every=3, key="key")``, the whole state
  every 3 epochs.

``W3`` — **high-churn state**: every key gets a value every epoch and its
exponentially decayed score changes (``score * 9 div 10 + v``, integers so
that both systems compute the same bits); the output is the epoch's top 100
keys by score. Same failure and systems as W2, falkirk with
``falkirk-lazy3`` (``Lazy(every=3, key="key")``: a third of the state per
epoch on average) and ``falkirk-inc``. Sizes here are far below the issue's
0.5 GB of state (``--full`` uses 10^7 keys); say so when quoting numbers.

Substitute (W2, W3): ``applyInPandasWithState`` calls a Python function per
key of the batch (per-group overhead the peer pays; its documented API for
arbitrary per-key state). W2's running sum could use Spark's native
streaming aggregation instead — cheaper per epoch, not measured here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import STREAMING_CONF, Written, fill_input_logs
from .measure import Meter, child, falkirk_category, stamp, streaming_category
from .pooling import configured, said, summarised


def keyed_table(epoch: int, size: dict[str, Any]) -> Any:
    """W2: all keys at epoch 0 (the bulk load), then ``churn`` of them; W3: every key every epoch. ``key, v``."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(7000 + epoch)
    k = size["keys"]
    if epoch == 0 or size["churn"] >= 1.0:
        keys = np.arange(k, dtype="int64")
    else:
        keys = np.sort(rng.choice(k, max(1, int(k * size["churn"])), replace=False)).astype("int64")
    return pa.table({"epoch": np.full(len(keys), epoch, dtype="int64"), "key": keys,
                     "v": rng.integers(0, 1000, len(keys)).astype("int64")})


KEYED_SCHEMA = "epoch BIGINT, key BIGINT, v BIGINT"
TOP = 100  # W3's output: the epoch's TOP keys by score


def write_keyed_input(directory: Path, size: dict[str, Any], epochs: int) -> None:
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    base = time.time() - 10 * epochs
    for e in range(epochs):
        p = directory / f"epoch-{e:05d}.parquet"
        pq.write_table(keyed_table(e, size), p)
        os.utime(p, (base + e, base + e))


def falkirk_keyed(root: Path, spark: Any, workload: str, size: dict[str, Any], regime: str) -> Any:
    """``updates`` → ``agg`` (keyed state: W2 running sum and count; W3 decayed score ``score * 9 div 10 + v``)
    → output ``changes`` (W2: the updated keys; W3: the top keys by score)."""
    from pyspark.sql import functions as F

    from falkirk.spark import Eager, Lazy, Pipeline
    from falkirk.spark.pipeline.run.session import SMALL_DATA

    pipe = Pipeline(root, spark, spark_conf=SMALL_DATA)
    pipe.input("updates", KEYED_SCHEMA, partitions=2, key="key", source=lambda e: keyed_table(e, size))
    top = TOP

    def running(updates: Any, *, state: Any, epoch: int) -> Any:
        upd = updates.select("key", F.col("v").alias("s"))
        if state is None:
            new = upd.select("key", F.col("s").alias("total"), F.lit(1).cast("bigint").alias("n"))
        else:
            new = state.join(upd, "key", "full_outer").select(
                "key", (F.coalesce("total", F.lit(0)) + F.coalesce("s", F.lit(0))).alias("total"),
                (F.coalesce("n", F.lit(0)) + F.when(F.col("s").isNotNull(), 1).otherwise(0)).cast("bigint").alias("n"))
        return new.join(upd.select("key"), "key"), new

    def decayed(updates: Any, *, state: Any, epoch: int) -> Any:
        upd = updates.select("key", F.col("v").alias("x"))
        if state is None:
            new = upd.select("key", F.col("x").alias("score"))
        else:
            new = state.join(upd, "key", "full_outer").select(
                "key", (F.expr("coalesce(score, 0) * 9 div 10") + F.coalesce("x", F.lit(0))).alias("score"))
        return new.orderBy(F.desc("score"), "key").limit(top), new

    regimes = {"eager-inc": Eager(key="key", incremental=True), "lazy3": Lazy(every=3, key="key"),
               "lazy3-r1": Lazy(every=3, key="key", replicas=1),
               "lazy3-inc": Lazy(every=3, key="key", incremental=True), "eager": Eager(key="key")}
    pipe.step(running if workload in ("W2", "W5") else decayed, name="agg", inputs=["updates"], regime=regimes[regime])
    pipe.output("changes", inputs=["agg"])
    return pipe


class StreamingKeyed:
    """W2/W3/W5 as one query: file source → ``groupBy("key").applyInPandasWithState`` (RocksDB, changelog on) →
    ``foreachBatch`` writing ``output/changes/epoch=N`` (overwritten: idempotent).

    ``kill_at``: the batch in whose stateful operator the driver (``kill="driver"``, W2/W3) or the executor JVM
    running state partition 0 (``kill="executor"``, W5) is SIGKILLed, once (a marker file under ``base``, which
    must be on storage every machine sees for W5). ``rows``: rows through the stateful operator per batch, from
    an accumulator (successful task attempts only)."""

    def __init__(self, spark: Any, input_dir: Path, base: Path, workload: str, *, kill_at: int | None = None,
                 kill: str = "driver") -> None:
        self.spark, self.input_dir, self.base, self.workload, self.kill_at = spark, input_dir, base, workload, kill_at
        self.kill = kill
        self.written = Written(base, streaming_category)
        self.meter = Meter(self.written)
        self.progress: list[dict[str, Any]] = []
        self.acc = spark.sparkContext.accumulator(0)
        self.rows: dict[int, int] = {}
        self._counted = 0

    def query(self) -> Any:
        import pandas as pd
        from pyspark.sql.streaming.state import GroupStateTimeout

        kill_at, marker, w2 = self.kill_at, str(self.base / "killed"), self.workload in ("W2", "W5")
        executor = self.kill == "executor"
        victims = (os.getpid(), int(self.spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
        acc = self.acc

        def update(key: Any, batches: Any, state: Any) -> Any:
            import os as _os
            import signal as _signal

            pdf = pd.concat(list(batches), ignore_index=True)
            acc.add(len(pdf))
            if kill_at is not None and int(pdf["epoch"].iloc[0]) == kill_at and not _os.path.exists(marker):
                if not executor:
                    open(marker, "w").close()
                    for pid in victims:  # the driver: its Python process and its JVM
                        _os.kill(pid, _signal.SIGKILL)
                from pyspark import TaskContext

                tc = TaskContext.get()
                if tc is not None and tc.partitionId() == 0 and tc.attemptNumber() == 0:
                    pid = _os.getpid()  # up from this Python worker (daemon, then the executor JVM)
                    for _ in range(8):
                        with open(f"/proc/{pid}/stat", "rb") as f:
                            pid = int(f.read().rsplit(b")", 1)[1].split()[1])
                        with open(f"/proc/{pid}/cmdline", "rb") as f:
                            if b"CoarseGrainedExecutorBackend" in f.read():
                                break
                    else:
                        raise RuntimeError("no executor JVM above this Python worker")
                    try:
                        _os.close(_os.open(marker, _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY))
                    except FileExistsError:
                        pass
                    else:
                        _os.kill(pid, _signal.SIGKILL)
            x = int(pdf["v"].sum())
            if w2:
                total, n = (int(a) for a in state.get) if state.exists else (0, 0)
                total, n = total + x, n + len(pdf)
                state.update((total, n))
                yield pd.DataFrame({"key": [int(key[0])], "total": [total], "n": [n]})
            else:
                score = int(state.get[0]) if state.exists else 0
                score = score * 9 // 10 + x if state.exists else x
                state.update((score,))
                yield pd.DataFrame({"key": [int(key[0])], "score": [score]})

        schema, state_schema = (("key BIGINT, total BIGINT, n BIGINT", "total LONG, n LONG") if w2
                                else ("key BIGINT, score BIGINT", "score LONG"))
        src = self.spark.readStream.schema(KEYED_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(self.input_dir))
        op = src.groupBy("key").applyInPandasWithState(update, schema, state_schema, "append",
                                                        GroupStateTimeout.NoTimeout)
        return (op.writeStream.foreachBatch(self.batch).option("checkpointLocation", str(self.base / "checkpoint"))
                .trigger(availableNow=True))

    def batch(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        if self.workload == "W3":
            df = df.orderBy(F.desc("score"), "key").limit(TOP)
        df.write.mode("overwrite").parquet(str(self.base / "output" / "changes" / f"epoch={batch_id}"))
        self.rows[batch_id] = self.acc.value - self._counted
        self._counted = self.acc.value
        self.meter.epoch_done(batch_id)

    def run(self) -> None:
        from falkirk.spark.pipeline.run.session import SMALL_DATA, sql_conf

        self.written.scan(count=False)
        with sql_conf(self.spark, {**STREAMING_CONF, **SMALL_DATA}):
            q = self.query().start()
            q.awaitTermination()
        self.progress = [json.loads(p.json) for p in q.recentProgress]
        self.written.scan()


def run_falkirk_keyed(spark: Any, root: Path, spec: dict[str, Any], fail: list[str], *, fill: bool = True) -> Any:
    pipe = falkirk_keyed(root, spark, spec["workload"], spec["size"], spec["regime"])
    written = Written(root, falkirk_category)
    if fill:
        fill_input_logs(pipe, spec["size"]["epochs"])
    written.scan(count=False)
    meter = Meter(written)

    def progress(line: str) -> None:
        if line.startswith("epoch"):
            meter.epoch_done(int(line.split()[1]))

    result = pipe.run(spec["size"]["epochs"], fail=fail, progress=progress)
    written.scan()
    return {"meter": meter, "result": result, "pipe": pipe, "bytes": dict(written.bytes)}


def phase_keyed_run(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """Driver process 1 of W2/W3: the failure-free run (measured; its result written now), then the run whose driver
    is SIGKILLed in the stateful step at the crash epoch (this process does not return)."""
    base, c = Path(spec["base"]), spec["size"]["crash"]
    if spec["system"] == "streaming":
        ref = StreamingKeyed(spark, Path(spec["input"]), base / "reference", spec["workload"])
        ref.run()
        walls, cpus = ref.meter.per_epoch()
        out = {"bytes": dict(ref.written.bytes), "peak_rss": ref.meter.peak_rss, "walls": walls, "cpus": cpus}
    else:
        r = run_falkirk_keyed(spark, base / "reference", spec, [])
        walls, cpus = r["meter"].per_epoch()
        out = {"bytes": r["bytes"], "peak_rss": r["meter"].peak_rss, "walls": walls, "cpus": cpus,
               "regimes": {n: s.regime.describe() for n, s in r["pipe"].steps.items()}}
    Path(spec["result"]).write_text(json.dumps(out, default=str))
    if spec["system"] == "streaming":
        StreamingKeyed(spark, Path(spec["input"]), base / "run", spec["workload"], kill_at=c).run()
    else:
        run_falkirk_keyed(spark, base / "run", spec, [f"agg@{c}:kill-mid"])
    raise SystemExit("the driver was not killed")


def phase_keyed_restart(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """Driver process 2 of W2/W3: the restarted driver; recovery measured, outputs compared with the reference."""
    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.tools.report import costs
    from falkirk.spark.pipeline.tools.verify import output_rows

    base, c, size = Path(spec["base"]), spec["size"]["crash"], spec["size"]
    out: dict[str, Any] = {"log_rows": 0}
    t0 = stamp()
    if spec["system"] == "streaming":
        run = StreamingKeyed(spark, Path(spec["input"]), base / "run", spec["workload"])
        run.run()
        end = run.meter.ends[c]
        rerun = [p for p in run.progress if p["batchId"] <= c]
        out.update(source_rows=sum(p["numInputRows"] for p in rerun), batches_rerun=[p["batchId"] for p in rerun],
                   records_recomputed=0,  # the killed batch's operator had not returned: nothing completed is redone
                   rerun_duration_ms=[p.get("durationMs") for p in rerun],
                   rerun_state_operators=[p.get("stateOperators") for p in rerun])
    else:
        r = run_falkirk_keyed(spark, base / "run", spec, [], fill=False)
        end = r["meter"].ends[c]
        journal, pipe = r["result"].journal, r["pipe"]
        rec = next(x for x in journal.recoveries if x.restart)
        mine = costs(journal, rec, inputs=set(pipe.inputs), stateful=["agg"])[0]
        out.update(records_recomputed=mine.recomputed, source_rows=mine.source_rows, log_rows=mine.log_rows,
                   phases=rec.phases(), actions=dict(rec.plan.actions))
    out.update(recovery_s=end[0] - t0[0], recovery_cpu_s=end[1] - t0[1])
    got = output_rows(spark, Root(str(base / "run")), "changes")
    ref = output_rows(spark, Root(str(base / "reference")), "changes")
    diffs = [f"changes epoch {e}" for e in sorted(set(got) | set(ref)) if got.get(e) != ref.get(e)]
    if len(ref) != size["epochs"]:
        diffs.append(f"reference has {len(ref)} epochs, expected {size['epochs']}")
    out.update(identical=not diffs, differences=diffs, rows_compared=sum(sum(v.values()) for v in ref.values()))
    return out


def measure_keyed(workload: str, configs: list[str], size: dict[str, Any], work: Path, warmup: int) -> dict[str, Any]:
    """W2/W3: each configuration in two driver processes (failure-free + killed; restarted)."""
    input_dir = work / f"{workload.lower()}-input"
    write_keyed_input(input_dir, size, size["epochs"])
    out = {}
    for name in configs:
        opt, spec = configured(workload, name, size, work / f"{workload}-{name}", input_dir)
        t0 = time.perf_counter()
        a = child(spec, work, f"{workload}-{name}-run", "keyed:run", -signal.SIGKILL)
        b = child(spec, work, f"{workload}-{name}-restart", "keyed:restart")
        res = summarised({**a, **b}, spec, opt, warmup, t0)
        shutil.rmtree(work / f"{workload}-{name}", ignore_errors=True)
        print(said(workload, name, res), flush=True)
        out[name] = res
    return out
