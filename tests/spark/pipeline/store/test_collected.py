"""A small frame written from the driver (``Storage.write_collected``) reads back as Spark's own write of it does.

The same rows are written both ways under one root, then read back through their manifests (as a restore reads
a checkpoint) and compared as multisets, with Spark's layout: the partition column's directories, that column
out of the files, the Spark schema in each footer. On a real S3 server too (``place``): the files land where
the manifest says, and their footers hold the rows it claims. Frames with columns pyarrow would write otherwise
are refused with nothing written, and an empty partitioned frame is Spark's write (an empty unpartitioned one
is one file of no rows, as Spark writes it). Into a named location (an output's), what was there is replaced.
"""

from __future__ import annotations

import datetime
import json
import posixpath
import re
from collections import Counter
from typing import Any

import pyarrow.parquet as pq
import pytest
from places import Place

from falkirk.spark.errors import StorageError
from falkirk.spark.pipeline.store import collected, frames
from falkirk.spark.pipeline.store.storage import Storage

pytestmark = [pytest.mark.spark]

SCHEMA = "k STRING, n BIGINT, small INT, x DOUBLE, ok BOOLEAN, day DATE, raw BINARY, _subtask INT"


def _rows(count: int) -> list[tuple[Any, ...]]:
    """Rows of :data:`SCHEMA` with a null in every nullable column now and then, three partition values."""
    out = []
    for i in range(count):
        null = i % 7 == 3
        out.append((
            None if null else f"key-{i}", i * 1_000_003, None if null else -i, i / 3, i % 2 == 0,
            datetime.date(2026, 1, 1) + datetime.timedelta(days=i % 40), None if null else bytes([i % 256, 7]),
            i % 3,
        ))
    return out


def _shape(name: str) -> str:
    """A data file's name with its part number and its write's UUID taken out (Spark 4.3:
    ``part-00001-<uuid>-c000.snappy.parquet``, and ``.c000`` in a partition's directory)."""
    name = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID", name)
    return re.sub(r"part-\d{5}-", "part-N-", name)


def _read(storage: Storage, spark: Any, m: Any) -> Counter[tuple[Any, ...]]:
    df = frames.read_frame(storage, spark, m)
    return Counter(tuple(r) for r in df.select(*[f.name for f in df.schema.fields]).collect())


@pytest.mark.parametrize("partition_by", ["_subtask", None])
def test_a_collected_write_reads_back_as_sparks_own_write(spark: Any, tmp_path: Any, partition_by: str | None) -> None:
    storage = Storage(str(tmp_path / "root"), fsync=False)
    df = spark.createDataFrame(_rows(200), SCHEMA).repartition(2).cache()
    assert df.count() == 200
    by_spark = storage.write_frame(df, "s", "checkpoint", 1, 200, partition_by=partition_by)
    mine = storage.write_collected(df, "s", "checkpoint", 2, partition_by=partition_by)
    assert mine is not None and mine.rows == by_spark.rows == 200
    assert mine.schema == by_spark.schema
    assert _read(storage, spark, mine) == _read(storage, spark, by_spark) == Counter(_rows(200))
    # Spark's layout: the same partition directories, the partition column in none of the files, files named as
    # Spark names them (a tool globbing for Spark's file names finds both)
    assert {posixpath.dirname(f.name) for f in mine.files} == {posixpath.dirname(f.name) for f in by_spark.files}
    assert {_shape(f.name) for f in mine.files} <= {_shape(f.name) for f in by_spark.files}, (mine.files, by_spark.files)
    for f in mine.files:
        path = tmp_path / "root" / mine.location / f.name
        assert f.name.rsplit("/", 1)[-1].startswith("part-") and path.stat().st_size == f.size
        meta = pq.read_metadata(path)
        assert "parquet-cpp" in meta.created_by  # written from the driver, by pyarrow
        assert partition_by is None or partition_by not in meta.schema.names
        assert collected.SPARK_ROW_METADATA.encode() in meta.metadata
        assert meta.metadata[collected.SPARK_VERSION.encode()] == spark.version.encode()  # Spark's legacy-calendar rule
    # read back without a schema too (a tool reading the files): the footers' Spark schema gives Spark's types
    plain = spark.read.parquet(str(tmp_path / "root" / mine.location))
    assert sorted(plain.schema.simpleString().split(",")) == sorted(df.schema.simpleString().split(","))
    storage.put(mine)
    storage.verify(storage.get("s", "checkpoint", 2))


