"""Durable storage: write-once manifests that prove their data, verification of sizes and checksums, sweeping.

Most tests run three times: on a local directory, on fsspec's in-memory
filesystem (``memory://``, no rename, no hard links) and on a real S3 server
(SeaweedFS on loopback, ``tests/spark/objectstore.py``). The tests of what
the driver sees after *another client* wrote — pyarrow, as Spark's executors
or a second program would — run on a local directory and on S3 (``place``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from objectstore import BUCKET
from places import Place

from falkirk.spark import CorruptDataError, Manifest, Storage
from falkirk.spark.errors import StorageError
from falkirk.spark.pipeline.store.manifest import FileEntry, manifest_path
from falkirk.spark.pipeline.store.rootfs import Root


@pytest.fixture(params=["local", "memory", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    """A Storage on a local directory, on fsspec's memory filesystem (no rename, no links), or on S3."""
    if request.param == "local":
        return Storage(tmp_path, fsync=False)
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        return Storage(f"s3a://{BUCKET}/{uuid.uuid4().hex[:12]}", fsync=False, storage_options=server.options())
    return Storage(f"memory://falkirk-tests/{uuid.uuid4().hex}", fsync=False)


def _fake_item(storage: Storage, step: str, epoch: int, payload: bytes) -> Manifest:
    loc = storage.new_location(step, "checkpoint", epoch)
    storage.fs.replace(f"{loc}/part-0.parquet", payload)
    return Manifest(step, "checkpoint", epoch, 1, loc, storage.describe_files(loc), "{}")


def test_manifest_round_trip(storage: Storage) -> None:
    """A published manifest reads back equal; epochs are listed in order; republishing the same is a no-op."""
    s = storage
    m = _fake_item(s, "cc", 3, b"0123456789")
    s.put(m)
    s.put(Manifest("cc", "checkpoint", 1))
    s.put(m)
    assert s.get("cc", "checkpoint", 3) == m
    assert s.epochs("cc", "checkpoint") == [1, 3]
    assert m.files[0].size == 10 and m.files[0].sha256.split(":")[0] in ("sha256", "etag")  # S3: the ETag


def test_manifests_are_write_once(storage: Storage) -> None:
    """A different manifest for an item already published is refused, naming the step, kind and epoch."""
    storage.put(Manifest("cc", "checkpoint", 4, rows=0, extra={"a": 1}))
    with pytest.raises(StorageError, match="step cc: checkpoint at epoch 4 is already published"):
        storage.put(Manifest("cc", "checkpoint", 4, rows=0, extra={"a": 2}))
    assert storage.get("cc", "checkpoint", 4).extra == {"a": 1}


def test_manifest_without_its_data_is_refused(storage: Storage) -> None:
    """Rows but no data file (what a root on one machine's disk gives on a cluster), or a listed file the
    driver cannot see, is refused at publish time, and no manifest is written."""
    with pytest.raises(StorageError, match="claims 1000 rows but no data file is visible"):
        storage.put(Manifest("cc", "checkpoint", 7, rows=1000, location="data/cc/checkpoint/7", schema="{}"))
    ghost = Manifest("cc", "log", 8, rows=5, location="data/cc/log/8", files=[FileEntry("part-0", 10, "")], schema="{}")
    with pytest.raises(StorageError, match="refusing to publish log at epoch 8: data file .*part-0 is missing"):
        storage.put(ghost)
    assert storage.epochs("cc", "checkpoint") == [] and storage.epochs("cc", "log") == []


def test_a_manifest_naming_data_of_another_step_or_kind_is_refused(storage: Storage) -> None:
    """A manifest names data under its own ``data/<step>/<kind>/`` (the start-up sweep reads only those
    kinds' manifests); another data location is refused, naming the step and both places."""
    item = _fake_item(storage, "cc", 5, b"x")
    loc = item.location or ""
    elsewhere = [("other", "checkpoint", loc), ("cc", "log", loc), ("cc", "checkpoint", f"{loc}/deeper"),
                 ("cc", "checkpoint", "data/cc/checkpoint/../log/x"), ("cc", "checkpoint", "data/cc/checkpoint/")]
    for step, kind, where in elsewhere:
        refused = f"step {step}: refusing to publish {kind} at epoch 5: its data {re.escape(repr(where))} is not a directory directly under data/{step}/{kind}/"
        with pytest.raises(StorageError, match=refused):
            storage.put(attrs.evolve(item, step=step, kind=kind, location=where))
        assert storage.epochs(step, kind) == []
    storage.put(item)
    assert storage.get("cc", "checkpoint", 5) == item


