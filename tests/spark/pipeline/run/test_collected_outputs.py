"""Small outputs and logs written from the driver (``StepRunner._collects``) give what Spark's writer gives.

The pipeline: events → ``parsed`` (``Ephemeral(log=True)``) → ``totals`` (``Lazy(every=2)``, a running sum
per key) → output ``totals_out``, and output ``raw`` straight from ``parsed``. An epoch whose rows the run
counted before its write (both outputs here) is collected as Arrow and written by pyarrow (``parquet-cpp`` in the
files' footers) when small; one not counted yet (``parsed``'s log, counted by its write) when its epoch before
was small: a driver's first such write is Spark's (no size to go by), after a restart the manifest before tells. Under failures (an exception in
``totals`` after its output's write, one in ``raw`` between its write and its publication, a new driver on the
root) every output equals, as multisets, a failure-free run's with collection off and the pure-Python totals;
an epoch written twice (the failed attempt's, then the retry's) holds the retry's files only. An output that
grew past the bound is Spark's again, and one whose collection outgrew ``spark.driver.maxResultSize`` is
written by Spark's writer for the rest of the run, noted. A session writing Parquet with another codec collects
nothing.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from falkirk.spark import Ephemeral, Lazy, Pipeline, compare_runs
from falkirk.spark.pipeline.run import runners

pytestmark = [pytest.mark.spark]

KEYS = 5
EPOCHS = 5


def events(epoch: int) -> list[dict[str, Any]]:
    return [{"key": k, "v": epoch * 100 + k * 7 + i} for k in range(KEYS) for i in range(4)]


def parsed(events: Any) -> Any:
    return events.selectExpr("key", "v * 2 AS v")


def totals(parsed: Any, *, state: Any) -> Any:
    now = parsed.groupBy("key").agg({"v": "sum"}).withColumnRenamed("sum(v)", "total")
    both = now if state is None else state.unionByName(now)
    new = both.groupBy("key").agg({"total": "sum"}).withColumnRenamed("sum(total)", "total")
    return new, new


def build(root: Path, spark: Any, *, durable: bool = True) -> Pipeline:
    pipe = Pipeline(root, spark, fsync=False, durable=durable)
    pipe.input("events", "key BIGINT, v BIGINT", partitions=2, source=events)
    pipe.step(parsed, regime=Ephemeral(log=True))
    pipe.step(totals, regime=Lazy(every=2))
    pipe.output("totals_out", inputs=["totals"])
    pipe.output("raw", inputs=["parsed"])
    return pipe


def expected_totals(epoch: int) -> Counter[tuple[int, int]]:
    sums: dict[int, int] = {}
    for e in range(epoch + 1):
        for r in events(e):
            sums[r["key"]] = sums.get(r["key"], 0) + 2 * r["v"]
    return Counter(sums.items())


def writers(root: Path, output: str) -> dict[int, set[str]]:
    """Per epoch of ``output``, who wrote its files: ``pyarrow`` or ``spark``."""
    out = {}
    for where in sorted((root / "output" / output).glob("epoch=*")):
        files = [p for p in where.iterdir() if p.name.startswith("part-")]
        out[int(where.name.split("=")[1])] = {
            "pyarrow" if "parquet-cpp" in pq.read_metadata(p).created_by else "spark" for p in files
        }
    return out


@pytest.fixture
def collections(monkeypatch: Any) -> list[tuple[str, str, int]]:
    """``(step, kind, epoch)`` of every write from the driver (``Storage.write_collected`` returning a manifest)."""
    from falkirk.spark.pipeline.store.storage import Storage

    real, seen = Storage.write_collected, []

    def spy(self: Any, df: Any, step: str, kind: str, epoch: int, **kw: Any) -> Any:
        m = real(self, df, step, kind, epoch, **kw)
        if m is not None:
            seen.append((step, kind, epoch))
        return m

    monkeypatch.setattr(Storage, "write_collected", spy)
    return seen


def log_writers(root: Path, step: str) -> set[str]:
    return {
        "pyarrow" if "parquet-cpp" in pq.read_metadata(p).created_by else "spark"
        for p in (root / "data" / step / "log").rglob("part-*")
    }


def rows_of(spark: Any, root: Path, output: str, epoch: int) -> Counter[tuple[Any, ...]]:
    df = spark.read.parquet(str(root / "output" / output / f"epoch={epoch}"))
    return Counter(tuple(r) for r in df.select(*sorted(df.columns)).collect())


@pytest.fixture(scope="module")
def reference(spark: Any, tmp_path_factory: Any) -> Path:
    """A failure-free run with nothing collected."""
    root = tmp_path_factory.mktemp("reference") / "root"
    saved = runners.COLLECT_MAX_ROWS
    runners.COLLECT_MAX_ROWS = -1
    try:
        result = build(root, spark).run(EPOCHS)
    finally:
        runners.COLLECT_MAX_ROWS = saved
    assert result.done
    assert writers(root, "totals_out") == {e: {"spark"} for e in range(EPOCHS)}
    return root


def test_small_outputs_and_logs_are_written_from_the_driver(
    spark: Any, tmp_path: Path, reference: Path, collections: list[tuple[str, str, int]]
) -> None:
    root = tmp_path / "root"
    pipe = build(root, spark)
    result = pipe.run(EPOCHS)
    assert result.done
    for output in ("totals_out", "raw"):  # counted before their writes: from the first epoch
        assert writers(root, output) == {e: {"pyarrow"} for e in range(EPOCHS)}
        assert [e for s, k, e in collections if (s, k) == (output, "output")] == list(range(EPOCHS))
    # the log, counted by its write: foretold by the epoch before, so not the first
    assert [e for s, k, e in collections if (s, k) == ("parsed", "log")] == list(range(1, EPOCHS))
    assert "pyarrow" in log_writers(root, "parsed")
    comparison = compare_runs(spark, pipe, root, reference)
    assert comparison.identical, comparison.differences
    assert comparison.rows_compared == sum(len(events(e)) + KEYS for e in range(EPOCHS))
    for e in range(EPOCHS):
        assert rows_of(spark, root, "totals_out", e) == expected_totals(e)
    # the journal's rows of each output epoch are those written
    for x in result.journal.executions:
        if x.step in ("raw", "totals_out") and x.rows is not None and x.rows >= 0:
            assert x.rows == (len(events(x.epoch)) if x.step == "raw" else KEYS), x


def test_with_falkirk_off_outputs_are_sparks_own_writes(
    spark: Any, tmp_path: Path, collections: list[tuple[str, str, int]]
) -> None:
    """``durable=False`` is the reference recovered runs are compared with (``compare_runs``, the demo): its outputs
    stay Spark's writes, so a fault in the driver-side write could not hide in both runs; each epoch holds the
    oracle's rows."""
    root = tmp_path / "root"
    assert build(root, spark, durable=False).run(EPOCHS).done
    assert collections == []
    for output in ("totals_out", "raw"):
        assert writers(root, output) == {e: {"spark"} for e in range(EPOCHS)}
    for e in range(EPOCHS):
        assert rows_of(spark, root, "totals_out", e) == expected_totals(e)
        assert sum(rows_of(spark, root, "raw", e).values()) == len(events(e))


