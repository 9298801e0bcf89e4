"""Durable storage under one root: Parquet data plus an atomic JSON manifest per item.

Every checkpoint, logged epoch, reported complete frontier and committed
output epoch of a step is described by a **manifest**,
``manifests/<step>/<kind>/<epoch>.json``, written with ``os.replace`` *after*
its data is written. The manifest is the only source of truth that the item
exists; it lists the data files with their sizes and SHA-256 checksums, so a
deleted or corrupt file is detected (:meth:`Storage.verify` raises
:class:`~falkirk.spark.errors.CorruptDataError`) and the item is treated as
unavailable instead of silently yielding wrong data.

Layout::

    root/pipeline.json              the pipeline's shape (checked on restart)
    root/meta.sqlite                the monitor's metadata (falkirk.solver.Monitor)
    root/input/<name>/...           input logs (falkirk.spark.pipeline.inputlog)
    root/manifests/<step>/<kind>/<epoch>.json
    root/data/<step>/<kind>/<epoch>-<id>/part-*.parquet
    root/output/<step>/epoch=<e>/   external output (overwritten per epoch)

>>> import tempfile
>>> s = Storage(tempfile.mkdtemp())
>>> s.put(Manifest("cc", "checkpoint", 5, rows=3))
>>> s.epochs("cc", "checkpoint"), s.get("cc", "checkpoint", 5).rows
([5], 3)
>>> s.get("cc", "checkpoint", 4)
Traceback (most recent call last):
...
falkirk.spark.errors.CorruptDataError: step cc: checkpoint at epoch 4 is unusable: no manifest
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import field, frozen

from falkirk.spark.errors import CorruptDataError, StorageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["KINDS", "FileEntry", "Manifest", "Storage", "write_json_atomic", "tree_size"]

#: What a manifest can describe.
KINDS = ("checkpoint", "log", "complete", "output")
FORMAT = "falkirk-manifest/1"


def write_json_atomic(path: Path, obj: Any, *, fsync: bool = True) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (temporary file, then ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, sort_keys=True)
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
    os.replace(tmp, path)


def tree_size(path: Path) -> int:
    """Total size in bytes of the files under ``path`` (0 if it does not exist)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:
                pass
    return total


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@frozen
class FileEntry:
    """One data file of a manifest: name (relative to the manifest's location), size, SHA-256."""

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

    ``fsync`` makes manifests and data files durable across a power loss (a
    killed process needs only ``os.replace``); ``checksums`` records and
    verifies SHA-256 of data files (sizes are always checked).
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True, checksums: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self.checksums = checksums
        self.root.mkdir(parents=True, exist_ok=True)

    # -- manifests ------------------------------------------------------------------
    def _manifest_path(self, step: str, kind: str, epoch: int) -> Path:
        if kind not in KINDS:
            raise StorageError(f"step {step}: unknown manifest kind {kind!r} (one of {list(KINDS)})")
        return self.root / "manifests" / step / kind / f"{epoch:08d}.json"

    def epochs(self, step: str, kind: str) -> list[int]:
        """The epochs for which a ``kind`` manifest of ``step`` exists, ascending."""
        d = self._manifest_path(step, kind, 0).parent
        if not d.is_dir():
            return []
        return sorted(int(p.stem) for p in d.glob("*.json") if p.stem.isdigit())

    def put(self, manifest: Manifest) -> None:
        """Publish ``manifest`` atomically (after its data was written)."""
        write_json_atomic(self._manifest_path(manifest.step, manifest.kind, manifest.epoch), manifest.to_json(), fsync=self.fsync)

    def get(self, step: str, kind: str, epoch: int) -> Manifest:
        """The manifest of ``step``'s ``kind`` at ``epoch`` (``CorruptDataError`` if absent or unreadable)."""
        path = self._manifest_path(step, kind, epoch)
        try:
            with open(path, encoding="utf-8") as fh:
                m = Manifest.from_json(json.load(fh))
        except FileNotFoundError:
            raise CorruptDataError(step, kind, epoch, "no manifest") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptDataError(step, kind, epoch, f"manifest {path} is unreadable ({exc})") from None
        if (m.step, m.kind, m.epoch) != (step, kind, epoch):
            raise CorruptDataError(step, kind, epoch, f"manifest {path} describes {m.step}/{m.kind}/{m.epoch}")
        return m

    def remove(self, step: str, kind: str, epoch: int) -> None:
        """Delete a manifest (first: the item stops existing) and then its data directory."""
        path = self._manifest_path(step, kind, epoch)
        try:
            m = self.get(step, kind, epoch)
        except CorruptDataError:
            m = None
        path.unlink(missing_ok=True)
        if m is not None and m.location and m.location.startswith("data/"):
            shutil.rmtree(self.root / m.location, ignore_errors=True)

    def remove_where(self, step: str, kind: str, keep: Any) -> list[int]:
        """Remove every ``kind`` manifest of ``step`` whose epoch fails ``keep(epoch)``; the removed epochs."""
        gone = [e for e in self.epochs(step, kind) if not keep(e)]
        for e in gone:
            self.remove(step, kind, e)
        return gone

    # -- Parquet data ---------------------------------------------------------------
    def new_location(self, step: str, kind: str, epoch: int) -> str:
        """A fresh data directory (relative to the root) for one item."""
        return f"data/{step}/{kind}/{epoch:08d}-{uuid.uuid4().hex[:12]}"

    def write_frame(
        self, df: DataFrame, step: str, kind: str, epoch: int, rows: int, *, location: str | None = None,
        partition_by: str | None = None, **extra: Any,
    ) -> Manifest:
        """Write ``df`` as Parquet (into ``location`` or a fresh directory) and describe it.

        ``partition_by``: a column whose values become subdirectories
        (``col=value/part-*``; keyed checkpoints, :mod:`falkirk.spark.pipeline.keyed`).
        The returned manifest is *not* published: call :meth:`put` once
        everything that belongs to the item is written.
        """
        location = location or self.new_location(step, kind, epoch)
        writer = df.write.mode("overwrite")
        if partition_by is not None:
            writer = writer.partitionBy(partition_by)
        writer.parquet(str(self.root / location))
        files = self._describe(self.root / location)
        return Manifest(step, kind, epoch, rows, location, files, df.schema.json(), extra)

    def _describe(self, directory: Path) -> list[FileEntry]:
        out = []
        for p in sorted(directory.rglob("part-*")):
            if self.fsync:
                fd = os.open(p, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            name = p.relative_to(directory).as_posix()
            out.append(FileEntry(name, p.stat().st_size, _sha256(p) if self.checksums else ""))
        return out

    def verify(self, m: Manifest) -> None:
        """Check that every file ``m`` lists exists with its size (and checksum); ``CorruptDataError`` if not."""
        base = self.root / (m.location or "")
        for f in m.files:
            p = base / f.name
            try:
                size = p.stat().st_size
            except OSError:
                raise CorruptDataError(m.step, m.kind, m.epoch, f"data file {p} is missing") from None
            if size != f.size:
                raise CorruptDataError(m.step, m.kind, m.epoch, f"data file {p} has {size} bytes, expected {f.size}")
            if self.checksums and f.sha256 and _sha256(p) != f.sha256:
                raise CorruptDataError(m.step, m.kind, m.epoch, f"data file {p} fails its SHA-256 check")

    def read_frame(self, spark: SparkSession, m: Manifest, *, verify: bool = True) -> DataFrame:
        """The DataFrame ``m`` describes, read from exactly its listed files (verified first)."""
        from pyspark.sql.types import StructType

        if verify:
            self.verify(m)
        if m.schema is None:
            raise CorruptDataError(m.step, m.kind, m.epoch, "the manifest has no schema")
        schema = StructType.fromJson(json.loads(m.schema))
        if not m.files:
            return spark.createDataFrame([], schema)
        base = self.root / (m.location or "")
        reader = spark.read.schema(schema)
        if any("/" in f.name for f in m.files):  # partitioned directories: their values are columns
            reader = reader.option("basePath", str(base))
        return reader.parquet(*(str(base / f.name) for f in m.files))

    # -- housekeeping -----------------------------------------------------------------
    def referenced(self) -> set[str]:
        """Data directories named by a manifest."""
        refs = set()
        mroot = self.root / "manifests"
        for p in mroot.glob("*/*/*.json") if mroot.is_dir() else ():
            try:
                with open(p, encoding="utf-8") as fh:
                    loc = json.load(fh).get("location")
            except (OSError, ValueError):
                continue
            if loc:
                refs.add(loc)
        return refs

    def sweep_orphans(self, steps: Iterable[str] | None = None) -> int:
        """Delete data directories no manifest names (left by a crash or replaced); the count removed."""
        refs = self.referenced()
        droot = self.root / "data"
        removed = 0
        names = list(steps) if steps is not None else ([p.name for p in droot.iterdir()] if droot.is_dir() else [])
        for step in names:
            for d in (droot / step).glob("*/*"):
                rel = d.relative_to(self.root).as_posix()
                if d.is_dir() and rel not in refs:
                    shutil.rmtree(d, ignore_errors=True)
                    removed += 1
        return removed

    def size(self) -> int:
        """Bytes under the root."""
        return tree_size(self.root)

    def __repr__(self) -> str:
        return f"Storage({str(self.root)!r})"