@pytest.mark.parametrize("damage", ["delete", "truncate", "flip"])
def test_verify_detects_damaged_data(storage: Storage, damage: str) -> None:
    """A deleted, truncated or bit-flipped data file fails verification, naming step, kind and epoch."""
    s = storage
    m = _fake_item(s, "cc", 5, b"x" * 100)
    s.put(m)
    s.verify(m)
    rel = f"{m.location}/{m.files[0].name}"
    if damage == "delete":
        s.fs.delete(rel)
    elif damage == "truncate":
        s.fs.replace(rel, b"x" * 50)
    else:
        s.fs.replace(rel, b"y" + b"x" * 99)
    with pytest.raises(CorruptDataError, match="step cc: checkpoint at epoch 5 is unusable") as err:
        s.verify(s.get("cc", "checkpoint", 5))
    assert (err.value.step, err.value.kind, err.value.epoch) == ("cc", "checkpoint", 5)


def _parquet(place: Place, rel: str, values: list[int]) -> None:
    """Another client (pyarrow, as an executor) writes a Parquet file of ``values`` to ``rel``."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"k": values, "v": [f"v{x}" for x in values]}), buf)
    place.write(rel, buf.getvalue())


def test_manifest_of_pyarrow_written_parquet(place: Place) -> None:
    """Parquet written by another client is described (part files only: no _SUCCESS, no directory marker),
    published, verified, and reads back with exactly its rows from the files the manifest lists."""
    import pyarrow.parquet as pq

    s = place.storage()
    loc = s.new_location("s", "log", 0)
    _parquet(place, f"{loc}/part-00000-a.c000.snappy.parquet", [1, 2])
    _parquet(place, f"{loc}/part-00001-a.c000.snappy.parquet", [3])
    place.write(f"{loc}/_SUCCESS", b"")
    place.arrow.create_dir(place.arrow_path(f"{loc}/_temporary"))
    files = s.describe_files(loc)
    assert [f.name for f in files] == ["part-00000-a.c000.snappy.parquet", "part-00001-a.c000.snappy.parquet"]
    s.put(Manifest("s", "log", 0, 3, loc, files, "{}"))
    m = place.storage().get("s", "log", 0)  # a second driver reads it back
    place.storage().verify(m)
    rows = [r for f in m.files for r in pq.read_table(place.arrow_path(f"{loc}/{f.name}"), filesystem=place.arrow).to_pylist()]
    assert sorted(r["k"] for r in rows) == [1, 2, 3] and m.rows == 3


def test_an_output_whose_files_hold_fewer_rows_than_written_is_not_published(place: Place) -> None:
    """A file the storage lost between the write and the listing is not listed, so sizes alone cannot see it:
    the rows of the listed files' footers must add up to the rows written (regression: the S3 soak at seed
    58 published report@104 as 30 rows with the file of 12; the executors' FUSE mount had lost the other
    while the server was down). A file cut short is refused too; nothing is published either way."""
    s = place.storage()
    loc = "output/report/epoch=104"
    _parquet(place, f"{loc}/part-00000-a.c000.snappy.parquet", [1, 2])
    _parquet(place, f"{loc}/part-00001-a.c000.snappy.parquet", [3])
    both = s.describe_files(loc)
    expect = {f"{loc}/part-00000-a.c000.snappy.parquet": 2, f"{loc}/part-00001-a.c000.snappy.parquet": 1}
    assert s.fs.parquet_rows({f"{loc}/{f.name}": f.size for f in both}) == expect
    s.fs.TAIL = 16  # every footer longer than the first read: the second read (keyword range on s3fs)
    assert s.fs.parquet_rows({f"{loc}/{f.name}": f.size for f in both}) == expect
    del s.fs.TAIL
    place.arrow.delete_file(place.arrow_path(f"{loc}/part-00000-a.c000.snappy.parquet"))
    listed = s.describe_files(loc)  # what the driver lists after the loss: one file, whose size is right
    with pytest.raises(StorageError, match=r"output at epoch 104: its 1 data file\(s\) .* hold 1 rows, not the 3 counted"):
        s.put(Manifest("report", "output", 104, 3, loc, listed, "{}"))
    cut = f"{loc}/part-00001-a.c000.snappy.parquet"
    place.write(cut, s.fs.read_bytes(cut)[:-20])  # its footer's end cut off
    with pytest.raises(StorageError, match=r"is not a whole Parquet file"):
        s.put(Manifest("report", "output", 104, 1, loc, s.describe_files(loc), "{}"))
    assert s.epochs("report", "output") == []
    _parquet(place, f"{loc}/part-00001-a.c000.snappy.parquet", [3])  # written again: published
    s.put(Manifest("report", "output", 104, 1, loc, s.describe_files(loc), "{}"))
    assert s.epochs("report", "output") == [104]


@pytest.mark.parametrize("damage", ["delete", "truncate", "alter"])
def test_verify_sees_another_clients_damage(place: Place, damage: str) -> None:
    """In one long-running driver that has listed and verified the item, a data file another client then
    deletes, truncates or rewrites with other bytes of the same size fails verification."""
    s = place.storage()
    loc = s.new_location("cc", "checkpoint", 5)
    _parquet(place, f"{loc}/part-00000.parquet", list(range(50)))
    m = Manifest("cc", "checkpoint", 5, 50, loc, s.describe_files(loc), "{}")
    s.put(m)
    s.verify(s.get("cc", "checkpoint", 5))
    assert s.epochs("cc", "checkpoint") == [5] and s.fs.size(loc) == m.files[0].size
    target = f"{loc}/part-00000.parquet"
    if damage == "delete":
        place.arrow.delete_file(place.arrow_path(target))
    elif damage == "truncate":
        place.write(target, b"PAR1")
    else:
        data = bytearray(s.fs.read_bytes(target))
        data[len(data) // 2] ^= 0xFF
        place.write(target, bytes(data))
    with pytest.raises(CorruptDataError, match=r"part-00000\.parquet .*\(step cc: checkpoint at epoch 5 is unusable\)") as err:
        s.verify(s.get("cc", "checkpoint", 5))
    assert err.value.path is not None and err.value.path.endswith(target)  # the message starts with the damaged file
    if damage != "delete":  # … and names the manifest it was compared with: either one may be the damaged one
        assert "by manifests/cc/checkpoint/00000005.json" in str(err.value), err.value


@pytest.mark.parametrize("seed", [0, 1])
def test_verify_all_finds_what_verifying_each_epoch_finds(place: Place, seed: int) -> None:
    """``verify_all`` (one listing, the manifests read together: what a restart checks every acknowledged output
    epoch with) names the same damaged epochs, with the same messages, as getting and verifying each epoch —
    after another client deleted, truncated or rewrote data files (same size) and garbled a manifest."""
    import random

    rnd = random.Random(seed)
    s = place.storage()
    for e in range(12):
        loc = s.new_location("out", "checkpoint", e)
        for k in range(rnd.randint(1, 3)):
            _parquet(place, f"{loc}/part-{k:05d}.parquet", list(range(10 * e, 10 * e + 5 + k)))
        s.put(Manifest("out", "checkpoint", e, 5, loc, s.describe_files(loc), "{}"))
    s.put(Manifest("out", "checkpoint", 12))  # an empty epoch: no data
    damaged = rnd.sample(range(12), 5)
    for e, how in zip(damaged, ["delete", "truncate", "alter", "garble", "delete-manifest"], strict=True):
        m = s.get("out", "checkpoint", e)
        target = f"{m.location}/{m.files[0].name}"
        if how == "delete":
            place.arrow.delete_file(place.arrow_path(target))
        elif how == "truncate":
            place.write(target, b"PAR1")
        elif how == "alter":
            data = bytearray(s.fs.read_bytes(target))
            data[len(data) // 2] ^= 0xFF
            place.write(target, bytes(data))
        elif how == "garble":
            place.write("manifests/out/checkpoint/" + f"{e:08d}.json", b"\x00 not json")
        else:
            place.arrow.delete_file(place.arrow_path(f"manifests/out/checkpoint/{e:08d}.json"))

    def one_by_one() -> list[str]:
        found = []
        for e in s.epochs("out", "checkpoint"):
            try:
                s.verify(s.get("out", "checkpoint", e))
            except CorruptDataError as err:
                found.append(str(err))
        return found

    checked, problems = s.verify_all("out", "checkpoint")
    assert checked == 12 and len(problems) == 4  # the deleted manifest is no epoch any more
    assert [str(p) for p in problems] == one_by_one()
    assert sorted(p.epoch for p in problems) == sorted(damaged[:4])

    # a selection (what a restart checks): only the epochs picked, from one listing handed over as a copy
    listed = s.epochs("out", "checkpoint")
    picked = sorted(damaged[:2] + [e for e in listed if e not in damaged][:2])
    seen: list[list[int]] = []

    def pick(epochs: list[int]) -> list[int]:
        seen.append(list(epochs))
        epochs.clear()  # the caller's list is a copy: what is checked does not depend on it
        return [*picked, 99]  # an epoch not listed is skipped

    checked, problems = s.verify_all("out", "checkpoint", select=pick)
    assert seen == [listed] and checked == 4
    assert [str(p) for p in problems] == [m for m in one_by_one() if any(f"epoch {e} " in m for e in damaged[:2])]
    assert sorted(p.epoch for p in problems) == sorted(damaged[:2])


def test_rewritten_output_epoch_is_described_afresh(place: Place) -> None:
    """An Output epoch re-written the way Spark overwrites (directory deleted, new part names) is described by
    what is there now, in the same driver that described the first attempt."""
    s = place.storage()
    where = "output/o/epoch=3"
    _parquet(place, f"{where}/part-00000-first.c000.parquet", [1])
    assert [f.name for f in s.describe_files(where)] == ["part-00000-first.c000.parquet"]
    place.arrow.delete_dir(place.arrow_path(where))
    _parquet(place, f"{where}/part-00000-again.c000.parquet", [1, 2])
    files = s.describe_files(where)
    assert [f.name for f in files] == ["part-00000-again.c000.parquet"]
    s.put(Manifest("o", "output", 3, 2, where, files, "{}"))
    s.verify(s.get("o", "output", 3))


def test_a_store_that_does_not_answer_is_not_a_corrupt_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage failure reading manifests is that StorageError: not a corrupt item (recovery would roll back
    past it), and sweeping stops instead of deleting data whose manifest it could not read."""
    s = Storage(tmp_path, fsync=False)
    kept = _fake_item(s, "cc", 1, b"a")
    s.put(kept)

    def unreachable(rel: str) -> bytes:
        raise StorageError(f"root {s.root}: read {rel} failed: ConnectTimeoutError: no answer")

    monkeypatch.setattr(s.fs, "read_bytes", unreachable)
    monkeypatch.setattr(s.fs, "read_many", lambda rels: unreachable(rels[0]))
    with pytest.raises(StorageError, match="ConnectTimeoutError") as err:
        s.get("cc", "checkpoint", 1)
    assert not isinstance(err.value, CorruptDataError)
    with pytest.raises(StorageError, match="ConnectTimeoutError"):
        s.sweep_orphans()
    assert [n for n, _ in s.fs.walk_files(kept.location or "")] == ["part-0.parquet"]


