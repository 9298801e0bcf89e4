"""W5: executor loss on a standalone cluster.

``W5`` — **executor loss on a standalone cluster**: W2's keyed state (running sum and count per key; ``keys``
keys loaded at epoch 0, ``churn`` of them updated per epoch) on the suite's cluster harness
(``tests/spark/cluster/harness.py``, imported: a master and two 1-core, 1 GB workers on loopback, each in its
own mount namespace with a private ``/tmp``; 512 MB executors, one per worker; the input, falkirk's root and
the streaming checkpoint on ``/var/tmp``, which every "machine" sees). One cluster for the whole workload;
one driver process (a new Spark application) per configuration runs the failure-free run, then the run in
which, at the crash epoch, the executor JVM holding the most state is SIGKILLed **mid-step**, in the same
driver:

* ``falkirk-lazy3`` / ``falkirk-inc`` — ``agg`` ``Lazy(every=3, key="key")`` / ``Eager(key="key",
  incremental=True)``, both with the default ``replicas=2`` on a cluster (state blocks kept in memory and on
  disk on two executors); ``falkirk-lazy3-r1`` — ``Lazy(every=3, key="key", replicas=1)``, the contrast. The
  kill is falkirk's own injection ``agg@C:executor`` (what the suite's executor-kill test uses): the executor
  holding the most cached blocks (Spark's status store) is SIGKILLed by the first task of ``agg``'s output
  that runs there. After a lost executor falkirk looks the state's blocks up on the remaining executors
  before declaring the state lost; expected: no rollback with two replicas.
* ``streaming-native`` — W2's strongest query: Spark's native streaming aggregation (``groupBy("key")
  .agg(sum, count)``, update mode; RocksDB, changelog checkpointing on). The kill: batch C's plan, and only
  its, has a Python filter on the aggregation's output rows (:mod:`.keyed_streaming`), in the state store's
  task: state partition 0's first task attempt SIGKILLs its executor JVM there, before the task commits the
  state.
* ``streaming`` / ``streaming-snap2`` — W2's ``applyInPandasWithState`` query (RocksDB, changelog
  checkpointing on; snapshots every 10 / every 2 deltas). The kill: inside the ``applyInPandasWithState``
  function of batch C, the first call of state partition 0's first task attempt SIGKILLs its executor JVM (the two state partitions hold the same
  number of keys — hash partitioning — so each executor holds half the state; Spark's status store has no
  per-executor count of state-store instances to pick "the most"). Spark retries the task (and resubmits
  the map tasks whose shuffle output went with the executor); the retried task reloads that state partition
  from the checkpoint location (last snapshot + changelog replay). The query does not stop.

Measured in W5 (the cluster's processes are not the driver's children): CPU of the driver's process tree
**plus the master's and the workers'** (which fork the executors and their Python workers): the own CPU
of every process in those trees plus the last seen CPU of every process that left them (a SIGKILLed
executor's Python workers are orphaned, not reaped by a worker; a process living less than the 0.2 s
between two looks is missed). A sampling thread (every 0.2 s) in the driver finds
the kill — the last sample before an executor JVM disappears starts the **recovery**, which ends when the
killed epoch's output is committed — and the replacement executor the master launches. **phases**:
``kill_to_replacement_executor_s`` (start-up: until the new executor JVM exists), the killed epoch's excess
over the same epoch of the failure-free run (state load and replay/recompute together: both happen inside
Spark's task retry, not separable from the driver; falkirk's journal phases are added when it did recover),
and the **catch-up** excess of the later epochs. **records recomputed** / **input rows re-read** — falkirk:
its journal (step executions redone; Spark's own task retries inside a step are not counted there);
streaming: rows through the stateful operator (an accumulator: successful task attempts) and the progress'
``numInputRows`` (SQL metrics: successful task attempts, resubmitted map tasks included) of batch C in
excess of the failure-free batch C. **peak executor memory**: the largest resident set of one executor
(its JVM and Python workers), sampled every 0.2 s during the failure-free run (``peak_executor_rss``; the
failure run's is kept too). Outputs compared per epoch as multisets with the configuration's failure-free
run and with the NumPy reference (:func:`.w2_w3.expected_changes`). Sizes: ``--quick`` 2·10^4 keys, 5 %
churn, 9 epochs, kill at epoch 4; default 10^5 keys, 1 %, 10 epochs, kill at 7; ``--full`` 10^6 keys, 1 %,
12 epochs, kill at 10 (not run here: the 512 MB executors may need more memory for two replicas of that state). ``--quick`` had 6 epochs until 2026-11-27: on the
cluster falkirk's first three epochs are cold (about 29, 14 and 10 CPU-s against 4 warm: the executors'
first checkpoint at epoch 2), the stream's one, so a median over epochs 2–5 held a cold falkirk epoch;
9 epochs give a median over 7, for both systems. ``--quick`` took 8.5 minutes for the five configurations
with 6 epochs on a quiet machine (18 at load 11–15; the cluster's start 10–26 s). W5's smoke test is
``tests/spark/cluster/test_spark_matrix_w5.py`` (it needs the suite's session-scoped cluster).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .configs import BENCHMARKS
from .measure import Sampler, child
from .pooling import configured, said, summarised
from .w2_w3 import StreamingKeyed, compared, run_falkirk_keyed, write_keyed_input


def phase_w5(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """One configuration of W5 in one driver on the cluster: the failure-free run (measured), then the run in which
    the executor JVM holding the most state (falkirk: the most cached blocks; streaming: state partition 0's) is
    SIGKILLed in the stateful step at the crash epoch; recovery measured from the kill to that epoch's output."""
    from falkirk.spark.pipeline.tools.report import costs

    base, c = Path(spec["base"]), spec["size"]["crash"]
    streaming = spec["system"] == "streaming"
    out: dict[str, Any] = {"log_rows": 0}
    sampler = Sampler()
    if streaming:
        ref = StreamingKeyed(spark, Path(spec["input"]), base / "reference", "W5", form=spec["form"])
        ref.run()
        ref_meter, ref_bytes = ref.meter, dict(ref.written.bytes)
    else:
        r = run_falkirk_keyed(spark, base / "reference", spec, [])
        ref_meter, ref_bytes = r["meter"], r["bytes"]
        out["regimes"] = {n: s.regime.describe() for n, s in r["pipe"].steps.items()}
    sampler.stop()
    walls, cpus = ref_meter.per_epoch()
    out.update(bytes=ref_bytes, peak_rss=ref_meter.peak_rss, peak_executor_rss=sampler.peak_executor_rss,
               walls=walls, cpus=cpus)
    sampler = Sampler()
    if streaming:
        run = StreamingKeyed(spark, Path(spec["input"]), base / "run", "W5", kill_at=c, kill="executor",
                             form=spec["form"])
        run.run()
        meter = run.meter
        batch = [p for p in run.progress if p["batchId"] == c]
        ref_batch = [p for p in ref.progress if p["batchId"] == c]
        # SQL metrics and the accumulator count successful task attempts: what ran again beyond the failure-free batch
        out.update(source_rows=sum(p["numInputRows"] for p in batch) - sum(p["numInputRows"] for p in ref_batch),
                   records_recomputed=run.rows.get(c, 0) - ref.rows.get(c, 0),
                   operator_rows={"run": run.rows, "reference": ref.rows},
                   failed_batch_duration_ms=[p.get("durationMs") for p in batch],
                   reference_batch_duration_ms=[p.get("durationMs") for p in ref_batch],
                   failed_batch_state_operators=[p.get("stateOperators") for p in batch])
    else:
        r = run_falkirk_keyed(spark, base / "run", spec, [f"agg@{c}:executor"])
        meter = r["meter"]
        journal, pipe = r["result"].journal, r["pipe"]
        out.update(fired=[str(i) for i in r["result"].fired] if hasattr(r["result"], "fired") else None,
                   notes=list(getattr(journal, "notes", []))[:20], recoveries=len(journal.recoveries),
                   redone=[(x.step, x.epoch, x.rows) for x in journal.executions if x.redo])
        if journal.recoveries:
            rec = journal.recoveries[0]
            mine = costs(journal, rec, inputs=set(pipe.inputs), stateful=["agg"])[0]
            out.update(records_recomputed=mine.recomputed, source_rows=mine.source_rows, log_rows=mine.log_rows,
                       phases=rec.phases(), actions=dict(rec.plan.actions))
        else:
            out.update(records_recomputed=0, source_rows=0)
    sampler.stop()
    out["peak_executor_rss_failure_run"] = sampler.peak_executor_rss
    if sampler.gone is None:
        raise SystemExit("W5: no executor JVM disappeared during the failure run")
    end = meter.ends[c]
    out.update(recovery_s=end[0] - sampler.gone[0], recovery_cpu_s=end[1] - sampler.gone[1])
    fw, fc = meter.per_epoch()
    # the split: the replacement executor's start (kill → its JVM appears), the killed epoch's excess over the
    # failure-free run (state load + replay/recompute: one number, Spark retries inside the epoch), catch-up (the
    # later epochs' excess: a cold replacement JVM, state moved or re-read)
    out["phases"] = {**out.get("phases", {}),
                     "kill_to_replacement_executor_s": (sampler.replaced_at - sampler.gone[0]
                                                        if sampler.replaced_at is not None else None),
                     "killed_epoch_excess_wall_s": fw[c] - walls[c], "killed_epoch_excess_cpu_s": fc[c] - cpus[c],
                     "catch_up_excess_wall_s": sum(fw[c + 1:]) - sum(walls[c + 1:]),
                     "catch_up_excess_cpu_s": sum(fc[c + 1:]) - sum(cpus[c + 1:])}
    out.update(failure_walls=fw, failure_cpus=fc)
    out.update(compared(spark, base, spec))
    return out


def start_cluster() -> Any:
    """The suite's standalone cluster (``tests/spark/cluster/harness.py``: a master and two 1-core, 1 GB workers on
    loopback, each with a private ``/tmp``; ``/var/tmp`` is the storage every machine sees)."""
    where = str(BENCHMARKS.parent / "tests" / "spark" / "cluster")
    if where not in sys.path:
        sys.path.insert(0, where)
    from harness import StandaloneCluster, why_unavailable

    reason = why_unavailable()
    if reason:
        raise SystemExit(f"W5 needs a Spark standalone cluster: {reason}")
    src = str(BENCHMARKS.parent / "src")  # the executors' Python workers import falkirk (its injection's filter)
    if src not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return StandaloneCluster(workers=2)


def measure_w5(configs: list[str], size: dict[str, Any], work: Path, warmup: int, cluster: Any = None) -> dict[str, Any]:
    """W5: every configuration in one driver process each on one standalone cluster (started here unless given;
    stopped — exactly its processes — at the end). The input, state and checkpoints live on the cluster's shared
    directory."""
    own = cluster is None
    cluster = cluster or start_cluster()
    out = {}
    try:
        if own:
            t = time.perf_counter()
            cluster.start()
            print(f"W5 cluster started in {time.perf_counter() - t:.0f} s ({cluster.master_url})", flush=True)
        input_dir = cluster.shared / "w5-input"
        write_keyed_input(input_dir, size, size["epochs"])
        info = {"master": cluster.master_url, "conf": cluster.driver_conf(),
                "roots": [p.pid for p in cluster.started if p.poll() is None]}
        for name in configs:
            opt, spec = configured("W5", name, size, cluster.shared / f"W5-{name}", input_dir, cluster=info)
            t0 = time.perf_counter()
            res = summarised(child(spec, work, f"W5-{name}", "W5"), spec, opt, warmup, t0)
            shutil.rmtree(cluster.shared / f"W5-{name}", ignore_errors=True)
            ph = res["phases"]
            print(said("W5", name, res,
                       f"; killed epoch +{ph['killed_epoch_excess_cpu_s']:.2f} s CPU, "
                       f"catch-up +{ph['catch_up_excess_cpu_s']:.2f} s CPU",
                       f", load {res['load_average'][0]:.1f}; peak executor {res['peak_executor_rss'] / 1e6:.0f} MB"),
                  flush=True)
            out[name] = res
    finally:
        if own:
            cluster.stop()
    return out
