"""Durable storage: atomic manifests, verification of sizes and checksums, orphan sweeping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import CorruptDataError, Manifest, Storage
from falkirk.spark.pipeline.storage import FileEntry


def _fake_item(storage: Storage, step: str, epoch: int, payload: bytes) -> Manifest:
    loc = storage.new_location(step, "checkpoint", epoch)
    (storage.root / loc).mkdir(parents=True)
    (storage.root / loc / "part-0.parquet").write_bytes(payload)
    return Manifest(step, "checkpoint", epoch, 1, loc, storage._describe(storage.root / loc), "{}")


def test_manifest_round_trip(tmp_path: Path) -> None:
    """A published manifest reads back equal; epochs are listed in order."""
    s = Storage(tmp_path, fsync=False)
    m = Manifest("cc", "log", 3, rows=7, location="data/x", files=[FileEntry("part-0", 10, "ab")], schema="{}",
                 extra={"k": 1})
    s.put(m)
    s.put(Manifest("cc", "log", 1))
    assert s.get("cc", "log", 3) == m
    assert s.epochs("cc", "log") == [1, 3]


@pytest.mark.parametrize("damage", ["delete", "truncate", "flip"])
def test_verify_detects_damaged_data(tmp_path: Path, damage: str) -> None:
    """A deleted, truncated or bit-flipped data file fails verification, naming step, kind and epoch."""
    s = Storage(tmp_path, fsync=False)
    m = _fake_item(s, "cc", 5, b"x" * 100)
    s.put(m)
    s.verify(m)
    f = tmp_path / (m.location or "") / m.files[0].name
    if damage == "delete":
        f.unlink()
    elif damage == "truncate":
        f.write_bytes(b"x" * 50)
    else:
        f.write_bytes(b"y" + b"x" * 99)
    with pytest.raises(CorruptDataError, match="step cc: checkpoint at epoch 5 is unusable") as err:
        s.verify(s.get("cc", "checkpoint", 5))
    assert (err.value.step, err.value.kind, err.value.epoch) == ("cc", "checkpoint", 5)


def test_unreadable_manifest_is_corrupt(tmp_path: Path) -> None:
    """A manifest that is not valid JSON counts as a corrupt item, not a crash."""
    s = Storage(tmp_path, fsync=False)
    s.put(Manifest("cc", "checkpoint", 2))
    (tmp_path / "manifests" / "cc" / "checkpoint" / "00000002.json").write_text("{not json")
    with pytest.raises(CorruptDataError, match="unreadable"):
        s.get("cc", "checkpoint", 2)


def test_remove_and_sweep(tmp_path: Path) -> None:
    """Removing a manifest deletes its data; data no manifest names (a crash's leftovers) is swept."""
    s = Storage(tmp_path, fsync=False)
    kept = _fake_item(s, "cc", 1, b"a")
    gone = _fake_item(s, "cc", 2, b"b")
    orphan = _fake_item(s, "cc", 3, b"c")
    s.put(kept)
    s.put(gone)
    s.remove("cc", "checkpoint", 2)
    assert not (tmp_path / (gone.location or "")).exists()
    assert s.sweep_orphans() == 1
    assert not (tmp_path / (orphan.location or "")).exists()
    assert (tmp_path / (kept.location or "")).exists()


@pytest.mark.spark
def test_frame_round_trip(spark: Any, tmp_path: Path) -> None:
    """A DataFrame written with a manifest reads back with the same rows and schema, empty ones included."""
    s = Storage(tmp_path, fsync=False)
    df = spark.createDataFrame([(1, "a"), (2, "b")], "k BIGINT, v STRING")
    m = s.write_frame(df, "step", "log", 0, 2)
    s.put(m)
    back = s.read_frame(spark, s.get("step", "log", 0))
    assert sorted(map(tuple, back.collect())) == [(1, "a"), (2, "b")]
    empty = s.write_frame(df.where("k > 5"), "step", "log", 1, 0)
    assert s.read_frame(spark, empty).schema == df.schema and s.read_frame(spark, empty).count() == 0
