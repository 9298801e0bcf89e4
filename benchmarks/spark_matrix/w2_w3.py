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

Structured Streaming, in each formulation of :mod:`.keyed_streaming` (RocksDB with changelog
checkpointing on; ``foreachBatch`` writing ``output/changes/epoch=N``):

* ``streaming-native`` / ``streaming-native-snap2`` — Spark's native streaming aggregation,
  ``groupBy("key").agg(sum("v"), count)`` in update mode, snapshots at the default spacing (10) and at 2:
  **the stream's strongest formulation of W2**, no Python in the operator.
* ``streaming`` / ``streaming-snap2`` — ``groupBy("key").applyInPandasWithState``: a Python function per
  key of the batch (its documented API for arbitrary per-key state); the matrix's stream until issue 60,
  kept as labelled weaker rows.
* ``falkirk-inc`` — ``agg`` ``Eager(key="key", incremental=True)``: a delta of
  the changed keys every epoch, a snapshot every 10 (``Lazy(every=k,
  incremental=True)`` is the same: incremental state checkpoints every
  epoch); ``falkirk-lazy3`` — ``Lazy(every=3, key="key")``, the whole state
  every 3 epochs.

``W3`` — **high-churn state**: every key gets a value every epoch and its
exponentially decayed score changes (``score * 9 div 10 + v``, integers so
that both systems compute the same bits); the output is the epoch's top 100
keys by score. Same failure as W2, falkirk with ``falkirk-lazy3``
(``Lazy(every=3, key="key")``: a third of the state per epoch on average)
and ``falkirk-inc``. The decay has no native streaming aggregation (why: :mod:`.keyed_streaming`); the
stream's formulations:

* ``streaming-merge`` — ``foreachBatch`` joining the batch with a state table the query keeps itself
  (Parquet, one version per batch id, exactly once by batch id, idempotent on a re-run);
* ``streaming-tws`` / ``streaming-tws-rows`` — ``transformWithStateInPandas`` / the row-based
  ``transformWithState`` (the state API v2 of pyspark 4.x);
* ``streaming`` / ``streaming-snap2`` — ``applyInPandasWithState``, as in W2.

