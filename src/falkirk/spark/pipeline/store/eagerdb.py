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
from pathlib import Path
from typing import TYPE_CHECKING

from falkirk.spark.errors import CorruptDataError, PipelineError

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.rootfs import Root

__all__ = ["DATABASE_COMMITS", "database_path", "committed_epochs"]


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