def test_a_collected_write_on_each_place(spark: Any, place: Place) -> None:
    """Local and S3: the files are under the manifest's location as listed, and their footers hold its rows."""
    storage = place.storage()
    df = spark.createDataFrame(_rows(50), SCHEMA)
    m = storage.write_collected(df, "s", "checkpoint", 3, partition_by="_subtask")
    assert m is not None and m.rows == 50
    assert sorted(f.name.split("/")[0] for f in m.files) == ["_subtask=0", "_subtask=1", "_subtask=2"]
    footers = 0
    for f in m.files:
        with place.arrow.open_input_file(place.arrow_path(posixpath.join(m.location, f.name))) as fh:
            assert fh.size() == f.size
            footers += pq.ParquetFile(fh).metadata.num_rows
    assert footers == 50
    storage.put(m)
    storage.verify(storage.get("s", "checkpoint", 3))
    # into an output's named location: nothing there first, then an unpublished attempt's file replaced
    for n in (20, 5):
        out = storage.write_collected(spark.createDataFrame(_rows(n), SCHEMA), "o", "output", 4, location="output/o/epoch=4")
        assert out is not None and out.rows == n and len(out.files) == 1
    storage.put(out)
    storage.verify(storage.get("o", "output", 4))
    where = posixpath.join(out.location, out.files[0].name)
    with place.arrow.open_input_file(place.arrow_path(where)) as fh:  # (this session reads no s3a: pyarrow does)
        assert Counter(tuple(r.values()) for r in pq.read_table(fh).to_pylist()) == Counter(_rows(5))


@pytest.mark.parametrize(
    ("schema", "partition_by"),
    [
        ("k STRING, at TIMESTAMP", None),
        ("k STRING, at TIMESTAMP_NTZ", None),
        ("k STRING, d DECIMAL(10, 2)", None),
        ("k STRING, xs ARRAY<INT>", None),
        ("k STRING, m MAP<STRING, INT>", None),
        ("k STRING, s STRUCT<a: INT>", None),
        ("k STRING, n INT", "k"),  # a partition column that is not an integer
        ("k STRING, n INT", "absent"),
    ],
)
def test_columns_pyarrow_writes_otherwise_are_left_to_spark(
    spark: Any, tmp_path: Any, schema: str, partition_by: str | None
) -> None:
    storage = Storage(str(tmp_path / "root"), fsync=False)
    df = spark.createDataFrame([], schema)
    assert storage.write_collected(df, "s", "checkpoint", 1, partition_by=partition_by) is None
    assert not (tmp_path / "root" / "data").exists() and storage.sweep_unpublished() == 0


def test_an_empty_partitioned_frame_is_sparks_write(spark: Any, tmp_path: Any) -> None:
    storage = Storage(str(tmp_path / "root"), fsync=False)
    df = spark.createDataFrame([], SCHEMA)
    m = storage.write_collected(df, "s", "checkpoint", 1, partition_by="_subtask")
    assert m is not None and m.rows == 0
    assert all("parquet-cpp" not in pq.read_metadata(tmp_path / "root" / m.location / f.name).created_by for f in m.files)
    assert _read(storage, spark, m) == Counter()


def test_columns_spark_knows_have_no_nulls_are_written_as_spark_writes_them(spark: Any, tmp_path: Any) -> None:
    """A column Spark knows holds no null (``spark.range``'s ``id``, what is computed from it alone) is a required
    field in Spark's Parquet file and nullable in the other: the collected file marks each field as Spark's does,
    its footer holds the same Spark schema, and the frame read back through either manifest has the same schema,
    nullability included."""
    storage = Storage(str(tmp_path / "root"), fsync=False)
    df = spark.range(60).selectExpr("id", "CAST(id AS STRING) AS s", "IF(id % 4 = 0, NULL, id) AS maybe").cache()
    assert df.count() == 60 and [f.nullable for f in df.schema.fields] == [False, False, True]
    by_spark = storage.write_frame(df, "s", "checkpoint", 1, 60)
    mine = storage.write_collected(df, "s", "checkpoint", 2)
    assert mine is not None

    def footer(m: Any) -> tuple[list[tuple[str, bool]], Any]:
        schemas = [pq.read_schema(tmp_path / "root" / m.location / f.name) for f in m.files]
        fields = {tuple((f.name, f.nullable) for f in s) for s in schemas}
        rows = {s.metadata[collected.SPARK_ROW_METADATA.encode()] for s in schemas}
        assert len(fields) == len(rows) == 1, (fields, rows)
        return list(fields.pop()), json.loads(rows.pop())  # the same schema, its keys in Python's or Scala's order

    assert footer(mine) == footer(by_spark)
    assert footer(mine)[0] == [("id", False), ("s", False), ("maybe", True)]
    back = [frames.read_frame(storage, spark, m) for m in (mine, by_spark)]
    assert back[0].schema == back[1].schema
    assert _read(storage, spark, mine) == _read(storage, spark, by_spark) == Counter(tuple(r) for r in df.collect())


