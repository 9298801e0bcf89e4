"""Eager SQLite steps write only what they declare: an undeclared table is refused at the first write."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Eager, EagerWriteError, Pipeline

pytestmark = [pytest.mark.spark]

EPOCHS = 4


def _records(epoch: int) -> list[dict[str, Any]]:
    return [{"user": f"u{i % 3}", "n": 10 * epoch + i} for i in range(6)]


def _expected() -> dict[str, int]:
    totals: dict[str, int] = {}
    for e in range(EPOCHS):
        for r in _records(e):
            totals[r["user"]] = totals.get(r["user"], 0) + r["n"]
    return totals


def _pipe(root: Path, spark: Any, stats: Any, tables: dict[str, str]) -> Pipeline:
    p = Pipeline(root, spark, fsync=False)
    p.input("clicks", "user STRING, n BIGINT", source=_records)
    p.step(stats, regime=Eager(database="stats.sqlite", tables=tables))
    return p


def _upsert_total(clicks: Any, *, db: Any, epoch: int) -> None:
    """The issue's running total kept by upsert in a table not listed in ``tables=``."""
    db.execute("CREATE TABLE IF NOT EXISTS seen (epoch INTEGER, rows INTEGER)")
    db.execute("CREATE TABLE IF NOT EXISTS totals (user TEXT PRIMARY KEY, total INTEGER)")
    db.execute("INSERT INTO seen VALUES (?, ?)", (epoch, clicks.count()))
    for row in clicks.groupBy("user").sum("n").collect():
        db.execute("INSERT INTO totals VALUES (?, ?) ON CONFLICT(user) DO UPDATE SET total = total + excluded.total",
                   (row[0], row[1]))


def _deltas(clicks: Any, *, db: Any, epoch: int) -> None:
    """The idempotent pattern: per-epoch delta rows, the total a view over them."""
    db.execute("CREATE TABLE IF NOT EXISTS deltas (epoch INTEGER, user TEXT, n INTEGER, PRIMARY KEY (epoch, user))")
    db.execute("CREATE VIEW IF NOT EXISTS totals AS SELECT user, sum(n) AS total FROM deltas GROUP BY user")
    for row in clicks.groupBy("user").sum("n").collect():
        db.execute("INSERT INTO deltas VALUES (?, ?, ?)", (epoch, row[0], row[1]))


def _totals(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / "stats.sqlite") as db:
        return dict(db.execute("SELECT user, total FROM totals").fetchall())


def test_undeclared_table_is_refused_at_the_first_write(spark: Any, tmp_path: Path) -> None:
    """Before: the run finished and ``stats@2:mid`` double-counted epoch 2 in ``totals``; now the first write to
    ``totals`` stops the run with EagerWriteError naming the table and the fix, and nothing of the epoch is kept."""
    with pytest.raises(EagerWriteError) as err:
        _pipe(tmp_path, spark, _upsert_total, {"seen": "epoch"}).run(EPOCHS, fail=["_upsert_total@2:mid"])
    assert err.value.table == "totals" and err.value.step == "_upsert_total"
    text = str(err.value)
    assert "not declared in Eager(tables=...)" in text and "view" in text, text
    with sqlite3.connect(tmp_path / "stats.sqlite") as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "seen" not in tables and "totals" not in tables, tables  # epoch 0's transaction rolled back


def test_writing_another_epochs_rows_is_refused(spark: Any, tmp_path: Path) -> None:
    """An UPDATE of a declared table's rows of earlier epochs (a running total in place) is refused too."""

    def running(clicks: Any, *, db: Any, epoch: int) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS acc (epoch INTEGER, total INTEGER)")
        n = clicks.count()
        if epoch == 0:
            db.execute("INSERT INTO acc VALUES (0, ?)", (n,))
        else:
            db.execute("UPDATE acc SET total = total + ?", (n,))

    with pytest.raises(EagerWriteError, match="tagged with epoch 0 .* while writing epoch 1") as err:
        _pipe(tmp_path, spark, running, {"acc": "epoch"}).run(EPOCHS)
    assert err.value.table == "acc"


def test_the_idempotent_pattern_survives_a_mid_epoch_failure(spark: Any, tmp_path: Path) -> None:
    """Per-epoch delta rows with totals as a view: the same totals with and without a failure after the write."""
    clean = _pipe(tmp_path / "clean", spark, _deltas, {"deltas": "epoch"})
    clean.run(EPOCHS)
    failed = _pipe(tmp_path / "failed", spark, _deltas, {"deltas": "epoch"})
    result = failed.run(EPOCHS, fail=["_deltas@2:mid"])
    assert [i.epoch for i in result.fired] == [2]
    assert _totals(tmp_path / "clean") == _totals(tmp_path / "failed") == _expected()
