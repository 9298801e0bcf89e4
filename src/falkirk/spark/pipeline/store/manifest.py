"""The manifest: the write-once JSON document that says an item exists and proves its data.

Every checkpoint, logged epoch, reported complete frontier and committed
output epoch of a step is described by a :class:`Manifest` at
:func:`manifest_path` (``manifests/<step>/<kind>/<epoch>.json``), listing
each data file with its size and checksum (:class:`FileEntry`).
:class:`~falkirk.spark.pipeline.store.storage.Storage` publishes, reads and
verifies them; input logs describe their segments with the same
:class:`FileEntry` (:mod:`~falkirk.spark.pipeline.store.segments`).

>>> m = Manifest("cc", "checkpoint", 5, rows=2, location="data/cc/checkpoint/5", files=[FileEntry("part-0", 10, "")])
>>> Manifest.from_json(m.to_json()) == m, manifest_path("cc", "checkpoint", 5)
(True, 'manifests/cc/checkpoint/00000005.json')
>>> manifest_path("cc", "snapshot", 5)
Traceback (most recent call last):
...
falkirk.spark.errors.StorageError: step cc: unknown manifest kind 'snapshot' (one of ['checkpoint', 'log', 'complete', 'output'])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from attrs import field, frozen

from falkirk.spark.errors import StorageError

__all__ = ["KINDS", "FORMAT", "FileEntry", "Manifest", "manifest_path"]

#: What a manifest can describe.
KINDS = ("checkpoint", "log", "complete", "output")
FORMAT = "falkirk-manifest/1"


def manifest_path(step: str, kind: str, epoch: int) -> str:
    """Where the manifest of ``step``'s ``kind`` at ``epoch`` is published, relative to the root."""
    if kind not in KINDS:
        raise StorageError(f"step {step}: unknown manifest kind {kind!r} (one of {list(KINDS)})")
    return f"manifests/{step}/{kind}/{epoch:08d}.json"


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
            doc["step"],
            doc["kind"],
            int(doc["epoch"]),
            int(doc["rows"]),
            doc["location"],
            [FileEntry(n, int(s), h) for n, s, h in doc["files"]],
            doc["schema"],
            doc["extra"],
        )
