"""The input log: idempotent appends, immutable cuts, detection of missing segments, acknowledgement.

The tests taking ``place`` run on a local directory and on a real S3 server
(``conftest.place``), through the log's public API only.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from places import Place

from falkirk.spark import CorruptDataError, InputLog, StorageError


def _log(where: Path | Place, partitions: int = 2) -> InputLog:
    root = where.root() if isinstance(where, Place) else where
    return InputLog(root, "events", "user BIGINT, v BIGINT", partitions=partitions, key="user", fsync=False)


def test_resending_a_batch_appends_nothing(place: Place) -> None:
    """A batch re-sent after a crash (same key) is ignored; a new key appends."""
    log = _log(place)
    recs = [{"user": u, "v": u} for u in range(10)]
    first = log.append(recs, batch="b0")
    assert sum(first.values()) == 10
    assert log.append(recs, batch="b0") == {}
    assert sum(log.end_offsets().values()) == 10
    assert sum(log.append(recs, batch="b1").values()) == 10


def test_half_written_batch_is_completed_on_resend(place: Place) -> None:
    """If only one partition's segment of a batch was written, re-sending writes the other one only."""
    log = _log(place)
    recs = [{"user": u, "v": u} for u in range(10)]
    written = log.append(recs, batch="b0")
    lost = max(written)
    for seg in log.segments(lost):
        log.fs.delete(seg.path)
    again = log.append(recs, batch="b0")
    assert again == {lost: written[lost]}


@settings(max_examples=25)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=6))
def test_cuts_partition_the_log(tmp_path_factory: Any, sizes: list[int]) -> None:
    """Epoch cuts are contiguous, never change, and hold exactly the records appended before each cut."""
    log = _log(tmp_path_factory.mktemp("log"), partitions=3)
    total = 0
    for epoch, n in enumerate(sizes):
        log.append([{"user": epoch * 100 + i, "v": i} for i in range(n)], batch=f"e{epoch}")
        cut = log.cut(epoch)
        assert cut.records == n and log.cut(epoch) == cut
        if epoch:
            assert cut.start == log.get_cut(epoch - 1).end
        total += n
    assert sum(log.end_offsets().values()) == total


def test_missing_segment_is_detected(place: Place) -> None:
    """Deleting a segment an epoch needs makes that epoch unreadable, naming the offsets."""
    log = _log(place, partitions=1)
    for e in range(3):
        log.append([{"user": e, "v": e}, {"user": e, "v": -e}], batch=f"e{e}")
        log.cut(e)
    lost = log.segments(0)[1].path
    data = log.files(log.get_cut(1))
    place.arrow.delete_file(place.arrow_path(lost))  # another client deletes the segment's manifest
    assert log.files(log.get_cut(0)) and log.files(log.get_cut(2))
    with pytest.raises(CorruptDataError, match=r"^input/events/part-0/000000000002@e1\.json is missing: the segment "
                       r"manifest of offsets 2\.\. of partition 0 \(its data files are there\)") as err:
        log.files(log.get_cut(1))
    assert err.value.path == lost
    for f in data:  # … and its data files: the partition and the offsets are all that is left to name
        place.arrow.delete_file(place.arrow_path(f))
    with pytest.raises(CorruptDataError, match=r"^input/events/part-0/ is missing offsets 2\.\.3 of epoch 1"):
        log.files(log.get_cut(1))
    with pytest.raises(CorruptDataError, match=r"^input/events/part-0/ is missing offsets 2\.\.3") as err:
        log.check(1)  # epoch 1 was never acknowledged: not garbage collection's doing
    assert "garbage collection" not in str(err.value)


def test_acknowledge_deletes_only_wholly_consumed_segments(place: Place) -> None:
    """Acknowledging epoch 1 deletes the segments and cuts before it, keeps what later epochs need."""
    log = _log(place, partitions=1)
    for e in range(4):
        log.append([{"user": e, "v": e}], batch=f"e{e}")
        log.cut(e)
    assert log.acknowledge(1) > 0
    assert log.cut_epochs() == [1, 2, 3]
    assert [s.start for s in log.segments(0)] == [2, 3]
    assert log.files(log.get_cut(3))
    with pytest.raises(CorruptDataError):
        log.files(log.get_cut(1))


