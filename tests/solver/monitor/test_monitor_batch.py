"""Monitor.batch / SQLiteStore.batch: several reports, one SQLite transaction; failures leave a consistent store."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from falkirk.errors import MonitorError
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
from falkirk.solver.monitor import Monitor
from falkirk.solver.monitor.store import BatchLostError, SQLiteStore


def chain() -> Dataflow:
    return Dataflow(
        [Processor("src", "epoch", stateless=True, logs=["s->a"]), Processor("a", "epoch"), Processor("out", "epoch")],
        [Edge("s->a", "src", "a"), Edge("a->out", "a", "out")],
    )


def stored(db: Path) -> dict[str, Any]:
    """What a fresh process opening ``db`` would restart from."""
    with Monitor.open(db) as m:
        m._check()
        return m.snapshot()


class Failing:
    """The store's connection, failing the first statement that starts with ``fail`` (as an I/O error would)."""

    def __init__(self, db: sqlite3.Connection, fail: str) -> None:
        self.db, self.fail = db, fail

    def _check(self, sql: str) -> None:
        if self.fail and sql.startswith(self.fail):
            self.fail = ""
            raise sqlite3.OperationalError(f"injected: {sql}")

    def execute(self, sql: str, *a: Any) -> Any:
        self._check(sql)
        return self.db.execute(sql, *a)

    def executemany(self, sql: str, *a: Any) -> Any:
        self._check(sql)
        return self.db.executemany(sql, *a)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def test_a_batch_commits_once_and_reads_see_its_writes(tmp_path: Path) -> None:
    """Eight reports and a discard: one commit (one commit record in the WAL), not nine; inside, the monitor and its
    store's own reads see every report, another connection none until the batch exits."""
    db = tmp_path / "m.db"
    m = Monitor.create(chain(), db, outputs=["out"])
    store = m.store
    assert isinstance(store, SQLiteStore)
    before, start = store.commits, stored(db)
    with m.batch():
        for e in range(3):
            m.record("src", Checkpoint(e))
            m.record("a", Checkpoint(e))
        m.acknowledge_output("out", 1)
        m.discard("src", [0, 1])
        with m.batch():  # nested: joins the outer batch
            m.record("a", Checkpoint(3))
        assert store.commits == before and store.in_batch
        assert stored(db) == start  # another connection (or a crash now) sees the state before the batch
        assert [c.frontier for c in store.load().dataflow.processors["a"].checkpoints] == [0, 1, 2, 3]  # type: ignore[union-attr]
        assert m.watermarks == Monitor.open(store).watermarks  # the store's reads: its own uncommitted writes
    assert store.commits == before + 1 and not store.in_batch
    assert stored(db) == m.snapshot()
    m.record("a", Checkpoint(4))  # outside a batch: one commit per report, as before
    assert store.commits == before + 2
    m.close()


def test_batch_commits_match_unbatched_reports(tmp_path: Path) -> None:
    """The same reports with and without a batch: same changes, same watermarks, same stored state."""
    results = []
    for batched in (False, True):
        db = tmp_path / f"m{batched}.db"
        m = Monitor.create(chain(), db, outputs=["out"])
        changes = []
        with m.batch() if batched else contextlib.nullcontext():
            for e in range(4):
                changes.append(m.record("src", Checkpoint(e)).to_json())
                changes.append(m.record("a", Checkpoint(e)).to_json())
                changes.append(m.acknowledge_output("out", e).to_json())
                m.discard("src", [e - 1] if e else [])
        m.close()
        results.append((changes, stored(db)))
    assert results[0] == results[1]


def test_a_refused_report_inside_a_batch_changes_nothing(tmp_path: Path) -> None:
    """A report the monitor refuses, or one whose store write fails half-way, leaves no trace in memory or in the
    batch's transaction (an SQLite savepoint); the batch goes on and commits the rest."""
    db = tmp_path / "m.db"
    m = Monitor.create(chain(), db, outputs=["out"])
    store = m.store
    assert isinstance(store, SQLiteStore)
    with m.batch():
        m.record("a", Checkpoint(2))
        with pytest.raises(MonitorError):
            m.record("a", Checkpoint(1))  # not above the previous frontier: refused
        real = store._db
        store._db = Failing(real, "INSERT INTO watermarks")  # type: ignore[assignment]
        with pytest.raises(MonitorError, match="injected"):
            m.record("src", Checkpoint(5))  # its checkpoint row is written, then the watermark upsert fails
        store._db = real
        assert [c.frontier for c in m.checkpoints("src")] == []
        m.record("src", Checkpoint(3))
    m._check()
    assert stored(db) == m.snapshot()
    assert [c.frontier for c in m.checkpoints("src")] == [3] and [c.frontier for c in m.checkpoints("a")] == [2]
    m.close()


def test_an_exception_leaving_a_batch_commits_what_was_acknowledged(tmp_path: Path) -> None:
    """The reports made before the exception are in the monitor's memory: they are committed, the store agrees."""
    db = tmp_path / "m.db"
    m = Monitor.create(chain(), db, outputs=["out"])
    with pytest.raises(RuntimeError, match="step failed"), m.batch():
        m.record("src", Checkpoint(0))
        m.record("a", Checkpoint(0))
        raise RuntimeError("step failed")
    assert stored(db) == m.snapshot()
    assert [c.frontier for c in m.checkpoints("a")] == [0]
    m.close()


def test_a_failed_commit_rolls_back_and_the_monitor_reloads(tmp_path: Path) -> None:
    """If the commit fails, the batch is rolled back and the monitor returns to the state before it (its store's):
    memory and database agree, and further reports work."""
    db = tmp_path / "m.db"
    m = Monitor.create(chain(), db, outputs=["out"])
    m.record("a", Checkpoint(0))
    before = m.snapshot()
    store = m.store
    assert isinstance(store, SQLiteStore)
    with pytest.raises(BatchLostError), m.batch():
        m.record("src", Checkpoint(1))
        m.record("a", Checkpoint(1))
        store._db = Failing(store._db, "COMMIT")  # type: ignore[assignment]
    store._db = store._db.db  # type: ignore[attr-defined]
    assert m.snapshot() == before == stored(db)
    m._check()
    m.record("a", Checkpoint(1))
    assert stored(db) == m.snapshot()
    m.close()


def test_closing_inside_a_batch_commits_it(tmp_path: Path) -> None:
    """Closing the monitor inside a batch commits what it holds; the batch's exit then does nothing."""
    db = tmp_path / "m.db"
    m = Monitor.create(chain(), db, outputs=["out"])
    with m.batch():
        m.record("a", Checkpoint(0))
        snap = m.snapshot()
        m.close()
    assert stored(db) == snap
    with pytest.raises(MonitorError, match="closed"), m.batch():
        pass


def test_a_memory_monitor_batch_is_a_no_op() -> None:
    """Without an SQLite store a batch changes nothing (each call is immediate, as before)."""
    m = Monitor(chain(), outputs=["out"])
    with m.batch() as same:
        assert same is m
        m.record("a", Checkpoint(1))
    assert [c.frontier for c in m.checkpoints("a")] == [1]
