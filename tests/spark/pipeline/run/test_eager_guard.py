"""An Eager database step writes only what a rollback can undo (the double-counted running total)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Eager, EagerWriteError, Ephemeral, Pipeline

pytestmark = [pytest.mark.spark]


def _clicks(epoch: int) -> list[dict[str, Any]]:
    return [{"user": f"u{i % 4}", "n": 10 * (epoch + 1)} for i in range(12)]


def _pipe(root: Path, spark: Any, step: Any, tables: dict[str, str]) -> Pipeline:
    def clean(clicks: Any) -> Any:
        return clicks.select("user", "n")

    p = Pipeline(root, spark, fsync=False)
    p.input("clicks", "user STRING NOT NULL, n BIGINT NOT NULL", source=_clicks)
    p.step(clean, regime=Ephemeral())
    p.step(step, regime=Eager(database="stats.sqlite", tables=tables))
    return p


def running_total(clean: Any, *, db: Any, epoch: int) -> None:
    """The user's original step: a per-user running total kept by upsert in an undeclared table."""
    db.execute("CREATE TABLE IF NOT EXISTS totals (user TEXT PRIMARY KEY, total INTEGER)")
    for r in clean.groupBy("user").sum("n").collect():
        db.execute("INSERT INTO totals VALUES (?, ?) ON CONFLICT(user) DO UPDATE SET total = total + excluded.total",
                   (r["user"], r["sum(n)"]))


def delta_rows(clean: Any, *, db: Any, epoch: int) -> None:
    """The idempotent pattern (docs/spark-eager.md): per-epoch rows, totals as a view."""
    db.execute("CREATE TABLE IF NOT EXISTS user_sums (epoch INTEGER, user TEXT, n INTEGER, PRIMARY KEY (epoch, user))")
    db.execute("CREATE VIEW IF NOT EXISTS totals AS SELECT user, SUM(n) AS total FROM user_sums GROUP BY user")
    db.executemany("INSERT INTO user_sums VALUES (?, ?, ?)",
                   [(epoch, r["user"], r["sum(n)"]) for r in clean.groupBy("user").sum("n").collect()])


def test_running_total_in_an_undeclared_table_is_refused_at_the_first_write(spark: Any, tmp_path: Path) -> None:
    """Before: a failure at epoch 3 double-counted (3,600 became 4,800). Now the first write stops the run, naming
    the table and the fix, and nothing of the epoch is committed."""
    with pytest.raises(EagerWriteError, match=r"writes to table 'totals', which is not declared") as err:
        _pipe(tmp_path, spark, running_total, {"stats": "epoch"}).run(4, fail="running_total@3:mid")
    assert err.value.table == "totals" and "view" in str(err.value)
    with sqlite3.connect(tmp_path / "stats.sqlite") as db:
        assert db.execute("SELECT count(*) FROM falkirk_epochs").fetchone() == (0,)


def test_update_of_an_earlier_epoch_in_a_declared_table_is_refused(spark: Any, tmp_path: Path) -> None:
    """Declaring the table does not make an in-place running total safe: updating epoch 0's rows at epoch 1 is refused."""
    def in_place(clean: Any, *, db: Any, epoch: int) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS totals (epoch INTEGER, user TEXT PRIMARY KEY, total INTEGER)")
        for r in clean.groupBy("user").sum("n").collect():
            db.execute("INSERT INTO totals VALUES (?, ?, ?) ON CONFLICT(user) DO UPDATE SET total = total + "
                       "excluded.total", (epoch, r["user"], r["sum(n)"]))

    with pytest.raises(EagerWriteError, match=r"updates a row of table 'totals' tagged with epoch 0 .* writing epoch 1"):
        _pipe(tmp_path, spark, in_place, {"totals": "epoch"}).run(2)


@pytest.mark.parametrize("where", ["mid", "before"])
def test_delta_rows_and_a_view_recover_exactly(spark: Any, tmp_path: Path, where: str) -> None:
    """The documented pattern: a failure of the step at epoch 3 leaves the totals equal to the failure-free run's."""
    ref = _pipe(tmp_path / "ref", spark, delta_rows, {"user_sums": "epoch"})
    ref.run(4)
    run = _pipe(tmp_path / "run", spark, delta_rows, {"user_sums": "epoch"})
    result = run.run(4, fail=f"delta_rows@3:{where}")
    assert len(result.journal.recoveries) == 1

    def totals(root: Path) -> dict[str, int]:
        with sqlite3.connect(root / "stats.sqlite") as db:
            return dict(db.execute("SELECT user, total FROM totals"))

    assert totals(tmp_path / "run") == totals(tmp_path / "ref")
    assert sum(totals(tmp_path / "ref").values()) == 12 * 10 * (1 + 2 + 3 + 4)  # computed from _clicks
