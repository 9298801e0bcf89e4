"""YSB: the Yahoo streaming benchmark as the Falkirk Wheel paper ran it, paced, with response latency.

``YSB`` — **count ad views per campaign per 10-second event-time window** (yahoo/streaming-benchmarks):
events ``user_id, page_id, ad_id, ad_type, event_type, event_time, ip_address``
(:mod:`.ysb_input`), keep ``view``, project ``(ad_id, event_time)``, join ad → campaign, count per campaign
per window; ``campaigns`` campaigns × 10 ads. A **paced producer** (a process of its own, outliving a
killed driver) releases one epoch of ``events`` events every ``interval`` seconds, so **response latency**
is measured from the moment the input was available. The output is each epoch's updated counts
(``campaign_id, window_start, count``: update mode, as YSB writes Redis), Parquet per epoch.

Configurations
--------------
* ``falkirk`` — the shipped regimes (``docs/spark.md``): ``views`` (filter, projection, join) ``Ephemeral()``,
  ``counts`` ``Lazy(every=3, key="campaign_id")`` (state: the open windows' counts; windows ending before the
  watermark — the epoch's end less one window, as the stream's — are dropped; one full outer join of the state
  with the epoch's counts gives both the new state and the updated windows: the step returns its output as a
  function of its new state, so the join is computed once, by the output's job, which makes the state as it
  reads it), ``campaign_counts`` an output;
  one step execution at a time. The input step waits for the producer's cut (polling every 20 ms).
* ``falkirk-concurrent`` — the same with ``Pipeline(concurrency=3)`` (window 2): the input step reads the
  next epoch while ``counts`` works and the output commits.
* ``streaming`` — one Structured Streaming query written the usual way (:mod:`.ysb_streaming`): micro-batch,
  processing-time trigger every ``interval``, a watermark of one window, RocksDB with changelog
  checkpointing, ``foreachBatch`` writing the batch's counts idempotently per batch id.
* ``streaming-c1``, ``falkirk-c1`` — ``streaming`` and ``falkirk`` with every driver JVM (the killed one's
  restart too) running the client JIT only (``-XX:TieredStopAtLevel=1``, :data:`.configs.C1`): a YSB driver's
  JVM is young and its epochs small, so C2's compiling, most of the JIT's CPU then, may not pay back. The
  targets compare each falkirk configuration with the best micro-batch stream configuration measured, per
  figure (:func:`.ysb_metrics.targets`).
* ``streaming-rtm`` — the same query in real-time mode (``trigger(realTime=...)``), failure-free only: see
  *Real-time mode* below and :mod:`.ysb_rtm`.

The failures (each configuration, each driver)
-----------------------------------------------
A driver process runs three paced runs of ``epochs`` epochs, each on fresh directories, each with its own
producer: **reference** (failure-free: the steady figures), **exception** (``counts`` raises a
``ConnectionError`` at epoch ``fail``, once: falkirk recovers in the same driver; the stream's counting is
Spark's own operator, so the exception is raised in ``foreachBatch`` of batch ``fail`` before the write — the
query stops and is restarted in the same session, batch ``fail`` runs again), **kill** (the driver — Python
and JVM — SIGKILLed mid-way through epoch ``fail``: falkirk ``counts@fail:kill-mid``, after ``counts``
computed and before it published; the stream in ``foreachBatch`` of batch ``fail``, after the counts were
computed and before the write). The parent restarts a new driver process at once on the same directories
while the producer goes on releasing; it runs to the end. Every failing run's outputs are compared, epoch by
epoch as multisets, with the reference's (and every reference with a pure-Python count of the generator's
events): a difference makes the benchmark exit 1.

The numbers (:mod:`.ysb_metrics`)
---------------------------------
* **epoch latency**: output committed (falkirk: the manifest's ``committed_at``; the stream: its sink's write
  returned) − input released (the producer's cut / rename). **window latency**: the commit of the epoch
  that made a window's count final − the window's end (event time on the run's clock); windows still open at
  the end are left out. p50/p99 over the steady epochs (``warmup..``) of the reference run.
* **CPU per epoch**: the driver tree's CPU (Python, JVM, workers; the producer is not in it) between two
  consecutive commits, from a sampler every 0.2 s, interpolated; median over the steady epochs. Paced, so
  it includes what each system spends while waiting. **service time**: commit − the later of the release and
  the previous commit. The CPU per epoch is also split at the start of the service time (``steady``'s
  ``cpu_service_median_s``, the epoch's own work to its commit, and ``cpu_between_median_s``, what ran after the
  previous commit — falkirk's deferred states and checkpoints, the JIT — and idling).
* **exception**: the failed epoch's service time and latency; **epochs until caught up** (from the failed
  epoch until the latency stays at most 1.2 × the reference's steady p99; ``None``: never within the run);
  **excess CPU**: the run's CPU from the commit before the failure to the last commit less the reference's.
* **kill**: **first output after restart** (the restarted driver's first commit − the moment the killed
  driver's process ended; also from the relaunch); excess CPU: what the killed driver spent after its last
  commit (its last CPU sample) + the restarted driver's whole tree from its launch to the last commit − the
  reference's CPU over the same epochs; epochs until caught up as above.
* In the matrix's table: ``cpu_median_s`` (CPU per epoch), ``wall_median_s`` (service time),
  ``recovery_cpu_s`` (the kill's excess CPU), ``recovery_s`` (kill → first output after restart).

Real-time mode
--------------
PySpark 4.3's ``trigger(realTime=...)`` accepts this aggregation in update mode, but not a source this
benchmark can use for a recovering stream: the real-time scan admits only sources implementing
``SupportsRealTimeMode`` — Kafka (its connector is not shipped with PySpark) and Spark's internal
``LowLatencyMemoryStream`` (driver memory, reachable only through py4j, not durable); the file and rate
sources are refused (``STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED``). Sinks: console, ``foreach``,
Kafka and the continuous memory sink; ``foreachBatch`` and the memory sink are refused
(``OPERATOR_OR_SINK_NOT_IN_ALLOWLIST``). With the memory stream, a ``foreach`` writer and one source and one
shuffle partition it runs on ``local[2]`` (two source and two shuffle partitions need four concurrent
slots: ``CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT``) and emits one update per input record; the trigger's
duration may not be under 5 s (``spark.sql.streaming.realTimeMode.minBatchDuration``). ``streaming-rtm``
(:mod:`.ysb_rtm`) measures the steady state so: the memory stream fed by the driver at each release, a
``foreach`` writer recording each update's time. The failures are not measured for it: the memory stream's
data lives in the driver, so a killed driver loses it (with Kafka the stream could replay; no broker here).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import Written
from .measure import child, falkirk_category
from .pooling import configured, round_robin
from .ysb_input import (
    BASE_MS,
    EVENTS_PARTITIONS,
    EVENTS_SCHEMA,
    POLL,
    CpuSampler,
    events_table,
    first_release,
    interval_ms,
    releases,
    samples,
    spawn_producer,
    stop_producer,
)
from .ysb_metrics import after_failure, describe_run, revive, steady, targets
from .ysb_streaming import Failure, StreamingYSB, ad_table, commits_of, views_of

OUTPUT = "campaign_counts"
#: how long before a cut is due (the last cut's time plus the interval) falkirk's source starts looking for it
DUE_EARLY = 0.1


def ysb_pipeline(root: Path, spark: Any, size: dict[str, Any], *, concurrency: int = 1, log_views: bool = False,
                 failure: Failure | None = None, paced: bool = True) -> Any:
    """YSB on falkirk (module docstring); :mod:`.mixed` adds its heavy branch to it. ``paced=False``: no
    producer, each epoch's events generated by the input's ``source`` when the epoch starts (the advisor check's
    form, :func:`advisor_target`)."""
    from falkirk.spark import Ephemeral, Lazy, Pipeline
    from falkirk.spark.pipeline.run.session import SMALL_DATA

    pipe = Pipeline(root, spark, spark_conf=SMALL_DATA, concurrency=concurrency)
    cuts, patience = Path(root) / "input" / "events" / "cuts", 120 + 10 * size["interval"]

    def released(epoch: int) -> list[Any]:  # the producer appends and cuts: wait for its cut, append nothing
        end, cut = time.time() + patience, cuts / f"{epoch:08d}.json"
        # the producer cuts every interval: sleep until the cut is due, as the stream's trigger waits for it,
        # then look every POLL s (not 250 looks an epoch: about 0.03 CPU-s of this driver's)
        try:
            due = (cuts / f"{epoch - 1:08d}.json").stat().st_mtime + size["interval"] - DUE_EARLY
        except FileNotFoundError:  # the first epoch, or the epoch before not cut by this producer
            due = 0.0
        if not cut.exists():
            time.sleep(max(0.0, min(due, end) - time.time()))
        while not cut.exists():
            if time.time() > end:
                raise TimeoutError(f"epoch {epoch} was not released within {patience} s")
            time.sleep(POLL)
        return []

    pipe.input("events", EVENTS_SCHEMA, partitions=EVENTS_PARTITIONS,
               source=released if paced else (lambda epoch: events_table(epoch, size)))
    # spark None: a pipeline declared only to be priced (the advisor check's parent), never run
    table, w, t = ad_table(spark, size) if spark is not None else None, size["window_ms"], interval_ms(size)
    fail = failure or Failure(None)

    def views(events: Any) -> Any:
        return views_of(events, table)

    def watermark(epoch: int) -> int:  # the stream's after ``epoch``: the latest event time less one window
        return BASE_MS + (epoch + 1) * t - w

    # a step function runs every epoch, so each py4j call it makes is a per-epoch cost: its expressions are SQL
    # strings, one call each, where Column objects are a call per column, operator and alias, and as many again
    # when Python collects them (docs/spark.md, "Spark settings": 800 -> 390 py4j calls per epoch here)
    def counts(views: Any, *, state: Any, epoch: int) -> Any:
        fail.maybe(epoch)
        keys = ["campaign_id", "window_start"]
        upd = views.selectExpr("campaign_id", f"et - et % {w} AS window_start").groupBy(*keys).count()
        if state is None:
            made = upd.selectExpr(*keys, "count", "count AS n")
        else:  # one full outer join gives both: the new counts, and the windows this epoch updated (n not null)
            live = state.where(f"window_start + {w} > {watermark(epoch - 1)}").drop("n")
            both = live.join(upd.withColumnRenamed("count", "n"), keys, "full_outer")
            made = both.selectExpr(*keys, "coalesce(count, 0) + coalesce(n, 0) AS count", "n")
        # the state kept: the open windows (the next epoch drops the rest as it reads it), and this epoch's updated
        # ones with their count here (n); the output is a function of it, so the join is done once, by the
        # output's job, which makes the state as it reads it (docs/spark.md, "an output computed from the state")
        kept = made.where(f"window_start + {w} > {watermark(epoch)} OR n IS NOT NULL")
        return (lambda state: state.where("n IS NOT NULL").select(*keys, "count")), kept

    pipe.step(views, regime=Ephemeral(log=log_views))
    pipe.step(counts, inputs=["views"], regime=Lazy(every=3, key="campaign_id"))
    pipe.output(OUTPUT, inputs=["counts"])
    return pipe


# -- one paced run ------------------------------------------------------------------------------------------------
def paced(spark: Any, base: Path, spec: dict[str, Any], kind: str, *, failure: Failure | None = None,
          fail: list[str] | None = None, build: Any = None, epochs: int | None = None) -> dict[str, Any]:
    """One paced run of ``spec``'s configuration under ``base/kind`` with its own producer (``kind == "restart"``:
    the restarted driver of the killed run, its producer still going); the run's clocks and outputs."""
    size, n = spec["size"], epochs or spec["size"]["epochs"]
    d = base / ("kill" if kind == "restart" else kind)
    producer = base / f"{'kill' if kind == 'restart' else kind}.producer.json"
    if kind == "restart":
        t0 = json.loads(producer.read_text())["t0"]
    else:
        d.mkdir(parents=True, exist_ok=True)
        t0 = first_release(size["interval"], size.get("lead", 2.0))
        target = {"root": str(d)} if spec["system"] == "falkirk" else {"source": str(d / "source")}
        (d / "source").mkdir(exist_ok=spec["system"] == "falkirk")
        spawn_producer({"system": spec["system"], **target, "t0": t0, "size": size, "epochs": n,
                        "releases": str(base / f"{kind}.releases.jsonl")}, producer)
    sampler = CpuSampler(base / f"{kind}.cpu")
    written = Written(d, falkirk_category if spec["system"] == "falkirk" else stream_category)
    written.scan(count=False)
    out: dict[str, Any] = {"t0": t0}
    try:
        if spec["system"] == "falkirk":
            pipe = (build or ysb_pipeline)(d, spark, size, concurrency=spec.get("concurrency", 1),
                                            log_views=spec.get("log_views", False), failure=failure)
            pipe.retry_in_place = spec.get("retry_in_place", True)  # False: a failed step is rolled back
            result = pipe.run(n, fail=fail or [], progress=lambda line: line.startswith("epoch") and written.scan())
            out.update(result=result, pipe=pipe, commits=falkirk_commits(d, pipe, n))
        else:
            st = (build or StreamingYSB)(spark, d, size, failure=failure, on_commit=lambda e, at: written.scan())
            st.run(n)
            out.update(stream=st, commits=commits_of(d))
    finally:
        sampler.stop()
        if kind != "kill":
            stop_producer(producer)
    written.scan()
    out.update(dir=d, bytes=dict(written.bytes), releases=releases(base / f"{'kill' if kind == 'restart' else kind}.releases.jsonl"),
               series=samples(base / f"{kind}.cpu"))
    return out


