"""W2, W3 and W5 on Structured Streaming: the stream's formulations of the keyed workloads.

Every formulation reads the same Parquet files (one per epoch, ``maxFilesPerTrigger=1``,
``Trigger.AvailableNow``), runs on the RocksDB state store with changelog checkpointing on where it keeps
state in Spark, and writes ``output/changes/epoch=N`` from ``foreachBatch`` (overwritten: idempotent per
batch id). The formulations (``form``; the configurations naming them are in :mod:`.configs`):

* ``pandas-state`` (``streaming``, ``streaming-snap2``) — ``groupBy("key").applyInPandasWithState``: a Python
  function per key of the batch, state in RocksDB. Its documented API for arbitrary per-key state; the
  weakest here.
* ``native`` (W2, W5: ``streaming-native``, ``streaming-native-snap2``) — Spark's own streaming aggregation,
  ``groupBy("key").agg(sum("v"), count)`` in update mode: no Python in the operator, state in RocksDB; the
  update mode emits exactly the keys of the batch with their new aggregate, which is W2's output.
* ``tws`` / ``tws-rows`` (``streaming-tws``, ``streaming-tws-rows``) — ``transformWithStateInPandas`` / the
  row-based ``transformWithState`` of pyspark 4.x (the state API v2): a Python ``handleInputRows`` per key,
  the state a ``ValueState`` in RocksDB read and written through the state server's socket.
* ``merge`` (W3: ``streaming-merge``) — no stateful operator: ``foreachBatch`` joins the batch with a state
  table the query keeps itself (``checkpoint/table/v=B``, Parquet, one version per batch id) and writes the
  next version, then the epoch's top keys from it. Exactly once by batch id: version ``B`` is written to a
  fresh directory and renamed into place (atomic on a local or POSIX file system), computed from the latest
  version before ``B``; a re-run batch ``B`` (Spark's ``foreachBatch`` is at-least-once: a batch killed before
  its commit runs again with the same id and data) finds version ``B`` in place and reuses it, or recomputes
  it from the same earlier version — idempotent either way; versions before ``B`` are deleted once ``B`` is
  in place. The Spark user's pattern for arbitrary keyed updates (with a table format one would ``MERGE``;
  no Delta Lake or Iceberg JAR can be installed here, and W3 changes every key every epoch, so a ``MERGE``
  would rewrite the whole table too).

W3's decay (``score * 9 div 10 + v`` every epoch, for **every** key, in integers) has **no native
aggregation**: it is a fold with a truncating division at every step, which no built-in aggregate
computes (``sum(v * 0.9^(B - e))`` is the real-valued decay, not these integers), Python aggregates cannot
run in a streaming aggregation, and update mode emits only the batch's keys while the top keys need every
key's decayed score. ``pandas-state`` and ``tws`` decay the keys *of the batch* only; W3's input has every key
in every epoch, so they compute the workload exactly; ``merge`` decays every key as falkirk does.

The failure (``kill_at``): the driver (W2/W3, ``kill="driver"``) or, on W5's cluster (``kill="executor"``),
the executor JVM running state partition 0 is SIGKILLed **inside the stateful step** of that batch, once (a
marker file under ``base``): in the state function of ``pandas-state`` and ``tws``; for ``native`` and
``merge`` by a Python filter on the stateful step's output rows, in that batch's plan only (the others
have none), which runs in the state store's task (``native``: after the aggregation reads the state,
before its task commits it) or in the join that computes the new version (``merge``).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import STREAMING_CONF, Written
from .measure import Meter, streaming_category

KEYED_SCHEMA = "epoch BIGINT, key BIGINT, v BIGINT"
TOP = 100  # W3's output: the epoch's TOP keys by score
FORMS = ("pandas-state", "native", "tws", "tws-rows", "merge")


def killer() -> Any:
    """The function a task of the killed batch calls: ``kill_here(kill, marker, victims)`` SIGKILLs the driver
    (``victims``: its Python process and JVM) or this task's executor JVM if it runs partition 0's first attempt;
    once (``marker``, created atomically). Made here, not at module level, so that cloudpickle ships it by value:
    Python workers cannot import the benchmarks."""

    def kill_here(kill: str, marker: str, victims: tuple[int, ...]) -> None:
        import os as _os
        import signal as _signal

        from pyspark import TaskContext

        if kill != "executor":
            if not _os.path.exists(marker):
                open(marker, "w").close()
                for pid in victims:
                    _os.kill(pid, _signal.SIGKILL)
            return
        tc = TaskContext.get()
        if tc is None or tc.partitionId() != 0 or tc.attemptNumber() != 0:
            return
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
            return
        _os.kill(pid, _signal.SIGKILL)

    return kill_here


class StreamingKeyed:
    """W2/W3/W5 as one query in formulation ``form`` (:data:`FORMS`, see the module's docstring).

    ``kill_at``: the batch in whose stateful step the driver (``kill="driver"``) or the executor JVM running state
    partition 0 (``kill="executor"``) is SIGKILLed, once (a marker file under ``base``, which must be on storage
    every machine sees for W5). ``rows``: rows through the stateful operator per batch, from an accumulator
    (successful task attempts only; ``pandas-state`` and ``tws`` count their input rows, ``native`` and ``merge``
    none)."""

    def __init__(self, spark: Any, input_dir: Path, base: Path, workload: str, *, kill_at: int | None = None,
                 kill: str = "driver", form: str = "pandas-state") -> None:
        if form not in FORMS:
            raise ValueError(f"form {form!r}: expected one of {', '.join(FORMS)}")
        if workload not in {"native": ("W2", "W5"), "merge": ("W3",)}.get(form, (workload,)):
            raise ValueError(f"{workload} has no {form!r} formulation here (see the module's docstring)")
        self.spark, self.input_dir, self.base, self.workload, self.kill_at = spark, input_dir, base, workload, kill_at
        self.kill, self.form = kill, form
        self.w2 = workload in ("W2", "W5")
        self.marker = str(base / "killed")
        self.victims = (os.getpid(), int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
        self.table = base / "checkpoint" / "table"  # merge: the state table's versions
        self.written = Written(base, streaming_category)
        self.meter = Meter(self.written)
        self.progress: list[dict[str, Any]] = []
        self.acc = spark.sparkContext.accumulator(0)
        self.rows: dict[int, int] = {}
        self._counted = 0

    # -- the queries ------------------------------------------------------------------------------------------
    def source(self) -> Any:
        return (self.spark.readStream.schema(KEYED_SCHEMA).option("maxFilesPerTrigger", 1)
                .parquet(str(self.input_dir)))

    def output_schema(self) -> str:
        return "key BIGINT, total BIGINT, n BIGINT" if self.w2 else "key BIGINT, score BIGINT"

    def operator(self, src: Any) -> Any:
        """The stateful part of the query (``merge``: none, the source itself)."""
        from pyspark.sql import functions as F

        if self.form == "native":
            return src.groupBy("key").agg(F.sum("v").alias("total"), F.count(F.lit(1)).alias("n"))
        if self.form == "merge":
            return src.select("key", "v")
        if self.form == "pandas-state":
            return self._pandas_state(src)
        return self._tws(src)

    def _pandas_state(self, src: Any) -> Any:
        import pandas as pd
        from pyspark.sql.streaming.state import GroupStateTimeout

        kill_at, kill, marker, victims, w2, acc = (self.kill_at, self.kill, self.marker, self.victims, self.w2,
                                                   self.acc)
        kill_here = killer()

        def update(key: Any, batches: Any, state: Any) -> Any:
            pdf = pd.concat(list(batches), ignore_index=True)
            acc.add(len(pdf))
            if kill_at is not None and int(pdf["epoch"].iloc[0]) == kill_at:
                kill_here(kill, marker, victims)
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

        state_schema = "total LONG, n LONG" if w2 else "score LONG"
        return src.groupBy("key").applyInPandasWithState(update, self.output_schema(), state_schema, "append",
                                                         GroupStateTimeout.NoTimeout)

    def _tws(self, src: Any) -> Any:
        from pyspark.sql.streaming import StatefulProcessor

        kill_at, kill, marker, victims, w2, acc = (self.kill_at, self.kill, self.marker, self.victims, self.w2,
                                                   self.acc)
        kill_here = killer()
        rows_api = self.form == "tws-rows"

        class Keyed(StatefulProcessor):  # type: ignore[misc]
            def init(self, handle: Any) -> None:
                self.state = handle.getValueState("s", "total LONG, n LONG" if w2 else "score LONG")

            def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N802, N803
                import pandas as _pd
                from pyspark.sql import Row as _Row

                if rows_api:
                    got = [(int(r["epoch"]), int(r["v"])) for r in rows]
                    epoch, x, count = got[0][0], sum(v for _, v in got), len(got)
                else:
                    pdf = _pd.concat(list(rows), ignore_index=True)
                    epoch, x, count = int(pdf["epoch"].iloc[0]), int(pdf["v"].sum()), len(pdf)
                acc.add(count)
                if kill_at is not None and epoch == kill_at:
                    kill_here(kill, marker, victims)
                exists, k = self.state.exists(), int(key[0])
                if w2:
                    total, n = (int(a) for a in self.state.get()) if exists else (0, 0)
                    out = {"key": k, "total": total + x, "n": n + count}
                    self.state.update((out["total"], out["n"]))
                else:
                    out = {"key": k, "score": int(self.state.get()[0]) * 9 // 10 + x if exists else x}
                    self.state.update((out["score"],))
                yield _Row(**out) if rows_api else _pd.DataFrame({c: [v] for c, v in out.items()})

            def close(self) -> None:
                pass

        grouped = src.groupBy("key")
        call = grouped.transformWithState if rows_api else grouped.transformWithStateInPandas
        return call(Keyed(), self.output_schema(), "Update", "None")

    def query(self) -> Any:
        op = self.operator(self.source())
        mode = "update" if self.form == "native" else "append"  # native: the batch's keys, their new aggregate
        return (op.writeStream.outputMode(mode).foreachBatch(self.batch)
                .option("checkpointLocation", str(self.base / "checkpoint")).trigger(availableNow=True))

    # -- each batch ------------------------------------------------------------------------------------------
    def _killing(self, df: Any) -> Any:
        """``df`` behind a Python filter that SIGKILLs (:func:`killer`) in the first task to see a row; the killed
        batch's plan only (``native``, ``merge``: the stateful step runs no Python of the user's)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import BooleanType

        kill, marker, victims, kill_here = self.kill, self.marker, self.victims, killer()

        def ok(_):  # type: ignore[no-untyped-def]  # no hints: PySpark would infer a pandas UDF
            kill_here(kill, marker, victims)
            return True

        return df.where(F.udf(ok, BooleanType(), useArrow=False).asNondeterministic()(F.lit(1)))

    def batch(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        killing = self.kill_at == batch_id and not os.path.exists(self.marker)
        if self.form == "merge":
            df = self.merge(df, batch_id, killing)
        elif killing and self.form == "native":
            df = self._killing(df)
        if not self.w2:
            df = df.orderBy(F.desc("score"), "key").limit(TOP)
        df.write.mode("overwrite").parquet(str(self.base / "output" / "changes" / f"epoch={batch_id}"))
        if self.form == "merge":
            self.collect(batch_id)
        self.rows[batch_id] = self.acc.value - self._counted
        self._counted = self.acc.value
        self.meter.epoch_done(batch_id)

    def versions(self) -> dict[int, Path]:
        """The state table's versions in place (``v=B``: the state after batch ``B``)."""
        if not self.table.exists():
            return {}
        return {int(p.name[2:]): p for p in self.table.iterdir() if p.name.startswith("v=")}

    def merge(self, df: Any, batch_id: int, killing: bool) -> Any:
        """``merge``: the state after batch ``batch_id`` — the version in place, or computed from the latest before it
        and renamed into place — read back from the table."""
        from pyspark.sql import functions as F

        have = self.versions()
        if batch_id not in have:
            upd = df.select("key", F.col("v").alias("x"))
            earlier = [b for b in have if b < batch_id]
            if earlier:  # every key decays, the batch's keys add their value (falkirk's ``decayed``)
                prev = self.spark.read.parquet(str(have[max(earlier)]))
                new = prev.join(upd, "key", "full_outer").select(
                    "key", (F.expr("coalesce(score, 0) * 9 div 10") + F.coalesce("x", F.lit(0))).alias("score"))
            else:
                new = upd.select("key", F.col("x").alias("score"))
            if killing:
                new = self._killing(new)
            tmp = self.table / f"_tmp-{batch_id}-{uuid.uuid4().hex}"
            new.write.parquet(str(tmp))
            os.rename(tmp, self.table / f"v={batch_id}")
        return self.spark.read.parquet(str(self.table / f"v={batch_id}"))

    def collect(self, batch_id: int) -> None:
        """``merge``: delete the versions before ``batch_id`` and any half-written one (``batch_id``'s is in place)."""
        for b, p in self.versions().items():
            if b < batch_id:
                shutil.rmtree(p, ignore_errors=True)
        for p in self.table.glob("_tmp-*"):
            shutil.rmtree(p, ignore_errors=True)

    def run(self) -> None:
        from falkirk.spark.pipeline.run.session import SMALL_DATA, sql_conf

        self.written.scan(count=False)
        if self.form == "merge":
            self.table.mkdir(parents=True, exist_ok=True)
        with sql_conf(self.spark, {**STREAMING_CONF, **SMALL_DATA}):
            q = self.query().start()
            q.awaitTermination()
        self.progress = [json.loads(p.json) for p in q.recentProgress]
        self.written.scan()
