"""W4: a heavy logged aggregate feeding a stateful branch and an exactly-once SQLite sink; the sink
fails once.

``W4`` — **a heavy logged aggregate feeding a stateful branch and an
exactly-once SQLite sink**; the failure is an exception raised by the sink
for one epoch. Input: ``events`` (``epoch, user, category, amount,
purchase``), ``--w4-events`` rows per epoch over ``--w4-users`` users.
The steps:

* ``heavy`` — the flagship's heavy per-epoch aggregate
  (:func:`falkirk.spark.pipeline.tools.flagship.heavy`: group-bys, a
  broadcast join, a ranking; one row per user of the epoch);
* ``totals`` — stateful branch: per-user running totals (spend, events,
  purchases) updated from ``heavy``'s rows, emitting the users of the epoch
  with their totals and ``avg_spend`` (``spend div events``), written to the
  external output ``totals_out`` (Parquet per epoch);
* ``sink`` — every ``heavy`` row of the epoch inserted into SQLite
  (``sink.sqlite``, table ``heavy_rows``) exactly once.

Configurations:

* ``falkirk`` — ``heavy`` Batch (logged), ``totals`` ``Lazy(every=3,
  key="user")``, ``sink`` Eager (the SQLite transaction records the epoch),
  ``totals_out`` Output. The failure: the sink function raises after
  collecting its rows, before inserting them (a real exception in user
  code, not falkirk's injector); falkirk rolls back the failed step's
  closure (only ``sink``) in the same driver and redoes it from ``heavy``'s
  log.
* ``falkirk-inc`` — the same with ``totals`` ``Eager(key="user",
  incremental=True)`` (a delta of the changed keys every epoch, a snapshot
  every 10).
* ``falkirk-advised`` — the regimes :meth:`Pipeline.advise
  <falkirk.spark.Pipeline.advise>` chooses (issue 33), each step failing
  alone at ``ADVISE_RATE`` (0.05 failures per epoch), priced in CPU seconds
  from a profile taken by a driver process of its own before the measured
  one (as a user profiles once, then runs): :meth:`Pipeline.profile
  <falkirk.spark.Pipeline.profile>` runs the shipped regimes for all the
  epochs on a scratch root, the sink raising at epoch ``epochs // 2 - 1``.
  Its result carries the advice and the model's predictions for the
  shipped and the advised regimes: steady cost per epoch (the sum of the
  step executions, measured by the failure-free run's journal as
  ``journal_steady_cpu_s``) and this failure's recovery (the redo of the
  sink's epoch from ``heavy``'s log: measured as ``failure_excess_cpu_s``,
  the CPU from the exception to the end of the failed epoch, ``recovery_cpu_s``,
  less the steady executions, in the failure-free run, of the sink and of
  every step after it in the pipeline's order (``totals_out``; each is in
  ``steady_after_failure_cpu_s``) — those run that epoch once in any run,
  and the model prices only what the failure adds; until 2026-11-27 the
  check used ``recovery_cpu_s`` whole, then, until 04:30 UTC that day, took
  off the sink's execution alone, leaving ``totals_out``'s in; since
  2026-11-28 the check takes both, and the steady executions, less the
  JVM's JIT compilers' CPU — ``failure_excess_nojit_cpu_s``,
  ``recovery_nojit_cpu_s`` — as the advisor prices them; since 2026-12-01
  it also takes off the work steps left to that epoch's end, which any run
  does there — a ``Lazy`` state made and checkpointed after the epoch's
  executions, measured by this run's journal, ``epoch_end_cpu_s``: with the
  sink's failure retried in place, the window holds ``totals``' whole
  epoch-end work, which before fell outside it). The profile's time is in
  no figure.
* ``streaming`` — one Structured Streaming query, as a Spark user with one
  query would write it: Parquet file source (one file per epoch,
  ``maxFilesPerTrigger=1``, ``Trigger.AvailableNow``) →
  ``groupBy("user").applyInPandasWithState`` on the RocksDB state store with
  changelog checkpointing **on** (the running totals; the events pass
  through the operator, plus one totals row per user of the batch:
  **substitute** — a stateful operator cannot come after the per-epoch
  aggregate in one query, so the totals are summed from the raw events,
  which gives the same numbers) → ``foreachBatch``: ``heavy`` on the
  passed-through events, the totals to ``output/totals_out/epoch=N``
  (overwritten: idempotent), the sink in one SQLite transaction skipped when
  the epoch is already there (exactly once although ``foreachBatch`` is
  at-least-once). The failure: the same exception in the same place of
  ``foreachBatch``; the query stops with it and is **restarted in the same
  SparkSession** on the same checkpoint location (batch N runs again:
  input re-read, state reloaded, ``heavy`` and the totals recomputed).
* ``streaming-snap2`` — the same, RocksDB snapshot every 2 deltas
  (``minDeltasForSnapshot=2``, its best recovery setting; default 10).
* ``streaming-split`` — Spark's own advice for exactly-once side effects
  (SPARK-28074: one query per stateful operator): query 1 = file source →
  ``applyInPandasWithState`` (totals only, no pass-through) →
  ``foreachBatch`` writing ``totals_out``; query 2 = file source →
  ``foreachBatch``: ``heavy`` and the sink. The queries run one after the
  other over all epochs (``AvailableNow``), each with its own checkpoint
  location; a failed sink restarts query 2 only.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import Written, advice_doc, fill_input_logs, journal_steady
from .configs import ADVISE_RATE
from .measure import Meter, child, falkirk_category
from .pooling import configured, report_advice, round_robin, said, summarised
from .w4_steps import (
    EVENTS_SCHEMA,
    Failure,
    avg_expr,
    events_table,
    heavy_of,
    insert_sink,
    sink_rows,
    write_parquet_input,
)
from .w4_streaming import StreamingW4


def falkirk_w4(root: Path, spark: Any, size: dict[str, int], totals: str, *, version: int = 1,
               failure: Failure | None = None, gc: bool = True, code_changes: dict[str, int] | None = None) -> Any:
    """The W4 pipeline on falkirk (see the module docstring)."""
    from pyspark.sql import functions as F

    from falkirk.spark import Batch, Eager, Lazy, Pipeline
    from falkirk.spark.pipeline.run.session import SMALL_DATA

    pipe = Pipeline(root, spark, spark_conf=SMALL_DATA, gc=gc, code_changes=code_changes)
    pipe.input("events", EVENTS_SCHEMA, partitions=2, key="user", source=lambda e: events_table(e, size))

    def heavy(events: Any) -> Any:
        return heavy_of(events)

    def totals_fn(heavy: Any, *, state: Any, epoch: int) -> Any:
        upd = heavy.select("user", "spend", "events", "purchases")
        if state is None:
            new = upd
        else:
            new = state.join(upd.withColumnsRenamed({"spend": "s", "events": "n", "purchases": "p"}), "user",
                             "full_outer").select(
                "user", (F.coalesce("spend", F.lit(0)) + F.coalesce("s", F.lit(0))).alias("spend"),
                (F.coalesce("events", F.lit(0)) + F.coalesce("n", F.lit(0))).alias("events"),
                (F.coalesce("purchases", F.lit(0)) + F.coalesce("p", F.lit(0))).alias("purchases"))
        out = new.join(upd.select("user"), "user").select(
            "user", "spend", "events", "purchases", F.expr(avg_expr(version)).cast("bigint").alias("avg_spend"))
        return out, new

    def sink(heavy: Any, *, db: Any, epoch: int) -> None:
        rows = sink_rows(heavy)
        if failure is not None:
            failure.maybe(epoch)
        insert_sink(db, epoch, rows)

    regime = Lazy(every=3, key="user") if totals == "lazy" else Eager(key="user", incremental=True)
    pipe.step(heavy, regime=Batch())
    pipe.step(totals_fn, name="totals", inputs=["heavy"], regime=regime)
    pipe.step(sink, regime=Eager(database="sink.sqlite", tables={"heavy_rows": "epoch"}))
    pipe.output("totals_out", inputs=["totals"])
    return pipe


def run_falkirk_w4(spark: Any, root: Path, size: dict[str, Any], spec: dict[str, Any], *, epochs: int,
                   failure: Failure | None = None, version: int = 1, gc: bool = True,
                   code_changes: dict[str, int] | None = None, fill: bool = True,
                   regimes: dict[str, Any] | None = None) -> dict[str, Any]:
    pipe = falkirk_w4(root, spark, size, spec["totals"], version=version, failure=failure, gc=gc,
                      code_changes=code_changes)
    if regimes:
        pipe.apply(regimes)
    written = Written(root, falkirk_category)
    if fill:
        fill_input_logs(pipe, epochs)
    written.scan(count=False)
    meter = Meter(written)

    def progress(line: str) -> None:
        if line.startswith("epoch"):
            meter.epoch_done(int(line.split()[1]))

    result = pipe.run(epochs, progress=progress)
    written.scan()
    return {"meter": meter, "result": result, "pipe": pipe, "bytes": dict(written.bytes)}


def outputs_of(spark: Any, base: Path, epochs: range | None = None) -> tuple[dict[int, Counter[Any]], Counter[Any]]:
    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.tools.verify import output_rows, table_rows

    out = output_rows(spark, Root(str(base)), "totals_out")
    if epochs is not None:
        out = {e: v for e, v in out.items() if e in epochs}
    return out, table_rows(base / "sink.sqlite", "heavy_rows")


def compare(got: tuple[dict[int, Counter[Any]], Counter[Any]], ref: tuple[dict[int, Counter[Any]], Counter[Any]],
            expect_epochs: int, sink: bool = True) -> dict[str, Any]:
    diffs = [f"totals_out epoch {e}" for e in sorted(set(got[0]) | set(ref[0])) if got[0].get(e) != ref[0].get(e)]
    if sink and got[1] != ref[1]:
        diffs.append("sink.sqlite:heavy_rows")
    if len(ref[0]) != expect_epochs or not any(ref[0].values()):
        diffs.append(f"reference has {len(ref[0])} totals_out epochs, expected {expect_epochs}")
    rows = sum(sum(c.values()) for c in ref[0].values()) + (sum(ref[1].values()) if sink else 0)
    return {"identical": not diffs, "differences": diffs, "rows_compared": rows}


def streaming_recovery(st: StreamingW4, failure: Failure, epoch: int, query: str) -> dict[str, Any]:
    """Recovery measured from the exception to the failed epoch's outputs committed, and what was re-run."""
    assert failure.at is not None
    end = st.meters[query].ends[epoch]
    rerun = [p for p in st.progress if p["query"] == query and p["attempt"] == 1 and p["batchId"] == epoch]
    return {"recovery_s": end[0] - failure.at[0], "recovery_cpu_s": end[1] - failure.at[1],
            "source_rows": sum(p["numInputRows"] for p in rerun),
            "batches_rerun": [p["batchId"] for p in rerun],
            "rerun_duration_ms": [p.get("durationMs") for p in rerun],
            "rerun_state_operators": [p.get("stateOperators") for p in rerun]}