def stream_category(rel: str) -> str | None:
    """What the stream persists besides its input and outputs: checkpoint locations (offsets, commits, state),
    and the mixed application's history table."""
    top = rel.split(os.sep, 1)[0]
    return top if top.startswith("checkpoint") or top == "history" else None


def falkirk_commits(root: Path, pipe: Any, epochs: int, output: str = OUTPUT) -> dict[int, float]:
    """``epoch → committed_at`` of an output, from its manifests (every driver's)."""
    from falkirk.spark.pipeline.store.storage import Storage

    st = Storage(root)
    return {e: float(st.get(output, "output", e).extra["committed_at"]) for e in range(epochs)
            if e in set(st.epochs(output, "output"))}


def outputs(spark: Any, d: Path, name: str = OUTPUT) -> dict[int, Any]:
    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.tools.verify import output_rows

    return output_rows(spark, Root(str(d)), name)


def compare(got: dict[int, Any], ref: dict[int, Any], epochs: int, what: str = OUTPUT) -> list[str]:
    """Differences, epoch by epoch as multisets (and a reference missing epochs)."""
    diffs = [f"{what} epoch {e}" for e in sorted(set(got) | set(ref)) if got.get(e) != ref.get(e)]
    if len(ref) != epochs or not any(ref.values()):
        diffs.append(f"reference has {len(ref)} {what} epochs, expected {epochs}")
    return diffs


