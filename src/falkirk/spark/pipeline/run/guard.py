"""What an eager database step may write, enforced inside SQLite: :class:`WriteGuard`.

An :class:`~falkirk.spark.pipeline.declare.regimes.Eager` step with a ``database``
writes in one SQLite transaction per epoch, committed with the epoch it
covers. falkirk undoes epochs after a rollback by deleting the rows each
declared table (``tables={name: epoch_column}``) tags with them, then
replays those epochs. That is only exact if every write of epoch ``e``
goes to a declared table and touches rows tagged ``e`` alone; a running
total kept by ``UPDATE … SET total = total + …`` in another table is
applied a second time by the replay (double counting).

So while the step function runs, the guard

* refuses, through SQLite's authorizer hook (``set_authorizer``), writes
  to a table not declared in ``tables=``, ``DROP``/``ALTER`` of tables,
  ``ATTACH``, and ending the epoch's transaction (``COMMIT``, ``BEGIN``…);
* refuses, through temporary triggers on the declared tables, inserting,
  updating or deleting (``INSERT OR REPLACE`` and upserts included) a row
  whose epoch column is not the epoch being written; a declared table
  created during the call is checked row by row afterwards.

The first refused write raises :class:`~falkirk.spark.errors.EagerWriteError`
naming the step, the table and the fix; the epoch's transaction is rolled
back. The idempotent pattern is per-epoch delta rows with totals as a view
(``docs/spark-eager.md``)::

    CREATE TABLE IF NOT EXISTS clicks (epoch INTEGER, user TEXT, n INTEGER, PRIMARY KEY (epoch, user));
    CREATE VIEW IF NOT EXISTS totals AS SELECT user, sum(n) AS total FROM clicks GROUP BY user;

>>> import sqlite3
>>> db = sqlite3.connect(":memory:", isolation_level=None)
>>> _ = db.execute("CREATE TABLE clicks (epoch INTEGER, user TEXT, n INTEGER)")
>>> _ = db.execute("CREATE TABLE totals (user TEXT PRIMARY KEY, total INTEGER)")
>>> guard = WriteGuard(db, "stats", {"clicks": "epoch"})
>>> guard.install()
>>> with guard.watch(3):
...     _ = db.execute("INSERT INTO clicks VALUES (3, 'ann', 2)")
>>> with guard.watch(3):
...     _ = db.execute("INSERT INTO totals VALUES ('ann', 2)")
Traceback (most recent call last):
...
falkirk.spark.errors.EagerWriteError: step 'stats' writes to table 'totals', which is not declared in Eager(tables=...): falkirk undoes an epoch by deleting the rows of the declared tables tagged with it, so a write elsewhere would be applied again when the epoch is replayed after a rollback (double counting). Declare the table with its epoch column (tables={'totals': 'epoch', ...}) and write rows tagged with the epoch; keep running totals as a view over per-epoch rows (docs/spark-eager.md)
>>> with guard.watch(4):
...     _ = db.execute("UPDATE clicks SET n = n + 1 WHERE user = 'ann'")
Traceback (most recent call last):
...
falkirk.spark.errors.EagerWriteError: step 'stats' updates a row of table 'clicks' tagged with epoch 3 (column 'epoch') while writing epoch 4: an epoch may only write rows tagged with itself, or replaying it after a rollback applies the change twice. Insert per-epoch delta rows and compute totals in a view (docs/spark-eager.md)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from falkirk.spark.errors import EagerWriteError

__all__ = ["WriteGuard", "DOCS"]

#: Where the idempotent pattern is documented.
DOCS = "docs/spark-eager.md"
_FUNCTION = "falkirk_write_guard"
_INTERNAL = (
    "sqlite_master",
    "sqlite_schema",
    "sqlite_sequence",
    "sqlite_stat1",
    "sqlite_stat4",
    "sqlite_temp_master",
    "sqlite_temp_schema",
)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class WriteGuard:
    """Refuses an eager step's writes that a rollback could not undo (see the module docstring).

    ``db`` is the step's connection (autocommit mode), ``step`` its name,
    ``tables`` the declared tables (name → epoch column), ``own`` tables of
    falkirk itself that the step must not write.
    """

    def __init__(
        self, db: sqlite3.Connection, step: str, tables: Mapping[str, str], *, own: tuple[str, ...] = ()
    ) -> None:
        self.db = db
        self.step = step
        self.tables = dict(tables)
        self.own = own
        self.epoch: int | None = None
        self.violations: list[EagerWriteError] = []
        self._guarded: set[str] = set()
        db.create_function(_FUNCTION, 3, self._row_check)
        db.execute("PRAGMA recursive_triggers = ON")  # REPLACE's deletions fire the delete guard

    # -- setting up ---------------------------------------------------------------------------
    def existing(self) -> dict[str, str]:
        """The declared tables that exist in the database (name → epoch column)."""
        have = {r[0] for r in self.db.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
        return {t: c for t, c in self.tables.items() if t in have}

    def _check_column(self, table: str) -> None:
        column = self.tables[table]
        columns = {r[1] for r in self.db.execute(f"PRAGMA main.table_info({_quote(table)})")}
        if column not in columns:
            raise EagerWriteError(
                self.step,
                table,
                f"step {self.step!r}: table {table!r} has no column {column!r}, the epoch column declared in "
                f"Eager(tables=...) (its columns: {', '.join(sorted(columns))})",
            )

    def install(self) -> None:
        """Put the row guards on the declared tables that exist (outside a transaction: temporary triggers
        persist)."""
        for table in self.existing():
            if table in self._guarded:
                continue
            self._check_column(table)
            col, t = _quote(self.tables[table]), _quote(table)
            lit = "'" + table.replace("'", "''") + "'"
            for op, when in (
                ("insert", f"{_FUNCTION}({lit}, 'insert', NEW.{col})"),
                ("delete", f"{_FUNCTION}({lit}, 'delete', OLD.{col})"),
                (
                    "update",
                    f"{_FUNCTION}({lit}, 'update', OLD.{col}) OR {_FUNCTION}({lit}, 'update', NEW.{col})",
                ),
            ):
                name = _quote(f"falkirk_guard_{op}_{table}")
                self.db.execute(
                    f"CREATE TEMP TRIGGER IF NOT EXISTS {name} BEFORE {op.upper()} ON main.{t} WHEN {when} "
                    "BEGIN SELECT RAISE(ABORT, 'falkirk: write refused (see the step error)'); END"
                )
            self._guarded.add(table)

    # -- while the step runs --------------------------------------------------------------------
    @contextmanager
    def watch(self, epoch: int) -> Iterator[None]:
        """Guard the enclosed call of the step function writing ``epoch``; raise the first refused write."""
        before = set(self.existing())
        self.epoch, self.violations = epoch, []
        self.db.set_authorizer(self._authorize)
        failed: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            failed = exc
            raise
        finally:
            self.db.set_authorizer(None)
            self.epoch = None
            if not self.violations and failed is None:
                self._check_new_tables(set(self.existing()) - before - self._guarded, epoch)
            if self.violations:
                raise self.violations[0] from failed

    def _refuse(self, table: str, message: str) -> int:
        self.violations.append(EagerWriteError(self.step, table, f"step {self.step!r} {message}"))
        return sqlite3.SQLITE_DENY

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, dbname: str | None, source: str | None
    ) -> int:
        if dbname == "temp":
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE):
            table = arg1 or ""
            if table in self.tables or table.startswith("sqlite_") and table in _INTERNAL:
                return sqlite3.SQLITE_OK
            if table in self.own:
                return self._refuse(table, f"writes to {table!r}, falkirk's own record of committed epochs")
            return self._refuse(
                table,
                f"writes to table {table!r}, which is not declared in Eager(tables=...): falkirk undoes an epoch by "
                "deleting the rows of the declared tables tagged with it, so a write elsewhere would be applied "
                "again when the epoch is replayed after a rollback (double counting). Declare the table with its "
                f"epoch column (tables={{{table!r}: 'epoch', ...}}) and write rows tagged with the epoch; keep "
                f"running totals as a view over per-epoch rows ({DOCS})",
            )
        if action in (sqlite3.SQLITE_DROP_TABLE, sqlite3.SQLITE_ALTER_TABLE):
            table = (arg1 if action == sqlite3.SQLITE_DROP_TABLE else arg2) or ""
            verb = "drops" if action == sqlite3.SQLITE_DROP_TABLE else "alters"
            return self._refuse(
                table,
                f"{verb} table {table!r}: a rollback does not undo schema changes of "
                "earlier epochs; create tables with CREATE TABLE IF NOT EXISTS",
            )
        if action == sqlite3.SQLITE_ATTACH:
            return self._refuse(
                arg1 or "", "attaches another database: its writes cannot be rolled back with the epoch"
            )
        if action == sqlite3.SQLITE_TRANSACTION:
            return self._refuse(
                "",
                f"runs {arg1}: falkirk commits the step's writes together with the epoch they "
                "belong to; do not begin, commit or roll back transactions in the step (note: "
                "sqlite3's executescript() commits first; run each statement with execute())",
            )
        return sqlite3.SQLITE_OK

    def _row_check(self, table: str, op: str, value: Any) -> int:
        if self.epoch is None or value == self.epoch and not isinstance(value, bool):
            return 0
        self.violations.append(
            EagerWriteError(
                self.step,
                table,
                f"step {self.step!r} {op}s a row of table {table!r} tagged with epoch {value!r} (column "
                f"{self.tables[table]!r}) while writing epoch {self.epoch}: an epoch may only write rows tagged with "
                f"itself, or replaying it after a rollback applies the change twice. Insert per-epoch delta rows "
                f"and compute totals in a view ({DOCS})",
            )
        )
        return 1

    def _check_new_tables(self, created: set[str], epoch: int) -> None:
        for table in sorted(created):
            self._check_column(table)
            col = _quote(self.tables[table])
            row = self.db.execute(
                f"SELECT {col} FROM main.{_quote(table)} WHERE {col} IS NOT ? LIMIT 1", (epoch,)
            ).fetchone()
            if row is not None:
                self.epoch = epoch
                self._row_check(table, "insert", row[0])
                self.epoch = None
