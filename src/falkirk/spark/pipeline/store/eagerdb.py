"""An Eager step's SQLite database: where it is, and which epochs it committed.

An Eager step declared with ``database`` keeps its state in a SQLite
database, an external system like the outputs: the executor commits each
epoch's rows in the same transaction as a row of the table
:data:`DATABASE_COMMITS`. :func:`database_path` says where the database is;
:func:`committed_epochs` reads which epochs it committed without writing
anything (recovery planning asks it before restoring the step to an epoch).

>>> import sqlite3, tempfile
>>> path = Path(tempfile.mkdtemp()) / "eager.sqlite"
>>> with contextlib.closing(sqlite3.connect(path)) as db, db:
...     _ = db.execute(f"CREATE TABLE {DATABASE_COMMITS} (step TEXT, epoch INTEGER, rows INTEGER)")
...     _ = db.execute(f"INSERT INTO {DATABASE_COMMITS} VALUES ('sink', 3, 10)")
>>> committed_epochs(path, "sink"), committed_epochs(path, "other")
({3}, set())
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from falkirk.solver.monitor.store import sqlite_cause
from falkirk.spark.errors import CorruptDataError, PipelineError, StorageError

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.rootfs import Root

__all__ = [
    "DATABASE_COMMITS",
    "database_path",
    "committed_epochs",
    "database_errors",
    "storage_error",
    "is_storage_failure",
]


def database_path(root: Root, step: str, db: str) -> Path:
    """An Eager step's SQLite database: ``db`` itself if absolute, else relative to a local root."""
    if Path(db).is_absolute():
        return Path(db)
    local = root.local_path(db)
    if local is None:
        raise PipelineError(
            f"step {step!r}: its database {db!r} is relative to the root, but the root {root.uri} is not a local "
            "filesystem; give the database an absolute path on the driver (an Eager step's database is an "
            "external system, like the outputs)"
        )
    return local


#: The table in an Eager step's SQLite database recording the epochs it committed (step, epoch, rows).
DATABASE_COMMITS = "falkirk_epochs"


def committed_epochs(path: Path, step: str) -> set[int]:
    """The epochs ``step`` committed in its SQLite database at ``path``, read without writing anything.

    ``CorruptDataError`` naming the file when it is missing or unreadable.
    A database closed cleanly is opened immutable (nothing is created
    beside it); one a crashed driver left with a write-ahead log is opened
    read-only, which lets SQLite rebuild its ``-shm`` index but changes no
    data.
    """
    if not path.exists():
        raise CorruptDataError(step, "checkpoint", -1, "is missing (the step's database)", path=str(path))
    wal = Path(f"{path}-wal")
    mode = "ro" if wal.exists() and wal.stat().st_size > 0 else "ro&immutable=1"
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode={mode}", uri=True)) as db:
            rows = db.execute(f"SELECT epoch FROM {DATABASE_COMMITS} WHERE step = ?", (step,)).fetchall()
    except sqlite3.Error as exc:
        raise CorruptDataError(step, "checkpoint", -1, f"is unreadable ({exc})", path=str(path)) from None
    return {int(r[0]) for r in rows}


def is_storage_failure(exc: sqlite3.Error) -> bool:
    """Whether SQLite failed for want of storage (a full disk or database, an I/O error, a file it cannot
    open), whoever issued the statement: the database's file system, not the statement, is at fault."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN")) or any(
        m in str(exc) for m in ("disk is full", "disk I/O error", "unable to open database file")
    )


@contextlib.contextmanager
def database_errors(step: str, path: Path, what: str) -> Iterator[None]:
    """Turn a storage failure SQLite meets while falkirk ``what`` (commits an epoch, resets the step…) into a
    :class:`~falkirk.spark.errors.StorageError` naming the step, the database file and the cause
    (:func:`is_storage_failure`); any other SQLite error passes unchanged (a database that is not one, a
    constraint: :func:`~falkirk.spark.pipeline.run.causes.is_deterministic` classifies those as before).

    SQLite's own message names neither the file nor the disk: a full file system comes back as ``database or
    disk is full`` (or ``disk I/O error``), which :func:`~falkirk.solver.monitor.store.sqlite_cause`
    completes with the free space it finds. A transaction SQLite refused is rolled back: the database keeps
    the epochs it committed before.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "eager.sqlite"
    >>> with database_errors("sink", path, "resetting it"):  # doctest: +ELLIPSIS
    ...     raise sqlite3.OperationalError("database or disk is full")
    Traceback (most recent call last):
    ...
    falkirk.spark.errors.StorageError: step 'sink': resetting it failed in its database ...: database or disk is full; ...
    >>> with database_errors("sink", path, "resetting it"):
    ...     raise sqlite3.DatabaseError("file is not a database")
    Traceback (most recent call last):
    ...
    sqlite3.DatabaseError: file is not a database
    """
    try:
        yield
    except sqlite3.Error as exc:
        if is_storage_failure(exc):
            raise storage_error(step, path, what, exc) from exc
        raise


def storage_error(step: str, path: Path, what: str, exc: sqlite3.Error) -> StorageError:
    """The :class:`~falkirk.spark.errors.StorageError` for a storage failure ``exc`` (see
    :func:`database_errors`)."""
    return StorageError(
        f"step {step!r}: {what} failed in its database {str(path)!r}: {sqlite_cause(str(path), exc)}; the "
        "epochs it committed before are kept. Free space on (or repair) the database's file system and start "
        "again"
    )
