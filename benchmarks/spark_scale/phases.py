"""The driver processes of one configuration at one point, for any workload adapter.

A workload adapter (:class:`.keyed.Keyed`, :class:`.ysb.Ysb`, :class:`.flagship.Flagship`) says how to write
the input, build the falkirk pipeline (``falkirk(root, spark, size, regimes)``), build the streaming query
(``stream(...)``: the matrix's query objects), which step fails and which outputs (and SQLite tables) are
compared. The phases, each a driver process of its own (``python -m benchmarks.spark_scale --phase P``):

* ``run`` — the failure-free run (the reference; measured per epoch), then a second run on a fresh root
  whose driver is SIGKILLed in the failing step at the crash epoch (falkirk ``STEP@C:kill-mid``; the stream
  in its stateful operator's task, :mod:`.streams`): the process does not return;
* ``restart`` — a new driver on the killed run's directories: recovery (a) measured from its session being
  up to the crash epoch's outputs committed, outputs compared with the reference;
* ``fail`` — a fresh root where the failing step fails inside its Spark job at the crash epoch (falkirk
  ``STEP@C:job``: every attempt of a task fails, the job is abandoned; the step lost nothing, so falkirk
  retries the epoch in place in the same driver, ``in_place`` in the figures; the stream: every attempt of
  the stateful operator's task fails, the query stops and is restarted in the same session): recovery (b) measured from the failure reaching the driver to the crash epoch's
  outputs committed, outputs compared with the reference;
* ``advise`` — ``falkirk-advised``'s profile and advice, once per point, outside the figures;
* ``reference`` — the failure-free run alone (``--remeasure-fail``: what the ``fail`` phases compare with);
* ``off`` — ``falkirk-off``: the shipped pipeline with falkirk off (``durable=False``), failure-free: the
  driver CPU a pipeline costs without falkirk's bookkeeping.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from ..spark_vs_streaming import Written, advice_doc, fill_input_logs, jvm_pid
from .meters import ScaleMeter, kind_of
from .plan import sql_settings
from .streams import Injected

#: failures per epoch ``falkirk-advised`` is advised for (the matrix's rate)
ADVISE_RATE = 0.05


def adapter(spec: dict[str, Any]) -> Any:
    from .flagship import Flagship
    from .keyed import Keyed
    from .ysb import Ysb

    w = spec["workload"]
    return Flagship() if w == "flagship" else Ysb() if w == "ysb" else Keyed(w)


def stamp() -> tuple[float, float]:
    from ..spark_matrix.measure import now_cpu

    return time.perf_counter(), now_cpu()


def _point_sql(spec: dict[str, Any]) -> dict[str, str]:
    from .plan import Point

    size = spec["size"]
    return sql_settings(Point(spec["workload"], size.get("keys", size.get("events")), size.get("churn"),
                              size["epochs"], size["crash"]))


def run_falkirk(wl: Any, spark: Any, root: Path, spec: dict[str, Any], fail: list[str], *, fill: bool = True,
                durable: bool = True) -> dict[str, Any]:
    """One falkirk run of ``spec``'s configuration at ``root`` (``fill``: its input log first, untimed)."""
    pipe = wl.falkirk(root, spark, spec["size"], spec["regimes"])
    pipe.spark_conf = _point_sql(spec)  # both systems' SQL settings at this size (not the matrix's SMALL_DATA)
    pipe.durable = durable
    if spec.get("advice"):
        from falkirk.spark.pipeline.declare.regimes import from_description

        pipe.apply({n: from_description(n, d) for n, d in spec["advice"]["regimes"].items()})
    written = Written(root, kind_of)
    if fill:
        fill_input_logs(pipe, spec["size"]["epochs"])
    written.scan(count=False)
    meter = ScaleMeter(written, jvm_pid(spark))
    failed: list[tuple[float, float]] = []

    def progress(line: str) -> None:
        if line.startswith("epoch"):
            meter.epoch_done(int(line.split()[1]))
        elif line.startswith("FAILURE") and not failed:
            failed.append(stamp())

    result = pipe.run(spec["size"]["epochs"], fail=fail, progress=progress)
    written.scan()
    return {"meter": meter, "result": result, "pipe": pipe, "failed_at": failed[0] if failed else None}


