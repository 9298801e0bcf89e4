"""A log written before segments were Parquet (JSON lines, fixtures/json-log-27438cf) keeps working: read both, write Parquet."""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import CorruptDataError, Cut, Ephemeral, InputLog, Pipeline

FIXTURE = Path(__file__).parent / "fixtures" / "json-log-27438cf"
SCHEMA = "user STRING NOT NULL, ts BIGINT, amount DECIMAL(7, 2), day DATE, tags ARRAY<STRING>"
D = decimal.Decimal


def _old_log(tmp: Path) -> InputLog:
    """A copy of the fixture's log (the test may write to it)."""
    shutil.copytree(FIXTURE / "input", tmp / "input")
    return InputLog(tmp, "clicks", SCHEMA, partitions=2, key="user", fsync=False, dead_letter=True)


def test_offsets_cuts_and_dead_letters_of_an_old_log(tmp_path: Path) -> None:
    """The old log's end offsets come from its JSON lines, its cuts and dead letters are as written."""
    log = _old_log(tmp_path)
    assert log.cut_epochs() == [0, 1, 2]
    assert log.get_cut(2) == Cut(2, {0: 6, 1: 3}, {0: 9, 1: 6})
    assert log.end_offsets() == {0: 11, 1: 6}
    assert all(s.legacy for k in (0, 1) for s in log.segments(k))
    assert log.dead_letters() == 1 == log.dead_letters("epoch-1")
    for e in log.cut_epochs():
        log.verify(log.get_cut(e))  # sizes (JSON-line segments have no recorded checksum)
    with pytest.raises(CorruptDataError, match="JSON lines: read it with Spark"):
        log.to_arrow(0)


def test_new_appends_are_parquet_and_follow_the_old_offsets(tmp_path: Path) -> None:
    """An append to the old log writes Parquet segments from the old end offsets; acknowledging deletes old segments."""
    log = _old_log(tmp_path)
    written = log.append([{"user": "hal", "ts": 3002, "amount": D("2.50"), "day": dt.date(2026, 1, 4)},
                          {"user": "ivy", "ts": 3003, "tags": ["x"]}], batch="epoch-3b")
    new = {k: [s for s in log.segments(k) if not s.legacy] for k in written}
    assert all(len(new[k]) == 1 and new[k][0].start == {0: 11, 1: 6}[k] for k in written)
    cut = log.cut(3)
    assert cut.start == {0: 9, 1: 6} and cut.records == 4
    assert len(log.files(cut)) == 1 + len(written)  # the old batch's JSON lines and the new Parquet files
    log.cut(4)
    assert log.acknowledge(3) > 0
    for k, old_last in ((0, 9), (1, 3)):  # only the last segment of each partition stays
        assert [s.start for s in log.segments(k)] == ([{0: 11, 1: 6}[k]] if k in written else [old_last])


@pytest.mark.spark
def test_spark_reads_json_and_parquet_segments_of_one_epoch(spark: Any, tmp_path: Path) -> None:
    """Old epochs read as they did before; an epoch spanning a JSON-lines and a Parquet segment reads both, typed."""
    log = _old_log(tmp_path)
    rows = [r.asDict() for r in log.read(spark, 0).orderBy("_partition", "_offset").collect()]
    assert rows == [
        {"user": "cat", "ts": 1, "amount": D("1.01"), "day": dt.date(2026, 1, 1), "tags": ["cat", "e0"], "_partition": 0, "_offset": 0},
        {"user": "eve", "ts": 2, "amount": D("2.02"), "day": dt.date(2026, 1, 1), "tags": None, "_partition": 0, "_offset": 1},
        {"user": "bob", "ts": 3, "amount": D("3.03"), "day": dt.date(2026, 1, 1), "tags": ["bob", "e0"], "_partition": 0, "_offset": 2},
        {"user": "ann", "ts": 0, "amount": D("0.00"), "day": dt.date(2026, 1, 1), "tags": None, "_partition": 1, "_offset": 0},
    ]
    assert [log.read(spark, e).count() for e in (1, 2)] == [5, 6]
    log.append([{"user": "hal", "ts": 3002, "amount": D("2.50"), "day": "2026-01-04", "tags": ["x", None]}], batch="b")
    log.cut(3)
    got = sorted((r.user, r.ts, r.amount, r.day, r.tags) for r in log.read(spark, 3).collect())
    assert got == [("fay", 3000, D("1.00"), dt.date(2026, 1, 4), None), ("gus", 3001, None, None, None),
                   ("hal", 3002, D("2.50"), dt.date(2026, 1, 4), ["x", None])]


@pytest.mark.spark
def test_a_pipeline_runs_on_an_old_log_and_goes_on_in_parquet(spark: Any, tmp_path: Path) -> None:
    """A pipeline over the old log: epochs 0-2 from JSON lines, 3 from both, 4 from Parquet; every record once.

    The old log already holds batch ``epoch-3`` in partition 0 (as if its producer had crashed half-way), so
    the source's records for epoch 3 are appended to partition 1 only: an append is idempotent per batch.
    """
    shutil.copytree(FIXTURE / "input", tmp_path / "input")
    p = Pipeline(tmp_path, spark, fsync=False)
    p.input("clicks", SCHEMA, partitions=2, key="user", dead_letter=True,
            source=lambda e: [{"user": f"new{e}-{i}", "ts": 1000 * e + i} for i in range(3)])

    @p.step(regime=Ephemeral())
    def spend(clicks: Any) -> Any:
        return clicks.select("user", "ts", "amount")

    p.output("out", inputs=["spend"])
    p.run(5)
    per_epoch = {e: spark.read.parquet(str(tmp_path / "output" / "out" / f"epoch={e}")).count() for e in range(5)}
    to_1 = sum(zlib.crc32(f"new3-{i}".encode()) % 2 == 1 for i in range(3))
    assert per_epoch == {0: 4, 1: 5, 2: 6, 3: 2 + to_1, 4: 3}