def test_unreadable_manifest_is_corrupt(storage: Storage) -> None:
    """A manifest that is not valid JSON counts as a corrupt item, not a crash."""
    s = storage
    s.put(Manifest("cc", "checkpoint", 2))
    s.fs.replace("manifests/cc/checkpoint/00000002.json", b"{not json")
    with pytest.raises(CorruptDataError, match="unreadable"):
        s.get("cc", "checkpoint", 2)


def test_remove_and_sweep(storage: Storage) -> None:
    """Removing a manifest deletes its data; data no manifest names (a crash's leftovers) is swept."""
    s = storage
    kept = _fake_item(s, "cc", 1, b"a")
    gone = _fake_item(s, "cc", 2, b"b")
    orphan = _fake_item(s, "cc", 3, b"c")
    s.put(kept)
    s.put(gone)
    s.remove("cc", "checkpoint", 2)
    assert list(s.fs.walk_files(gone.location or "")) == []
    for e in range(40):  # an output's manifests, kept for ever: they cannot name data/..., so they are not read
        s.fs.publish(f"manifests/out/output/{e:08d}.json", json.dumps({"location": f"output/out/epoch={e}"}).encode())
    s.put(Manifest("cc", "complete", 1))  # a kind without data: not read either
    s.fs.publish("manifests/cc/checkpoint/garbled.json", b"\xff{not json")  # read, names nothing
    reads: list[str] = []
    read_bytes, read_many = s.fs.read_bytes, s.fs.read_many
    s.fs.read_bytes = lambda rel: reads.append(rel) or read_bytes(rel)  # type: ignore[method-assign]
    together: list[str] = []
    s.fs.read_many = lambda rels: together.extend(rels) or read_many(rels)  # type: ignore[method-assign]
    assert s.sweep_orphans() == 1
    assert reads == []
    # only the kinds that have a data directory are read, together (one request each would grow with history)
    assert sorted(together) == ["manifests/cc/checkpoint/00000001.json", "manifests/cc/checkpoint/garbled.json"]
    assert list(s.fs.walk_files(orphan.location or "")) == []
    assert [n for n, _ in s.fs.walk_files(kept.location or "")] == ["part-0.parquet"]