def test_new_cut_needs_the_previous_one(place: Place) -> None:
    """Epochs are cut in order: cutting epoch 2 without a cut for epoch 1 is refused."""
    log = _log(place)
    log.cut(0)
    with pytest.raises(CorruptDataError, match=r"^input/events/cuts/00000001\.json is missing \(epochs are cut in order\)"):
        log.cut(2)


def test_a_second_driver_sees_the_first_ones_appends_and_cuts(place: Place) -> None:
    """Two logs on the same input (two processes' views): each sees what the other appended and cut, a
    batch re-sent through the other is ignored, and a cut is the same from both."""
    a, b = _log(place), _log(place)
    a.append([{"user": u, "v": u} for u in range(4)], batch="x")
    assert b.end_offsets() == a.end_offsets() and sum(b.end_offsets().values()) == 4
    assert b.append([{"user": u, "v": u} for u in range(4)], batch="x") == {}
    assert a.cut(0) == b.cut(0) == b.get_cut(0)
    b.append([{"user": 9, "v": 9}], batch="y")
    assert a.cut(1).records == 1 and b.cut_epochs() == [0, 1]
    assert a.files(a.get_cut(1)) == b.files(b.get_cut(1))


def test_a_store_that_does_not_answer_is_not_a_corrupt_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage failure while reading a cut is that StorageError, never a CorruptDataError (which would make
    recovery treat the epoch as lost)."""
    log = _log(tmp_path)
    log.cut(0)

    def unreachable(rel: str) -> bytes:
        raise StorageError(f"root {log.fs.uri}: read {rel} failed: EndpointConnectionError: no route")

    monkeypatch.setattr(log.fs, "read_bytes", unreachable)
    with pytest.raises(StorageError, match="EndpointConnectionError") as err:
        log.get_cut(0)
    assert not isinstance(err.value, CorruptDataError)


@pytest.mark.spark
def test_read_returns_exactly_the_epoch(spark: Any, tmp_path: Path) -> None:
    """Reading an epoch with Spark returns its records with their partitions and offsets."""
    log = _log(tmp_path)
    log.append([{"user": u, "v": u} for u in range(6)], batch="a")
    log.cut(0)
    log.append([{"user": u, "v": 10 * u} for u in range(6, 9)], batch="b")
    log.cut(1)
    rows = log.read(spark, 1).collect()
    assert sorted(r["user"] for r in rows) == [6, 7, 8]
    assert all(r["_offset"] >= log.get_cut(0).end[r["_partition"]] for r in rows)


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _plain(value: Any) -> Any:
    """A timestamp as seconds since the epoch (PySpark collects it naive, in the local zone), a NaN as a string
    (it equals nothing, itself included); else ``value``."""
    import datetime

    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return "NaN" if isinstance(value, float) and value != value else value


def _rows(df: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(_plain(v) for v in r) for r in df.collect())


@pytest.mark.parametrize(
    "schema, local",
    [
        ("user BIGINT NOT NULL, v INT, name STRING, code VARCHAR(4), ok BOOLEAN, day DATE, f DOUBLE, g FLOAT", True),
        ("user BIGINT, ts TIMESTAMP", False),
    ],
)
def test_a_small_epoch_is_read_on_the_driver_a_large_one_by_sparks_reader(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: str, local: bool
) -> None:
    """An epoch within ``DRIVER_MAX_ROWS`` whose types Spark reads alike from Arrow and Parquet is a local relation
    (no Spark job reads its files), a larger one, or one holding a timestamp, Spark's Parquet scan; read either way,
    an epoch has exactly the records appended to it, with the same partitions, offsets and schema (dates before
    the Gregorian calendar's start in 1582 included)."""
    import datetime
    import math

    from falkirk.spark.pipeline.store import inputread

    log = InputLog(tmp_path, "events", schema, partitions=2, key="user", fsync=False)
    names = [f.split()[0] for f in schema.split(", ")]

    def record(u: int) -> dict[str, Any]:
        value = {"v": u * 3, "name": f"n{u}" if u % 4 else None, "code": f"c{u % 100}", "ok": u % 2 == 0,
                 "day": datetime.date(1200 + u, 3, 1) if u % 6 == 1 else datetime.date(2026, 1, 1 + u % 28), "f": math.nan if u % 5 == 0 else u / 7, "g": u / 2,
                 "ts": datetime.datetime(2026, 1, 1, u % 24, tzinfo=datetime.UTC)}
        return {"user": u, **{n: value[n] for n in names[1:]}}

    sizes = [5, 9]
    for epoch, n in enumerate(sizes):
        log.append([record(100 * epoch + i) for i in range(n)], batch=f"e{epoch}")
        log.cut(epoch)
    read = [log.read(spark, e) for e in range(len(sizes))]  # within the bound
    monkeypatch.setattr(inputread, "DRIVER_MAX_ROWS", 6)
    routed = [log.read(spark, e) for e in range(len(sizes))]
    monkeypatch.setattr(inputread, "DRIVER_MAX_ROWS", -1)
    by_spark = [log.read(spark, e) for e in range(len(sizes))]
    assert ["LocalTableScan" in _plan(df) for df in read] == [local, local]
    assert [inputread.on_driver(df) is not None for df in read] == [local, local]
    assert ["LocalTableScan" in _plan(df) for df in routed] == [local, False]
    assert not any("LocalTableScan" in _plan(df) or inputread.on_driver(df) is not None for df in by_spark)
    for epoch, (df, ref) in enumerate(zip(read, by_spark, strict=True)):
        assert df.schema == ref.schema
        assert _rows(df) == _rows(ref)
        want = Counter(tuple(_plain(record(100 * epoch + i)[n]) for n in names) for i in range(sizes[epoch]))
        assert Counter(tuple(_plain(r[n]) for n in names) for r in df.collect()) == want
        cut = log.get_cut(epoch)
        assert sorted((r["_partition"], r["_offset"]) for r in df.collect()) == sorted(
            (k, o) for k in cut.end for o in range(cut.start[k], cut.end[k])
        )


def test_a_small_epoch_is_read_on_the_driver_from_any_root(spark: Any, place: Place) -> None:
    """On a local directory and on a real S3 server, a small epoch is read on the driver through the root's own
    filesystem: a local relation holding exactly the records appended to it, at the cut's offsets."""
    from falkirk.spark.pipeline.store import inputread

    log = _log(place)
    log.append([{"user": u, "v": u} for u in range(6)], batch="a")
    log.cut(0)
    log.append([{"user": u, "v": 10 * u} for u in range(6, 11)], batch="b")
    log.cut(1)
    df = log.read(spark, 1)
    assert "LocalTableScan" in _plan(df) and inputread.on_driver(df) is not None
    assert Counter((r["user"], r["v"]) for r in df.collect()) == Counter((u, 10 * u) for u in range(6, 11))
    cut = log.get_cut(1)
    assert sorted((r["_partition"], r["_offset"]) for r in df.collect()) == sorted(
        (k, o) for k in cut.end for o in range(cut.start[k], cut.end[k])
    )


def test_a_small_epoch_the_driver_cannot_read_is_left_to_sparks_reader(spark: Any, tmp_path: Path) -> None:
    """A truncated segment file: the driver's reading fails, so Spark's reader reads the epoch, and its job fails
    naming the file (as for any epoch)."""
    log = _log(tmp_path)
    log.append([{"user": u, "v": u} for u in range(6)], batch="a")
    log.cut(0)
    assert "LocalTableScan" in _plan(log.read(spark, 0))
    victim = next(p for p in sorted((tmp_path / "input" / "events").rglob("*.parquet")))
    victim.write_bytes(victim.read_bytes()[:20])
    df = log.read(spark, 0)
    assert "LocalTableScan" not in _plan(df)
    with pytest.raises(Exception, match=victim.name):
        df.collect()


@pytest.mark.parametrize("damage", ["a record less", "offsets shifted"])
def test_a_small_epoch_whose_records_differ_from_its_manifests_is_refused_by_name(
    spark: Any, tmp_path: Path, damage: str
) -> None:
    """A segment file replaced by a readable one holding a record less than its manifest says, or as many records
    at other offsets: the driver's read refuses the epoch with ``CorruptDataError`` naming the input, the epoch
    and the file, instead of giving records the log never held (Spark's reader, which does not count
    them, would)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from falkirk.spark.errors import CorruptDataError

    log = _log(tmp_path)
    log.append([{"user": u, "v": u} for u in range(12)], batch="a")
    log.cut(0)
    assert "LocalTableScan" in _plan(log.read(spark, 0))
    victim = next(p for p in sorted((tmp_path / "input" / "events").rglob("*.parquet")))
    table = pq.read_table(victim)
    if damage == "a record less":
        table = table.slice(1)
    else:
        table = table.set_column(
            table.schema.get_field_index("_offset"), "_offset", pc.add(table.column("_offset"), 100)
        )
    pq.write_table(table, victim)
    with pytest.raises(CorruptDataError) as err:
        log.read(spark, 0)
    e = err.value
    assert (e.step, e.kind, e.epoch) == ("events", "input", 0), str(e)
    assert e.path is not None and e.path.endswith(victim.name), str(e)  # the segment's file, or its partition's first


# -- issue 30: what append takes, and what a segment proves ----------------------------------------------------
RECORDS = [{"user": u % 7, "v": 10 * u} for u in range(23)] + [{"user": None, "v": -1}, {"v": -2}]


def _stored(log: InputLog) -> list[dict[str, Any]]:
    return sorted(log.to_arrow().to_pylist(), key=lambda r: (r["_partition"], r["_offset"]))


def test_every_kind_of_data_appends_the_same_records(tmp_path: Path) -> None:
    """Mappings, a generator, an Arrow Table or RecordBatch, pandas, Parquet path(s): the same records, partitions, offsets."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(RECORDS, pa.schema([("user", pa.int64()), ("v", pa.int64())]))
    pq.write_table(table.slice(0, 10), tmp_path / "a.parquet")
    pq.write_table(table.slice(10), tmp_path / "b.parquet")
    kinds = {
        "dicts": RECORDS, "generator": (r for r in RECORDS), "table": table, "batch": table.to_batches()[0],
        "pandas": pd.DataFrame({"user": pd.array([r.get("user") for r in RECORDS], dtype="Int64"),
                                "v": [r["v"] for r in RECORDS]}),
        "parquet": [tmp_path / "a.parquet", str(tmp_path / "b.parquet")],
    }
    stored = {}
    for name, data in kinds.items():
        log = _log(tmp_path / name, partitions=3)
        assert sum(log.append(data, batch="b").values()) == len(RECORDS)
        stored[name] = _stored(log)
    assert all(v == stored["dicts"] for v in stored.values()), {k: v[:2] for k, v in stored.items()}
    one = _log(tmp_path / "one", partitions=3)
    one.append(str(tmp_path / "a.parquet"))
    assert len(_stored(one)) == 10


def test_a_segment_manifest_proves_its_data(tmp_path: Path) -> None:
    """End offsets come from manifests (data unread); a truncated file fails files(), an altered one verify()."""
    log = _log(tmp_path, partitions=1)
    log.append(RECORDS, batch="b")
    cut = log.cut(0)
    (path,) = [tmp_path / f for f in log.files(cut)]
    data = path.read_bytes()
    path.write_bytes(b"\0" * len(data))  # same size, other bytes
    assert log.end_offsets() == {0: len(RECORDS)}
    log.files(cut)
    with pytest.raises(CorruptDataError, match="fails its SHA-256 check"):
        log.verify(cut)
    path.write_bytes(data[:-1])
    with pytest.raises(CorruptDataError, match=f"has {len(data) - 1} bytes, expected {len(data)}"):
        log.files(cut)


def test_an_append_larger_than_a_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks write several files into one segment per partition; a bad record in a later chunk names its offset."""
    from falkirk.spark import RecordError
    from falkirk.spark.pipeline.store import ingest

    monkeypatch.setattr(ingest, "CHUNK", 4)
    log = _log(tmp_path, partitions=2)
    assert sum(log.append(RECORDS, batch="b").values()) == len(RECORDS)
    assert [len(log.segments(k)) for k in (0, 1)] == [1, 1]
    assert sum(len(log._manifest(s, 0).files) for k in (0, 1) for s in log.segments(k)) > 2
    rows = _stored(log)
    for k in (0, 1):
        assert [r["_offset"] for r in rows if r["_partition"] == k] == list(range(sum(r["_partition"] == k for r in rows)))
    before = log.end_offsets()
    bad = [{"user": 1, "v": i} for i in range(9)] + [{"user": 1, "v": "x"}]
    with pytest.raises(RecordError) as err:
        log.append(bad, batch="c")
    k = zlib.crc32(b"1") % 2
    assert (err.value.index, err.value.partition, err.value.offset) == (9, k, before[k] + 9)
    assert log.end_offsets() == before and not [n for n in log.fs.listdir("input/events/part-0") if "@c." in n]


def _old_append_error(records: list[Any], schema: Any, key: str | None, partitions: int, ends: dict[int, int]) -> Any:
    """Where the append before issue 30 placed its first bad record: (index, partition, offset, field)."""
    counts: dict[int, int] = {}
    spread = 0
    for i, r in enumerate(records):
        value = r.get(key) if key and isinstance(r, Mapping) else None
        if value is None:
            k, spread = spread % partitions, spread + 1
        else:
            k = zlib.crc32(str(value).encode()) % partitions
        problem = schema.check(r)
        if problem is not None:
            return i, k, ends[k] + counts.get(k, 0), problem.field
        counts[k] = counts.get(k, 0) + 1
    return None


_VALUES = st.one_of(st.integers(-5, 5), st.none(), st.text(max_size=2), st.floats(allow_nan=False), st.booleans())


@given(st.lists(st.one_of(st.fixed_dictionaries({"user": st.integers(0, 9) | st.none(), "v": st.integers(-9, 9)}),
                          st.dictionaries(st.sampled_from(["user", "v", "w"]), _VALUES, max_size=2)), max_size=12),
       st.integers(1, 3), st.booleans(), st.integers(1, 5))
@settings(max_examples=60, deadline=None)
def test_the_first_bad_record_is_where_it_was(tmp_path_factory: Any, records: list[Any], partitions: int,
                                              keyed: bool, chunk: int) -> None:
    """RecordError names the index, partition, offset and field the per-record append named (any chunking)."""
    from falkirk.spark import RecordError
    from falkirk.spark.pipeline.store import ingest

    log = InputLog(tmp_path_factory.mktemp("log"), "events", "user BIGINT, v BIGINT NOT NULL", partitions=partitions,
                   key="user" if keyed else None, fsync=False)
    log.append([{"user": 3, "v": 1}, {"user": 4, "v": 2}])
    ends = log.end_offsets()
    want = _old_append_error(records, log.record_schema, log.key, partitions, ends)
    saved, ingest.CHUNK = ingest.CHUNK, chunk
    try:
        log.append(records)
        got = None
    except RecordError as err:
        got = (err.index, err.partition, err.offset, err.field)
    finally:
        ingest.CHUNK = saved
    assert got == want
    if want is not None:
        assert log.end_offsets() == ends


@given(st.lists(st.integers(0, 1000), max_size=400), st.lists(st.integers(0, 399), max_size=6))
@settings(max_examples=40, deadline=None)
def test_halving_finds_exactly_the_bad_records(good: list[int], bad_at: list[int]) -> None:
    """bad_records: the per-record check's bad records, in order (and the first one alone with first_only)."""
    from falkirk.spark.pipeline.store.convert import Converter, bad_records
    from falkirk.spark.pipeline.store.records import parse_schema

    records: list[Any] = [{"v": g} for g in good]
    for i in bad_at:
        if i < len(records):
            records[i] = {"v": str(i)}
    schema = parse_schema("v INT")
    want = [i for i, r in enumerate(records) if schema.check(r) is not None]
    conv = Converter(schema)
    if not want:
        conv.records(records)
        return
    assert [i for i, _, _ in bad_records(conv, records, first_only=False)] == want
    assert [i for i, _, _ in bad_records(conv, records, first_only=True)] == want[:1]
    batch = pa.RecordBatch.from_pylist([{"v": str(r["v"])} for r in records])
    assert len(bad_records(conv, batch, first_only=False)) == len(records)  # strings for INT: every row


def test_dead_letters_from_arrow_data(tmp_path: Path) -> None:
    """Typed data with a bad value: the good rows are appended, the bad one diverted with its index and reason."""
    import pyarrow as pa

    log = InputLog(tmp_path, "events", "user BIGINT, v INT", partitions=2, key="user", fsync=False, dead_letter=True)
    table = pa.table({"user": [1, 2, 3], "v": [1, 2**40, 3]})
    assert sum(log.append(table, batch="b").values()) == 2
    line = json.loads(log.fs.read_bytes(f"{log.dead_letter_dir}/b.jsonl"))
    assert (line["index"], line["field"], line["record"]) == (1, "v", {"user": 2, "v": 2**40})
    assert "out of range" in line["problem"]