@pytest.mark.parametrize(
    "fail",
    [
        ["totals@3:mid"],  # after totals' epoch, before its consumers: rolled back or retried
        ["raw@2:mid"],  # raw's files written from the driver, not published: the retry writes them again
        ["raw@2:mid", "totals_out@3:mid", "totals@4:mid"],
    ],
)
def test_under_failures_the_outputs_equal_a_failure_free_run(
    spark: Any, tmp_path: Path, reference: Path, fail: list[str]
) -> None:
    root = tmp_path / "root"
    pipe = build(root, spark)
    result = pipe.run(EPOCHS, fail=fail)
    assert result.done and result.journal.recoveries
    comparison = compare_runs(spark, pipe, root, reference)
    assert comparison.identical, comparison.differences
    for e in range(EPOCHS):
        assert rows_of(spark, root, "totals_out", e) == expected_totals(e)
        assert sum(rows_of(spark, root, "raw", e).values()) == len(events(e))
    assert {"pyarrow"} in writers(root, "raw").values()


def test_a_new_driver_goes_by_the_manifest_before(
    spark: Any, tmp_path: Path, reference: Path, collections: list[tuple[str, str, int]]
) -> None:
    """A second run on the root (a new driver): its first log's size comes from the manifest of the epoch
    before, so it is collected at once."""
    root = tmp_path / "root"
    assert build(root, spark).run(2).done
    assert [e for s, k, e in collections if (s, k) == ("parsed", "log")] == [1]
    pipe = build(root, spark)
    assert pipe.run(EPOCHS).done
    assert [e for s, k, e in collections if (s, k) == ("parsed", "log")] == [1, *range(2, EPOCHS)]
    comparison = compare_runs(spark, pipe, root, reference)
    assert comparison.identical, comparison.differences


