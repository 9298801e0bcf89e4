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


def _frame(spark: Any, lo: int, hi: int) -> Any:
    return spark.createDataFrame([(u % 7, u) for u in range(lo, hi)], "user BIGINT, v INT")


def _logged(log: InputLog, spark: Any, epoch: int) -> list[tuple[int, int]]:
    return sorted((r["user"], r["v"]) for r in log.read(spark, epoch).select("user", "v").collect())


@pytest.mark.parametrize("paged", [False, True])
def test_garbage_collection_during_a_dataframe_append_keeps_what_it_will_publish(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, paged: bool,
) -> None:
    """Acknowledging an epoch sweeps what Spark wrote that no manifest names; an append whose files Spark has
    written but whose manifests are not published yet (a producer appending while the pipeline collects
    garbage) keeps them, and reads back whole; what the acknowledged segments left goes. ``paged``: the
    listing of ``spark/`` shows the runs but not their records (a listing in pages, the record written
    between two pages)."""
    from falkirk.spark.pipeline.store import sparkinput

    log = InputLog(tmp_path, "ev", "user BIGINT, v INT", partitions=2, key="user", fsync=False)
    log.append(_frame(spark, 0, 20), batch="a")
    first = {n for n in log.fs.listdir(f"{log.dir}/spark") if not n.endswith(".json")}
    log.cut(0)
    log.append(_frame(spark, 20, 40), batch="b")
    log.cut(1)
    if paged:
        listdir = log.fs.listdir
        monkeypatch.setattr(log.fs, "listdir", lambda rel="": [
            n for n in listdir(rel) if not (rel.endswith("/spark") and n.endswith(".json"))])
    files = sparkinput._files
    swept: list[int] = []

    def racing(lg: InputLog, location: str) -> Any:  # garbage collection between Spark's write and the publish
        swept.append(log.acknowledge(1))
        return files(lg, location)

    monkeypatch.setattr(sparkinput, "_files", racing)
    assert sum(log.append(_frame(spark, 40, 65), batch="c").values()) == 25
    assert swept and swept[0] > 0
    log.cut(2)
    assert _logged(log, spark, 2) == sorted((u % 7, u) for u in range(40, 65))
    monkeypatch.undo()
    left = set(log.fs.listdir(f"{log.dir}/spark"))
    assert not first & {n.removesuffix(".json") for n in left}, left  # the acknowledged append's run is gone


