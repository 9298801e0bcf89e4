"""The DDL as Arrow: Spark's parser and falkirk's give the same schema; Spark reads what the log writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from falkirk.spark import InputLog
from falkirk.spark.pipeline.store.arrowschema import arrow_schema, read_ddl
from falkirk.spark.pipeline.store.records import parse_schema

DDLS = [
    "user STRING NOT NULL, ts BIGINT, url STRING, tags ARRAY<STRING>",
    "a TINYINT, b SMALLINT, c INT, d FLOAT, e DOUBLE, f DECIMAL(5, 2), g DATE, j BOOLEAN, k DECIMAL(38, 0)",
    "h TIMESTAMP, i TIMESTAMP_NTZ, l TIMESTAMP_LTZ",
    "m MAP<STRING, BIGINT>, s STRUCT<a: INT NOT NULL, b: STRING, c: ARRAY<STRUCT<x: DATE>>>",
    "v VARCHAR(3), ch CHAR(2) NOT NULL, n ARRAY<VARCHAR(4)>, `odd name` INTEGER, ok LONG, r REAL, dd DEC(4, 1)",
]


def test_varchar_keeps_its_length_in_metadata() -> None:
    """VARCHAR(n)/CHAR(n) are strings with n in the field metadata (top level), NOT NULL a non-nullable field."""
    s = arrow_schema(parse_schema(DDLS[4]))
    assert s.field("v").type == pa.string() and s.field("v").metadata == {b"falkirk.max_length": b"3"}
    assert not s.field("ch").nullable and s.field("n").type == pa.list_(pa.string())


@pytest.mark.spark
@pytest.mark.parametrize("ddl", DDLS)
def test_spark_and_falkirk_map_the_ddl_alike(spark: Any, ddl: str) -> None:
    """Spark's DataType.fromDDL + PySpark's Arrow mapping equals falkirk's parser + table, metadata included."""
    ours, sparks = arrow_schema(parse_schema(ddl)), arrow_schema(parse_schema(ddl), spark)
    assert sparks.equals(ours, check_metadata=True), (sparks, ours)


@pytest.mark.spark
def test_spark_reads_every_type_the_log_writes(spark: Any, tmp_path: Path) -> None:
    """One record of every declared type, appended and read back by Spark's Parquet reader (VARCHAR as STRING)."""
    import datetime as dt
    import decimal

    ddl = ", ".join(DDLS)
    log = InputLog(tmp_path, "all", ddl, fsync=False, spark=spark)
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 6)
    record = {"user": "u", "ts": 1, "tags": ["a", None], "a": -8, "b": 300, "c": 5, "ch": "xy", "d": 1.5, "e": 2.5,
              "f": decimal.Decimal("123.45"), "g": dt.date(2026, 1, 2), "j": True, "k": 10**37, "h": when,
              "i": when, "l": when.replace(tzinfo=dt.UTC), "m": {"k": 1}, "s": {"a": 1, "c": [{"x": None}]},
              "v": "abc", "n": ["abcd"], "odd name": 7, "ok": 2**40, "r": 0.25, "dd": decimal.Decimal("999.9")}
    log.append([record])
    log.cut(0)
    (row,) = log.read(spark, 0).collect()
    got = row.asDict(recursive=True)
    assert spark.conf.get("spark.sql.session.timeZone") in ("UTC", "Etc/UTC")
    assert got["h"] == when and got["i"] == when and got["k"] == 10**37 and got["m"] == {"k": 1}
    assert {k: got[k] for k in ("user", "a", "b", "c", "ch", "f", "v", "n", "odd name", "dd")} == {
        "user": "u", "a": -8, "b": 300, "c": 5, "ch": "xy", "f": decimal.Decimal("123.45"), "v": "abc", "n": ["abcd"],
        "odd name": 7, "dd": decimal.Decimal("999.9")}
    assert read_ddl(log.record_schema).count("`") >= 2 * len(got)