def test_an_output_past_the_bound_is_sparks(spark: Any, tmp_path: Path, reference: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(runners, "COLLECT_MAX_ROWS", KEYS)  # totals_out (KEYS rows) fits, raw does not
    root = tmp_path / "root"
    pipe = build(root, spark)
    assert pipe.run(EPOCHS).done
    assert writers(root, "raw") == {e: {"spark"} for e in range(EPOCHS)}
    assert writers(root, "totals_out") == {e: {"pyarrow"} for e in range(EPOCHS)}
    comparison = compare_runs(spark, pipe, root, reference)
    assert comparison.identical, comparison.differences


def test_an_unbounded_collection_is_not_foretold(
    spark: Any, tmp_path: Path, reference: Path, monkeypatch: Any, collections: list[tuple[str, str, int]]
) -> None:
    """``spark.driver.maxResultSize`` 0 (no bound): only counted epochs are collected, not the log's."""
    monkeypatch.setattr(runners, "result_bound", lambda spark: 0)
    root = tmp_path / "root"
    pipe = build(root, spark)
    assert pipe.run(EPOCHS).done
    assert {(s, k) for s, k, _ in collections if k != "checkpoint"} == {("raw", "output"), ("totals_out", "output")}
    comparison = compare_runs(spark, pipe, root, reference)
    assert comparison.identical, comparison.differences


def test_a_collection_past_max_result_size_falls_back_to_sparks_writer(
    spark: Any, tmp_path: Path, reference: Path, monkeypatch: Any
) -> None:
    """Spark refuses a collection beyond ``spark.driver.maxResultSize`` (an epoch far larger than the one before):
    that write is Spark's, and so is every later one of that step in the run, with a note; nothing fails."""
    DataFrame = type(spark.range(1))  # the session's class (classic), whose toArrow is its own
    real = DataFrame.toArrow
    refused: list[int] = []

    def to_arrow(self: Any) -> Any:
        if "v" in self.columns and "total" not in self.columns:  # raw's rows (and parsed's log)
            refused.append(1)
            raise RuntimeError(
                "Job aborted: Total size of serialized results of 2 tasks (1100.0 MiB) is bigger than "
                "spark.driver.maxResultSize (1024.0 MiB)"
            )
        return real(self)

    monkeypatch.setattr(DataFrame, "toArrow", to_arrow)
    root = tmp_path / "root"
    pipe = build(root, spark)
    result = pipe.run(EPOCHS)
    assert result.done and not result.journal.recoveries
    assert len(refused) == 2  # raw's output and parsed's log, once each
    assert writers(root, "raw") == {e: {"spark"} for e in range(EPOCHS)}
    assert log_writers(root, "parsed") == {"spark"}
    assert writers(root, "totals_out") == {e: {"pyarrow"} for e in range(EPOCHS)}
    notes = [n for n in result.journal.notes if "maxResultSize" in n]
    assert len(notes) == 2 and any(n.startswith("step raw@0") for n in notes), notes
    comparison = compare_runs(spark, pipe, root, reference)
    assert comparison.identical, comparison.differences


def test_a_session_writing_parquet_otherwise_collects_nothing(spark: Any, tmp_path: Path, reference: Path) -> None:
    """Another codec than Spark's default: every output and log is Spark's write, and none is collected first for
    nothing (a collection, then Spark's write of the same rows)."""
    DataFrame = type(spark.range(1))
    real, collections = DataFrame.toArrow, []

    def to_arrow(self: Any) -> Any:
        collections.append(1)
        return real(self)

    spark.conf.set("spark.sql.parquet.compression.codec", "gzip")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(DataFrame, "toArrow", to_arrow)
            root = tmp_path / "root"
            pipe = build(root, spark)
            assert pipe.run(EPOCHS).done
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
    assert writers(root, "raw") == writers(root, "totals_out") == {e: {"spark"} for e in range(EPOCHS)}
    assert collections == []  # nor totals' checkpoints (Storage.write_collected refuses the session too)
    comparison = compare_runs(spark, pipe, root, reference)
    assert comparison.identical, comparison.differences