def users_in(size: dict[str, int], epoch: int) -> int:
    return len(set(events_table(epoch, size).column("user").to_pylist()))


def recomputed(size: dict[str, int], epochs: Any, mode: str, *, heavy: bool) -> int:
    """Streaming: rows of the re-run batches' stateful operator (single query: the events passed through and a totals
    row per user; split: a totals row per user) and, with ``heavy``, ``heavy``'s rows (one per user)."""
    total = 0
    for k in epochs:
        users = users_in(size, k)
        total += users + (size["events"] if mode == "single" else 0) + (users if heavy else 0)
    return total


def phase_w4_advise(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """``falkirk-advised``'s first driver: the shipped W4 regimes profiled on a scratch root, then advised (each
    step failing alone at ``ADVISE_RATE``); the advice's figures, its regimes described."""
    size, base = spec["size"], Path(spec["base"])
    epochs, c = size["epochs"], size["fail"]
    t0 = time.perf_counter()
    pipe = falkirk_w4(base / "profile", spark, size, spec["totals"], failure=Failure(max(0, epochs // 2 - 1)))
    fill_input_logs(pipe, epochs)
    # no restart measured: the advice weighs step failures only, and the sink closes over ``failure``, whose
    # attributes the first run changed (a second run on the root would be refused as a code change)
    costs = pipe.profile(epochs=epochs, restart=False)
    advice = pipe.advise(ADVISE_RATE, costs=costs, objective=costs.unit)
    doc = advice_doc(pipe, costs, advice, ("sink",), c - 1, t0)  # the sink fails while it runs epoch c
    shutil.rmtree(base / "profile", ignore_errors=True)
    return doc


def phase_w4(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """One configuration of W4: the failure-free run (measured), then the run with the sink's exception
    (``falkirk-advised``: with the regimes :func:`phase_w4_advise` chose)."""
    from falkirk.spark.pipeline.tools.report import costs

    size, epochs, c, base = spec["size"], spec["size"]["epochs"], spec["size"]["fail"], Path(spec["base"])
    out: dict[str, Any] = {}
    regimes = None
    if spec.get("advice"):  # falkirk-advised: what its first driver (phase_w4_advise) chose
        from falkirk.spark.pipeline.declare.regimes import from_description

        out["advice"] = spec["advice"]
        regimes = {n: from_description(n, d) for n, d in spec["advice"]["regimes"].items()}
    if spec["system"] == "streaming":
        inp = Path(spec["input"])
        ref = StreamingW4(spark, inp, base / "reference", spec["mode"])
        ref.run()
        walls, cpus = ref.per_epoch()
        out.update(bytes=dict(ref.written.bytes), peak_rss=max(m.peak_rss for m in ref.meters.values()))
        failure = Failure(c)
        run = StreamingW4(spark, inp, base / "run", spec["mode"], failure=failure)
        run.run()
        query = "single" if spec["mode"] == "single" else "sink"
        out.update(streaming_recovery(run, failure, c, query))
        # re-run steps of batch c that had completed before the exception: heavy (and the stateful operator)
        out["records_recomputed"] = recomputed(size, [c], spec["mode"], heavy=True)
        out["log_rows"] = 0
    else:
        ref_run = run_falkirk_w4(spark, base / "reference", size, spec, epochs=epochs, regimes=regimes)
        walls, cpus = ref_run["meter"].per_epoch()
        out.update(bytes=ref_run["bytes"], peak_rss=ref_run["meter"].peak_rss,
                   regimes={n: s.regime.describe() for n, s in ref_run["pipe"].steps.items()})
        failure = Failure(c)
        r = run_falkirk_w4(spark, base / "run", size, spec, epochs=epochs, failure=failure, regimes=regimes)
        assert failure.at is not None
        end = r["meter"].ends[c]
        journal, pipe = r["result"].journal, r["pipe"]
        rec = journal.recoveries[0]
        mine = costs(journal, rec, inputs=set(pipe.inputs), stateful=[n for n in pipe.steps if not pipe.stateless(n)])[0]
        # the failure's excess: from the exception to the end of epoch c, the sink and every step after it in the
        # pipeline's order (totals_out) run epoch c once, as in any run, so their steady executions (the
        # failure-free run's medians) are taken off; what remains is what the model prices (restore, replay, redo)
        ref_journal = ref_run["result"].journal
        def steady(jit: bool) -> dict[str, float]:  # the sink's and later steps' median first executions
            return {n: statistics.median(xs) for n in pipe.order[pipe.order.index("sink"):]
                    if (xs := [x for x in (ref_journal.cpu(n, e, jit=jit) for e in range(1, epochs)) if x is not None])}

        # and the same less the JVM's JIT compilers' CPU (the window's, the steady executions'), as the advisor
        # prices an in-driver recovery
        steady_after, steady_nojit = steady(True), steady(False)
        window_jit = end[2] - failure.jit_at
        # the work steps left to epoch c's end (a Lazy state made, and checkpointed) falls in the window too, as
        # it would without the failure: taken off as well (this run's own measurement of it)
        later = [x for x in journal.at(c) if x.later_cpu is not None]
        later_cpu = sum(x.later_cpu or 0.0 for x in later)
        later_nojit = later_cpu - sum(x.later_jit or 0.0 for x in later)
        out.update(recovery_s=end[0] - failure.at[0], recovery_cpu_s=end[1] - failure.at[1],
                   failure_excess_cpu_s=end[1] - failure.at[1] - sum(steady_after.values()) - later_cpu,
                   recovery_nojit_cpu_s=end[1] - failure.at[1] - window_jit,
                   failure_excess_nojit_cpu_s=(end[1] - failure.at[1] - window_jit - sum(steady_nojit.values())
                                               - later_nojit),
                   epoch_end_cpu_s={x.step: x.later_cpu for x in later},
                   steady_after_failure_cpu_s=steady_after, steady_after_failure_nojit_cpu_s=steady_nojit,
                   journal_steady_cpu_s=journal_steady(ref_run["result"], epochs),
                   records_recomputed=mine.recomputed, source_rows=mine.source_rows, log_rows=mine.log_rows,
                   phases=rec.phases(), actions=dict(rec.plan.actions), in_place=rec.in_place,
                   redone=[(x.step, x.epoch, x.rows) for x in journal.executions if x.redo])
    out.update(walls=walls, cpus=cpus)
    out.update(compare(outputs_of(spark, base / "run"), outputs_of(spark, base / "reference"), epochs))
    return out


def measure_w46(workload: str, configs: list[str], size: dict[str, int], work: Path, warmup: int,
                drivers: int = 1) -> dict[str, Any]:
    """W4/W6: each configuration in ``drivers`` driver processes, round-robin (as :func:`measure_w1`)."""
    input_dir = work / f"{workload.lower()}-input"
    write_parquet_input(input_dir, size, size["epochs"])
    advice: dict[str, Any] = {}

    def one(name: str, d: int) -> dict[str, Any]:
        opt, spec = configured(workload, name, size, work / f"{workload}-{name}", input_dir)
        if opt.get("advise") and name not in advice:  # profiled and advised once, by a driver of its own
            advice[name] = child(spec, work, f"{workload}-{name}-advise", f"{workload}:advise")
        if opt.get("advise"):
            spec["advice"] = advice[name]
        t0 = time.perf_counter()
        res = summarised(child(spec, work, f"{workload}-{name}" + (f"-d{d + 1}" if d else "")), spec, opt,
                         warmup, t0)
        shutil.rmtree(work / f"{workload}-{name}", ignore_errors=True)
        print(said(workload, name, res, tail=f", driver {d + 1} of {drivers}" if drivers > 1 else ""), flush=True)
        return res

    out = round_robin(configs, drivers, one)
    if workload == "W4":  # the steps the excess took off (phase_w4): the sink and those after it in epoch c
        # less the JVM's JIT compilers' CPU, as the advisor prices an in-driver recovery (since 2026-11-28)
        report_advice(out, "failure_excess_nojit_cpu_s",
                      tuple(out.get("falkirk-advised", {}).get("steady_after_failure_cpu_s", ())),
                      "recovery_nojit_cpu_s")
    else:
        report_advice(out)
    return out