def expected_counts(size: dict[str, Any]) -> dict[int, Any]:
    """The counts each epoch must emit, computed in Python from the generator (an oracle for every system)."""
    from collections import Counter

    from .ysb_input import ads, events_table

    camp, w = dict(ads(size)), size["window_ms"]
    total: Counter[tuple[str, int]] = Counter()
    out = {}
    for e in range(size["epochs"]):
        tb = events_table(e, size)
        seen: Counter[tuple[str, int]] = Counter()
        for ad, kind, t in zip(*(tb.column(c).to_pylist() for c in ("ad_id", "event_type", "event_time")), strict=True):
            if kind == "view":
                seen[(camp[ad], int(t) - int(t) % w)] += 1
        total.update(seen)
        out[e] = Counter((c, ws, total[(c, ws)]) for c, ws in seen)
    return out


def described(run: dict[str, Any], rows: dict[int, Any], size: dict[str, Any]) -> dict[str, Any]:
    return describe_run(run["commits"], run["releases"], run["series"], run["t0"],
                        {e: list(c) for e, c in rows.items()}, size)


# -- the driver processes ------------------------------------------------------------------------------------------
def phase_ysb(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """Driver 1: the reference and the exception runs (measured; written before the third), then the run whose
    driver is SIGKILLed at epoch ``fail`` (this process does not return)."""
    size, base, c = spec["size"], Path(spec["base"]), spec["size"]["fail"]
    if size.get("warm"):  # the JVM's first epochs (class loading, code generation, the JIT) in no measured run
        shutil.rmtree(paced(spark, base, spec, "warm", epochs=size["warm"])["dir"], ignore_errors=True)
    ref = paced(spark, base, spec, "reference")
    ref_rows = outputs(spark, ref["dir"])
    out: dict[str, Any] = {"reference": described(ref, ref_rows, size), "bytes": ref["bytes"]}
    if spec["system"] == "falkirk":
        out["steps"] = step_costs(ref["result"], size.get("warmup", 0))
    out["oracle_differences"] = compare(ref_rows, expected_counts(size), size["epochs"])
    ex = paced(spark, base, spec, "exception", failure=Failure(c))
    ex_rows = outputs(spark, ex["dir"])
    out["exception"] = described(ex, ex_rows, size)
    out["exception_differences"] = compare(ex_rows, ref_rows, size["epochs"])
    if spec["system"] == "falkirk":
        rec = ex["result"].journal.recoveries
        out["exception_phases"] = [r.phases() for r in rec]
        out["exception_actions"] = [dict(r.plan.actions) for r in rec]
    else:
        out["exception_rerun"] = [p["batchId"] for p in ex["stream"].progress if p["attempt"] == 1][:1]
    Path(spec["result"]).write_text(json.dumps(out, default=str))
    shutil.rmtree(ex["dir"], ignore_errors=True)
    if spec["system"] == "falkirk":
        paced(spark, base, spec, "kill", fail=[f"counts@{c}:kill-mid"])
    else:
        paced(spark, base, spec, "kill", failure=Failure(c, "kill"))
    raise SystemExit("the driver was not killed")


def phase_ysb_restart(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """Driver 2: the restarted driver of the killed run; its outputs compared with the reference's."""
    size, base = spec["size"], Path(spec["base"])
    run = paced(spark, base, spec, "restart")
    rows = outputs(spark, run["dir"])
    out: dict[str, Any] = {"differences": compare(rows, outputs(spark, base / "reference"), size["epochs"])}
    restart_series = run["series"]
    run["series"] = []  # two drivers' CPU: the excess is computed from both series in the parent
    out["kill"] = described(run, rows, size)
    out["restart_series"] = restart_series
    if spec["system"] == "falkirk":
        from falkirk.spark.pipeline.tools.report import costs

        journal, pipe = run["result"].journal, run["pipe"]
        rec = next(x for x in journal.recoveries if x.restart)
        mine = costs(journal, rec, inputs=set(pipe.inputs), stateful=[n for n in pipe.steps if not pipe.stateless(n)])[0]
        out.update(records_recomputed=mine.recomputed, source_rows=mine.source_rows, log_rows=mine.log_rows,
                   phases=rec.phases(), actions=dict(rec.plan.actions))
    else:
        rerun = [p for p in run["stream"].progress if p["batchId"] <= size["fail"]]
        out.update(records_recomputed=0, source_rows=sum(p["numInputRows"] for p in rerun), log_rows=0,
                   batches_rerun=[p["batchId"] for p in rerun])
    return out


def kill_figures(first: dict[str, Any], second: dict[str, Any], stamps: dict[str, float], base: Path,
                 c: int, warmup: int) -> dict[str, Any]:
    """The kill's figures from both drivers: first output after restart, excess CPU, catching up."""
    from .ysb_input import cpu_at

    ref, run = first["reference"], second["kill"]
    killed = samples(base / "kill.cpu")  # the killed driver's CPU samples, up to its last
    before = max((e for e, t in run["commits"].items() if t < stamps["exited"]), default=-1)
    lost = (killed[-1][1] - cpu_at(killed, run["commits"][before])) if killed and before >= 0 else 0.0
    series = second["restart_series"]
    last = max(run["commits"])
    restart_cpu = cpu_at(series, run["commits"][last])
    after = [t for t in run["commits"].values() if t > stamps["exited"]]
    res = after_failure({**run, "cpu": {}}, ref, c, warmup)
    res.update(excess_cpu_s=lost + restart_cpu - sum(v for e, v in ref["cpu"].items() if before < e <= last),
               lost_cpu_s=lost, restart_cpu_s=restart_cpu, last_commit_before_kill=before,
               first_output_s=min(after) - stamps["exited"] if after else None,
               first_output_from_relaunch_s=min(after) - stamps["relaunched"] if after else None)
    return res


def measure_ysb(configs: list[str], size: dict[str, Any], work: Path, warmup: int, drivers: int = 1) -> dict[str, Any]:
    """YSB: each configuration in ``drivers`` pairs of driver processes, round-robin (:func:`round_robin`); steady
    figures from epoch ``max(warmup, size["warmup"])``."""
    warmup = max(warmup, size.get("warmup", 0))

    def one(name: str, d: int) -> dict[str, Any]:
        tag = f"YSB-{name}" + (f"-d{d + 1}" if d else "")
        opt, spec = configured("YSB", name, size, work / tag, work)
        t_start, stamps = time.perf_counter(), {}  # type: ignore[var-annotated]
        if opt.get("rtm"):  # real-time mode: the steady state only (ysb_rtm)
            res = summarise_steady(child(spec, work, f"{tag}-run", "YSB:rtm"), size, warmup)
        else:
            a = child(spec, work, f"{tag}-run", "YSB", -signal.SIGKILL, stamps=stamps)
            stamps["relaunched"] = time.time()
            b = child(spec, work, f"{tag}-restart", "YSB:restart")
            res = summarise_ysb(a, b, stamps, Path(spec["base"]), size, warmup)
        res.update(system=spec["system"], benchmark_s=time.perf_counter() - t_start, conf=opt.get("conf", {}),
                   load_average=os.getloadavg())
        shutil.rmtree(work / tag, ignore_errors=True)
        print(said_ysb(name, res, d, drivers), flush=True)
        return res

    # the targets compare the drivers' medians of these, not the first driver's
    return round_robin(configs, drivers, one, nested=("steady", "exception", "kill"))


def summarise_ysb(a: dict[str, Any], b: dict[str, Any], stamps: dict[str, float], base: Path,
                  size: dict[str, Any], warmup: int) -> dict[str, Any]:
    a = {**a, "reference": revive(a["reference"]), "exception": revive(a["exception"])}
    b = {**b, "kill": revive(b["kill"])}
    ref, c = a["reference"], size["fail"]
    st = steady(ref, warmup)
    exc = after_failure(a["exception"], ref, c, warmup)
    kill = kill_figures(a, b, stamps, base, c, warmup)
    diffs = a["oracle_differences"] + a["exception_differences"] + b["differences"]
    return {"cpu_median_s": st["cpu_median_s"], "wall_median_s": st["service_median_s"], "steady": st,
            "exception": exc, "kill": kill, "recovery_cpu_s": kill["excess_cpu_s"], "recovery_s": kill["first_output_s"],
            "bytes_per_epoch": sum(a["bytes"].values()) / size["epochs"], "bytes": a["bytes"],
            "records_recomputed": b["records_recomputed"], "source_rows": b["source_rows"],
            "log_rows": b["log_rows"], "identical": not diffs, "differences": diffs,
            "phases": b.get("phases"), "actions": b.get("actions"), "exception_phases": a.get("exception_phases"),
            "steps": a.get("steps"),
            "timeline": {"reference": ref["latency"], "exception": a["exception"]["latency"],
                         "kill": b["kill"]["latency"]}}


def summarise_steady(a: dict[str, Any], size: dict[str, Any], warmup: int) -> dict[str, Any]:
    """A configuration measured failure-free only (``streaming-rtm``): no recovery figures."""
    ref = revive(a["reference"])
    st = steady(ref, warmup)
    return {"cpu_median_s": st["cpu_median_s"], "wall_median_s": st["service_median_s"], "steady": st,
            "exception": {}, "kill": {}, "recovery_cpu_s": None, "recovery_s": None, "bytes_per_epoch": 0.0,
            "records_recomputed": 0, "source_rows": 0, "log_rows": 0, "identical": not a["differences"],
            "differences": a["differences"], "one_update_per_record": a.get("one_update_per_record"),
            "updates_written": a.get("updates_written"), "timeline": {"reference": ref["latency"]}}


def step_costs(result: Any, warmup: int) -> dict[str, dict[str, float | None]]:
    """Each step's median wall and CPU seconds per execution over the steady epochs, from the journal (CPU only
    where nothing ran beside it: ``None`` in a concurrent run)."""
    import statistics

    out: dict[str, dict[str, float | None]] = {}
    for step in {x.step for x in result.journal.executions}:
        xs = [x for x in result.journal.executions if x.step == step and not x.redo and x.epoch >= warmup]
        cpus = [x.cpu for x in xs if x.cpu is not None]
        out[step] = {"seconds": statistics.median(x.seconds for x in xs) if xs else None,
                     "cpu": statistics.median(cpus) if cpus else None}
    return out


def said_ysb(name: str, r: dict[str, Any], d: int, drivers: int) -> str:
    s, ex, k = r["steady"], r["exception"], r["kill"]
    if not ex:
        return (f"YSB {name:20} cpu {r['cpu_median_s']:.2f} s/epoch, latency p50 {s['latency']['p50']:.2f} p99 "
                f"{s['latency']['p99']:.2f} s (failure-free only), identical {r['identical']} "
                f"({r['benchmark_s']:.0f} s, driver {d + 1} of {drivers})")
    f = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    return (f"YSB {name:20} cpu {f(r['cpu_median_s'])} s/epoch ({f(s.get('cpu_service_median_s'))} to the commit, "
            f"{f(s.get('cpu_between_median_s'))} after), latency p50 {f(s['latency']['p50'])} p99 "
            f"{f(s['latency']['p99'])} s (windows p99 {f(s['window_latency']['p99'])}); exception: epoch "
            f"{f(ex['failed_epoch_service_s'])} s, caught up after {ex['epochs_until_caught_up']}, excess CPU "
            f"{f(ex['excess_cpu_s'])} s; kill: first output {f(k['first_output_s'])} s, excess CPU "
            f"{f(k['excess_cpu_s'])} s, caught up after {k['epochs_until_caught_up']}; identical {r['identical']} "
            f"({r['benchmark_s']:.0f} s, driver {d + 1} of {drivers})")


def ysb_targets(summary: dict[str, Any]) -> dict[str, Any]:
    return targets(summary)


# -- the advisor check's target (benchmarks/advisor_check.py, issue 59) ---------------------------------------------
def advisor_target(size: str) -> Any:
    """YSB as ``benchmarks/advisor_check.py --pipelines ysb`` runs it: the matrix's falkirk pipeline unpaced
    (each epoch's events generated when it starts: the check measures CPU, not latency), ``counts`` failing
    after epoch ``at``, the driver killed in ``counts``; the profile injects ``counts`` failures."""
    from benchmarks.advisor_check import Target

    from .configs import SIZES

    dims = dict(SIZES["quick" if size == "quick" else "default"]["YSB"])
    epochs = 9 if size == "quick" else 14

    def make(root: Path, spark: Any, regimes: dict[str, Any] | None) -> Any:
        pipe = ysb_pipeline(root, spark, dims, paced=False)
        return pipe.apply(regimes) if regimes else pipe

    return Target("ysb", make, epochs, epochs - 2, "counts", "counts",
                  tuple(f"counts@{e}:after" for e in (1, epochs // 2, epochs - 2)))