def run_stream(wl: Any, spark: Any, base: Path, spec: dict[str, Any], *, at: int | None = None,
               kind: str = "fail") -> tuple[Any, Injected]:
    """The streaming query of ``spec`` under ``base`` (``at``: the batch of an injected ``kind`` failure)."""
    from falkirk.spark.pipeline.run.session import sql_conf

    q = wl.stream(spark, Path(spec["input"]), base, spec["size"], spec["form"])
    q.written = Written(base, kind_of)
    meter = ScaleMeter(q.written, jvm_pid(spark))
    setattr(q, wl.meter_attr, meter)
    run = Injected(q, at=at, kind=kind, batch_attr=wl.batch_attr, stamp=stamp)
    with sql_conf(spark, _point_sql(spec)):
        run.run()
    return meter, run


def compared(spark: Any, wl: Any, got: Path, ref: Path, epochs: int) -> dict[str, Any]:
    """Outputs (and SQLite tables) of ``got`` against the failure-free ``ref``, as multisets (outputs by Spark)."""
    from falkirk.spark.pipeline.tools.verify import output_differences, table_rows

    diffs, rows = [], 0
    for name in wl.outputs:
        n, differ = output_differences(spark, got, ref, name)
        rows += n
        diffs += [f"{name} epoch {e}: {m} missing, {x} extra" for e, (m, x) in differ.items()]
        have = sorted(int(d.name.split("=")[1]) for d in (ref / "output" / name).glob("epoch=*"))
        if have != list(range(epochs)):
            diffs.append(f"the reference has {name} epochs {have}, expected 0..{epochs - 1}")
    for db, table in wl.tables:
        a, b = table_rows(got / db, table), table_rows(ref / db, table)
        rows += sum(b.values())
        if a != b:
            diffs.append(f"{db}:{table}")
    return {"identical": not diffs and rows > 0, "differences": diffs, "rows_compared": rows}


