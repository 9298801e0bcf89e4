"""benchmarks/spark_bytes.py's own measurements, without Spark: the WAL frame count and the per-epoch diff."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from benchmarks.spark_bytes import category, diff, scan, wal_frames


def test_wal_frames_counts_what_each_transaction_wrote(tmp_path: Path) -> None:
    """One frame per page a transaction changes, one commit frame per transaction; the WAL's size agrees."""
    db = sqlite3.connect(tmp_path / "m.sqlite", isolation_level=None)
    db.execute("PRAGMA page_size=1024")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("CREATE TABLE t (a TEXT)")
    before = wal_frames(tmp_path / "m.sqlite-wal")
    for i in range(5):
        db.execute("INSERT INTO t VALUES (?)", (f"row {i}",))
    after = wal_frames(tmp_path / "m.sqlite-wal")
    assert before is not None and after is not None
    assert after["page"] == 1024 and after["commits"] - before["commits"] == 5
    assert after["frames"] - before["frames"] == 5  # each insert rewrites the table's one leaf page
    assert after["size"] == 32 + after["frames"] * (24 + 1024)
    db.close()


def test_diff_counts_new_files_growth_and_deletions(tmp_path: Path) -> None:
    (tmp_path / "manifests" / "cc" / "checkpoint").mkdir(parents=True)
    (tmp_path / "meta.sqlite-wal").write_bytes(b"x" * 100)
    (tmp_path / "old").write_bytes(b"y" * 7)
    first = scan(tmp_path)
    (tmp_path / "manifests" / "cc" / "checkpoint" / "00000003.json").write_bytes(b"{}" * 10)
    with open(tmp_path / "meta.sqlite-wal", "ab") as f:
        f.write(b"x" * 50)
    os.utime(tmp_path / "meta.sqlite-wal", ns=(first["meta.sqlite-wal"][1] + 10**9,) * 2)
    (tmp_path / "old").unlink()
    d = diff(first, scan(tmp_path))
    assert d["new_bytes"] == {"manifests/cc/checkpoint": 20}
    assert d["grown_bytes"] == {"meta.sqlite-wal": 50}
    assert d["deleted_bytes"] == {"old": 7}
    assert category(os.path.join("input", "events", "seg.parquet")) == "input/events"
