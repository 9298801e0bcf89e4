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

Layout::

    root/pipeline.json              the pipeline's shape (checked on restart)
    root/meta.sqlite                the monitor's metadata (a cache of the manifests; local roots)
    root/input/<name>/...           input logs (falkirk.spark.pipeline.store.inputlog)
    root/manifests/<step>/<kind>/<epoch>.json
    root/data/<step>/<kind>/<epoch>-<id>/part-*.parquet
    root/output/<step>/epoch=<e>/   external output (overwritten per epoch)

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

import contextlib
import json
import os
import posixpath
import sqlite3
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import field, frozen

from falkirk.spark.errors import CorruptDataError, PipelineError, StorageError
from falkirk.spark.pipeline.store.fscalls import DEFAULT_TIMEOUT
from falkirk.spark.pipeline.store.rootfs import Root

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["KINDS", "FileEntry", "Manifest", "Storage", "as_root", "database_path", "committed_epochs",
           "DATABASE_COMMITS"]

#: What a manifest can describe.
KINDS = ("checkpoint", "log", "complete", "output")
FORMAT = "falkirk-manifest/1"
#: The Hadoop setting (a write option) that makes Spark's file committer write a ``_SUCCESS`` file: off for
#: falkirk's writes, whose manifests say what is complete
NO_SUCCESS_MARKER = "mapreduce.fileoutputcommitter.marksuccessfuljobs"


def as_root(
    root: Root | str | os.PathLike[str], *, fsync: bool = True, storage_options: Mapping[str, Any] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Root:
    """``root`` as a :class:`~falkirk.spark.pipeline.store.rootfs.Root` (a path or URI is opened with the options)."""
    if isinstance(root, Root):
        if storage_options:
            raise StorageError(f"root {root.uri}: it is already open; give storage_options to the Root, not here")
        return root
    return Root(root, fsync=fsync, storage_options=storage_options, timeout=timeout)


@frozen
class FileEntry:
    """One data file of a manifest: name (relative to the manifest's location), size, checksum.

    ``sha256`` holds the checksum: ``sha256:<hex>`` computed by the driver, the
    filesystem's own (``etag:…``, ``md5hash:…``), a bare hex SHA-256 (older
    manifests), or ``""`` when checksums are off.
    """

    name: str
    size: int
    sha256: str


def _entries(value: Iterable[FileEntry]) -> tuple[FileEntry, ...]:
    return tuple(value)


def _mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})


