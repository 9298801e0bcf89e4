"""Appending a Spark DataFrame: the executors check and write, the same records land where Python's would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import InputLog, RecordError

pytestmark = pytest.mark.spark

SCHEMA = "user BIGINT, v INT NOT NULL, name VARCHAR(3), s STRUCT<a: INT NOT NULL, b: STRING>"
ROWS = [{"user": u % 5 if u % 4 else None, "v": u, "name": "ab"[: u % 3], "s": {"a": u, "b": None}} for u in range(30)]


def _log(tmp: Path, **kw: Any) -> InputLog:
    return InputLog(tmp, "ev", SCHEMA, partitions=3, key="user", fsync=False, **kw)


def _stored(log: InputLog) -> list[tuple[Any, ...]]:
    return sorted((r["_partition"], r["_offset"], r["user"], r["v"]) for r in log.to_arrow().to_pylist())


def test_a_dataframe_lands_where_the_same_python_records_would(spark: Any, tmp_path: Path) -> None:
    """Same keys, same partitions; offsets dense from each partition's end; the log reads them back typed."""
    df = spark.createDataFrame(ROWS, SCHEMA.replace("VARCHAR(3)", "STRING")).repartition(3)
    spark_log, py_log = _log(tmp_path / "spark"), _log(tmp_path / "python")
    keyed = [r for r in ROWS if r["user"] is not None]
    spark_log.append([{"user": 9, "v": 0}], batch="a")
    py_log.append([{"user": 9, "v": 0}], batch="a")
    written = spark_log.append(df, batch="b")
    assert sum(written.values()) == len(ROWS)
    py_log.append(keyed, batch="b")
    by_key = {(p, u, v) for p, _, u, v in _stored(py_log)}
    assert by_key <= {(p, u, v) for p, _, u, v in _stored(spark_log)}
    for k in range(3):
        offsets = sorted(o for p, o, _, _ in _stored(spark_log) if p == k)
        assert offsets == list(range(len(offsets)))
    assert spark_log.append(df, batch="b") == {}  # re-sent: nothing twice
    spark_log.cut(0)
    assert spark_log.read(spark, 0).count() == len(ROWS) + 1
    manifest = spark_log._manifest(spark_log.segments(0)[-1], 0)
    assert all(f.name.startswith("spark/") and f.sha256.startswith("sha256:") for f in manifest.files)


@pytest.mark.parametrize(("column", "value", "field"), [
    ("v", None, "v"),                 # NULL in a NOT NULL field
    ("name", "abcd", "name"),         # longer than VARCHAR(3)
    ("s", {"a": None, "b": "x"}, "s"),  # NULL in a NOT NULL struct field
])
def test_a_bad_row_stops_the_append_naming_it(spark: Any, tmp_path: Path, column: str, value: Any, field: str) -> None:
    """The first bad row: RecordError with its index, and the partition and offset Python's append names; nothing written.

    (Every row has a key here: rows without one are spread differently by the two, by row id in Spark.)
    """
    rows = [{**r, "user": i % 5} for i, r in enumerate(ROWS)]
    rows[17][column] = value
    df = spark.createDataFrame(rows, SCHEMA.replace("VARCHAR(3)", "STRING").replace("v INT NOT NULL", "v INT")
                               .replace("a: INT NOT NULL", "a: INT"))
    log = _log(tmp_path)
    with pytest.raises(RecordError) as err:
        log.append(df, batch="b")
    e = err.value
    assert (e.field, e.index) == (field, 17)
    py = _log(tmp_path / "py")
    with pytest.raises(RecordError) as ref:
        py.append(rows, batch="b")
    assert (e.partition, e.offset) == (ref.value.partition, ref.value.offset)
    assert log.end_offsets() == {0: 0, 1: 0, 2: 0} and not log.fs.listdir("input/ev/spark")


def test_types_convert_exactly_or_the_row_is_bad(spark: Any, tmp_path: Path) -> None:
    """A wider integer column converts when it fits, a string column is refused, extra columns are bad rows."""
    log = InputLog(tmp_path, "ev", "n INT, d DECIMAL(4, 1)", fsync=False, dead_letter=True)
    df = spark.createDataFrame([(1, "1.5"), (2**40, "2.0"), (3, "2.25")], "n BIGINT, d STRING") \
        .selectExpr("n", "CAST(d AS DECIMAL(6, 2)) AS d")
    assert log.append(df, batch="b") == {0: 1}
    lines = [json.loads(x) for x in log.fs.read_bytes(f"{log.dead_letter_dir}/b.jsonl").splitlines()]
    assert sorted((x["index"], x["field"]) for x in lines) == [(1, "n"), (2, "d")]
    assert log.to_arrow().column("n").to_pylist() == [1]
    with pytest.raises(RecordError, match="'extra': not declared"):
        InputLog(tmp_path / "x", "ev", "n INT", fsync=False).append(spark.range(2).selectExpr("1 AS n", "id AS extra"))