def test_an_empty_unpartitioned_frame_is_one_file_of_no_rows(spark: Any, tmp_path: Any) -> None:
    """As Spark writes it: one file with the schema, read back empty through the manifest and by Spark alone."""
    storage = Storage(str(tmp_path / "root"), fsync=False)
    df = spark.createDataFrame([], SCHEMA)
    m = storage.write_collected(df, "s", "output", 1, location="output/s/epoch=1")
    assert m is not None and m.rows == 0 and len(m.files) == 1
    meta = pq.read_metadata(tmp_path / "root" / m.location / m.files[0].name)
    assert "parquet-cpp" in meta.created_by and meta.num_rows == 0
    assert _read(storage, spark, m) == Counter()
    alone = spark.read.parquet(str(tmp_path / "root" / "output" / "s"))
    assert alone.count() == 0 and [f.name for f in alone.schema.fields] == [*df.columns, "epoch"]


def test_a_collected_write_into_a_named_location_replaces_what_was_there(spark: Any, tmp_path: Any) -> None:
    """An output's directory (``output/<name>/epoch=E``) after an attempt that wrote but did not publish: what that
    attempt left is gone, as Spark's overwrite removes it, and no hidden file stays beside the new one."""
    storage = Storage(str(tmp_path / "root"), fsync=False)
    first = spark.createDataFrame(_rows(20), SCHEMA)
    storage.write_frame(first, "s", "output", 3, 20, location="output/s/epoch=3")
    again = spark.createDataFrame(_rows(5), SCHEMA)
    m = storage.write_collected(again, "s", "output", 3, location="output/s/epoch=3")
    assert m is not None and m.rows == 5 and len(m.files) == 1
    where = tmp_path / "root" / "output" / "s" / "epoch=3"
    assert sorted(p.name for p in where.iterdir()) == [m.files[0].name]
    assert _read(storage, spark, m) == Counter(_rows(5))
    assert not (tmp_path / "root" / "data").exists() and storage.sweep_unpublished() == 0


def test_a_null_partition_value_is_sparks_write(spark: Any, tmp_path: Any) -> None:
    storage = Storage(str(tmp_path / "root"), fsync=False)
    data = [(*r[:-1], None if i % 5 == 0 else r[-1]) for i, r in enumerate(_rows(30))]
    df = spark.createDataFrame(data, SCHEMA)
    m = storage.write_collected(df, "s", "checkpoint", 1, partition_by="_subtask")
    assert m is not None and m.rows == 30
    assert all("parquet-cpp" not in pq.read_metadata(tmp_path / "root" / m.location / f.name).created_by for f in m.files)
    assert _read(storage, spark, m) == Counter(data)


@pytest.mark.parametrize("setting", ["codec", "encryption"])
def test_a_session_writing_parquet_otherwise_is_left_to_spark(spark: Any, tmp_path: Any, setting: str) -> None:
    """Another codec than Spark's default, or Parquet encryption configured: nothing written from the driver."""
    storage = Storage(str(tmp_path / "root"), fsync=False)
    df = spark.createDataFrame(_rows(10), SCHEMA)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    if setting == "codec":
        spark.conf.set("spark.sql.parquet.compression.codec", "zstd")
    else:
        hadoop.set(collected.ENCRYPTION[0], "org.example.NoSuchFactory")
    try:
        assert storage.write_collected(df, "s", "checkpoint", 1, partition_by="_subtask") is None
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
        hadoop.unset(collected.ENCRYPTION[0])
    assert not (tmp_path / "root" / "data").exists()
    assert collected.session_allows(spark)


def test_a_collected_write_the_store_does_not_list_is_refused_naming_the_driver(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows written from the driver that the store then does not list: refused there, saying the driver wrote
    them (not asking whether the executors see the driver's storage: none wrote)."""
    storage = Storage(str(tmp_path / "root"), fsync=False)
    df = spark.createDataFrame(_rows(10), SCHEMA)
    monkeypatch.setattr(storage.fs, "walk_files", lambda location: iter(()))
    with pytest.raises(StorageError, match=r"step s: the output of epoch 4 was written from the driver under .*"
                                           r"output/s/epoch=4.* no data file is visible there") as caught:
        storage.write_collected(df, "s", "output", 4, location="output/s/epoch=4")
    assert "executors" not in str(caught.value)
