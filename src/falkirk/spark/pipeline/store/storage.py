"""Durable storage under one root: Parquet data plus a write-once JSON manifest per item.

Every checkpoint, logged epoch, reported complete frontier and committed
output epoch of a step is described by a **manifest**,
``manifests/<step>/<kind>/<epoch>.json``, published write-once
(:meth:`~falkirk.spark.pipeline.store.rootfs.Root.publish`) *after* its data is
written and seen. The manifest is the only source of truth that the item
exists, and it **proves its data**: it lists every data file with its size
and a checksum, taken from what the driver sees through the root's
filesystem — the same storage the executors wrote to. A manifest that would
claim rows with no file behind it is refused at publish time
(:class:`~falkirk.spark.errors.StorageError`): that is what a root on one
machine's local disk produces on a cluster, where the executors' files stay
on their own disks. :meth:`Storage.verify` then detects a missing, truncated
or altered file (:class:`~falkirk.spark.errors.CorruptDataError`), so the
item is treated as unavailable instead of silently yielding wrong data.

All I/O goes through :class:`~falkirk.spark.pipeline.store.rootfs.Root`, so the
root may be a path or a URI (``file://``, ``s3a://``, ``gs://``, ``abfss://``…).

:class:`Storage` publishes, reads and verifies items; one module per role
beside it: :mod:`~falkirk.spark.pipeline.store.manifest` (the document:
:class:`Manifest`, :class:`FileEntry`, where it is published),
:mod:`~falkirk.spark.pipeline.store.frames` (reading items back with Spark),
:mod:`~falkirk.spark.pipeline.store.sweep` (data no manifest names),
:mod:`~falkirk.spark.pipeline.store.manifestcache` (manifests an object
store's check need not read again) and
:mod:`~falkirk.spark.pipeline.store.eagerdb` (an Eager step's SQLite
database). The names they define are importable from here as before.

Layout::

    root/pipeline.json              the pipeline's shape (checked on restart)
    root/meta.sqlite                the monitor's metadata (a cache of the manifests; local roots)
    root/input/<name>/...           input logs (falkirk.spark.pipeline.store.inputlog)
    root/manifests/<step>/<kind>/<epoch>.json
    root/data/<step>/<kind>/<epoch>-<id>/part-*.parquet
    root/output/<step>/epoch=<e>/   external output (overwritten per epoch)

On an object store the monitor's ``meta.sqlite`` and ``manifests.sqlite``
(:mod:`~falkirk.spark.pipeline.store.manifestcache`: manifests already read,
by MD5) live on the driver's disk, under ``$FALKIRK_CACHE``: caches, never
the truth.

>>> s = Storage("memory://falkirk-doc/storage")
>>> s.put(Manifest("cc", "checkpoint", 5, rows=0))
>>> s.epochs("cc", "checkpoint"), s.get("cc", "checkpoint", 5).rows
([5], 0)
>>> s.get("cc", "checkpoint", 4)
Traceback (most recent call last):
...
falkirk.spark.errors.CorruptDataError: manifests/cc/checkpoint/00000004.json is missing (step cc: checkpoint at epoch 4 is unusable)
>>> s.put(Manifest("cc", "checkpoint", 6, rows=3, location="data/cc/checkpoint/6"))
Traceback (most recent call last):
...
falkirk.spark.errors.StorageError: step cc: refusing to publish checkpoint at epoch 6: it claims 3 rows but no data file is visible under memory://falkirk-doc/storage/data/cc/checkpoint/6 (do the executors and the driver see the same storage?)
"""

from __future__ import annotations

import json
import os
import posixpath
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import CorruptDataError, StorageError
from falkirk.spark.pipeline.store import collected, frames, sweep
from falkirk.spark.pipeline.store.eagerdb import DATABASE_COMMITS, committed_epochs, database_path
from falkirk.spark.pipeline.store.fscalls import DEFAULT_TIMEOUT
from falkirk.spark.pipeline.store.manifest import KINDS, FileEntry, Manifest, manifest_path
from falkirk.spark.pipeline.store.manifestcache import ManifestCache, content_md5
from falkirk.spark.pipeline.store.rootfs import Root, metadata_cache

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = [
    "KINDS",
    "FileEntry",
    "Manifest",
    "Storage",
    "as_root",
    "database_path",
    "committed_epochs",
    "DATABASE_COMMITS",
]