def test_the_sweep_lists_once_and_leaves_names_that_hold_nothing(storage: Storage) -> None:
    """The sweep finds which data directories hold files from one listing, never by looking into each: on
    an object store a garbage-collected item can leave its name behind (SeaweedFS keeps it for ever), and
    such names are left alone; on a local root an empty directory is deleted. The orphan is deleted, the
    published item kept."""
    s = storage
    for e in range(30):  # garbage-collected items
        s.put(_fake_item(s, "cc", e, b"x"))
        s.remove("cc", "checkpoint", e)
    orphan, kept = _fake_item(s, "cc", 99, b"o"), _fake_item(s, "cc", 100, b"k")
    s.put(kept)
    empty = "data/cc/checkpoint/00000200-000000000000"
    if s.fs.local:
        (s.fs.local_path(empty) or Path()).mkdir(parents=True)
    names = s.fs.listdir("data/cc/checkpoint")
    if s.fs.object_store:  # SeaweedFS keeps the collected items' names: what this test is about there
        assert len(names) == 32
    looked: list[str] = []
    for name in ("walk_files", "isdir", "info", "exists", "files"):
        call = getattr(s.fs, name)
        setattr(s.fs, name, lambda *a, _c=call, _n=name, **k: looked.append(_n) or _c(*a, **k))
    deleted: list[str] = []
    delete = s.fs.delete
    s.fs.delete = lambda rel, **k: deleted.append(rel) or delete(rel, **k)  # type: ignore[method-assign]
    assert s.sweep_orphans() == 1
    assert deleted == ([orphan.location, empty] if s.fs.local else [orphan.location])
    assert looked == (["files", "isdir"] if s.fs.local else ["files"])  # one listing of the step's files
    assert [n for n, _ in s.fs.walk_files(kept.location or "")] == ["part-0.parquet"]
    assert list(s.fs.walk_files(orphan.location or "")) == []