def phase_run(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """The failure-free run (measured; its figures written now), then the killed one (does not return)."""
    wl, base, c = adapter(spec), Path(spec["base"]), spec["size"]["crash"]
    if spec["system"] == "streaming":
        meter, _ = run_stream(wl, spark, base / "reference", spec)
        out = {**meter.figures()}
    else:
        r = run_falkirk(wl, spark, base / "reference", spec, [], durable=not spec.get("off"))
        out = {**r["meter"].figures(), "regimes": {n: s.regime.describe() for n, s in r["pipe"].steps.items()}}
    Path(spec["result"]).write_text(json.dumps(out, default=str))
    if spec.get("off"):
        return out
    if spec["system"] == "streaming":
        run_stream(wl, spark, base / "run", spec, at=c, kind="kill")
    else:
        run_falkirk(wl, spark, base / "run", spec, [f"{wl.failed_step}@{c}:kill-mid"])
    raise SystemExit("the driver was not killed")


def _falkirk_recovery(r: dict[str, Any], restart: bool, crash: int) -> dict[str, Any]:
    """What the journal says of the run's recovery; after a restart also ``failure_cpu_s``, the advisor's
    counterpart of a driver failure's price (:func:`~benchmarks.spark_vs_streaming.failure_cpu`: the redone
    executions plus the new driver's first executions beyond the killed driver's steady ones, JIT included):
    ``recovery_cpu_s`` counts the crash epoch's whole execution, which a failure-free run pays too."""
    from falkirk.spark.pipeline.tools.report import costs

    from ..spark_vs_streaming import failure_cpu

    journal, pipe = r["result"].journal, r["pipe"]
    rec = next(x for x in journal.recoveries if x.restart == restart)
    mine = costs(journal, rec, inputs=set(pipe.inputs), stateful=[n for n in pipe.steps if not pipe.stateless(n)])[0]
    out = {"records_recomputed": mine.recomputed, "source_rows": mine.source_rows, "log_rows": mine.log_rows,
           "phases": rec.phases(), "actions": dict(rec.plan.actions), "in_place": rec.in_place}
    if restart:
        redo = [x for x in journal.executions if x.recovery == rec.index and x.redo and x.cpu is not None]
        out["failure_cpu_s"] = failure_cpu(journal, sum(x.cpu for x in redo), crash)
    return out


def phase_restart(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """Recovery (a): the driver restarted on the killed run's directories."""
    wl, base, c = adapter(spec), Path(spec["base"]), spec["size"]["crash"]
    t0 = stamp()
    if spec["system"] == "streaming":
        meter, run = run_stream(wl, spark, base / "run", spec)
        rerun = [p for p in run.progress if p["batchId"] <= c]
        out = {"source_rows": sum(p["numInputRows"] for p in rerun), "log_rows": 0,
               "records_recomputed": wl.recomputed_by_stream(spec["size"], c),
               "batches_rerun": [p["batchId"] for p in rerun]}
    else:
        r = run_falkirk(wl, spark, base / "run", spec, [], fill=False)
        meter, out = r["meter"], _falkirk_recovery(r, True, c)
    end = meter.ends[c]
    out.update(recovery_s=end[0] - t0[0], recovery_cpu_s=end[1] - t0[1])
    out.update(compared(spark, wl, base / "run", base / "reference", spec["size"]["epochs"]))
    return out


def phase_fail(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """Recovery (b): the failing step fails inside its Spark job at the crash epoch, in a fresh run."""
    wl, base, c = adapter(spec), Path(spec["base"]), spec["size"]["crash"]
    if spec["system"] == "streaming":
        meter, run = run_stream(wl, spark, base / "fail", spec, at=c, kind="fail")
        failed_at = run.failed_at
        rerun = [p for p in run.progress if p["attempt"] == 1 and p["batchId"] <= c]
        out = {"source_rows": sum(p["numInputRows"] for p in rerun), "log_rows": 0,
               "records_recomputed": wl.recomputed_by_stream(spec["size"], c)}
    else:
        r = run_falkirk(wl, spark, base / "fail", spec, [f"{wl.failed_step}@{c}:job"])
        meter, failed_at, out = r["meter"], r["failed_at"], _falkirk_recovery(r, False, c)
    if failed_at is None:
        raise SystemExit("the injected failure did not stop the step")
    end = meter.ends[c]
    out.update(recovery_s=end[0] - failed_at[0], recovery_cpu_s=end[1] - failed_at[1])
    out.update(compared(spark, wl, base / "fail", base / "reference", spec["size"]["epochs"]))
    shutil.rmtree(base / "fail", ignore_errors=True)
    return out


def phase_advise(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """``falkirk-advised``: the shipped regimes profiled on a scratch root, advised for a driver failure in the failing
    step at ``ADVISE_RATE``; the advice (its regimes are what the measured drivers run)."""
    wl, base, size = adapter(spec), Path(spec["base"]), spec["size"]
    t0 = time.perf_counter()
    pipe = wl.falkirk(base / "profile", spark, size, "shipped")
    pipe.spark_conf = _point_sql(spec)
    fill_input_logs(pipe, size["epochs"])
    costs = pipe.profile(epochs=size["epochs"], fail=f"{wl.failed_step}@{max(0, size['epochs'] // 2 - 1)}:after")
    advice = pipe.advise(ADVISE_RATE, failures="driver", costs=costs, objective=costs.unit)
    doc = advice_doc(pipe, costs, advice, ("all",), (size["crash"] - 1, wl.failed_step), t0)
    shutil.rmtree(base / "profile", ignore_errors=True)
    return doc


def phase_reference(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """The failure-free run alone, the reference later ``fail`` phases compare with (``--remeasure-fail``)."""
    wl, base = adapter(spec), Path(spec["base"])
    if spec["system"] == "streaming":
        meter, _ = run_stream(wl, spark, base / "reference", spec)
    else:
        meter = run_falkirk(wl, spark, base / "reference", spec, [])["meter"]
    return {**meter.figures()}


PHASES = {"run": phase_run, "restart": phase_restart, "fail": phase_fail, "advise": phase_advise,
          "reference": phase_reference}
