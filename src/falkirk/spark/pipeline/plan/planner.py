"""The planner seam: where the executor gets rollback plans and low-watermarks.

A :class:`Planner` keeps, per step, the epochs at which it has an available
frontier — checkpoints of stateful steps, acknowledged epochs of external
outputs, and the latest complete frontier ``c`` of stateless ones — mirrored
from the manifests (which remain the source of truth). It answers
:meth:`Planner.plan` (SPEC §5: the failed steps lose ``⊤``, the others get
their live metadata) and :meth:`Planner.watermarks` (SPEC §6: everyone
failed) with falkirk's solver.

By default the answers come from a :class:`falkirk.solver.Monitor` persisted
in ``meta.sqlite`` beside the data, which keeps the low-watermarks up to date
incrementally as checkpoints are recorded. Garbage collection's deletions
are dropped from it in place (:meth:`Planner.compact`). The monitor only
accepts checkpoints in increasing order, so when a rollback abandons
checkpoints (:meth:`Planner.truncate`) or one turns out to be corrupt
(:meth:`Planner.forget`) the planner rebuilds it from the mirror (a new
database replaces the old one with ``os.replace``). ``monitor=False`` uses
:func:`falkirk.solver.solve_frontiers` directly (no database). Inside
:meth:`Planner.batch` the monitor's writes are committed together, once per
:meth:`Planner.commit` (the executor: once per epoch).

>>> from falkirk.solver import Dataflow, Edge, Processor
>>> df = Dataflow([Processor("src", "epoch", stateless=True, logs=["s->c"]), Processor("c", "epoch")],
...               [Edge("s->c", "src", "c")])
>>> p = Planner(df, monitor=False)
>>> for e in range(4): p.record("src", e)
>>> p.record("c", 1)
>>> p.watermarks()
{'src': 3, 'c': 1}
>>> plan = p.plan({"c"}, {})
>>> plan.actions, epoch_of(plan.frontiers["c"])
({'src': 'keep', 'c': 'restore'}, 1)
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from falkirk.domains import Frontier
from falkirk.errors import MonitorError
from falkirk.solver import Checkpoint, Dataflow, RollbackPlan, encode_frontier, solve_frontiers
from falkirk.solver.store import with_checkpoints

__all__ = ["Planner", "epoch_of", "TOP"]

#: :func:`epoch_of` of ``⊤``.
TOP: int = 1 << 62


def epoch_of(f: Frontier) -> int:
    """An epoch frontier as an int: the last epoch it holds, ``-1`` for ``∅``, :data:`TOP` for ``⊤``."""
    if f.is_top:
        return TOP
    if f.is_empty:
        return -1
    return int(encode_frontier(f))


def _frontier(epoch: int) -> Any:
    return "empty" if epoch < 0 else epoch


class Planner:
    """Rollback plans and low-watermarks for a pipeline's dataflow (see the module docstring).

    ``template`` is the pipeline's dataflow without checkpoints; ``outputs``
    its external outputs; ``known`` the available epochs found in the
    manifests; ``path`` the monitor's SQLite database (``None``: in memory).
    """

    #: recorded frontiers after which :meth:`compact` reopens the monitor from its pruned database
    REOPEN = 512
    #: write-ahead log size above which :meth:`compact` folds it back into the database
    WAL_BYTES = 1 << 20

    def __init__(
        self,
        template: Dataflow,
        *,
        outputs: Iterable[str] = (),
        known: Mapping[str, Iterable[int]] | None = None,
        path: str | os.PathLike[str] | None = None,
        monitor: bool = True,
        synchronous: str = "NORMAL",
        root: str | None = None,
    ) -> None:
        self.template = template
        #: the pipeline root the database caches (named in a :class:`~falkirk.spark.errors.StorageError`)
        self.root = root
        self.outputs = frozenset(outputs)
        self.path = Path(path) if path is not None else None
        self.use_monitor = monitor
        self.synchronous = synchronous
        self.stateless = {n for n, p in template.processors.items() if p.stateless}
        self.available: dict[str, list[int]] = {n: [] for n in template.processors}
        self._monitor: Any = None
        self._dirty = True
        self._pruned = False
        self._recorded = 0  # frontiers recorded since the monitor was (re)opened
        self._batching = 0  # depth of batch()
        # the monitor's batch holding this batch's uncommitted writes
        self._open_batch: ExitStack | None = None
        self.rebuilds = 0
        self.reopens = 0
        self.know(known or {})

    def know(self, known: Mapping[str, Iterable[int]]) -> None:
        """The available epochs found in the manifests (a stateless step keeps only its latest)."""
        for n, epochs in known.items():
            es = sorted(set(epochs))
            self.available[n] = es[-1:] if n in self.stateless else es
        self._dirty = True

    # -- reports ----------------------------------------------------------------------
    def record(self, step: str, epoch: int) -> None:
        """``step`` durably has a new available frontier at ``epoch`` (after its manifest was written)."""
        if self.available[step] and epoch <= self.available[step][-1]:
            self.truncate(step, epoch - 1)
        have = self.available[step]
        self.available[step] = [epoch] if step in self.stateless else [*have, epoch]
        if step in self.stateless and have:
            self._pruned = True  # its previous frontier is superseded: dropped from the monitor at compact()
        if self._dirty or self._monitor is None:
            return  # the rebuild on next use includes it
        self._recorded += 1
        try:
            self._join_batch()
            if step in self.outputs:
                self._monitor.acknowledge_output(step, epoch)
            else:
                self._monitor.record(step, Checkpoint(epoch))
        except MonitorError:
            self._dirty = True

    def truncate(self, step: str, keep: int) -> None:
        """A rollback of ``step`` to ``keep``: its frontiers above ``keep`` no longer exist."""
        have = self.available[step]
        kept = [e for e in have if e <= keep]
        if step in self.stateless and have and not kept and keep >= 0:
            kept = [keep]  # a stateless step rolled back to ``keep`` has completed exactly that
        if kept != have:
            self.available[step] = kept
            self._dirty = True

    def forget(self, step: str, epoch: int) -> None:
        """``step``'s frontier at ``epoch`` turned out unusable (deleted or corrupt data)."""
        if epoch in self.available[step]:
            self.available[step].remove(epoch)
            self._dirty = True

    def prune(self, step: str, below: int) -> None:
        """Garbage collection deleted ``step``'s frontiers strictly below ``below`` (dropped at
        :meth:`compact`)."""
        kept = [e for e in self.available[step] if e >= below]
        if kept != self.available[step]:
            self.available[step] = kept
            self._pruned = True

    def copy(self) -> Planner:
        """An in-memory planner with the same frontiers (no monitor, no database): for trying plans out."""
        return Planner(self.template, outputs=self.outputs, known=self.available, monitor=False)

    # -- batches ---------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[Planner]:
        """Defer the monitor's commits: its writes inside are committed together at :meth:`commit` and at
        exit.

        ``record`` and ``compact`` normally commit one SQLite transaction per
        recorded frontier and per discard (each writes the pages it changes
        to ``meta.sqlite-wal`` in full); the executor opens one batch around
        its run loop and calls :meth:`commit` at the end of every epoch, so
        an epoch's reports and garbage collection are one transaction. Plans
        and watermarks inside are the same as without a batch (the monitor
        answers from memory, and its store reads its own uncommitted writes).
        A rebuild of the monitor inside (after a rollback, :meth:`truncate`,
        :meth:`forget`) drops the old database with whatever it held and
        starts the new one outside any transaction; later writes join the
        batch again. Nested batches join the outermost one.

        Why deferring is safe: ``meta.sqlite`` is a cache of the manifests.
        Every planner starts dirty and rebuilds the database from the
        available frontiers found in the manifests on first use (it never
        opens the one an earlier driver left), so a crash that loses an
        uncommitted batch loses nothing the next driver reads. An exception
        that leaves the batch commits what the monitor acknowledged (it is
        in the monitor's memory as well); if a commit fails the monitor is
        marked dirty and rebuilt on next use, as after any monitor error.
        Meanwhile another process (``falkirk monitor --db … status``) sees
        the database as of the last commit: at most an epoch behind.
        """
        self._batching += 1
        try:
            yield self
        finally:
            self._batching -= 1
            if not self._batching:
                self._release_batch()

    def commit(self) -> None:
        """Inside :meth:`batch`: commit the monitor's writes so far (one transaction); the batch goes on."""
        self._release_batch()

    def _join_batch(self) -> None:
        """Inside :meth:`batch`, before a write: hold the monitor's batch open (begun once per commit)."""
        if self._batching and self._open_batch is None and self._monitor is not None:
            stack = ExitStack()
            stack.enter_context(self._monitor.batch())
            self._open_batch = stack

    def _release_batch(self) -> None:
        stack, self._open_batch = self._open_batch, None
        if stack is None:
            return
        try:
            stack.close()
        except MonitorError:
            # the store rolled the batch back (and the monitor reloaded, or closed): rebuild
            self._dirty = True

    # -- answers -------------------------------------------------------------------------
    def dataflow(self, live: Mapping[str, Checkpoint] | None = None) -> Dataflow:
        """The template with the available frontiers as checkpoints (and ``live`` metadata)."""
        cks = {n: [Checkpoint(e) for e in es] for n, es in self.available.items()}
        return with_checkpoints(self.template, cks, live)

    def plan(self, failed: Iterable[str] | str, live: Mapping[str, Checkpoint]) -> RollbackPlan:
        """The rollback plan when ``failed`` fail (``"all"``: a restarted driver)."""
        monitor = self._ensure()
        if monitor is None:
            return solve_frontiers(self.dataflow(live), failed)
        return monitor.plan_rollback(failed, live=dict(live))

    def watermarks(self) -> dict[str, int]:
        """The low-watermark of every step (``-1``: nothing can be collected yet)."""
        monitor = self._ensure()
        marks = (
            monitor.watermarks if monitor is not None else solve_frontiers(self.dataflow(), "all").frontiers
        )
        return {n: epoch_of(f) for n, f in marks.items()}

    # -- the monitor ------------------------------------------------------------------------
    def _ensure(self) -> Any:
        if not self.use_monitor:
            return None
        if self._monitor is not None and not self._dirty:
            stored = sum(len(self._monitor.checkpoints(n)) for n in self.available)
            if stored <= 4 * sum(map(len, self.available.values())) + 64:
                return self._monitor
        self._rebuild()
        return self._monitor

    def _rebuild(self) -> None:
        from falkirk.solver.monitor import Monitor

        # committed, though superseded: the new database is built from the available frontiers
        self._release_batch()
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None
        df = self.dataflow()
        if self.path is None:
            self._monitor = Monitor(df, outputs=self.outputs)
        else:
            with self._storage("rebuilding the monitor's database"):
                tmp = self.path.with_name(self.path.name + ".new")
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(str(tmp) + suffix).unlink(missing_ok=True)
                Monitor.create(df, tmp, outputs=self.outputs, synchronous=self.synchronous).close()
                for suffix in ("-wal", "-shm"):
                    Path(str(self.path) + suffix).unlink(missing_ok=True)
                os.replace(tmp, self.path)
                self._monitor = Monitor.open(self.path, synchronous=self.synchronous)
        self._dirty = False
        self._recorded = 0
        self.rebuilds += 1

    @contextmanager
    def _storage(self, what: str) -> Iterator[None]:
        """Turn a failure to write the monitor's database into a :class:`StorageError` naming the root, what
        was being done and the cause (a read-only root, a full disk…)."""
        from falkirk.spark.errors import StorageError

        try:
            yield
        except (OSError, sqlite3.Error, MonitorError) as exc:
            if isinstance(exc, StorageError) or (
                isinstance(exc, MonitorError) and not isinstance(exc.__cause__, (OSError, sqlite3.Error))
            ):
                raise  # a monitor refusing on its own grounds (a malformed graph…) is not the storage's failure
            where = f"root {self.root}" if self.root is not None else f"{self.path}"
            if isinstance(exc, sqlite3.Error):  # SQLite's words name neither the file nor a full disk
                from falkirk.solver.monitor.store import sqlite_cause

                cause = f"{type(exc).__name__}: {sqlite_cause(str(self.path), exc)}"
            else:
                cause = f"{type(exc).__name__}: {exc}" if isinstance(exc, MonitorError) else str(exc)
            raise StorageError(
                f"{where}: {what} ({self.path}, the planner's cache of the manifests) failed: {cause}; nothing under "
                "the root was changed by it. A run writes under its root: make it writable (or free space) and "
                "start again"
            ) from exc

    def compact(self) -> None:
        """After garbage collection: the monitor's database holds exactly the available checkpoints.

        Metadata of checkpoints garbage collection deleted (and of a
        stateless step's superseded frontiers) is dropped **in place**
        (:meth:`falkirk.solver.Monitor.discard`: one transaction, no
        re-solve — the watermarks cannot change), so ``falkirk monitor --db
        ROOT/meta.sqlite status`` agrees with the storage and the database
        stays bounded over a long run without being rebuilt each epoch. Its
        write-ahead log is then folded back into it (SQLite ``TRUNCATE``
        checkpoint) when it has grown. The in-memory solver keeps the
        resolved metadata of what was dropped (harmless: nothing below a
        watermark is chosen) until the monitor is reopened from its database,
        every :attr:`REOPEN` recorded frontiers. Only frontiers a rollback
        abandoned (:meth:`truncate`, :meth:`forget`) rebuild the database.
        """
        if self._pruned and self._monitor is not None and not self._dirty:
            try:
                self._join_batch()
                for n, es in self.available.items():
                    keep = set(es)
                    gone = [c.frontier for c in self._monitor.checkpoints(n) if c.frontier not in keep]
                    if gone:
                        self._monitor.discard(n, gone)
            except MonitorError:
                self._dirty = True  # not in place after all: rebuilt from the available frontiers on next use
        self._pruned = False
        if self._recorded >= self.REOPEN and not self._dirty and self._monitor is not None:
            self._reopen()
        self._ensure()
        wal = Path(f"{self.path}-wal") if self.path is not None else None
        if wal is not None and wal.exists() and wal.stat().st_size > self.WAL_BYTES:
            self.commit()  # the checkpoint below (another connection) cannot pass an open write transaction
            with self._storage("checkpointing the write-ahead log of the monitor's database"):
                db = sqlite3.connect(self.path)  # type: ignore[arg-type]
                try:
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    db.close()  # a connection left open would hold the database's -wal/-shm files until collected

    def _reopen(self) -> None:
        """The monitor again from its (pruned) database, or in memory from the available frontiers: bounded
        memory."""
        from falkirk.solver.monitor import Monitor

        self.commit()  # reopened from the database: it must hold everything recorded
        if self._dirty:  # the commit failed: rebuilt on next use
            return
        self._monitor.close()
        self._monitor = None
        if self.path is None:
            self._monitor = Monitor(self.dataflow(), outputs=self.outputs)
        else:
            self._monitor = Monitor.open(self.path, synchronous=self.synchronous)
        self._recorded = 0
        self.reopens += 1

    def close(self) -> None:
        """Close the monitor's database (committing an open batch's writes first)."""
        self._release_batch()
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None
            self._dirty = True

    def __repr__(self) -> str:
        return f"<Planner: {len(self.available)} steps, monitor={'sqlite' if self.path else 'memory' if self.use_monitor else 'off'}>"