Which is strongest, and why the others lose, is in ``benchmarks/README.md`` (the matrix's W3). Sizes here
are far below the issue's 0.5 GB of state (``--full`` uses 10^7 keys); say so when quoting numbers.

**Outputs.** Every run's output is compared, as multisets per epoch, with the same configuration's
failure-free run **and** with :func:`expected_changes`, the workload computed from the input in NumPy (the
reference every configuration of either system must give; ``identical`` is false otherwise).

``--drivers N``: each configuration measured by N pairs of driver processes, round-robin, as in W1/W4.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import Written, fill_input_logs
from .keyed_streaming import KEYED_SCHEMA, TOP, StreamingKeyed
from .measure import Meter, child, falkirk_category, stamp
from .pooling import configured, round_robin, said, summarised

__all__ = ["KEYED_SCHEMA", "TOP", "StreamingKeyed", "expected_changes", "keyed_table", "measure_keyed"]


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


def write_keyed_input(directory: Path, size: dict[str, Any], epochs: int) -> None:
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    base = time.time() - 10 * epochs
    for e in range(epochs):
        p = directory / f"epoch-{e:05d}.parquet"
        pq.write_table(keyed_table(e, size), p)
        os.utime(p, (base + e, base + e))


def expected_changes(workload: str, size: dict[str, Any], epochs: int) -> dict[int, Counter[tuple[int, ...]]]:
    """The output ``changes`` of every epoch, computed from the input in NumPy, as multisets: W2/W5 each updated key
    with its running ``(key, total, n)``; W3 the :data:`TOP` keys by decayed score (every key seen so far decays,
    ``score * 9 // 10``, then the epoch's values are added), ties by key.

    >>> out = expected_changes("W3", {"keys": 5, "churn": 1.0}, 2)
    >>> sorted(out) == [0, 1] and len(out[1]) == 5
    True
    """
    import numpy as np

    k = size["keys"]
    total, n, seen = np.zeros(k, "int64"), np.zeros(k, "int64"), np.zeros(k, bool)
    out: dict[int, Counter[tuple[int, ...]]] = {}
    for e in range(epochs):
        t = keyed_table(e, size)
        keys, v = t.column("key").to_numpy(), t.column("v").to_numpy()
        if workload == "W3":
            total = np.where(seen, total * 9 // 10, 0)
        np.add.at(total, keys, v)
        np.add.at(n, keys, 1)
        seen[keys] = True
        if workload == "W3":
            ids = np.flatnonzero(seen)
            order = np.lexsort((ids, -total[ids]))[:TOP]
            out[e] = Counter(zip(ids[order].tolist(), total[ids[order]].tolist(), strict=True))
        else:
            ids = np.unique(keys)
            out[e] = Counter(zip(ids.tolist(), total[ids].tolist(), n[ids].tolist(), strict=True))
    return out


def compared(spark: Any, base: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """``identical``: the failure run's ``changes`` equal the failure-free run's and :func:`expected_changes`, per
    epoch as multisets; the differences named."""
    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.tools.verify import output_rows

    size = spec["size"]
    got = output_rows(spark, Root(str(base / "run")), "changes")
    ref = output_rows(spark, Root(str(base / "reference")), "changes")
    want = expected_changes(spec["workload"], size, size["epochs"])
    diffs = [f"changes epoch {e}" for e in sorted(set(got) | set(ref)) if got.get(e) != ref.get(e)]
    diffs += [f"changes epoch {e} differs from the reference" for e in sorted(want) if ref.get(e) != want[e]]
    if len(ref) != size["epochs"]:
        diffs.append(f"reference has {len(ref)} epochs, expected {size['epochs']}")
    return {"identical": not diffs, "differences": diffs, "rows_compared": sum(sum(v.values()) for v in ref.values())}


def falkirk_keyed(root: Path, spark: Any, workload: str, size: dict[str, Any], regime: str,
                  form: str = "join") -> Any:
    """``updates`` → ``agg`` (keyed state: W2 running sum and count; W3 decayed score ``score * 9 div 10 + v``)
    → output ``changes`` (W2: the updated keys; W3: the top keys by score).

    ``form`` (W2 only): ``"join"`` — the new state is a full outer join of the whole state with the epoch's
    updates (Spark shuffles and sorts the state every epoch); ``"broadcast"`` — the updates are broadcast and
    the state is only scanned: the updated keys' old rows picked by a broadcast semi-join, the other keys' rows
    kept by a broadcast anti-join, no shuffle of the state (its rows are still copied into the new state);
    ``"changes"`` (with a ``changes=True`` regime) — the old rows read with ``falkirk.spark.lookup`` (the state
    probed by the updated keys), and only the updated keys' new rows returned, which falkirk applies to the state
    in place."""
    from pyspark.sql import functions as F

    from falkirk.spark import Eager, Lazy, Pipeline, lookup
    from falkirk.spark.pipeline.run.session import SMALL_DATA

    pipe = Pipeline(root, spark, spark_conf=SMALL_DATA)
    pipe.input("updates", KEYED_SCHEMA, partitions=2, key="key", source=lambda e: keyed_table(e, size))
    top = TOP

    def loaded(upd: Any) -> Any:  # W2's state after the first epoch: each key's value, counted once
        return upd.select("key", F.col("s").alias("total"), F.lit(1).cast("bigint").alias("n"))

    def running(updates: Any, *, state: Any, epoch: int) -> Any:
        upd = updates.select("key", F.col("v").alias("s"))
        if state is None:
            new = loaded(upd)
        else:
            new = state.join(upd, "key", "full_outer").select(
                "key", (F.coalesce("total", F.lit(0)) + F.coalesce("s", F.lit(0))).alias("total"),
                (F.coalesce("n", F.lit(0)) + F.when(F.col("s").isNotNull(), 1).otherwise(0)).cast("bigint").alias("n"))
        return new.join(upd.select("key"), "key"), new

    def running_broadcast(updates: Any, *, state: Any, epoch: int) -> Any:
        upd = updates.select("key", F.col("v").alias("s"))
        if state is None:
            new = loaded(upd)
            return new, new
        keys = F.broadcast(upd.select("key"))
        old = state.join(keys, "key", "left_semi")  # the updated keys' rows: a scan of the state, no shuffle
        changed = upd.join(old, "key", "left").select(
            "key", (F.coalesce("total", F.lit(0)) + F.col("s")).alias("total"),
            (F.coalesce("n", F.lit(0)) + 1).cast("bigint").alias("n"))
        return changed, state.join(keys, "key", "left_anti").unionByName(changed)

    def running_changes(updates: Any, *, state: Any, epoch: int) -> Any:
        # changes=True: the updated keys' rows are the new state's changes (falkirk applies them in place)
        upd = updates.select("key", F.col("v").alias("s"))
        if state is None:
            new = loaded(upd)
            return new, new
        old = lookup(state, upd.select("key"))  # the updated keys' rows: the state probed by them, no shuffle
        changed = upd.join(old, "key", "left").select(
            "key", (F.coalesce("total", F.lit(0)) + F.col("s")).alias("total"),
            (F.coalesce("n", F.lit(0)) + 1).cast("bigint").alias("n"))
        return changed, changed

    def decayed(updates: Any, *, state: Any, epoch: int) -> Any:
        upd = updates.select("key", F.col("v").alias("x"))
        if state is None:
            new = upd.select("key", F.col("x").alias("score"))
        else:
            new = state.join(upd, "key", "full_outer").select(
                "key", (F.expr("coalesce(score, 0) * 9 div 10") + F.coalesce("x", F.lit(0))).alias("score"))
        # the top keys computed from the new state as made (a function of it): the join is done once an epoch
        return (lambda made: made.orderBy(F.desc("score"), "key").limit(top)), new

    regimes = {"eager-inc": Eager(key="key", incremental=True), "lazy3": Lazy(every=3, key="key"),
               "lazy3-r1": Lazy(every=3, key="key", replicas=1),
               "lazy3-inc": Lazy(every=3, key="key", incremental=True), "eager": Eager(key="key"),
               "lazy3-inc-changes": Lazy(every=3, key="key", incremental=True, changes=True),
               "lazy3-inc-differential-changes": Lazy(every=3, key="key", incremental=True, changes=True,
                                                      differential=True)}
    if form not in ("join", "broadcast", "changes") or (form != "join" and workload != "W2"):
        raise ValueError(f"form={form!r}: 'join', or 'broadcast' or 'changes' for W2")
    if (form == "changes") != regime.endswith("-changes"):
        raise ValueError(f"form={form!r} with regime {regime!r}: the changes form needs a changes=True regime")
    steps = {"join": running, "broadcast": running_broadcast, "changes": running_changes}
    fn = steps[form] if workload in ("W2", "W5") else decayed
    pipe.step(fn, name="agg", inputs=["updates"], regime=regimes[regime])
    pipe.output("changes", inputs=["agg"])
    return pipe


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
        ref = StreamingKeyed(spark, Path(spec["input"]), base / "reference", spec["workload"], form=spec["form"])
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
        StreamingKeyed(spark, Path(spec["input"]), base / "run", spec["workload"], kill_at=c, form=spec["form"]).run()
    else:
        run_falkirk_keyed(spark, base / "run", spec, [f"agg@{c}:kill-mid"])
    raise SystemExit("the driver was not killed")


def phase_keyed_restart(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """Driver process 2 of W2/W3: the restarted driver; recovery measured, outputs compared (:func:`compared`)."""
    from falkirk.spark.pipeline.tools.report import costs

    base, c = Path(spec["base"]), spec["size"]["crash"]
    out: dict[str, Any] = {"log_rows": 0}
    t0 = stamp()
    if spec["system"] == "streaming":
        run = StreamingKeyed(spark, Path(spec["input"]), base / "run", spec["workload"], form=spec["form"])
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
    out.update(compared(spark, base, spec))
    return out


def measure_keyed(workload: str, configs: list[str], size: dict[str, Any], work: Path, warmup: int,
                  drivers: int = 1) -> dict[str, Any]:
    """W2/W3: each configuration in ``drivers`` measurements (each a failure-free and killed driver, then its restart),
    round-robin over the configurations (:func:`~.pooling.round_robin`)."""
    input_dir = work / f"{workload.lower()}-input"
    write_keyed_input(input_dir, size, size["epochs"])

    def one(name: str, d: int) -> dict[str, Any]:
        opt, spec = configured(workload, name, size, work / f"{workload}-{name}", input_dir)
        tag = f"{workload}-{name}" + (f"-d{d + 1}" if d else "")
        for attempt in (1, 2):  # a driver that fails (seen: "Python worker failed to connect back" at load 17-21)
            t0 = time.perf_counter()  # is run again once, noted; a wrong output is not a failure here
            try:
                a = child(spec, work, f"{tag}-run", "keyed:run", -signal.SIGKILL)
                b = child(spec, work, f"{tag}-restart", "keyed:restart")
                break
            except SystemExit as exc:
                if attempt == 2:
                    raise
                print(f"{tag}: {str(exc).splitlines()[0]}; run again", flush=True)
                shutil.rmtree(work / f"{workload}-{name}", ignore_errors=True)
        res = summarised({**a, **b, "attempts": attempt}, spec, opt, warmup, t0)
        shutil.rmtree(work / f"{workload}-{name}", ignore_errors=True)
        print(said(workload, name, res, tail=f", driver {d + 1} of {drivers}" if drivers > 1 else ""), flush=True)
        return res

    return round_robin(configs, drivers, one)