#: The Hadoop setting (a write option) that makes Spark's file committer write a ``_SUCCESS`` file: off for
#: falkirk's writes, whose manifests say what is complete
NO_SUCCESS_MARKER = "mapreduce.fileoutputcommitter.marksuccessfuljobs"


def as_root(
    root: Root | str | os.PathLike[str],
    *,
    fsync: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Root:
    """``root`` as a :class:`~falkirk.spark.pipeline.store.rootfs.Root` (a path or URI is opened with the
    options)."""
    if isinstance(root, Root):
        if storage_options:
            raise StorageError(
                f"root {root.uri}: it is already open; give storage_options to the Root, not here"
            )
        return root
    return Root(root, fsync=fsync, storage_options=storage_options, timeout=timeout)


#: kinds of manifest whose claimed rows are checked against their Parquet files' footers before publishing
#: (:meth:`Storage.put`): what a step wrote and readers consume as a whole (checkpoints can hold other rows
#: than they count: a keyed delta)
ROWS_CHECKED = frozenset({"output", "log"})


class Storage:
    """The durable storage of one pipeline under ``root`` (see the module docstring).

    ``root`` is a path, a URI or a :class:`~falkirk.spark.pipeline.store.rootfs.Root`
    (``storage_options`` and ``timeout`` open a path or URI: see ``docs/storage.md``).
    ``fsync`` makes local manifests and data files durable across a power loss;
    ``checksums`` records and verifies a checksum per data file (sizes are
    always checked).
    """

    def __init__(
        self,
        root: Root | str | os.PathLike[str],
        *,
        fsync: bool = True,
        checksums: bool = True,
        storage_options: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.fs = as_root(root, fsync=fsync, storage_options=storage_options, timeout=timeout)
        self.fsync = fsync
        self.checksums = checksums
        #: manifests read from an object store, by MD5 (made on first use: :meth:`verify_all`)
        self._manifests: ManifestCache | None = None
        #: data directories this Storage wrote whose manifest was not published (yet): swept by
        #: sweep_unpublished
        self._unpublished: dict[str, None] = {}

    @property
    def root(self) -> str:
        """The root's URI (what Spark is given)."""
        return self.fs.uri

    # -- manifests ------------------------------------------------------------------
    def epochs(self, step: str, kind: str) -> list[int]:
        """The epochs for which a ``kind`` manifest of ``step`` exists, ascending."""
        d = posixpath.dirname(manifest_path(step, kind, 0))
        return sorted(int(n[:-5]) for n in self.fs.listdir(d) if n.endswith(".json") and n[:-5].isdigit())

    def put(self, manifest: Manifest) -> None:
        """Publish ``manifest`` write-once, after checking that it proves its data.

        Refused with :class:`~falkirk.spark.errors.StorageError` when it
        claims rows but lists no data file, when a file it lists is not
        visible with its size, or (an output or a log) when its Parquet
        files' footers do not hold the rows it claims. Publishing the same
        document twice is a no-op; a different document for the same item
        is refused.
        """
        m = manifest
        own = f"data/{m.step}/{m.kind}"
        loc = m.location
        if (
            loc is not None
            and loc.startswith("data/")
            and (posixpath.dirname(loc) != own or posixpath.normpath(loc) != loc)
        ):
            raise StorageError(
                f"step {m.step}: refusing to publish {m.kind} at epoch {m.epoch}: its data {loc!r} is not a "
                f"directory directly under {own}/ (a manifest names data of its own step and kind; the start-up "
                "sweep relies on it)"
            )
        if m.location is not None and m.rows > 0 and not m.files:
            raise StorageError(
                f"step {m.step}: refusing to publish {m.kind} at epoch {m.epoch}: it claims {m.rows} rows but no "
                f"data file is visible under {self.fs.describe(m.location)} (do the executors and the driver "
                "see the same storage?)"
            )
        if m.files:
            self._check_visible(m, problem=StorageError)
            if m.kind in ROWS_CHECKED:
                self._check_rows(m)
        rel = manifest_path(m.step, m.kind, m.epoch)
        data = json.dumps(m.to_json(), sort_keys=True).encode()
        if m.location is not None:
            self._unpublished.pop(m.location, None)
        try:
            self.fs.publish(rel, data)
        except FileExistsError:
            if self.fs.read_bytes(rel) != data:
                raise StorageError(
                    f"step {m.step}: {m.kind} at epoch {m.epoch} is already published with different contents "
                    f"({self.fs.describe(rel)}); manifests are write-once"
                ) from None

    def _check_rows(self, m: Manifest) -> None:
        """Refuse ``m`` (:class:`~falkirk.spark.errors.StorageError`) unless its Parquet files hold the rows it
        claims, read from their footers: a file the storage lost or cut short between Spark's write and the
        driver's listing is not in the listing, so checking sizes alone would publish the rest as the whole
        (the S3 soak at seed 58: an output epoch of 30 rows published with the file of 12, the other lost by
        the executors' FUSE mount while the server was down). The rows claimed are those counted when the frame
        was computed; the message names both causes, since a nondeterministic step computed a second time (a task
        retried) can write other rows than were counted."""
        if m.location is None or m.rows < 0 or not all(f.name.endswith(".parquet") for f in m.files):
            return
        found = self.fs.parquet_rows({posixpath.join(m.location, f.name): f.size for f in m.files})
        if any(n is None for n in found.values()):  # an encrypted footer: its rows are not readable here
            return
        wrong = {rel: what for rel, what in found.items() if isinstance(what, str)}
        held = sum(n for n in found.values() if isinstance(n, int))
        if wrong or held != m.rows:
            said = "; ".join(f"{self.fs.describe(rel)} {what}" for rel, what in sorted(wrong.items()))
            raise StorageError(
                f"step {m.step}: refusing to publish {m.kind} at epoch {m.epoch}: its {len(m.files)} data file(s) "
                f"under {self.fs.describe(m.location)} hold {held} rows, not the {m.rows} counted"
                + (f" ({said})" if said else "")
                + ": a file lost or cut short by the storage between the write and the listing, or a count that "
                "is not of these rows (a nondeterministic step computed again, e.g. by a retried task); nothing is "
                "published, and the epoch is written again"
            )

    def get(self, step: str, kind: str, epoch: int) -> Manifest:
        """The manifest of ``step``'s ``kind`` at ``epoch`` (``CorruptDataError`` if absent or unreadable)."""
        rel = manifest_path(step, kind, epoch)
        try:
            raw = self.fs.read_bytes(rel)
        except FileNotFoundError:
            raise CorruptDataError(step, kind, epoch, "is missing", path=rel) from None
        return self._parse(step, kind, epoch, raw)

    def _parse(self, step: str, kind: str, epoch: int, raw: bytes) -> Manifest:
        rel = manifest_path(step, kind, epoch)
        try:
            m = Manifest.from_json(json.loads(raw))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptDataError(
                step, kind, epoch, f"is unreadable ({type(exc).__name__}: {exc})", path=rel
            ) from None
        if (m.step, m.kind, m.epoch) != (step, kind, epoch):
            raise CorruptDataError(step, kind, epoch, f"describes {m.step}/{m.kind}/{m.epoch}", path=rel)
        return m

    def verify_all(
        self, step: str, kind: str, *, select: Callable[[list[int]], Collection[int]] | None = None
    ) -> tuple[int, list[CorruptDataError]]:
        """Every ``kind`` manifest of ``step`` (or those ``select`` picks from the epochs listed) and the files
        it lists checked as :meth:`verify` checks one: ``(manifests checked, one problem per damaged epoch)``.

        ``select`` is called once, with a copy of the committed epochs listed (ascending), before any
        manifest is read; the epochs it returns that are not among them are skipped.

        The same checks with a cost that does not grow by a request per file: the data is listed once (with
        an object store's ETags, the checksums it records there) and the manifests are read together
        (concurrently on an object store). Checked one by one (a read, then a size and a checksum request
        per file), the S3 soak's restarts grew by ~0.06 s per epoch of history for its two outputs. On a
        local root, when ``select`` picks less than half of them, each one's directory is listed instead of the
        step's whole data, so the cost follows the epochs checked, not the history (on an object store one
        listing of 1,000 files is one request: cheaper than a request per epoch).
        """
        folder = posixpath.dirname(manifest_path(step, kind, 0))
        # an object store's listing gives each manifest's checksum: those kept from an earlier read are not read
        listing = None if self.fs.local else self.fs.files(folder)
        if listing is None:
            every = self.epochs(step, kind)
        else:
            names = (posixpath.basename(rel) for rel in listing if posixpath.dirname(rel) == folder)
            every = sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())
        epochs = every
        if select is not None:
            wanted = set(select(list(every)))
            epochs = [e for e in every if e in wanted]
        raws = self._read_manifests(folder, [manifest_path(step, kind, e) for e in epochs], listing)
        manifests: dict[int, Manifest] = {}
        problems: list[CorruptDataError] = []
        for e in epochs:
            raw = raws[manifest_path(step, kind, e)]
            try:
                if isinstance(raw, FileNotFoundError):  # deleted since it was listed
                    raise CorruptDataError(step, kind, e, "is missing", path=manifest_path(step, kind, e))
                manifests[e] = self._parse(step, kind, e, raw)
            except CorruptDataError as err:
                problems.append(err)
        # one listing per step directory the manifests point into (``output/<name>``, ``data/<name>``), or per
        # epoch's directory when only a few of the epochs are checked
        few = self.fs.local and 2 * len(epochs) < len(every)
        tops = {
            m.location if few else "/".join(m.location.split("/")[:2])
            for m in manifests.values()
            if m.location
        }
        listed: dict[str, dict[str, Any]] = {}
        for top in sorted(tops):
            listed.update(self.fs.files(top))
        for m in manifests.values():
            try:
                self.verify(m, listed.get)
            except CorruptDataError as err:
                problems.append(err)
        return len(epochs), sorted(problems, key=lambda p: p.epoch)

    def _read_manifests(
        self, folder: str, rels: list[str], listing: Mapping[str, Mapping[str, Any]] | None
    ) -> dict[str, bytes | FileNotFoundError]:
        """Manifests ``rels`` of ``folder``: those whose MD5 ``listing`` gives and the driver's
        :class:`~falkirk.spark.pipeline.store.manifestcache.ManifestCache` holds from there, the others
        read together (and kept)."""
        md5s = {}
        if listing is not None:
            for rel in rels:
                md5 = content_md5(listing.get(rel) or {})
                if md5 is not None:
                    md5s[rel] = md5
        if not md5s or listing is None:
            return self.fs.read_many(rels)
        if self._manifests is None:
            self._manifests = ManifestCache(lambda: metadata_cache(self.fs).with_name("manifests.sqlite"))
        kept = self._manifests.get(md5s)
        read = self.fs.read_many([rel for rel in rels if rel not in kept])
        self._manifests.keep({rel: raw for rel, raw in read.items() if isinstance(raw, bytes)}, md5s)
        self._manifests.forget_others(folder, listing)
        return {**read, **kept}

    def remove(self, step: str, kind: str, epoch: int) -> None:
        """Delete a manifest (first: the item stops existing) and then its data directory."""
        rel = manifest_path(step, kind, epoch)
        try:
            m = self.get(step, kind, epoch)
        except CorruptDataError:
            m = None
        self.fs.delete(rel)
        if m is not None and m.location and m.location.startswith("data/"):
            self.fs.delete(m.location, recursive=True)

    def remove_where(self, step: str, kind: str, keep: Any, *, sync: bool = False) -> list[int]:
        """Remove every ``kind`` manifest of ``step`` whose epoch fails ``keep(epoch)``; the removed epochs.

        ``sync``: the removals are durable when this returns (a rollback's:
        a power loss must not bring back an item above the frontier it
        chose); garbage collection's need not be (an item below the
        low-watermark that comes back is never chosen, and is collected again).
        """
        gone = [e for e in self.epochs(step, kind) if not keep(e)]
        # newest first: a removal cut short leaves the older items, as a rollback would
        for e in reversed(gone):
            self.remove(step, kind, e)
        if gone and sync and self.fsync:
            self.fs.sync_dir(posixpath.dirname(manifest_path(step, kind, 0)))
        return gone

    # -- Parquet data ---------------------------------------------------------------
    def new_location(self, step: str, kind: str, epoch: int) -> str:
        """A fresh data directory (relative to the root) for one item."""
        return f"data/{step}/{kind}/{epoch:08d}-{uuid.uuid4().hex[:12]}"

    def write_frame(
        self,
        df: DataFrame,
        step: str,
        kind: str,
        epoch: int,
        rows: int,
        *,
        location: str | None = None,
        partition_by: str | None = None,
        **extra: Any,
    ) -> Manifest:
        """Write ``df`` as Parquet (into ``location`` or a fresh directory) and describe what the driver sees.

        ``partition_by``: a column whose values become subdirectories
        (``col=value/part-*``; keyed checkpoints, :mod:`falkirk.spark.pipeline.store.keyed`).
        The returned manifest is *not* published: call :meth:`put` once
        everything that belongs to the item is written (it refuses a
        manifest whose files the driver cannot see).
        """
        location = location or self.new_location(step, kind, epoch)
        if location.startswith("data/"):
            self._unpublished[location] = None  # until put() publishes a manifest naming it
        # no _SUCCESS marker: a manifest, not a marker, says an item is complete, and the marker's job commit
        # cost about 0.06 CPU-s per write (a tiny write then costs what a count of the same frame does)
        writer = df.write.mode("overwrite").option(NO_SUCCESS_MARKER, "false")
        if partition_by is not None:
            writer = writer.partitionBy(partition_by)
        writer.parquet(self.fs.spark_uri(location))
        files = self.describe_files(location)
        return Manifest(step, kind, epoch, rows, location, files, df.schema.json(), extra)

    def write_collected(
        self,
        df: DataFrame,
        step: str,
        kind: str,
        epoch: int,
        *,
        location: str | None = None,
        partition_by: str | None = None,
        table: pa.Table | None = None,
        vouched: bool = False,
        **extra: Any,
    ) -> Manifest | None:
        """:meth:`write_frame` for a ``df`` the caller knows is small, on a root this driver sees as the executors
        do: its rows collected as Arrow (``table``, where the caller collected them already) and written from the
        driver (:mod:`~falkirk.spark.pipeline.store.collected`), the manifest's ``rows`` those collected. Into
        ``location`` (what was there first is removed, as Spark's overwrite does) or a fresh directory. An empty
        partitioned ``df`` (or one with a null partition value) is written by Spark. ``None``, with nothing
        written, where its columns are not all of types written alike by both
        (:func:`~falkirk.spark.pipeline.store.collected.collectable`) or its session writes Parquet otherwise
        (:func:`~falkirk.spark.pipeline.store.collected.session_allows`; ``vouched``: the caller asked)."""
        if not collected.collectable(df.schema, partition_by):
            return None
        if not (vouched or collected.session_allows(df.sparkSession)):
            return None
        if table is None:
            table = df.toArrow()
        location = location or self.new_location(step, kind, epoch)
        nulls = partition_by is not None and table.column(partition_by).null_count > 0
        if partition_by is not None and (not table.num_rows or nulls):
            # Spark's files say what an empty partitioned item (or a null partition) is
            return self.write_frame(
                df, step, kind, epoch, table.num_rows, location=location, partition_by=partition_by, **extra
            )
        if location.startswith("data/"):
            self._unpublished[location] = None  # until put() publishes a manifest naming it
        else:  # an earlier attempt's files, never published (nothing when there are none: no look first)
            self.fs.delete(location, recursive=True)
        collected.write(self.fs, location, table, df.schema, partition_by, df.sparkSession.version)
        files = self.describe_files(location)
        if table.num_rows and not files:  # put()'s own refusal would ask about the executors: none wrote here
            raise StorageError(
                f"step {step}: the {kind} of epoch {epoch} was written from the driver under "
                f"{self.fs.describe(location)}, but no data file is visible there now (does the store list what "
                "was just written to it, or did something remove it?)"
            )
        return Manifest(step, kind, epoch, table.num_rows, location, files, df.schema.json(), extra)

    def describe_files(self, location: str) -> list[FileEntry]:
        """The data files (``part-*``) under ``location`` as the driver sees them: name, size, checksum.

        With ``fsync`` they are made durable here, before any manifest can
        name them: each listed file (one open: its checksum is computed from
        the same read), then the directories whose entries changed —
        ``location``'s subdirectories holding them, ``location`` and the
        directory holding ``location`` (Spark made it anew). Spark's
        ``_SUCCESS`` and ``.crc`` files are not listed and not flushed.
        """
        out = []
        dirs = set()
        for name, size in self.fs.walk_files(location):
            if not posixpath.basename(name).startswith("part-"):
                continue
            checksum = self.fs.sync_file(
                posixpath.join(location, name), checksum=self.checksums, fsync=self.fsync
            )
            out.append(FileEntry(name, size, checksum))
            dirs.add(posixpath.dirname(name))
        if self.fsync:
            self.fs.sync_dir(location, dirs, created=True)
        return out

    def check_sizes(self, m: Manifest) -> None:
        """Check that every file ``m`` lists exists with its size (no data read); ``CorruptDataError`` if
        not."""
        self._check_visible(m, problem=CorruptDataError)

    def _look_up(self, rel: str) -> dict[str, Any] | None:
        try:
            return self.fs.info(rel)
        except FileNotFoundError:
            return None

    def _check_visible(
        self,
        m: Manifest,
        *,
        problem: type[Exception],
        info_of: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        info_of = info_of or self._look_up
        for f in m.files:
            rel = posixpath.join(m.location or "", f.name)
            info = info_of(rel)
            size = -1 if info is None else int(info.get("size") or 0)
            if size != f.size:
                what = (
                    "is missing" if size < 0 else f"has {size} bytes, expected {f.size}{self._recorded_in(m)}"
                )
                if problem is StorageError:
                    raise StorageError(
                        f"step {m.step}: refusing to publish {m.kind} at epoch {m.epoch}: "
                        f"data file {self.fs.describe(rel)} {what}"
                    )
                raise CorruptDataError(m.step, m.kind, m.epoch, what, path=rel)

    def verify(self, m: Manifest, info_of: Callable[[str], Mapping[str, Any] | None] | None = None) -> None:
        """Check that every file ``m`` lists exists with its size (and checksum); ``CorruptDataError`` if
        not. ``info_of(rel)``: the filesystem's description of a file (``None``: absent), if already listed."""
        info_of = info_of or self._look_up
        self._check_visible(m, problem=CorruptDataError, info_of=info_of)
        if not self.checksums:
            return
        for f in m.files:
            if not f.sha256:
                continue
            rel = posixpath.join(m.location or "", f.name)
            want = f.sha256 if ":" in f.sha256 else f"sha256:{f.sha256}"
            if self.fs.checksum(rel, info=dict(info_of(rel) or {})) != want:
                kind = want.split(":", 1)[0].replace("sha256", "SHA-256")
                raise CorruptDataError(
                    m.step, m.kind, m.epoch, f"fails its {kind} check{self._recorded_in(m)}", path=rel
                )

    def _recorded_in(self, m: Manifest) -> str:
        """Where the size or checksum a file is compared with comes from: either side may be the damaged
        one."""
        if m.kind not in KINDS:  # an input epoch: several segment manifests
            return ""
        return f" by {manifest_path(m.step, m.kind, m.epoch)}"

    # -- reading the data back with Spark (defined in falkirk.spark.pipeline.store.frames) ----------
    read_frame = frames.read_frame
    read_tagged = frames.read_tagged
    read_many = frames.read_many
    read_partitioned = frames.read_partitioned

    # -- housekeeping -----------------------------------------------------------------
    def sweep_unpublished(self) -> int:
        """Delete the data directories this Storage wrote and never published (a step that failed between its
        write and its manifest); the count removed. No manifest is read: what a crashed driver left behind is
        :meth:`sweep_orphans`' (at start-up)."""
        gone = list(self._unpublished)
        for rel in gone:
            self.fs.delete(rel, recursive=True)
        self._unpublished.clear()
        return len(gone)

    # data no manifest names, found by reading the manifests that can name it (falkirk.spark.pipeline.store.sweep)
    referenced = sweep.referenced
    sweep_orphans = sweep.sweep_orphans

    def size(self) -> int:
        """Bytes under the root."""
        return self.fs.size()

    def __repr__(self) -> str:
        return f"Storage({self.root!r})"
