"""Where a monitor keeps its metadata: the :class:`MetadataStore` protocol and two stores.

A store holds what a :class:`~falkirk.solver.Monitor` has acknowledged: the
graph, every checkpoint in the order it was recorded, and the announced
low-watermarks. :meth:`MetadataStore.append` is **atomic**: after a crash at
any point, :meth:`MetadataStore.load` returns the state before or after the
call, never a mix.

* :class:`SQLiteStore` (the default for persistent monitors): an embedded
  SQLite database in WAL mode, one transaction per ``append`` (or one per
  :meth:`SQLiteStore.batch` of them); with the default ``synchronous="FULL"``
  a committed record also survives power loss (``"NORMAL"`` survives a
  killed process, not a lost machine).
* :class:`MemoryStore`: keeps Python objects in memory (no persistence, so
  it accepts projections that are Python functions); for tests and
  short-lived monitors.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", checkpoints=[Checkpoint(1)])], [])
>>> store = SQLiteStore(":memory:")
>>> store.create(StoredState(df, frozenset(), {"a": df.domains["a"].frontier(1)}))
>>> store.append("a", Checkpoint(4), {"a": df.domains["a"].frontier(4)})
>>> state = store.load()
>>> [c.frontier for c in state.dataflow.processors["a"].checkpoints], state.watermarks
([1, 4], {'a': Frontier(epoch, 4)})
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from attrs import evolve, frozen

from falkirk.domains import Frontier
from falkirk.domains.encoding import encode_frontier
from falkirk.errors import MonitorError
from falkirk.solver.model import Checkpoint, Dataflow
from falkirk.solver.model.resolve import coerce
from falkirk.solver.monitor.codec import (
    FORMAT,
    checkpoint_from_json,
    checkpoint_to_json,
    graph_from_json,
    graph_to_json,
)

__all__ = [
    "StoredState",
    "MetadataStore",
    "MemoryStore",
    "SQLiteStore",
    "BatchLostError",
    "with_checkpoints",
    "sqlite_cause",
]


#: Below this many free bytes on a database's filesystem, an SQLite I/O error is reported as a full disk.
FULL_BELOW = 1 << 20


def sqlite_cause(path: str, exc: sqlite3.Error) -> str:
    """SQLite's message for ``exc``, and the likely cause when SQLite does not give it: a write that failed
    on a full filesystem often comes back as ``disk I/O error`` (the WAL's shared-memory file could not grow),
    which names neither the disk nor its state."""
    text = str(exc)
    name = getattr(exc, "sqlite_errorname", "")
    if not (name.startswith(("SQLITE_IOERR", "SQLITE_FULL")) or "disk" in text) or path in ("", ":memory:"):
        return text
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return text
    free = st.f_bavail * st.f_frsize
    if free >= FULL_BELOW:
        return text
    return f"{text} (its filesystem has {free:,} bytes free: no space left on device; free space and retry)"


class BatchLostError(MonitorError):
    """Committing a :meth:`SQLiteStore.batch` failed: it was rolled back, the store holds the state before
    it."""


@frozen
class StoredState:
    """A monitor's durable state: the graph with its checkpoints, the outputs, the watermarks."""

    dataflow: Dataflow
    outputs: frozenset[str]
    watermarks: dict[str, Frontier]


def with_checkpoints(
    df: Dataflow, checkpoints: Mapping[str, list[Checkpoint]], live: Mapping[str, Checkpoint] | None = None
) -> Dataflow:
    """``df``'s graph with ``checkpoints[p]`` as each processor's checkpoints and ``live[p]`` as its live
    metadata."""
    live = live or {}
    procs = [
        evolve(p, checkpoints=tuple(checkpoints.get(name, ())), live=live.get(name))
        for name, p in df.processors.items()
    ]
    return Dataflow(procs, df.edges.values(), notifications=df.system_notifications)


class MetadataStore(Protocol):
    """Durable storage for a monitor (see the module docstring)."""

    def create(self, state: StoredState) -> None:
        """Store a new monitor's state; refuse (``MonitorError``) if one is already stored."""
        ...

    def load(self) -> StoredState | None:
        """The stored state, or ``None`` if nothing was created yet."""
        ...

    def append(self, processor: str, checkpoint: Checkpoint, watermarks: Mapping[str, Frontier]) -> None:
        """Atomically add ``checkpoint`` to ``processor`` and set the changed ``watermarks``."""
        ...

    def close(self) -> None:
        """Release resources; the store is unusable afterwards."""
        ...


class MemoryStore:
    """A :class:`MetadataStore` in memory (nothing survives the process)."""

    def __init__(self) -> None:
        self._graph: Dataflow | None = None
        self._outputs: frozenset[str] = frozenset()
        self._checkpoints: dict[str, list[Checkpoint]] = {}
        self._watermarks: dict[str, Frontier] = {}

    def create(self, state: StoredState) -> None:
        if self._graph is not None:
            raise MonitorError("this MemoryStore already holds a monitor")
        self._graph = state.dataflow
        self._outputs = state.outputs
        self._checkpoints = {n: list(p.checkpoints) for n, p in state.dataflow.processors.items()}
        self._watermarks = dict(state.watermarks)

    def load(self) -> StoredState | None:
        if self._graph is None:
            return None
        df = with_checkpoints(self._graph, self._checkpoints)
        return StoredState(df, self._outputs, dict(self._watermarks))

    def append(self, processor: str, checkpoint: Checkpoint, watermarks: Mapping[str, Frontier]) -> None:
        if self._graph is None:
            raise MonitorError("this MemoryStore holds no monitor yet (create one first)")
        self._checkpoints[processor].append(checkpoint)
        self._watermarks.update(watermarks)

    def discard(self, processor: str, frontiers: list[Any]) -> None:
        """Forget ``processor``'s checkpoints at ``frontiers`` (:meth:`Monitor.discard
        <falkirk.solver.Monitor.discard>`)."""
        if self._graph is None:
            raise MonitorError("this MemoryStore holds no monitor yet (create one first)")
        dom = self._graph.domains[processor]
        drop = {coerce(dom, f, processor) for f in frontiers}
        self._checkpoints[processor] = [
            ck for ck in self._checkpoints[processor] if coerce(dom, ck.frontier, processor) not in drop
        ]

    def close(self) -> None:
        pass


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS falkirk_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS checkpoints (seq INTEGER PRIMARY KEY, processor TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS watermarks (processor TEXT PRIMARY KEY, frontier TEXT NOT NULL)",
)
_UPSERT = (
    "INSERT INTO watermarks (processor, frontier) VALUES (?, ?) "
    "ON CONFLICT(processor) DO UPDATE SET frontier = excluded.frontier"
)


class SQLiteStore:
    """A :class:`MetadataStore` in an SQLite database file (WAL mode, one transaction per append).

    ``synchronous`` is SQLite's setting: ``"FULL"`` (default: durable across
    power loss) or ``"NORMAL"`` (durable across a killed process; faster).
    :meth:`batch` groups several appends and discards into one transaction.
    """

    SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
    #: page size of a new database. Every transaction (a recorded checkpoint, a discard) writes each page it
    #: changes to the write-ahead log in full, and the rows are tens of bytes: with SQLite's default 4 kB
    #: pages a spark pipeline's monitor logged ~75 kB per flagship epoch for ~15 transactions; 1 kB pages
    #: write a quarter of that, with the same transactions and syncs. (An existing database keeps its page
    #: size.) A :meth:`batch` writes each changed page once for all its calls: the pipeline's epoch, ~2 kB.
    PAGE_SIZE = 1024

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: str = "FULL", timeout: float = 30.0
    ) -> None:
        if synchronous.upper() not in self.SYNCHRONOUS:
            raise MonitorError(f"synchronous must be one of {list(self.SYNCHRONOUS)}, not {synchronous!r}")
        self.path = os.fspath(path)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=timeout)
            self._db.execute(f"PRAGMA page_size={self.PAGE_SIZE}")  # a no-op unless the database is new
            # pages freed by discarded checkpoints go back to the file system (see _trim): set on a new
            # database, before WAL mode writes its header; an older one is converted by one VACUUM, below
            new = self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            if new:
                self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            # a long-lived monitor updates in place (records, discards): checkpoint the WAL every 64 pages and
            # truncate it to 256 kB after, so the files stay bounded however long the run (SQLite's default
            # lets the WAL reach 1,000 pages and never shrinks it)
            self._db.execute("PRAGMA wal_autocheckpoint=64")
            self._db.execute("PRAGMA journal_size_limit=262144")
            if self._db.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # also a file left without tables
                self._vacuum()
        except sqlite3.Error as exc:
            raise MonitorError(
                f"cannot open the monitor database {self.path!r}: {sqlite_cause(self.path, exc)}"
            ) from exc
        if mode.lower() not in ("wal", "memory"):
            raise MonitorError(f"{self.path!r}: SQLite refused WAL mode (journal_mode is {mode!r})")
        self._graph: Dataflow | None = None
        self._depth = 0  # nesting depth of batch()
        self._freed = False  # a discard committed (or is in the open batch): pages may be free
        self._closed = False
        #: transactions this store committed (each a commit record in the write-ahead log)
        self.commits = 0

    @property
    def in_batch(self) -> bool:
        """Whether a :meth:`batch` is open (its writes are not committed yet)."""
        return self._depth > 0

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group every append and discard inside into **one** transaction, committed when the outermost batch
        exits.

        Each ``append``/``discard`` inside still is atomic on its own (an
        SQLite savepoint: one that fails leaves nothing behind), and reads on
        this store inside the batch see its writes (one connection, one
        transaction). Other connections see none of them until the commit.
        The write transaction begins with the first write (``BEGIN
        IMMEDIATE``), so a batch without writes commits nothing.

        Nesting is safe: an inner batch joins the outer one (nothing is
        committed at its exit). When the outermost batch exits — normally
        **or by an exception** — what its completed calls wrote is committed:
        each of them was acknowledged to its caller (a :class:`Monitor
        <falkirk.solver.Monitor>` has already taken it into its in-memory
        state), so the database agrees with the monitor either way; a failed
        call was rolled back to its savepoint, in memory and here alike.

        What a batch gives up is durability of each call on return: a crash
        (a killed process, a lost machine) before the batch commits loses all
        of its calls, and the database holds the state before the batch — an
        earlier consistent state (``load`` never sees part of a batch, nor
        part of a call). If the commit itself fails, the transaction is
        rolled back and :class:`BatchLostError` is raised: the database again
        holds the state before the batch, and a monitor must reload from it
        (:meth:`Monitor.batch <falkirk.solver.Monitor.batch>` does).
        """
        if self._closed:
            raise MonitorError(f"{self.path!r}: this store is closed")
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and not self._closed and self._db.in_transaction:
                self._commit_batch()

    def _commit_batch(self) -> None:
        try:
            self._commit()
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise BatchLostError(
                f"monitor database {self.path!r}: committing a batch failed, it was rolled back "
                f"({sqlite_cause(self.path, exc)})"
            ) from exc

    def _commit(self) -> None:
        self._db.execute("COMMIT")
        self.commits += 1
        if self._freed:
            self._trim()

    #: free pages kept in the file before :meth:`_trim` returns them (the next appends reuse these)
    KEEP_FREE = 32

    def _trim(self) -> None:
        """Return free pages beyond :attr:`KEEP_FREE` to the file system. Without it the file keeps the
        largest size it ever had, and a long run's peaks (records piling up while a step recovers) ratchet
        it up: the soak measured 7 kB of live pages in an 80 kB file after 1,120 epochs."""
        self._freed = False
        try:
            free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
            if free > self.KEEP_FREE:
                with self._no_wait():
                    # executescript steps it to the end (execute frees one page: a page per step)
                    self._db.executescript(f"PRAGMA incremental_vacuum({free - self.KEEP_FREE});")
        except sqlite3.Error:  # another connection writes: the next discard trims
            pass

    def _vacuum(self) -> None:
        """Convert a database made without ``auto_vacuum`` (before it was set) by rewriting it once."""
        try:
            with self._no_wait():
                self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                self._db.execute("VACUUM")
        except sqlite3.Error:  # busy: another connection holds it; the next open converts it
            pass

    @contextmanager
    def _no_wait(self) -> Iterator[None]:
        """Housekeeping gives way at once to another connection's write lock (not after the busy timeout)."""
        (wait,) = self._db.execute("PRAGMA busy_timeout").fetchone()
        self._db.execute("PRAGMA busy_timeout=0")
        try:
            yield
        finally:
            self._db.execute(f"PRAGMA busy_timeout={int(wait)}")

    @contextmanager
    def _transaction(self, kind: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        db = self._db
        # inside a batch: a savepoint in the batch's transaction, committed when the batch exits
        if self._depth:
            try:
                if not db.in_transaction:
                    db.execute("BEGIN IMMEDIATE")  # reads and writes of the batch in one write transaction
                db.execute("SAVEPOINT falkirk_call")
            except sqlite3.Error as exc:
                raise MonitorError(f"monitor database {self.path!r}: {sqlite_cause(self.path, exc)}") from exc
            try:
                yield db
                db.execute("RELEASE falkirk_call")
            except BaseException as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK TO falkirk_call")
                    db.execute("RELEASE falkirk_call")
                if isinstance(exc, sqlite3.Error):
                    raise MonitorError(
                        f"monitor database {self.path!r}: {sqlite_cause(self.path, exc)}"
                    ) from exc
                raise
            return
        try:
            db.execute(f"BEGIN {kind}")
            yield db
            self._commit()
        except BaseException as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise MonitorError(f"monitor database {self.path!r}: {sqlite_cause(self.path, exc)}") from exc
            raise

    def _initialised(self, db: sqlite3.Connection) -> bool:
        row = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'falkirk_meta'"
        ).fetchone()
        return (
            row is not None
            and db.execute("SELECT 1 FROM falkirk_meta WHERE key = 'graph'").fetchone() is not None
        )

    def create(self, state: StoredState) -> None:
        df = state.dataflow
        graph = json.dumps(graph_to_json(df, state.outputs))
        rows = [
            (n, json.dumps(checkpoint_to_json(df, n, ck)))
            for n, p in df.processors.items()
            for ck in p.checkpoints
        ]
        marks = [(n, json.dumps(encode_frontier(f))) for n, f in state.watermarks.items()]
        with self._transaction() as db:
            for stmt in _SCHEMA:
                db.execute(stmt)
            if self._initialised(db):
                raise MonitorError(f"{self.path!r} already holds a monitor: open it with Monitor.open")
            db.executemany(
                "INSERT INTO falkirk_meta (key, value) VALUES (?, ?)", [("format", FORMAT), ("graph", graph)]
            )
            db.executemany("INSERT INTO checkpoints (processor, body) VALUES (?, ?)", rows)
            db.executemany(_UPSERT, marks)
        self._graph = df

    def load(self) -> StoredState | None:
        with self._transaction("DEFERRED") as db:
            if not self._initialised(db):
                return None
            (graph,) = db.execute("SELECT value FROM falkirk_meta WHERE key = 'graph'").fetchone()
            rows = db.execute("SELECT processor, body FROM checkpoints ORDER BY seq").fetchall()
            marks = db.execute("SELECT processor, frontier FROM watermarks").fetchall()
        checkpoints: dict[str, list[Checkpoint]] = {}
        for name, body in rows:
            checkpoints.setdefault(name, []).append(checkpoint_from_json(json.loads(body)))
        df, outputs = graph_from_json(json.loads(graph), checkpoints)
        watermarks = {n: coerce(df.domains[n], json.loads(v), f"stored watermark of {n!r}") for n, v in marks}
        self._graph = df
        return StoredState(df, outputs, watermarks)

    def append(self, processor: str, checkpoint: Checkpoint, watermarks: Mapping[str, Frontier]) -> None:
        if self._graph is None:
            raise MonitorError(f"{self.path!r}: create or load the monitor before appending")
        body = json.dumps(checkpoint_to_json(self._graph, processor, checkpoint))
        marks = [(n, json.dumps(encode_frontier(f))) for n, f in watermarks.items()]
        with self._transaction() as db:
            db.execute("INSERT INTO checkpoints (processor, body) VALUES (?, ?)", (processor, body))
            db.executemany(_UPSERT, marks)

    def discard(self, processor: str, frontiers: list[Any]) -> None:
        """Delete ``processor``'s checkpoints at ``frontiers`` in one transaction (the database is not
        rewritten; free pages beyond :attr:`KEEP_FREE` go back to the file system after the commit)."""
        if self._graph is None:
            raise MonitorError(f"{self.path!r}: create or load the monitor before discarding")
        dom = self._graph.domains[processor]
        drop = {json.dumps(dom.encode(coerce(dom, f, processor)), sort_keys=True) for f in frontiers}  # type: ignore[attr-defined]
        with self._transaction() as db:
            rows = db.execute(
                "SELECT seq, body FROM checkpoints WHERE processor = ?", (processor,)
            ).fetchall()
            gone = [
                (seq,)
                for seq, body in rows
                if json.dumps(json.loads(body)["frontier"], sort_keys=True) in drop
            ]
            db.executemany("DELETE FROM checkpoints WHERE seq = ?", gone)
            self._freed = self._freed or bool(gone)

    def close(self) -> None:
        """Close the database; inside a :meth:`batch`, commit what it wrote first (the batch then commits
        nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._db.in_transaction:
                self._commit_batch()
        finally:
            self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
