"""``code_changes={step: E}``: a changed step's code redoes it and everything downstream from epoch ``E`` — or is
refused with the root left byte-identical.

The pipeline: readings → Ephemeral ``clean`` → Batch ``hourly`` (per-device sums) → ``Lazy(every=2, key=device)``
``rolling`` (running sums) → output ``device_report``, and an Eager SQLite step ``alerts`` over ``clean``. It runs
``FIRST`` epochs with the old ``clean``, then restarts with a new ``clean`` and ``code_changes={"clean": E}`` and
runs to ``THEN``. The expected output is computed here in plain Python — old code up to ``E``, new code after —
not by running falkirk again.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_support import root_listing

from falkirk.spark import Batch, Eager, Ephemeral, Lazy, Pipeline, PipelineError, RecoveryError
from falkirk.spark.pipeline.tools.verify import output_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FIRST, THEN, DEVICES = 5, 7, 5


def readings(epoch: int) -> list[dict[str, Any]]:
    """Deterministic readings: a few per device, one of them negative (what ``clean`` drops)."""
    return [{"device": d, "value": (7 * epoch + 3 * d + k) % 11 - 1} for d in range(DEVICES) for k in range(3)]


def old_clean(readings: Any) -> Any:
    return readings.where("value > 0").select("device", "value")


def new_clean(readings: Any) -> Any:  # keeps zeros too and doubles every value
    return readings.where("value >= 0").selectExpr("device", "value * 2 AS value")


def build(root: Path, spark: Any, clean: Any, **options: Any) -> Pipeline:
    from pyspark.sql import functions as F

    pipe = Pipeline(root, spark, fsync=False, **options)
    pipe.input("readings", "device BIGINT, value BIGINT", partitions=2, key="device", source=readings)
    pipe.step(clean, name="clean", inputs=["readings"], regime=Ephemeral())

    @pipe.step(regime=Batch())
    def hourly(clean: Any) -> Any:
        return clean.groupBy("device").agg(F.sum("value").alias("value"))

    @pipe.step(regime=Lazy(every=2, key="device", partitions=2))
    def rolling(hourly: Any, *, state: Any) -> Any:
        both = hourly if state is None else state.unionByName(hourly)
        new = both.groupBy("device").agg(F.sum("value").alias("value"))
        return new, new

    @pipe.step(regime=Eager(database="alerts.sqlite", tables={"alerts": "epoch"}))
    def alerts(clean: Any, *, db: Any, epoch: int) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS alerts (epoch INTEGER, device INTEGER, value INTEGER)")
        for r in clean.where("value >= 8").collect():
            db.execute("INSERT INTO alerts VALUES (?, ?, ?)", (epoch, r["device"], r["value"]))

    pipe.output("device_report", inputs=["rolling"])
    return pipe


def expected(change_at: int) -> tuple[dict[int, Counter[tuple[Any, ...]]], Counter[tuple[Any, ...]]]:
    """The report per epoch and the alerts table, by hand: old ``clean`` up to ``change_at``, new after."""
    running: Counter[int] = Counter()
    report: dict[int, Counter[tuple[Any, ...]]] = {}
    alerts: Counter[tuple[Any, ...]] = Counter()
    for e in range(THEN):
        if e <= change_at:
            cleaned = [(r["device"], r["value"]) for r in readings(e) if r["value"] > 0]
        else:
            cleaned = [(r["device"], 2 * r["value"]) for r in readings(e) if r["value"] >= 0]
        for device, value in cleaned:
            running[device] += value
            if value >= 8:
                alerts[(e, device, value)] += 1
        report[e] = Counter((d, v) for d, v in running.items())
    return report, alerts


@pytest.fixture(scope="module", params=[False, True], ids=["gc-off", "gc-on"])
def base(request: pytest.FixtureRequest, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool]:
    """The old pipeline after ``FIRST`` epochs, garbage collection off or on."""
    gc = request.param
    root = tmp_path_factory.mktemp(f"code-changes-{'gc' if gc else 'nogc'}")
    build(root, spark, old_clean, gc=gc).run(FIRST)
    return root, gc


def _alerts(root: Path) -> Counter[tuple[Any, ...]]:
    with sqlite3.connect(root / "alerts.sqlite") as db:
        return Counter(db.execute("SELECT epoch, device, value FROM alerts").fetchall())


@pytest.mark.parametrize("change_at", [0, 2, FIRST - 2, FIRST - 1])
def test_code_changes_redo_the_step_and_its_consumers_from_the_epoch(
    base: tuple[Path, bool], change_at: int, spark: Any, tmp_path: Path,
) -> None:
    """Where the data is there (GC off; GC on within what retain kept) the output equals the hand-computed one;
    where it is not, the change is refused naming what is missing, the root is byte-identical and the old
    pipeline still resumes."""
    source, gc = base
    root = tmp_path / "root"
    shutil.copytree(source, root)
    before = root_listing(root)
    pipe = build(root, spark, new_clean, gc=gc, code_changes={"clean": change_at})
    # the input garbage collection acknowledged cannot be read again: epochs up to it are never recomputed
    acknowledged = pipe.inputs["readings"].log.acknowledged()
    assert (acknowledged >= 0) == gc
    if change_at < acknowledged:  # clean would recompute an epoch whose input was collected
        with pytest.raises(RecoveryError, match=r"^input/readings/cuts/0000000\d\.json") as err:
            pipe.run(THEN)
        assert "collected by garbage collection" in str(err.value) and "nothing under" in str(err.value)
        assert root_listing(root) == before
        # the refusal names the earliest epoch that works here, and that one does
        suggested = re.search(r"the earliest epoch code_changes can name for clean here is (\d+)", str(err.value))
        assert suggested is not None, str(err.value)
        earliest = int(suggested.group(1))
        assert change_at < earliest == acknowledged, (earliest, acknowledged)
        shutil.copytree(root, tmp_path / "suggested")
        build(tmp_path / "suggested", spark, new_clean, gc=gc, code_changes={"clean": earliest}).run(THEN)
        report, alerts = expected(earliest)
        assert output_rows(spark, tmp_path / "suggested", "device_report") == report
        assert _alerts(tmp_path / "suggested") == alerts
        build(root, spark, old_clean, gc=gc).run(THEN)  # the unchanged pipeline resumes
        report, alerts = expected(THEN)
    else:
        result = pipe.run(THEN)
        (rec,) = result.journal.recoveries
        redone = {(x.step, x.epoch) for x in result.journal.executions if x.redo}
        assert {("clean", e) for e in range(change_at + 1, FIRST)} <= redone
        assert all(x.recovery == rec.index for x in result.journal.executions if x.redo)
        report, alerts = expected(change_at)
    got = output_rows(spark, root, "device_report")
    assert got == report, {e: (got.get(e), report[e]) for e in report if got.get(e) != report[e]}
    assert _alerts(root) == alerts


def test_refused_restarts_leave_the_root_byte_identical(base: tuple[Path, bool], spark: Any, tmp_path: Path) -> None:
    """A changed function without code_changes, a removed step, another regime and other input partitions are
    refused by run() before anything under the root is written."""
    source, gc = base
    root = tmp_path / "root"
    shutil.copytree(source, root)
    before = root_listing(root)

    changed = build(root, spark, new_clean, gc=gc)
    removed = build(root, spark, old_clean, gc=gc)
    del removed.steps["alerts"]
    removed.order.remove("alerts")
    regime = build(root, spark, old_clean, gc=gc)
    regime.steps["rolling"] = type(regime.steps["rolling"])("rolling", regime.steps["rolling"].fn, ("hourly",),
                                                            Eager(key="device"), frozenset({"state"}))
    partitions = build(root, spark, old_clean, gc=gc)
    partitions.inputs["readings"].log.partitions = 3
    for pipe, message in [(changed, "its code changed"), (removed, "step 'alerts' is missing here"),
                          (regime, "its regime was lazy, now eager"), (partitions, "partitions and key cannot change")]:
        with pytest.raises(PipelineError, match=message):
            pipe.run(THEN)
        assert root_listing(root) == before, message
