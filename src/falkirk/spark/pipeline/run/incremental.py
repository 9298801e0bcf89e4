"""How a step's DataFrame state is checkpointed and read back: plain, keyed, or keyed snapshots and deltas.

A :class:`~falkirk.spark.pipeline.run.runners.StepRunner` with DataFrame
state (Lazy, Eager) owns one :class:`StateCheckpoints`:

==========================  ===========================================================
regime                      each checkpoint
==========================  ===========================================================
no ``key``                  the state as Parquet
``key=``                    the state by key group, one directory per partition
                            (:mod:`~falkirk.spark.pipeline.store.keyed`)
``key=, incremental=True``  every ``snapshot_every``-th epoch as with ``key=`` (a
                            snapshot); the others a delta from the epoch before
                            (:mod:`~falkirk.spark.pipeline.store.delta`); with
                            ``differential=True`` (and ``changes=True``), while the
                            base is the snapshot, every change since it (chained to
                            the snapshot alone: a restore reads two checkpoints)
``append=True``             the rows appended since the checkpoint before, chained to
                            it (a restore reads the chain's files in one scan, no key
                            resolved); the state whole when there is no chain in
                            memory, or it reached ``APPEND_CHAIN`` checkpoints
==========================  ===========================================================

Reading a checkpoint back follows its manifest, not the regime: a delta's
manifest names the chain it is restored through, so a step whose
``incremental`` or ``snapshot_every`` changed on a restart still restores
what it wrote before. Keyed state is redistributed into the step's current
number of partitions after the chain is applied (rescaling works through
deltas: every row carries its key group).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from falkirk.spark.errors import CorruptDataError, PipelineError
from falkirk.spark.pipeline.run.session import held_bytes, is_connect, materialised, shares_storage
from falkirk.spark.pipeline.store import collected, delta, keyed
from falkirk.spark.pipeline.store.jvm import once

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from falkirk.spark.pipeline.declare.regimes import Regime
    from falkirk.spark.pipeline.run.context import RunContext
    from falkirk.spark.pipeline.store.manifest import Manifest

__all__ = ["COLLECT_MAX_BYTES", "StateCheckpoints"]

#: a state made and held in at most this many bytes of Spark's cache has its full checkpoints collected and
#: written from the driver (:mod:`~falkirk.spark.pipeline.store.collected`), as has a ``changes=True`` step's
#: delta whose changes are made and held in at most as many: up to it, Spark's write job with its file committer
#: costs more than the collection (0.28-0.35x of its CPU from 13 kB to 1.4 MB held, 0.71-0.86x at 14 MB:
#: ``benchmarks/README.md``, "A small checkpoint written from the driver"), and the rows are few enough for the
#: driver to hold as Arrow
COLLECT_MAX_BYTES = 8 << 20


class StateCheckpoints:
    """Writes and reads the state checkpoints of step ``name`` (see the module docstring)."""

    def __init__(self, ctx: RunContext, name: str, regime: Regime) -> None:
        self.ctx = ctx
        self.name = name
        self.regime = regime
        self.key: str | None = getattr(regime, "key", None)
        #: the chain of the state in memory: the epochs of its snapshot and deltas, ending at its own
        self.chain: tuple[int, ...] | None = None
        #: chains of checkpoints seen (written or read) by epoch: garbage collection reads no manifest for
        #: them
        self.chains: dict[int, tuple[int, ...]] = {}
        #: after a restore that rescaled keyed state: (old partitions, new partitions, old read per new)
        self.rescaled: tuple[int, int, dict[int, list[int]]] | None = None
        #: whether the frame :meth:`read` returned last is its checkpoint's files read as they were written (one
        #: item: no chain resolved, no shuffle into other partitions)
        self.as_written = False
        #: a ``changes=True`` step's base that is the chain's snapshot, and that snapshot's epoch: with
        #: ``differential=True`` each delta holds all the changes since it (:meth:`write`)
        self.base: tuple[DataFrame, int] | None = None
        #: whether the session writes Parquet as pyarrow does (:func:`~.collected.session_allows`), once asked
        self._session_allows: bool | None = None

    def session_allows(self) -> bool:
        """Whether the session writes Parquet as pyarrow does (:func:`~.collected.session_allows`), asked once
        (the step's runner asks here too): a session writing Parquet otherwise would collect for nothing."""
        if self._session_allows is None:
            self._session_allows = collected.session_allows(self.ctx.spark)
        return self._session_allows

    # -- writing --------------------------------------------------------------------------------
    def write(
        self,
        state: DataFrame,
        previous: DataFrame | None,
        epoch: int,
        rows: int | None,
        *,
        changes: DataFrame | None = None,
        changes_held: DataFrame | None = None,
        changes_table: Any = None,
        layers: tuple[DataFrame, DataFrame | None] | None = None,
        appended: tuple[list[DataFrame], int, tuple[int, ...] | None] | None = None,
    ) -> Manifest:
        """Write the checkpoint of ``state`` after ``epoch`` (``previous``: the state after ``epoch - 1``).

        ``rows``: the state's rows when known (else a full checkpoint counts
        them, which also materialises the state; a delta's own job does).
        ``changes`` (a ``changes=True`` step): what the step returned, with
        ``_deleted`` — the delta as it is, no comparison of two states; the
        state's rows are not counted (a full checkpoint counts them while it
        writes). ``changes_held``: the detached frame ``changes`` is read from
        (``changes`` itself where not given); where it is made and small
        (:meth:`_small`), the delta is collected and written from the driver.
        ``changes_table``: ``changes`` tagged with their partitions
        (:func:`~falkirk.spark.pipeline.store.keyed.tagged`), collected
        already (Arrow): the delta is written from them with no job, where
        they are small.
        ``layers``: that step's base and the changes since it
        (``None``: none); with ``differential=True``, where the base is the
        chain's snapshot, the delta is those changes, chained to the snapshot
        alone (a restore reads two checkpoints and resolves no key).
        ``appended`` (an ``append=True`` step): the parts no checkpoint holds
        (made, in order), their rows, and the chain that holds the others —
        written alone, chained to it, where that is the chain in memory and
        shorter than ``APPEND_CHAIN``; else ``state`` whole starts a new
        chain.
        The manifest is not published (the runner does, after its ``mid`` point).
        """
        from pyspark.sql import functions as F

        storage, key = self.ctx.storage, self.key
        if key is None:
            if appended is None:
                self.chain = None
                return self._whole(state, state, epoch, rows, changes is not None)
            return self._append(state, epoch, rows, *appended)
        n, groups = self.regime.parallelism, self.regime.max_parallelism  # type: ignore[attr-defined]
        layout = {"key": key, "max_parallelism": groups, "parallelism": n}
        before = self.chain
        if self.writes_delta(epoch, previous):
            assert before is not None and previous is not None
            swapped = changes is not None and layers is not None and self._differential(layers)
            if swapped:
                # all the changes since the snapshot, in one delta
                assert layers is not None
                changes, changes_held, changes_table, before = layers[1], layers[1], None, before[:1]
            if changes is not None:  # the step's own changes, tagged with their partitions: no shuffle
                cols = tuple(c for c in changes.columns if c != delta.DELETED)

                def delta_columns() -> list[Column | str]:  # a tombstone's values null
                    gone = delta.gone()
                    values = [
                        c if c == key else F.when(gone, None).otherwise(F.col(c)).alias(c) for c in cols
                    ]
                    return [*values, keyed.SUBTASK, gone.alias(delta.DELETED)]

                laid_out = keyed.tagged(changes, key, n, groups).select(
                    *once(("delta-columns", key, cols), delta_columns)
                )
                held = changes if changes_held is None else changes_held
                if (
                    self.session_allows()
                    and collected.collectable(laid_out.schema, keyed.SUBTASK)
                    and self.ctx.frames.rows_of(held) != 0  # none: Spark's write says what an empty item is
                    and (
                        self._small_table(changes_table)
                        if changes_table is not None
                        else materialised(held) and self._small(held)
                    )
                ):
                    # made and small: collected and written from the driver (one job over the cache, no file
                    # committer), as a small full checkpoint is; its rows are those collected
                    m = storage.write_collected(
                        laid_out,
                        self.name,
                        "checkpoint",
                        epoch,
                        table=self._delta_table(
                            changes, held, laid_out, cols, changes_table, output=not swapped
                        ),
                        vouched=True,  # the session was asked above
                        partition_by=keyed.SUBTASK,
                        keyed=layout,
                        delta={"chain": list(before), "state_rows": rows},
                    )
                    if m is not None:
                        self.chain, self.chains[epoch] = (*before, epoch), before
                        return m
            else:
                delta.check_columns(state, self.name)
                # the manifest records the state's size (materialised)
                rows = state.count() if rows is None else rows
                # one shuffle into the checkpoint's layout, compared there; the write's job counts the rows
                diffs = delta.diff(
                    state, previous, key, place=lambda both: keyed.placed(both, key, n, groups)
                )
                laid_out = diffs.drop(keyed.SALT, keyed.KG)
            observing = self.ctx.frames.observing(laid_out)
            if observing is None:  # through Spark Connect: counted first, from memory
                persisted, written, count = laid_out.persist(), laid_out, None
            else:
                persisted, written, count = observing
            try:
                m = storage.write_frame(
                    written,
                    self.name,
                    "checkpoint",
                    epoch,
                    0 if count is not None else persisted.count(),
                    partition_by=keyed.SUBTASK,
                    keyed=layout,
                    delta={"chain": list(before), "state_rows": rows},  # None: not counted (changes=True)
                )
                if count is not None:
                    m = attrs.evolve(m, rows=count())
            finally:
                persisted.unpersist()
            self.chain = (*before, epoch)
        else:
            laid_out = keyed.tagged(state, key, n, groups)
            m = self._whole(
                laid_out, state, epoch, rows, changes is not None, partition_by=keyed.SUBTASK, keyed=layout
            )
            self.chain = (epoch,)
        if self.chain == (epoch,):  # a snapshot of a base with no changes on top: the next deltas' base
            self.base = (layers[0], epoch) if layers is not None and layers[1] is None else None
        self.chains[epoch] = self.chain[:-1]
        return m

    def _whole(
        self, written: DataFrame, state: DataFrame, epoch: int, rows: int | None, view: bool, **layout: Any
    ) -> Manifest:
        """Write ``written`` (``state``, perhaps laid out for a keyed checkpoint) whole. Its rows, where not
        known, are counted by the write's own job (a Spark observation) where the write reads ``state`` once
        and computes nothing twice — a view of layers (``view``), or a state made already (held in executor
        memory, e.g. by the job of an output computed from it); else counted first, which also materialises
        the state (its write then reads it from memory)."""
        storage = self.ctx.storage
        made = materialised(state)
        partition = layout.get("partition_by")
        if made and collected.collectable(written.schema, partition) and self._small(state):
            # collected and written from the driver: one job, no file committer
            m = storage.write_collected(written, self.name, "checkpoint", epoch, **layout)
            if m is not None:
                return m
        counting = self.ctx.frames.counting(written) if rows is None and (view or made) else None
        if counting is None:
            rows = state.count() if rows is None else rows
            return storage.write_frame(written, self.name, "checkpoint", epoch, rows, **layout)
        observed, count = counting
        m = storage.write_frame(observed, self.name, "checkpoint", epoch, 0, **layout)
        return attrs.evolve(m, rows=count())

    def _append(
        self,
        state: DataFrame,
        epoch: int,
        rows: int | None,
        parts: list[DataFrame],
        added: int,
        holds: tuple[int, ...] | None,
    ) -> Manifest:
        """The checkpoint of an ``append=True`` state after ``epoch`` (:meth:`write`): ``parts`` (``added`` rows)
        chained to the chain in memory, else ``state`` whole. Collected and written from the driver where every
        part is made and small (:meth:`_small`), as a full checkpoint of a made state is."""
        from falkirk.spark.pipeline.run.appended import union

        storage, before = self.ctx.storage, self.chain
        limit = int(getattr(self.regime, "APPEND_CHAIN", 32))
        if before is None or before != holds or len(before) >= limit:
            full = self._whole(state, state, epoch, rows, True)  # a full checkpoint, as without append=True
            self.chain = (epoch,)
            self.chains[epoch] = ()
            return full
        written = union(tuple(parts), self.name)
        if written is None:  # nothing appended since: an empty link
            written = state.limit(0)
        link: dict[str, Any] = {"chain": list(before), "append": True, "state_rows": rows}
        collected: Manifest | None = None
        if parts and all(materialised(p) for p in parts) and self._small_parts(parts):
            collected = storage.write_collected(written, self.name, "checkpoint", epoch, delta=link)
        m = collected or storage.write_frame(written, self.name, "checkpoint", epoch, added, delta=link)
        self.chain = (*before, epoch)
        self.chains[epoch] = before
        return m

    def _small_parts(self, parts: list[DataFrame]) -> bool:
        """Whether made ``parts`` together are small enough to be collected (:meth:`_small`)."""
        if not shares_storage(self.ctx.spark, self.ctx.storage.fs.object_store):
            return False
        total = 0
        # the first part of unknown size (or past the limit) settles it: the rest are not asked
        for p in parts:
            size = held_bytes(p)
            if size is None:
                return False
            total += size
            if total > COLLECT_MAX_BYTES:
                return False
        return True

    def _delta_table(
        self,
        changes: DataFrame,
        held: DataFrame,
        laid_out: DataFrame,
        cols: tuple[str, ...],
        got: Any,
        *,
        output: bool,
    ) -> Any:
        """The rows of the delta ``laid_out`` (``changes`` — ``held`` with ``_deleted`` — tagged with their
        partitions, a tombstone's values null) as ``laid_out.toArrow()`` would give them, from ``got`` (``changes``
        tagged, collected already) or else collected by one job that brings ``changes`` themselves: ``held``'s
        rows are then kept (``output``: ``held`` is the step's changes, not the changes since the snapshot) for
        the driver-side write of the step's output when that is ``held`` (:meth:`~.frames.Frames.collected`),
        which needs no job of its own. A tombstone's values are nulled here, as the delta's projection does in
        Spark."""
        import pyarrow as pa
        import pyarrow.compute as pc

        key, n, groups = self.key, self.regime.parallelism, self.regime.max_parallelism  # type: ignore[attr-defined]
        assert key is not None
        if got is None:
            got = keyed.tagged(changes, key, n, groups).toArrow()
            if output:
                self.ctx.frames.collected(held, got.select(held.columns))
        gone = pc.fill_null(got.column(delta.DELETED), False)
        columns = [
            got.column(c)
            if c == key
            else pc.if_else(gone, pa.scalar(None, got.schema.field(c).type), got.column(c))
            for c in cols
        ]
        # the types toArrow gives (the session's string widths), the nullability of the delta's own columns
        fields = [
            pa.field(f.name, got.schema.field(f.name).type, nullable=f.nullable)
            for f in laid_out.schema.fields
        ]
        return pa.Table.from_arrays([*columns, got.column(keyed.SUBTASK), gone], schema=pa.schema(fields))

    def _small_table(self, table: Any) -> bool:
        """Whether collected ``table`` is small enough (:data:`COLLECT_MAX_BYTES` in Arrow) to be written from the
        driver, whose view of the root is the executors'."""
        return table.nbytes <= COLLECT_MAX_BYTES and shares_storage(
            self.ctx.spark, self.ctx.storage.fs.object_store
        )

    def _small(self, state: DataFrame) -> bool:
        """Whether made ``state`` is small enough (:data:`COLLECT_MAX_BYTES` in Spark's cache) for its checkpoint
        to be collected and written from the driver, whose view of the root is the executors'."""
        if not shares_storage(self.ctx.spark, self.ctx.storage.fs.object_store):
            return False
        size = held_bytes(state)
        return size is not None and size <= COLLECT_MAX_BYTES

    def _differential(self, layers: tuple[DataFrame, DataFrame | None]) -> bool:
        """Whether the next delta of a ``changes=True`` step with ``layers`` (its base and the changes since) is
        those changes, chained to the snapshot alone: ``differential=True``, and its base is the snapshot the
        chain in memory starts from."""
        base, overlay = layers
        chain = self.chain
        return (
            bool(getattr(self.regime, "differential", False))
            and overlay is not None
            and self.base is not None
            and self.base[0] is base
            and chain is not None
            and chain[0] == self.base[1]
        )

    def writes_delta(self, epoch: int, previous: DataFrame | None) -> bool:
        """Whether the checkpoint after ``epoch`` is a delta (else a snapshot) given the state before it,
        ``previous``: incremental keyed state whose chain in memory ends at the epoch before and is shorter than
        the snapshot spacing."""
        before = self.chain
        return (
            self.key is not None
            and bool(getattr(self.regime, "incremental", False))
            and previous is not None
            and before is not None
            and before[-1] == epoch - 1
            # a chain in memory is unbroken from its snapshot (each delta the epoch after the last): its length,
            # unless it skips to the snapshot (a delta of the changes since it)
            and epoch - before[0] < self.regime.snapshot_spacing  # type: ignore[attr-defined]
        )

    def snapshot_horizon(self, epoch: int, previous: DataFrame | None) -> int | None:
        """If the checkpoint after ``epoch`` is a snapshot, the epochs until the next one (the snapshot spacing
        of incremental state, else the regime's ``every``; 1 for ``Eager``); ``None`` if ``epoch`` takes no
        checkpoint or a delta."""
        regime = self.regime
        if not regime.checkpoints_at(epoch) or self.writes_delta(epoch, previous):
            return None
        if getattr(regime, "incremental", False):
            return int(regime.snapshot_spacing)  # type: ignore[attr-defined]
        return int(getattr(regime, "every", 1))

    # -- reading --------------------------------------------------------------------------------
    def read(self, m: Manifest) -> DataFrame:
        """The state checkpoint ``m`` holds: keyed state through its chain, redistributed by key group into
        the step's partitions (checked by the recovery's plan: not verified again)."""
        storage, spark = self.ctx.storage, self.ctx.spark
        self.rescaled, self.as_written = None, False
        layout = m.extra.get("keyed")
        if layout is None:
            self.base = None
            if (m.extra.get("delta") or {}).get("append"):  # the chain's files in one scan
                before = delta.chain(m)
                items = [storage.get(self.name, "checkpoint", e) for e in before] + [m]
                self.chain, self.chains[m.epoch] = (*before, m.epoch), tuple(before)
                return storage.read_many(spark, items, verify=False)
            self.chain = (m.epoch,) if getattr(self.regime, "append", False) else None
            self.as_written = True
            return storage.read_frame(spark, m, verify=False)
        items = self._chain_of(m)
        if len(items) == 1:
            self.as_written = self._in_place(m)
            return self._snapshot(m)
        # the snapshot read apart, tagged 0 by a literal, and its deltas in one scan (tagged 1, 2, ... by their
        # files), resolved per key after the shuffle: a tag told by the file costs a lookup of its path per row,
        # which over the snapshot's rows cost as much as the rest of the restore (10^7 rows: 7.4 s of wall
        # against 3.8 s before the checkpoint's files lay in partition directories, whose longer names the
        # lookup compares)
        from pyspark.sql import functions as F

        key = layout["key"]
        base = self._snapshot_rows(items[0])
        changes = storage.read_tagged(spark, items[1:], delta.SEQ, tags=range(1, len(items)), verify=False)
        rows = base.withColumn(delta.SEQ, F.lit(0)).unionByName(changes, allowMissingColumns=True)
        state = keyed.restore(
            rows,
            key,
            self.regime.parallelism,  # type: ignore[attr-defined]
            layout["max_parallelism"],
            within=lambda d, by: delta.newest(d, key, [by]),
        )
        return state.drop(delta.SEQ, delta.DELETED)

    def read_layers(self, m: Manifest) -> tuple[DataFrame, DataFrame | None, int, int]:
        """Keyed checkpoint ``m`` as a ``changes=True`` step keeps its state
        (:class:`~falkirk.spark.pipeline.run.layers.Layers`): its chain's
        snapshot redistributed into the step's partitions (the base: what a
        full checkpoint's restore reads), and the deltas after it resolved
        into the changes they make together — per key the rows of the
        latest delta naming it, a removed key's tombstone kept, with
        ``_deleted`` (the overlay; ``None`` for a snapshot alone). The
        snapshot is neither tagged nor compared with the deltas: the view
        of the layers applies them. Also the snapshot's rows and, at most,
        the overlay's (the deltas' rows: a key named by several counts in
        each), from the manifests (no job)."""

        storage, spark = self.ctx.storage, self.ctx.spark
        items = self._chain_of(m)
        key = m.extra["keyed"]["key"]
        base = self._snapshot(items[0])
        if len(items) == 1:
            return base, None, m.rows, 0
        columns: list[Column | str] = [*base.columns, delta.gone().alias(delta.DELETED)]
        if len(items) == 2:  # one delta is resolved as it is: read as written, like the snapshot
            return base, self._snapshot(m).select(*columns), items[0].rows, m.rows
        rows = storage.read_tagged(spark, items[1:], delta.SEQ, tags=range(1, len(items)), verify=False)
        overlay = delta.newest(rows, key, tombstones=True).select(*columns)
        bound = sum(item.rows for item in items[1:])
        return base, overlay.coalesce(self.regime.parallelism), items[0].rows, bound  # type: ignore[attr-defined]

    def _snapshot(self, m: Manifest) -> DataFrame:
        """The rows of keyed checkpoint ``m`` (a snapshot, or a delta read alone) in the step's partitions, each
        key in the partition owning its key group: as written (one task per partition's directory, no shuffle)
        when the step's partitions are the checkpoint's, else (or through Spark Connect) redistributed by key
        group (a shuffle)."""
        storage, spark, n = self.ctx.storage, self.ctx.spark, self.regime.parallelism  # type: ignore[attr-defined]
        layout = m.extra["keyed"]
        if self._in_place(m):  # (older checkpoints' files hold a _kg)
            return storage.read_partitioned(spark, m, keyed.SUBTASK, n, verify=False).drop(keyed.KG)
        return keyed.restore(self._snapshot_rows(m), layout["key"], n, layout["max_parallelism"])

    def _in_place(self, m: Manifest) -> bool:
        """Whether keyed checkpoint ``m`` is read in the step's partitions as written (one task per partition's
        directory), not redistributed by key group."""
        n = self.regime.parallelism  # type: ignore[attr-defined]
        return bool(m.extra["keyed"]["parallelism"] == n and not is_connect(self.ctx.spark))

    def _snapshot_rows(self, m: Manifest) -> DataFrame:
        """The rows of keyed snapshot ``m`` where they are read (without its partition directory)."""
        return self.ctx.storage.read_frame(self.ctx.spark, m, verify=False).drop(keyed.SUBTASK)

    def _chain_of(self, m: Manifest) -> list[Manifest]:
        """The manifests of keyed checkpoint ``m``'s chain (its snapshot first, ``m`` last), checked against
        the step's layout; the chain in memory becomes it, and :attr:`rescaled` tells a change of
        partitions."""
        self.rescaled = None
        before = delta.chain(m)
        items = [self.ctx.storage.get(self.name, "checkpoint", e) for e in before] + [m]
        for item in items:
            self._check_layout(item)
        self.chain, self.base = (*before, m.epoch), None
        self.chains[m.epoch] = tuple(before)
        new = self.regime.parallelism  # type: ignore[attr-defined]
        differ = [
            item.extra["keyed"]["parallelism"] for item in items if item.extra["keyed"]["parallelism"] != new
        ]
        if differ:  # reported as the newest layout that differs (a chain may span a change of partitions)
            self.rescaled = (
                differ[-1],
                new,
                keyed.plan_rescale(differ[-1], new, m.extra["keyed"]["max_parallelism"]),
            )
        return items

    def _check_layout(self, m: Manifest) -> None:
        layout: dict[str, Any] = m.extra["keyed"]
        regime = self.regime
        if layout["key"] != self.key or layout["max_parallelism"] != getattr(regime, "max_parallelism", None):
            raise PipelineError(
                f"step {self.name!r}: its checkpoint at epoch {m.epoch} is keyed by {layout['key']!r} over "
                f"{layout['max_parallelism']} key groups; the step now declares key={self.key!r}, "
                f"max_parallelism={getattr(regime, 'max_parallelism', None)} (key groups cannot change)"
            )

    # -- retention --------------------------------------------------------------------------------
    def floor(self, lw: int) -> int:
        """The oldest checkpoint epoch garbage collection must keep so that ``lw`` stays restorable: the
        snapshot of its chain (``lw`` itself for a full checkpoint)."""
        if lw < 0 or (self.key is None and not getattr(self.regime, "append", False)):
            return lw
        if lw not in self.chains:
            try:
                self.chains[lw] = tuple(delta.chain(self.ctx.storage.get(self.name, "checkpoint", lw)))
            except CorruptDataError:  # no readable manifest at lw: nothing below it can make it restorable
                return lw
        before = self.chains[lw]
        for e in [e for e in self.chains if e < (before[0] if before else lw)]:
            del self.chains[e]
        return before[0] if before else lw

    def lose(self) -> None:
        """The state in memory is gone: the next checkpoint is a snapshot."""
        self.chain = self.base = None