def test_an_epoch_cut_and_acknowledged_between_two_partitions_publishes_keeps_the_unpublished_one(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The append has published partition 0's segment, not yet partition 1's, when the pipeline cuts an epoch
    (with partition 0's new records) and acknowledges it: partition 1's part stays, and every record of the
    append is in the log afterwards."""
    from falkirk.spark.pipeline.store import sparkinput

    log = InputLog(tmp_path, "ev", "user BIGINT, v INT", partitions=2, key="user", fsync=False)
    log.append(_frame(spark, 0, 20), batch="a")
    log.cut(0)
    log.append(_frame(spark, 20, 40), batch="b")
    log.cut(1)
    publish = sparkinput.seg.publish_manifest
    published: list[int] = []
    swept: list[int] = []

    def publishing(fs: Any, directory: str, m: Any) -> None:
        publish(fs, directory, m)
        published.append(m.partition)
        if len(published) == 1:
            log.cut(2)
            swept.append(log.acknowledge(2))

    monkeypatch.setattr(sparkinput.seg, "publish_manifest", publishing)
    assert sum(log.append(_frame(spark, 40, 65), batch="c").values()) == 25
    monkeypatch.undo()
    assert published == [0, 1] and swept and swept[0] > 0
    log.cut(3)
    mine = [r for r in log.to_arrow().to_pylist() if r["v"] >= 40]
    assert sorted((r["user"], r["v"]) for r in mine) == sorted((u % 7, u) for u in range(40, 65))
    later = sorted((r["user"], r["v"]) for r in mine if r["_partition"] == 1)
    assert later and _logged(log, spark, 3) == later  # epoch 3: the partition published after the cut


def test_a_crashed_dataframe_append_is_swept_once_the_log_has_moved_past_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two appends crash after Spark wrote and before anything was published (one as older code left it,
    without the record of its start offsets): the same records appended again land once; when an epoch past
    them is acknowledged both leftovers are deleted, and nothing else."""
    from falkirk.spark.pipeline.store import sparkinput

    log = InputLog(tmp_path, "ev", "user BIGINT, v INT", partitions=2, key="user", fsync=False)
    publish = sparkinput.seg.publish_manifest

    def crash(*_: Any) -> None:
        raise KeyboardInterrupt("the producer died")

    monkeypatch.setattr(sparkinput.seg, "publish_manifest", crash)
    for batch in ("a", "b"):
        with pytest.raises(KeyboardInterrupt):
            log.append(_frame(spark, 0, 20), batch=batch)
    monkeypatch.setattr(sparkinput.seg, "publish_manifest", publish)
    crashed = {n for n in log.fs.listdir(f"{log.dir}/spark") if not n.endswith(".json")}
    assert len(crashed) == 2 and log.end_offsets() == {0: 0, 1: 0}
    older, recorded = sorted(crashed)
    log.fs.delete(f"{log.dir}/spark/{older}.json")  # as code before the record left it
    # while the log has not moved past them, the recorded one may be an append in progress: it stays
    sparkinput.sweep_spark(log, {0: 0, 1: 0})
    assert set(log.fs.listdir(f"{log.dir}/spark")) == {recorded, f"{recorded}.json"}
    log.append(_frame(spark, 0, 20), batch="a")
    log.cut(0)
    log.append(_frame(spark, 20, 30), batch="b")
    log.cut(1)
    assert _logged(log, spark, 0) == sorted((u % 7, u) for u in range(20))
    assert _logged(log, spark, 1) == sorted((u % 7, u) for u in range(20, 30))
    assert log.acknowledge(1) > 0
    left = {n.removesuffix(".json") for n in log.fs.listdir(f"{log.dir}/spark")}
    assert recorded not in left and len(left) == 1, left  # the last append's run stays: it gives the end offsets
    log.append(_frame(spark, 30, 33), batch="c")
    log.cut(2)
    assert _logged(log, spark, 2) == sorted((u % 7, u) for u in range(30, 33))


def test_a_damaged_record_keeps_its_run_and_is_named_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """A crashed append whose record of start offsets was damaged outside falkirk: what it records is unknown,
    so its run is never swept, however far the log moves past it; a warning names the record, once."""
    import logging

    from falkirk.spark.pipeline.store import sparkinput

    log = InputLog(tmp_path, "ev", "user BIGINT, v INT", partitions=2, key="user", fsync=False)
    publish = sparkinput.seg.publish_manifest

    def crash(*_: Any) -> None:
        raise KeyboardInterrupt("the producer died")

    monkeypatch.setattr(sparkinput.seg, "publish_manifest", crash)
    with pytest.raises(KeyboardInterrupt):
        log.append(_frame(spark, 0, 20), batch="a")
    monkeypatch.setattr(sparkinput.seg, "publish_manifest", publish)
    (run,) = {n for n in log.fs.listdir(f"{log.dir}/spark") if not n.endswith(".json")}
    log.fs.replace(f"{log.dir}/spark/{run}.json", b"{not json")
    for first, last in ((0, 20), (20, 30)):
        log.append(_frame(spark, first, last), batch=str(first))
        log.cut(first // 20)
    monkeypatch.setattr(sparkinput, "_REPORTED", set())
    with caplog.at_level(logging.WARNING, logger=sparkinput.__name__):
        for _ in range(2):  # swept twice: said once
            sparkinput.sweep_spark(log, log.end_offsets())
    said = [r.getMessage() for r in caplog.records if f"spark/{run}.json" in r.getMessage()]
    assert len(said) == 1 and "cannot be read" in said[0] and "kept, never swept" in said[0], said
    assert {run, f"{run}.json"} <= set(log.fs.listdir(f"{log.dir}/spark"))
    assert log.fs.listdir(f"{log.dir}/spark/{run}")  # its parts are still there
    assert _logged(log, spark, 1) == sorted((u % 7, u) for u in range(20, 30))