@frozen
class Manifest:
    """What was durably written for ``step`` at ``epoch`` (``kind`` ∈ :data:`KINDS`).

    ``location`` is the data directory relative to the root (``None`` when the
    item has no Parquet data, e.g. a reported complete frontier); ``schema``
    is the DataFrame schema as JSON; ``extra`` holds kind-specific fields.
    """

    step: str
    kind: str
    epoch: int
    rows: int = 0
    location: str | None = None
    files: tuple[FileEntry, ...] = field(default=(), converter=_entries)
    schema: str | None = None
    extra: dict[str, Any] = field(factory=dict, converter=_mapping)

    def to_json(self) -> dict[str, Any]:
        """The manifest document."""
        return {
            "format": FORMAT,
            "step": self.step,
            "kind": self.kind,
            "epoch": self.epoch,
            "rows": self.rows,
            "location": self.location,
            "files": [[f.name, f.size, f.sha256] for f in self.files],
            "schema": self.schema,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Manifest:
        """Parse a manifest document (``KeyError``/``TypeError`` if malformed)."""
        if doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, expected {FORMAT!r}")
        return cls(
            doc["step"], doc["kind"], int(doc["epoch"]), int(doc["rows"]), doc["location"],
            [FileEntry(n, int(s), h) for n, s, h in doc["files"]], doc["schema"], doc["extra"],
        )


class Storage:
    """The durable storage of one pipeline under ``root`` (see the module docstring).

    ``root`` is a path, a URI or a :class:`~falkirk.spark.pipeline.store.rootfs.Root`
    (``storage_options`` and ``timeout`` open a path or URI: see ``docs/storage.md``).
    ``fsync`` makes local manifests and data files durable across a power loss;
    ``checksums`` records and verifies a checksum per data file (sizes are
    always checked).
    """

    def __init__(
        self, root: Root | str | os.PathLike[str], *, fsync: bool = True, checksums: bool = True,
        storage_options: Mapping[str, Any] | None = None, timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.fs = as_root(root, fsync=fsync, storage_options=storage_options, timeout=timeout)
        self.fsync = fsync
        self.checksums = checksums
        #: data directories this Storage wrote whose manifest was not published (yet): swept by sweep_unpublished
        self._unpublished: dict[str, None] = {}

    @property
    def root(self) -> str:
        """The root's URI (what Spark is given)."""
        return self.fs.uri

    # -- manifests ------------------------------------------------------------------
    def _manifest_rel(self, step: str, kind: str, epoch: int) -> str:
        if kind not in KINDS:
            raise StorageError(f"step {step}: unknown manifest kind {kind!r} (one of {list(KINDS)})")
        return f"manifests/{step}/{kind}/{epoch:08d}.json"

    def epochs(self, step: str, kind: str) -> list[int]:
        """The epochs for which a ``kind`` manifest of ``step`` exists, ascending."""
        d = posixpath.dirname(self._manifest_rel(step, kind, 0))
        return sorted(int(n[:-5]) for n in self.fs.listdir(d) if n.endswith(".json") and n[:-5].isdigit())

    def put(self, manifest: Manifest) -> None:
        """Publish ``manifest`` write-once, after checking that it proves its data.

        Refused with :class:`~falkirk.spark.errors.StorageError` when it
        claims rows but lists no data file, or when a file it lists is not
        visible with its size. Publishing the same document twice is a
        no-op; a different document for the same item is refused.
        """
        m = manifest
        if m.location is not None and m.rows > 0 and not m.files:
            raise StorageError(
                f"step {m.step}: refusing to publish {m.kind} at epoch {m.epoch}: it claims {m.rows} rows but no "
                f"data file is visible under {self.fs.describe(m.location)} (do the executors and the driver "
                "see the same storage?)"
            )
        if m.files:
            self._check_visible(m, problem=StorageError)
        rel = self._manifest_rel(m.step, m.kind, m.epoch)
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

    def get(self, step: str, kind: str, epoch: int) -> Manifest:
        """The manifest of ``step``'s ``kind`` at ``epoch`` (``CorruptDataError`` if absent or unreadable)."""
        rel = self._manifest_rel(step, kind, epoch)
        try:
            m = Manifest.from_json(json.loads(self.fs.read_bytes(rel)))
        except FileNotFoundError:
            raise CorruptDataError(step, kind, epoch, "is missing", path=rel) from None
        except StorageError:
            raise  # the store failed to answer: that is not a corrupt manifest
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptDataError(step, kind, epoch, f"is unreadable ({type(exc).__name__}: {exc})", path=rel) from None
        if (m.step, m.kind, m.epoch) != (step, kind, epoch):
            raise CorruptDataError(step, kind, epoch, f"describes {m.step}/{m.kind}/{m.epoch}", path=rel)
        return m

    def remove(self, step: str, kind: str, epoch: int) -> None:
        """Delete a manifest (first: the item stops existing) and then its data directory."""
        rel = self._manifest_rel(step, kind, epoch)
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
        for e in reversed(gone):  # newest first: a removal cut short leaves the older items, as a rollback would
            self.remove(step, kind, e)
        if gone and sync and self.fsync:
            self.fs.sync_dir(posixpath.dirname(self._manifest_rel(step, kind, 0)))
        return gone

    # -- Parquet data ---------------------------------------------------------------
    def new_location(self, step: str, kind: str, epoch: int) -> str:
        """A fresh data directory (relative to the root) for one item."""
        return f"data/{step}/{kind}/{epoch:08d}-{uuid.uuid4().hex[:12]}"

    def write_frame(
        self, df: DataFrame, step: str, kind: str, epoch: int, rows: int, *, location: str | None = None,
        partition_by: str | None = None, **extra: Any,
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
            checksum = self.fs.sync_file(posixpath.join(location, name), checksum=self.checksums, fsync=self.fsync)
            out.append(FileEntry(name, size, checksum))
            dirs.add(posixpath.dirname(name))
        if self.fsync:
            self.fs.sync_dir(location, dirs, created=True)
        return out

    def check_sizes(self, m: Manifest) -> None:
        """Check that every file ``m`` lists exists with its size (no data read); ``CorruptDataError`` if not."""
        self._check_visible(m, problem=CorruptDataError)

    def _check_visible(self, m: Manifest, *, problem: type[Exception]) -> None:
        for f in m.files:
            rel = posixpath.join(m.location or "", f.name)
            try:
                size = int(self.fs.info(rel).get("size") or 0)
            except FileNotFoundError:
                size = -1
            if size != f.size:
                what = "is missing" if size < 0 else f"has {size} bytes, expected {f.size}{self._recorded_in(m)}"
                if problem is StorageError:
                    raise StorageError(f"step {m.step}: refusing to publish {m.kind} at epoch {m.epoch}: "
                                       f"data file {self.fs.describe(rel)} {what}")
                raise CorruptDataError(m.step, m.kind, m.epoch, what, path=rel)

    def verify(self, m: Manifest) -> None:
        """Check that every file ``m`` lists exists with its size (and checksum); ``CorruptDataError`` if not."""
        self._check_visible(m, problem=CorruptDataError)
        if not self.checksums:
            return
        for f in m.files:
            if not f.sha256:
                continue
            rel = posixpath.join(m.location or "", f.name)
            want = f.sha256 if ":" in f.sha256 else f"sha256:{f.sha256}"
            if self.fs.checksum(rel) != want:
                kind = want.split(":", 1)[0].replace("sha256", "SHA-256")
                raise CorruptDataError(m.step, m.kind, m.epoch, f"fails its {kind} check{self._recorded_in(m)}",
                                       path=rel)

    def _recorded_in(self, m: Manifest) -> str:
        """Where the size or checksum a file is compared with comes from: either side may be the damaged one."""
        if m.kind not in KINDS:  # an input epoch: several segment manifests
            return ""
        return f" by {self._manifest_rel(m.step, m.kind, m.epoch)}"

    def _schema(self, m: Manifest) -> Any:
        """``m``'s schema (a ``StructType``); :class:`CorruptDataError` if it has none, or claims rows without files."""
        from pyspark.sql.types import StructType

        if m.schema is None:
            raise CorruptDataError(m.step, m.kind, m.epoch, "has no schema",
                                   path=self._manifest_rel(m.step, m.kind, m.epoch))
        if not m.files and m.rows > 0:
            raise CorruptDataError(m.step, m.kind, m.epoch, f"claims {m.rows} rows but lists no data file",
                                   path=self._manifest_rel(m.step, m.kind, m.epoch))
        return StructType.fromJson(json.loads(m.schema))

    def read_frame(self, spark: SparkSession, m: Manifest, *, verify: bool = True) -> DataFrame:
        """The DataFrame ``m`` describes, read from exactly its listed files (verified first)."""
        if verify:
            self.verify(m)
        schema = self._schema(m)
        if not m.files:
            return spark.createDataFrame([], schema)
        base = self.fs.spark_uri(m.location or "")
        reader = spark.read.schema(schema)
        if any("/" in f.name for f in m.files):  # partitioned directories: their values are columns
            reader = reader.option("basePath", base)
        return reader.parquet(*(f"{base}/{f.name}" for f in m.files))

    def read_tagged(self, spark: SparkSession, ms: Sequence[Manifest], column: str,
                    tags: Sequence[int] | None = None, *, verify: bool = True) -> DataFrame:
        """The rows of several manifests' data, read in **one scan**, each with ``column`` (an int): the tag of
        the manifest listing its file (``tags[i]`` for ``ms[i]``; default ``i``).

        Columns: the manifests' data columns by name (the first's order,
        then new ones; null where a file lacks one). Partition columns
        (``name=value/`` directories) are not read: the files of different
        manifests lie under different directories.

        One scan, not a union of one read per manifest: Spark plans,
        schedules and opens each scan apart, which for a chain of small
        checkpoints costs several times reading them. A row's manifest is
        told by its file's name (``_metadata.file_name``, unique per
        written file); if two manifests list files of the same name, or a
        column's type differs between them, they are read one by one and
        unioned instead.
        """
        from functools import reduce

        from pyspark.sql import functions as F
        from pyspark.sql.types import StructField, StructType

        tags = list(range(len(ms))) if tags is None else list(tags)
        if verify:
            for m in ms:
                self.verify(m)
        schemas = [self._schema(m) for m in ms]
        partition_cols = {part.split("=", 1)[0] for m in ms for f in m.files
                          for part in f.name.split("/")[:-1] if "=" in part}
        fields: dict[str, Any] = {}
        agree = True
        for schema in schemas:
            for fld in schema.fields:
                if fld.name in partition_cols:
                    continue
                if fld.name in fields and fields[fld.name].dataType != fld.dataType:
                    agree = False
                fields.setdefault(fld.name, StructField(fld.name, fld.dataType, True))
        merged = StructType(list(fields.values()))
        names = [f.name.rsplit("/", 1)[-1] for m in ms for f in m.files]
        if not names:
            return spark.createDataFrame([], merged).withColumn(column, F.lit(None).cast("int"))
        if not agree or len(set(names)) != len(names):
            frames = [self.read_frame(spark, m, verify=False).drop(*partition_cols).withColumn(column, F.lit(t))
                      for m, t in zip(ms, tags, strict=True)]
            return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
        paths = [f"{self.fs.spark_uri(m.location or '')}/{f.name}" for m in ms for f in m.files]
        tag_of = F.create_map(*[F.lit(v) for m, t in zip(ms, tags, strict=True) for f in m.files
                                for v in (f.name.rsplit("/", 1)[-1], t)])
        return (spark.read.schema(merged).parquet(*paths)
                .withColumn(column, F.element_at(tag_of, F.col("_metadata.file_name")).cast("int")))

    # -- housekeeping -----------------------------------------------------------------
    def referenced(self) -> set[str]:
        """Data directories named by a manifest."""
        refs = set()
        for step in self.fs.listdir("manifests"):
            for kind in self.fs.listdir(f"manifests/{step}"):
                for name in self.fs.listdir(f"manifests/{step}/{kind}"):
                    try:
                        loc = json.loads(self.fs.read_bytes(f"manifests/{step}/{kind}/{name}")).get("location")
                    except (FileNotFoundError, ValueError, AttributeError):  # removed meanwhile, or unreadable
                        continue
                    if loc:
                        refs.add(loc)
        return refs

    def sweep_unpublished(self) -> int:
        """Delete the data directories this Storage wrote and never published (a step that failed between its
        write and its manifest); the count removed. No manifest is read: what a crashed driver left behind is
        :meth:`sweep_orphans`' (at start-up)."""
        gone = list(self._unpublished)
        for rel in gone:
            self.fs.delete(rel, recursive=True)
        self._unpublished.clear()
        return len(gone)

    def sweep_orphans(self, steps: Iterable[str] | None = None) -> int:
        """Delete data directories no manifest names (left by a crash or replaced); how many held files.

        Empty ones are deleted without being counted: on an object store a
        directory is only a name prefix, which some servers keep listing for
        a moment after its last object went.

        Reads every manifest under the root: run it at start-up (a crashed
        driver's leftovers); during a run, :meth:`sweep_unpublished` finds the
        same directories without reading anything.
        """
        refs = self.referenced()
        removed = 0
        names = list(steps) if steps is not None else self.fs.listdir("data")
        for step in names:
            for kind in self.fs.listdir(f"data/{step}"):
                for item in self.fs.listdir(f"data/{step}/{kind}"):
                    rel = f"data/{step}/{kind}/{item}"
                    if rel in refs:
                        continue
                    held = next(iter(self.fs.walk_files(rel)), None) is not None
                    if held or self.fs.isdir(rel):
                        self.fs.delete(rel, recursive=True)
                        removed += held
        return removed

    def size(self) -> int:
        """Bytes under the root."""
        return self.fs.size()

    def __repr__(self) -> str:
        return f"Storage({self.root!r})"


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