@pytest.mark.parametrize("root, needs", [("s3a://bucket/p", "s3fs"), ("abfss://c@acct.dfs.core.windows.net/p", "adlfs"),
                                         ("gs://bucket/p", "gcsfs")])
def test_missing_connector_is_named(root: str, needs: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A URI whose driver-side connector is not installed is an error naming the package, not a local folder."""
    import sys

    from fsspec.registry import _registry

    monkeypatch.setitem(sys.modules, needs, None)  # ``import needs`` fails, installed or not
    for protocol in ("s3", "abfs", "gcs"):
        if protocol in _registry:
            monkeypatch.delitem(_registry, protocol)
    with pytest.raises(StorageError, match=f"the driver needs {needs}"):
        Root(root)


def test_unsupported_scheme_and_unreachable_hdfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown scheme is refused naming it; an hdfs:// root the driver cannot reach fails before writing
    anything, and neither leaves a local folder named after the URI."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match="scheme 'ftp' is not supported"):
        Root("ftp://host/p")
    with pytest.raises(StorageError, match="root 'hdfs://127.0.0.1:1/p/run1': cannot reach the filesystem"):
        Root("hdfs://127.0.0.1:1/p/run1")
    assert list(tmp_path.iterdir()) == []


def test_plain_paths_and_file_uris_are_the_same_root(tmp_path: Path) -> None:
    """A plain path and its file:// URI name the same storage; Spark is given the URI."""
    a, b = Root(tmp_path / "r"), Root((tmp_path / "r").as_uri())
    a.publish("x.json", b"1")
    assert b.read_bytes("x.json") == b"1"
    assert a.spark_uri("x.json") == b.spark_uri("x.json") == (tmp_path / "r" / "x.json").as_uri()


@pytest.mark.spark
@pytest.mark.parametrize("as_uri", [False, True])
def test_frame_round_trip(spark: Any, tmp_path: Path, as_uri: bool) -> None:
    """A DataFrame written with a manifest reads back with the same rows and schema, empty ones included,
    whether the root is a plain path or a file:// URI."""
    s = Storage(tmp_path.as_uri() if as_uri else tmp_path, fsync=False)
    df = spark.createDataFrame([(1, "a"), (2, "b")], "k BIGINT, v STRING")
    m = s.write_frame(df, "step", "log", 0, 2)
    s.put(m)
    back = s.read_frame(spark, s.get("step", "log", 0))
    assert sorted(map(tuple, back.collect())) == [(1, "a"), (2, "b")]
    assert all(f.name.startswith("part-") and f.size > 0 for f in m.files)
    written = {q.name for q in (tmp_path / m.location).iterdir()}
    assert "_SUCCESS" not in written and {f.name for f in m.files} <= written  # the manifest, not a marker
    empty = s.write_frame(df.where("k > 5"), "step", "log", 1, 0)
    assert s.read_frame(spark, empty).schema == df.schema and s.read_frame(spark, empty).count() == 0
    # an item of no rows that lists no files (older roots) is empty by its plan: no job reads it
    from falkirk.spark.pipeline.run.frames import Frames

    bare = s.read_frame(spark, attrs.evolve(empty, files=()), verify=False)
    assert bare.schema == df.schema and Frames().planned_empty(bare) and bare.count() == 0
    chain = s.read_many(spark, [attrs.evolve(empty, files=())], verify=False)
    assert chain.schema == df.schema and Frames().planned_empty(chain)


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``os.fsync`` is called on, in order (resolved through ``/proc/self/fd``)."""
    import os

    calls: list[str] = []
    real = os.fsync

    def record(fd: int) -> None:
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    return calls


def test_fsync_flushes_exactly_the_listed_files_and_the_directories_whose_entries_changed(
    tmp_path: Path, fsynced: list[str]
) -> None:
    """A keyed item (part files in ``_subtask=i/``, plus Spark's ``_SUCCESS`` and ``.crc`` files): its part files
    and the directories that gained entries are flushed — the subdirectories, the item's directory and the one
    holding it, and the ancestors once per Root — never ``_SUCCESS``, a ``.crc``, or an unchanged directory."""
    s = Storage(tmp_path)
    root = str(tmp_path)
    items = []
    for epoch in (1, 2):
        loc = s.new_location("cc", "checkpoint", epoch)
        for i in (0, 1):  # as Spark's executors write them (not through the Root)
            (tmp_path / loc / f"_subtask={i}").mkdir(parents=True)
            (tmp_path / loc / f"_subtask={i}" / f"part-{i}.parquet").write_bytes(b"x" * (10 + i))
            (tmp_path / loc / f"_subtask={i}" / f".part-{i}.parquet.crc").write_bytes(b"c")
        (tmp_path / loc / "_SUCCESS").write_bytes(b"")
        fsynced.clear()
        files = s.describe_files(loc)
        items.append((loc, files, list(fsynced)))
    (loc1, files1, synced1), (loc2, _, synced2) = items
    assert [f.name for f in files1] == ["_subtask=0/part-0.parquet", "_subtask=1/part-1.parquet"]
    assert all(f.sha256.startswith("sha256:") for f in files1)
    expect = [f"{root}/{loc1}/_subtask=0/part-0.parquet", f"{root}/{loc1}/_subtask=1/part-1.parquet",
              f"{root}/{loc1}/_subtask=0", f"{root}/{loc1}/_subtask=1", f"{root}/{loc1}",
              f"{root}/data/cc/checkpoint"]
    assert synced1 == [*expect, f"{root}/data/cc", f"{root}/data", root]  # the first item: its ancestors too
    assert synced2 == [p.replace(loc1, loc2) for p in expect]  # data/cc/checkpoint gained loc2: flushed again

    fsynced.clear()
    s.put(Manifest("cc", "checkpoint", 1, 21, loc1, files1, "{}"))
    manifests = f"{root}/manifests/cc/checkpoint"
    assert fsynced[0].startswith(f"{manifests}/.00000001.json.") and fsynced[0].endswith(".tmp")  # content first
    assert fsynced[1:] == [manifests, f"{root}/manifests/cc", f"{root}/manifests", root]  # then the new name
    fsynced.clear()
    s.put(Manifest("cc", "checkpoint", 2, 0))
    assert fsynced[1:] == [manifests]  # a known directory: only it gained an entry
    fsynced.clear()
    s.remove_where("cc", "checkpoint", lambda e: e < 2, sync=True)  # a rollback's removal is durable
    assert fsynced == [manifests]
    fsynced.clear()
    s.remove_where("cc", "checkpoint", lambda e: e < 1)  # garbage collection's need not be
    assert fsynced == []


def test_without_fsync_nothing_is_flushed_and_checksums_still_come_from_one_read(tmp_path: Path, fsynced: list[str]) -> None:
    """``fsync=False``: no flush at all; the checksum is still computed (once per file)."""
    s = Storage(tmp_path, fsync=False)
    m = _fake_item(s, "cc", 3, b"payload")
    s.put(m)
    assert fsynced == [] and m.files[0].sha256.startswith("sha256:")


def test_sweep_unpublished_removes_only_what_this_storage_wrote_and_never_published(storage: Storage) -> None:
    """A step that failed between writing its data and publishing its manifest leaves a directory: garbage
    collection removes it without reading any manifest; published data and others' directories stay."""
    s = storage
    df_like = _fake_item(s, "cc", 1, b"a")  # written outside write_frame: not tracked
    s._unpublished[df_like.location or ""] = None
    published = _fake_item(s, "cc", 2, b"b")
    s._unpublished[published.location or ""] = None
    s.put(published)
    assert s.sweep_unpublished() == 1
    # no file is left under the swept directory (an object store may list an emptied prefix for a while)
    assert list(s.fs.walk_files(df_like.location or "")) == [] and s.fs.exists(published.location or "")
    assert s.sweep_unpublished() == 0


@pytest.mark.spark
def test_read_tagged_reads_several_items_in_one_scan_and_tags_each_row_with_its_item(
    spark: Any, tmp_path: Path
) -> None:
    """Rows of three items (one empty, one with an extra column) come back in one scan, each tagged with the tag of
    the manifest listing its file (told by its name, or by as many directories as two items' files need); a column
    an item lacks is null; partition directories are not read."""
    from pyspark.sql import functions as F

    s = Storage(tmp_path, fsync=False)
    a = spark.createDataFrame([(1, 10, 0), (2, 20, 1)], "k BIGINT, v BIGINT, p INT")
    b = spark.createDataFrame([(1, 11, True, 1)], "k BIGINT, v BIGINT, gone BOOLEAN, p INT")
    items = [s.write_frame(a, "st", "checkpoint", 0, 2, partition_by="p"),
             s.write_frame(a.where("k > 5"), "st", "checkpoint", 1, 0),
             s.write_frame(b, "st", "checkpoint", 2, 1, partition_by="p")]
    df = s.read_tagged(spark, items, "tag", [7, 8, 9])
    assert df.columns == ["k", "v", "gone", "tag"]
    assert sorted(map(tuple, df.collect())) == [(1, 10, None, 7), (1, 11, True, 9), (2, 20, None, 7)]
    assert "Union" not in df._jdf.queryExecution().executedPlan().toString()
    # one task writing into both partition directories: two files of the same name, told apart by their directory
    one = s.write_frame(a.coalesce(1), "st", "checkpoint", 3, 2, partition_by="p")
    assert len({f.name.rsplit("/", 1)[-1] for f in one.files}) == 1 < len(one.files)
    both = s.read_tagged(spark, [items[1], one, items[2]], "tag", [4, 5, 6])
    assert sorted(map(tuple, both.collect())) == [(1, 10, None, 5), (1, 11, True, 6), (2, 20, None, 5)]
    plan = both._jdf.queryExecution().executedPlan().toString()
    # the two files of one name are the same item's: told by the name alone, no path taken apart per row
    assert "Union" not in plan and "file_name" in plan and "substring_index" not in plan, plan
    dup = s.read_tagged(spark, [items[0], items[0]], "tag")  # same file names twice: read one by one
    assert sorted(map(tuple, dup.select("k", "tag").collect())) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    none = s.read_tagged(spark, [items[1]], "tag")
    assert none.count() == 0 and "tag" in none.columns
    assert s.read_tagged(spark, items[:1], "tag").where(F.col("tag") != 0).count() == 0


def test_a_restart_reads_only_the_manifests_it_has_not_read_before(
    place: Place, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On an object store, a driver keeps the manifests it read by their content's MD5 (from the listing's
    ETag): the next driver's check of the committed outputs reads only new or changed ones, and finds the
    same. A manifest damaged in place is read again and named; restored from a backup, it is the kept one
    again. Without the cache file, or with a broken one, every manifest is read and the answer is the same.
    A damaged entry of the cache is a miss; a cache that cannot be made is left aside. On a local root
    nothing is kept: each check reads every manifest, as before."""
    monkeypatch.setenv("FALKIRK_CACHE", str(tmp_path / "cache"))
    s = place.storage()
    for e in range(6):
        loc = f"output/report/epoch={e}"
        _parquet(place, f"{loc}/part-00000.parquet", [e, e + 1])
        s.put(Manifest("report", "output", e, 2, loc, s.describe_files(loc), "{}"))

    def check() -> tuple[list[str], int, list[str]]:
        driver = place.storage()  # a new driver process: nothing in memory
        read: list[str] = []
        read_many = driver.fs.read_many
        driver.fs.read_many = lambda rels: read.extend(rels) or read_many(rels)  # type: ignore[method-assign]
        n, problems = driver.verify_all("report", "output")
        return sorted(read), n, [p.path or "" for p in problems]

    every = [manifest_path("report", "output", e) for e in range(6)]
    assert check() == (every, 6, [])
    kept = [] if place.kind == "s3" else every  # what a second driver reads
    assert check() == (kept, 6, [])
    three = manifest_path("report", "output", 3)
    good = s.fs.read_bytes(three)
    # damaged in place, then restored from a backup, each by one PUT (pyarrow's writer, a multipart upload,
    # gives an ETag that is not an MD5: such a manifest is read every time, as before)
    s.fs.replace(three, good.replace(b'"rows"', b'"rows!"'))  # another MD5
    assert check() == ([three] if place.kind == "s3" else every, 6, [three])
    s.fs.replace(three, good)
    assert check() == (kept, 6, [])
    place.write(three, good)  # another client's write
    assert check()[1:] == (6, [])
    s.fs.replace(three, good)
    assert check()[1:] == (6, [])
    if place.kind == "s3":
        cache = tmp_path / "cache"
        (db,) = cache.rglob("manifests.sqlite")
        with sqlite3.connect(db) as con:  # the driver's disk damaged one entry: a miss, not a damaged manifest
            con.execute("UPDATE manifest SET raw = ? WHERE rel = ?", (b"{}", three))
        assert check() == ([three], 6, [])
        db.unlink()
        assert check() == (every, 6, [])
        db.write_bytes(b"not a database" * 100)
        with caplog.at_level("WARNING"):
            assert check() == (every, 6, [])  # made again, empty
        assert "is unusable" in caplog.text and "made again" in caplog.text
        assert check() == ([], 6, [])
        monkeypatch.setenv("FALKIRK_CACHE", str(db))  # a file where the cache's directory would be made
        caplog.clear()
        with caplog.at_level("WARNING"):
            assert check() == (every, 6, [])
        assert "left aside" in caplog.text
    else:
        assert not (tmp_path / "cache").exists()
