"""Segments: keys hash as before (vectorised crc32), manifests prove the data, orphans of a crash are swept."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from places import Place

from falkirk.spark.pipeline.store import segments as seg
from falkirk.spark.pipeline.store.inputlog import InputLog
from falkirk.spark.pipeline.store.rootfs import Root

_MANY = st.tuples(st.lists(st.text(max_size=8), min_size=1, max_size=30), st.integers(4097, 6000)).map(
    lambda t: (t[0] * t[1])[: t[1]])  # over 4096 values with few distinct ones: hashed per distinct value


@given(st.lists(st.text(), max_size=50) | _MANY)
def test_crc32_of_strings_is_zlibs(values: list[str]) -> None:
    """The vectorised crc32 (by byte position, or per distinct value when few) equals zlib.crc32 of the UTF-8 bytes."""
    got = seg.crc32_strings(pa.array(values, pa.string())).tolist()
    assert got == [zlib.crc32(v.encode()) for v in values]


@given(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), max_size=40) |
       st.lists(st.one_of(st.none(), st.text(max_size=6)), max_size=40),
       st.integers(1, 5), st.integers(0, 7))
def test_partitions_are_the_per_record_formula(keys: list[Any], count: int, spread: int) -> None:
    """crc32(str(key)) % partitions for keys; records without one round-robin from ``spread`` (the old loop)."""
    want, nxt = [], spread
    for v in keys:
        if v is None:
            want.append(nxt % count)
            nxt += 1
        else:
            want.append(zlib.crc32(str(v).encode()) % count)
    got, after = seg.partitions(pa.array(keys), None, count, spread, len(keys))
    assert got.tolist() == want and after == nxt


def test_manifest_round_trip_and_listing(tmp_path: Path) -> None:
    """A manifest reads back as written; listing sees manifests and legacy files, never data or temp files."""
    fs = Root(tmp_path, fsync=False)
    m = seg.SegmentManifest("ev", 0, 12, 3, "b.1", "input/ev", (seg.FileEntry("part-0/x.parquet", 10, "sha256:ab"),))
    seg.publish_manifest(fs, "input/ev", m)
    fs.publish("input/ev/part-0/000000000012@b.1.abcd-0.parquet", b"data")
    fs.publish("input/ev/part-0/000000000000.jsonl", b"{}\n" * 12)
    fs.publish("input/ev/part-0/.000000000015.json.1234.tmp", b"")
    segs = seg.list_segments(fs, "input/ev", 0)
    assert [(s.start, s.batch, s.legacy) for s in segs] == [(0, None, True), (12, "b.1", False)]
    assert seg.read_manifest(fs, segs[1], "ev", 0) == m
    assert seg.read_manifest(fs, segs[0], "ev", 0).rows == 12
    assert json.loads(fs.read_bytes(segs[1].path))["format"] == "falkirk-segment/1"


def test_a_crash_before_the_manifest_leaves_nothing_the_log_sees(tmp_path: Path) -> None:
    """Data written without its manifest is not a segment: the batch is sent again, the orphan is swept."""
    log = InputLog(tmp_path, "ev", "u BIGINT", fsync=False)
    crashed = seg.SegmentWriter(log.fs, log.dir, log.name, log.end_offsets(), "b0", skip=set(), checksums=True)
    crashed.add(log.converter.records([{"u": 1}]), seg.partitions(None, None, 1, 0, 1)[0])  # the driver dies here
    assert log.segments(0) == [] and log.end_offsets() == {0: 0}
    assert log.append([{"u": 1}, {"u": 2}], batch="b0") == {0: 2}
    log.cut(0)
    log.append([{"u": 3}], batch="b1")
    log.cut(1)
    orphans = [n for n in log.fs.listdir("input/ev/part-0") if crashed.id in n]
    assert len(orphans) == 1
    log.acknowledge(1)
    assert not [n for n in log.fs.listdir("input/ev/part-0") if crashed.id in n]
    assert log.to_arrow(1).column("u").to_pylist() == [3]


def test_a_failed_commit_keeps_the_data_of_published_segments(tmp_path: Path, monkeypatch: Any) -> None:
    """If publishing a later partition's manifest fails, abort deletes only the unpublished partitions' files."""
    log = InputLog(tmp_path, "ev", "u BIGINT", partitions=2, key="u", fsync=False)
    real = seg.publish_manifest

    def second_fails(fs: Root, directory: str, m: seg.SegmentManifest) -> None:
        if m.partition == 1:
            raise OSError("disk gone")
        real(fs, directory, m)

    monkeypatch.setattr(seg, "publish_manifest", second_fails)
    records = [{"u": u} for u in range(20)]
    with pytest.raises(OSError, match="disk gone"):
        log.append(records, batch="b")
    monkeypatch.setattr(seg, "publish_manifest", real)
    assert [len(log.segments(k)) for k in (0, 1)] == [1, 0]
    log.cut(0)
    log.files(log.get_cut(0))  # partition 0's data is there
    assert not [n for n in log.fs.listdir("input/ev/part-1") if n.endswith(".parquet")]
    assert log.append(records, batch="b") == {1: sum(zlib.crc32(str(u).encode()) % 2 for u in range(20))}


@pytest.mark.parametrize("outer", ["a", "b"])
def test_two_appends_at_once_are_an_error_naming_the_records_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outer: str,
) -> None:
    """Two appenders of one log (a producer, and ``log.append`` elsewhere) with batch keys ``a`` and ``b`` compute
    the same start offset and both publish; the log reads ``b``'s segment (the last name). Whichever looks after
    both published raises, naming both and the one left out: ``a`` itself when it publishes last, else ``b``
    (``a`` returned as if its records had landed). ``a``'s records, appended again with its batch key, land
    once, and the log holds every record once."""
    from falkirk.spark.errors import StorageError

    logs = {k: InputLog(tmp_path, "ev", "user BIGINT, v BIGINT", fsync=False) for k in "ab"}
    records = {"a": [{"user": 1, "v": v} for v in range(3)], "b": [{"user": 2, "v": v} for v in range(10, 15)]}
    inner = "b" if outer == "a" else "a"
    publish = seg.publish_manifest

    def racing(fs: Any, directory: str, m: Any) -> None:
        if m.batch == outer:  # the outer append has its offsets; the inner one runs whole before it publishes
            assert logs[inner].append(records[inner], batch=inner) == {0: len(records[inner])}
        publish(fs, directory, m)

    monkeypatch.setattr(seg, "publish_manifest", racing)
    with pytest.raises(StorageError, match="appends ran at once") as err:
        logs[outer].append(records[outer], batch=outer)
    monkeypatch.undo()
    message = str(err.value)
    assert "It reads 000000000000@b.json; the records in 000000000000@a.json are not in it" in message, message
    log = logs["a"]
    assert sorted(r["v"] for r in log.to_arrow().to_pylist()) == list(range(10, 15))  # a's records left out
    assert log.append(records["a"], batch="a") == {0: 3}  # again, with its batch key: they land once
    assert sorted(r["v"] for r in log.to_arrow().to_pylist()) == [*range(3), *range(10, 15)]


@pytest.mark.parametrize("last", ["b", "c"])
def test_a_third_appender_between_two_is_an_overlap_named_on_append_and_on_read(
    place: Place, monkeypatch: pytest.MonkeyPatch, last: str,
) -> None:
    """Three appenders at once: ``b`` computes start 0; ``a`` appends offsets 0..2; ``c`` computes start 3 (after
    ``a``'s segment); ``b`` publishes 0..4 (the log then reads ``b``'s at 0, the last name), ``c`` publishes
    3..5, and either looks last. ``c``'s offsets 3..4 are ``b``'s too: whichever looks after both published
    raises the overlap, naming both, and the repair (remove ``b``'s manifest: ``c`` follows ``a``'s), which holds
    even where ``b`` looked first and was told ``a``'s records were left out. An epoch over them cannot be read
    (its offsets would be counted twice). Repaired as the message says, the log holds every record once."""
    import threading

    from falkirk.spark.errors import CorruptDataError, StorageError

    logs = {k: InputLog(place.root(), "ev", "user BIGINT, v BIGINT", fsync=False) for k in "abc"}  # 3 appenders
    records = {"a": [{"user": 1, "v": v} for v in range(3)], "b": [{"user": 2, "v": v} for v in range(10, 15)],
               "c": [{"user": 3, "v": v} for v in range(20, 23)]}
    publish = seg.publish_manifest
    c_ready, b_done, errors = threading.Event(), threading.Event(), {}

    def c_appends() -> None:
        try:
            logs["c"].append(records["c"], batch="c")
        except StorageError as exc:
            errors["c"] = exc

    def racing(fs: Any, directory: str, m: Any) -> None:
        if m.batch == "b":  # b has its offsets (0); a appends whole, then c takes its offsets (3)
            assert logs["a"].append(records["a"], batch="a") == {0: 3}
            if last == "b":
                c_appends()  # c publishes and looks (it sees a's segment alone at 0: no overlap yet)
            else:
                threading.Thread(target=c_appends, name="c", daemon=True).start()
                assert c_ready.wait(30)
        elif m.batch == "c":
            assert m.start == 3
            if last == "c":
                c_ready.set()
                assert b_done.wait(30)  # b publishes and looks first
        publish(fs, directory, m)

    monkeypatch.setattr(seg, "publish_manifest", racing)
    overlap = r"segments 000000000000@b\.json and 000000000003@c\.json both hold offsets 3\.\.4: appends ran at once"
    fix = "remove input/ev/part-0/000000000000@b.json, so that the log reads 000000000000@a.json, which"
    try:
        with pytest.raises(StorageError) as err:
            logs["b"].append(records["b"], batch="b")
    finally:
        b_done.set()
    for t in threading.enumerate():
        if t.name == "c":
            t.join(30)
    monkeypatch.undo()
    if last == "b":  # b saw c's segment inside its own
        assert not errors and re.search(overlap, str(err.value)) and fix in str(err.value), str(err.value)
    else:  # b looked before c published: a's records left out, it was told; c saw the overlap
        assert "It reads 000000000000@b.json; the records in 000000000000@a.json are not in it" in str(err.value)
        assert re.search(overlap, str(errors["c"])) and fix in str(errors["c"]), str(errors.get("c"))
        assert "do not append them again, though an error at offset 0 may have said they were left out" in str(
            errors["c"])
    log = logs["a"]
    cut = log.cut(0)
    assert (cut.start[0], cut.end[0]) == (0, 6)
    with pytest.raises(CorruptDataError, match=r"has offsets 3\.\.4 of partition 0 in two segments "
                       r"\(000000000000@b\.json and 000000000003@c\.json\)") as read:
        log.files(cut)
    assert fix in str(read.value) and read.value.path == "input/ev/part-0/"
    with pytest.raises(CorruptDataError, match="in two segments"):
        log.to_arrow(0)
    with monkeypatch.context() as acked:  # epoch 0 acknowledged, its segments not collected yet: not "collected"
        acked.setattr(log, "acknowledged", lambda: 0)
        with pytest.raises(CorruptDataError, match="in two segments") as checked:
            log.check(0)
    assert "garbage collection" not in str(checked.value)
    log.fs.delete("input/ev/part-0/000000000000@b.json")  # as the messages say
    assert sorted(r["v"] for r in log.to_arrow(0).to_pylist()) == [*range(3), *range(20, 23)]
    assert log.append(records["b"], batch="b") == {0: 5}
    log.cut(1)
    assert sorted(r["v"] for r in log.to_arrow(1).to_pylist()) == list(range(10, 15))
    assert sorted(r["v"] for r in log.to_arrow().to_pylist()) == sorted(v["v"] for rs in records.values() for v in rs)


def test_overlap_checks_read_no_manifest_for_a_log_appended_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Appends one after another: the overlap check decides from the listing alone (no manifest read beyond
    what computing the offsets reads), and never raises."""
    log = InputLog(tmp_path, "ev", "user BIGINT, v BIGINT", fsync=False)
    log.append([{"user": 1, "v": 0}], batch="x0")
    reads: list[str] = []
    real = seg._rows
    monkeypatch.setattr(seg, "_rows", lambda fs, path: reads.append(path) or real(fs, path))
    for e in range(1, 4):
        assert log.append([{"user": 1, "v": v} for v in range(e)], batch=f"x{e}") == {0: e}
    assert reads == []
    assert sorted(r["v"] for r in log.to_arrow().to_pylist()) == sorted([0, *(v for e in range(1, 4) for v in range(e))])
