"""An input log's segments: Parquet with the partition and offset columns, each proven by a write-once
manifest.

Layout under ``input/<name>/`` (the root may be a path or a URI)::

    part-<k>/<start>[@<batch>].json                    a segment's manifest
    part-<k>/<start>[@<batch>].<id>-<j>.parquet        its data, written by the driver (pyarrow)
    spark/<id>/_segment=<k>/part-*.parquet             its data, written by Spark's executors
    part-<k>/<start>[@<batch>].jsonl                   a segment written before Parquet (JSON lines)

A segment is the records one append gave partition ``k``, at offsets
``start .. start + rows - 1``. Its data files are written first, then its
**manifest** is published write-once (:meth:`Root.publish
<falkirk.spark.pipeline.store.rootfs.Root.publish>`): the segment exists
exactly when its manifest does. The manifest records the row count (the log's
end offsets and an epoch's files are found from manifests, never by reading
data) and every data file with its size and checksum, as
:class:`~falkirk.spark.pipeline.store.manifest.Manifest` does for checkpoints.
A crash before the manifest leaves unreferenced data files, which
:func:`sweep` deletes.

Why Parquet (and not Arrow IPC): Spark reads Parquet natively, with its
vectorised reader, column pruning and row-group statistics (a replay reads
only the columns a step uses, and a filter on ``_offset`` skips row groups);
Spark has no reader for Arrow IPC files, which would have to go through the
driver's Python. ``_offset`` is delta-encoded (an ascending range costs almost
nothing), ``_partition`` dictionary-encoded.

A record's partition is ``crc32(str(value)) % partitions`` of its key (as
before: a key keeps its partition across versions); records without a key
value are spread round-robin.

>>> import pyarrow as pa
>>> partitions(pa.array([5, None, 12, None]), None, 4, 0, 4)   # (partitions, next round-robin position)
(array([2, 0, 1, 1], dtype=int32), 2)
>>> [zlib.crc32(str(v).encode()) % 4 for v in (5, 12)]
[2, 1]
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import uuid
import zlib
from typing import TYPE_CHECKING, Any

from attrs import frozen

from falkirk.spark.errors import CorruptDataError, StorageError
from falkirk.spark.pipeline.store.arrowschema import log_fields
from falkirk.spark.pipeline.store.manifest import FileEntry
from falkirk.spark.pipeline.store.rootfs import Root

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = [
    "Segment",
    "SegmentManifest",
    "SegmentWriter",
    "list_segments",
    "parquet_options",
    "partitions",
    "read_manifest",
]

FORMAT = "falkirk-segment/1"
#: Values sampled to decide whether a column is worth a dictionary.
_SAMPLE = 8192
_NAME = re.compile(r"^(\d{12})(?:@([A-Za-z0-9_.-]+))?\.(json|jsonl)$")


@frozen
class Segment:
    """A segment of partition ``partition`` from offset ``start``: its manifest (or legacy JSON-lines
    file)."""

    partition: int
    start: int
    batch: str | None
    path: str  # relative to the root
    legacy: bool = False  # a JSON-lines file written before segments were Parquet


@frozen
class SegmentManifest:
    """What a segment holds: ``rows`` records from ``start``; its files, relative to ``location``."""

    input: str
    partition: int
    start: int
    rows: int
    batch: str | None
    location: str  # relative to the root
    files: tuple[FileEntry, ...]

    def to_json(self) -> dict[str, Any]:
        """The manifest document."""
        return {
            "format": FORMAT,
            "input": self.input,
            "partition": self.partition,
            "start": self.start,
            "rows": self.rows,
            "batch": self.batch,
            "location": self.location,
            "files": [[f.name, f.size, f.sha256] for f in self.files],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SegmentManifest:
        """Parse a manifest document (``ValueError``/``KeyError``/``TypeError`` if malformed)."""
        if doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, expected {FORMAT!r}")
        return cls(
            doc["input"],
            int(doc["partition"]),
            int(doc["start"]),
            int(doc["rows"]),
            doc["batch"],
            doc["location"],
            tuple(FileEntry(n, int(s), h) for n, s, h in doc["files"]),
        )


def segment_name(start: int, batch: str | None) -> str:
    """``<start>[@<batch>]``: the stem of a segment's manifest and of its driver-written data files."""
    return f"{start:012d}{'@' + batch if batch else ''}"


def list_segments(fs: Root, directory: str, partition: int) -> list[Segment]:
    """The segments of ``partition`` in offset order (a manifest wins over a legacy file at the same
    offset)."""
    where = f"{directory}/part-{partition}"
    return [
        Segment(partition, start, x.group(2), f"{where}/{x.group(0)}", legacy=x.group(3) == "jsonl")
        for start, x in sorted(_kept(fs.listdir(where)).items())
    ]


def _kept(names: list[str]) -> dict[int, re.Match[str]]:
    """The file the log reads at each offset, from a partition's sorted listing ``names``: the last manifest's
    name, else a legacy JSON-lines file's."""
    found: dict[int, re.Match[str]] = {}
    for name in names:
        m = _NAME.match(name)
        if m and (int(m.group(1)) not in found or m.group(3) == "json"):
            found[int(m.group(1))] = m
    return found


def _start(name: str) -> int:
    """The start offset in a segment's file name (one :data:`_NAME` matches)."""
    return int(name[:12])


def _manifests_at(names: list[str], start: int) -> list[str]:
    """The segment manifests (not legacy files) at offset ``start`` in a partition's listing ``names``."""
    return [n for n in names if n.endswith(".json") and _NAME.match(n) and _start(n) == start]


def read_manifest(fs: Root, seg: Segment, input: str, epoch: int) -> SegmentManifest:
    """The manifest of ``seg`` (a legacy segment: one from its line count); ``CorruptDataError`` if
    unreadable."""
    try:
        if seg.legacy:
            data = fs.read_bytes(seg.path)
            name = f"part-{seg.partition}/{posixpath.basename(seg.path)}"
            return SegmentManifest(
                input,
                seg.partition,
                seg.start,
                data.count(b"\n"),
                seg.batch,
                posixpath.dirname(posixpath.dirname(seg.path)),
                (FileEntry(name, len(data), ""),),
            )
        return SegmentManifest.from_json(json.loads(fs.read_bytes(seg.path)))
    except FileNotFoundError:
        raise CorruptDataError(
            input, "input", epoch, "disappeared (a segment of the input log)", path=seg.path
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorruptDataError(
            input,
            "input",
            epoch,
            f"is unreadable (a segment manifest: {type(exc).__name__}: {exc})",
            path=seg.path,
        ) from None


# -- partitions -----------------------------------------------------------------------------------
def _crc_table() -> np.ndarray:
    import numpy as np

    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0xEDB88320), t >> 1)
    return t


def crc32_strings(arr: pa.Array) -> np.ndarray:
    """``zlib.crc32`` of ``str`` of every value of ``arr`` (integers or strings, no nulls), vectorised.

    Each distinct value is hashed once when they are few (a key of users, not
    of events); the hashing runs over byte positions, the shortest strings
    dropping out first.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(arr) > 4096:
        enc = pc.dictionary_encode(arr)
        if len(enc.dictionary) * 2 < len(arr):
            return crc32_strings(enc.dictionary)[enc.indices.to_numpy(zero_copy_only=False)]
    arr = pc.cast(arr, pa.string())
    n = len(arr)
    table = _crc_table()
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    data = np.frombuffer(arr.buffers()[2] or b"\0", dtype=np.uint8)
    lengths = np.diff(offsets)
    longest = int(lengths.max()) if n else 0
    order = np.argsort(longest - lengths, kind="stable")  # longest first: position i is a prefix of the order
    at = offsets[:-1][order].astype(np.int64)
    remaining = np.bincount(lengths, minlength=longest + 1)[::-1].cumsum()[::-1]  # strings longer than i
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    for i in range(longest):
        m = int(remaining[i + 1])
        c = crc[:m]
        crc[:m] = table[(c ^ data[at[:m]]) & 0xFF] ^ (c >> 8)
        at[:m] += 1
    out = np.empty(n, dtype=np.uint32)
    out[order] = crc ^ np.uint32(0xFFFFFFFF)
    return out


def partitions(
    keys: pa.Array | None, raw: list[Any] | None, count: int, spread: int, rows: int
) -> tuple[np.ndarray, int]:
    """The partition of each of ``rows`` records and the next round-robin position.

    ``keys``: the key column as Arrow (``None``: no key); ``raw``: the same
    values as given (their ``str`` is hashed when the column is neither
    integers nor strings). Records without a key value take positions
    ``spread, spread + 1, …`` modulo ``count``.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = rows
    if keys is None or count == 1:
        nulls = np.ones(n, dtype=bool) if keys is None else pc.is_null(keys).to_numpy(zero_copy_only=False)
        out = np.zeros(n, dtype=np.int32)
    else:
        nulls = pc.is_null(keys).to_numpy(zero_copy_only=False)
        out = np.zeros(n, dtype=np.int32)
        valid = ~nulls
        if valid.any():
            present = keys.filter(pa.array(valid)) if nulls.any() else keys
            if (
                pa.types.is_integer(present.type)
                or pa.types.is_string(present.type)
                or pa.types.is_large_string(present.type)
            ):
                hashes = crc32_strings(present)
            else:
                assert raw is not None
                hashes = np.fromiter((zlib.crc32(str(v).encode()) for v in raw if v is not None), np.uint32)
            out[valid] = (hashes % np.uint32(count)).astype(np.int32)
    spread_rows = int(nulls.sum())
    if spread_rows:
        out[nulls] = ((spread + np.arange(spread_rows)) % count).astype(np.int32)
    return out, spread + spread_rows


def parquet_options(table: pa.Table | pa.RecordBatch) -> dict[str, Any]:
    """How segments are written: Snappy, delta encoding for ``_offset``, a dictionary for columns whose values
    repeat.

    pyarrow's default tries a dictionary for every column and falls back to
    plain encoding once the dictionary passes 1 MB: on a column of distinct
    values (timestamps, amounts, ids) that is work for nothing, repeated in
    every file. So a top-level column whose first :data:`_SAMPLE` values are
    mostly distinct is written plain.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = (
        pa.schema([*table.schema, *log_fields()]) if "_offset" not in table.column_names else table.schema
    )
    key = schema.to_string(show_field_metadata=False, show_schema_metadata=False)
    if key not in _LEAVES:
        empty = io.BytesIO()
        pq.write_table(schema.empty_table(), empty)
        _LEAVES[key] = [c.path for c in pq.ParquetFile(io.BytesIO(empty.getvalue())).schema]
    distinct = {
        name
        for name in table.column_names
        if name not in ("_partition", "_offset")
        and not _nested(table.schema.field(name).type)
        and pc.count_distinct(table.column(name).slice(0, _SAMPLE)).as_py() * 2 > min(_SAMPLE, table.num_rows)
    }
    dictionary = [p for p in _LEAVES[key] if p != "_offset" and p.split(".")[0] not in distinct]
    return {
        "use_dictionary": dictionary,
        "column_encoding": {"_offset": "DELTA_BINARY_PACKED"},
        "compression": "snappy",
    }


_LEAVES: dict[str, list[str]] = {}


# -- writing --------------------------------------------------------------------------------------
class SegmentWriter:
    """The segments of one append: data files as chunks arrive, manifests at :meth:`commit`.

    ``ends``: every partition's end offset before the append; ``skip``:
    partitions that already hold this batch (a re-sent batch).
    """

    def __init__(
        self,
        fs: Root,
        directory: str,
        input: str,
        ends: dict[int, int],
        batch: str | None,
        *,
        skip: set[int],
        checksums: bool,
    ) -> None:
        self.fs, self.dir, self.input, self.batch = fs, directory, input, batch
        self.start = dict(ends)
        self.next = dict(ends)
        self.skip = skip
        self.checksums = checksums
        self.id = uuid.uuid4().hex[:8]
        self.files: dict[int, list[FileEntry]] = {}
        self._written: list[str] = []
        self._published: set[int] = set()

    def offset(self, partition: int) -> int:
        """The offset the next record of ``partition`` gets."""
        return self.next[partition]

    def add(self, batch: pa.RecordBatch, parts: np.ndarray) -> None:
        """Append the records of ``batch`` (the declared fields) to the partitions ``parts`` names, in
        order."""
        import numpy as np
        import pyarrow as pa

        if not batch.num_rows:
            return
        counts = np.bincount(parts, minlength=max(self.next) + 1)
        whole = len(counts) == 1 or counts.max() == batch.num_rows
        options: dict[str, Any] | None = None
        for k, n in enumerate(counts.tolist()):
            if n == 0:
                continue
            start = self.next[k]
            # also where a re-sent partition is skipped: the offsets a bad record would get
            self.next[k] = start + n
            if k in self.skip:
                continue
            piece = batch if whole else batch.filter(pa.array(parts == k))
            options = options or parquet_options(batch)  # once per chunk: the same for every partition
            table = (
                pa.Table.from_batches([piece])
                .append_column("_partition", pa.array(np.full(n, k, dtype=np.int32)))
                .append_column("_offset", pa.array(np.arange(start, start + n, dtype=np.int64)))
            )
            self._write(k, table, options)

    def _write(self, k: int, table: pa.Table, options: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(table, buf, **options)
        data = buf.getvalue()
        name = f"{segment_name(self.start[k], self.batch)}.{self.id}-{len(self.files.get(k, ()))}.parquet"
        rel = f"{self.dir}/part-{k}/{name}"
        self.fs.publish(rel, data)
        self._written.append(rel)
        checksum = self.fs.checksum(rel) if self.checksums else ""
        self.files.setdefault(k, []).append(FileEntry(f"part-{k}/{name}", len(data), checksum))

    def abort(self) -> None:
        """Delete the data files written so far that no published manifest names."""
        for rel in self._written:
            partition = int(rel[len(self.dir) + len("/part-") :].split("/", 1)[0])
            if partition not in self._published:
                self.fs.delete(rel)

    def commit(self) -> dict[int, int]:
        """Publish a manifest per partition written to; how many records went to each."""
        written = {}
        published: list[SegmentManifest] = []
        for k in sorted(self.files):
            rows = self.next[k] - self.start[k]
            m = SegmentManifest(
                self.input, k, self.start[k], rows, self.batch, self.dir, tuple(self.files[k])
            )
            publish_manifest(self.fs, self.dir, m)
            self._published.add(k)
            published.append(m)
            written[k] = rows
        check_alone(self.fs, self.dir, published)
        return written


def _nested(t: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_nested(t))


def publish_manifest(fs: Root, directory: str, m: SegmentManifest) -> None:
    """Publish ``m`` write-once as ``part-<k>/<start>[@<batch>].json`` (``FileExistsError`` if there); the
    appender then checks its segments (:func:`check_alone`)."""
    rel = f"{directory}/part-{m.partition}/{segment_name(m.start, m.batch)}.json"
    fs.publish(rel, json.dumps(m.to_json(), sort_keys=True).encode())


def check_alone(fs: Root, directory: str, published: list[SegmentManifest]) -> None:
    """After an append published ``published``: no other append published a segment at the same offset of the
    same partition, or one overlapping.

    A log takes one appender at a time. Two at once can compute the same
    start offset for a partition; where their manifests' names are the same
    (the same batch key, or none) the second publish fails, otherwise both
    publish and readers keep one (:func:`list_segments`: the last name): the
    other's records would be lost without a word. Each appender looks once it
    has published, so the later one sees both and raises
    :class:`~falkirk.spark.errors.StorageError` naming the segment the log
    reads and those whose records are not in it, which may be its own or the
    other appender's. What it published stays published.

    A third appender that starts at the end of one of the two (the one
    published first, say) makes segments that overlap without sharing a
    start, where the log reads the other, longer one: the segment the log
    reads at an offset of the new one's, or just before it, must end at or
    before the next one's start. Whichever of the appenders looks after the
    overlapping segments are both published raises, naming both, the offsets
    both hold and how to repair the log; if neither looks after both (each
    checked before the other published), readers of an epoch spanning both
    raise (:mod:`.inputread`). A gap (a segment that ends before the next
    starts) is not an error here: readers name it for the epochs it holds.
    Only a segment sharing its offset with another is read for this (on the
    path of an error, never for a log appended to one appender at a time).
    """
    for m in published:
        where = f"{directory}/part-{m.partition}"
        names = fs.listdir(where)
        _check_overlaps(fs, where, m, names)
        same = _manifests_at(names, m.start)
        if len(same) > 1:
            kept, lost = same[-1], same[:-1]
            raise StorageError(
                f"input {m.input}: partition {m.partition} has {len(same)} segments at offset {m.start} "
                f"({', '.join(same)}): appends ran at once, and a log takes one appender at a time. It reads "
                f"{kept}; the records in {', '.join(lost)} are not in it. Whoever appended them must append "
                f"them again once the other append has ended (with their batch key, a partition whose last "
                f"segment is already theirs is skipped; without one, every partition is written again)"
            )


def _check_overlaps(fs: Root, where: str, m: SegmentManifest, names: list[str]) -> None:
    """:func:`check_alone`'s look, after ``m`` was published at ``where`` (listing ``names``), at the segment the
    log reads just before ``m``'s offset and the one it reads at it (``m``, or another manifest at its offset
    with a later name), each against the one after it: ``StorageError`` if they overlap. A segment's rows are
    read only where its offset holds more than one manifest (a race's mark: otherwise ``m`` was appended at its
    end); one gone meanwhile (collected), unreadable (a reader names it), or written as JSON lines (an older
    log's) is not looked at."""
    found = _kept(names)
    kept = {start: x.group(0) for start, x in found.items() if x.group(3) == "json"}
    starts = sorted(found)
    mine = segment_name(m.start, m.batch) + ".json"
    before = max((s for s in starts if s < m.start), default=None)
    for start in (s for s in (before, m.start) if s is not None):
        name = kept.get(start)
        nxt = min((s for s in starts if s > start), default=None)
        if name is None or nxt is None:
            continue
        if name == mine:
            rows: int | None = m.rows
        elif len(_manifests_at(names, start)) > 1:
            rows = _rows(fs, f"{where}/{name}")
        else:
            continue
        if rows is None or nxt >= start + rows:
            continue
        after = found[nxt].group(0)
        theirs = (
            m.rows if after == mine else _rows(fs, f"{where}/{after}") if after.endswith(".json") else None
        )
        hi = min(start + rows, nxt + theirs) if theirs else start + rows
        raise StorageError(
            f"input {m.input}: partition {m.partition}: segments {name} and {after} both hold offsets "
            f"{nxt}..{hi - 1}: appends ran at once, and a log takes one appender at a time. The log cannot "
            f"tell which records those offsets are, and reading an epoch over them fails. "
            + overlap_remedy(fs, where, name, after, names)
        )


def _rows(fs: Root, path: str) -> int | None:
    """The rows of the segment manifest at ``path``, ``None`` if it is gone or cannot be read."""
    try:
        return int(json.loads(fs.read_bytes(path))["rows"])
    except (OSError, ValueError, KeyError, TypeError, StorageError):
        return None


def overlap_remedy(fs: Root, where: str, first: str, second: str, names: list[str]) -> str:
    """How to repair the partition at ``where`` (listing ``names``) where segments ``first`` and ``second``
    (manifest names, ``first`` the lower offset) overlap.

    Where ``first`` shares its offset with other manifests, the log reads it in place of one of them; if
    ``second`` starts where one of those ends (it was appended after it), removing the others makes the log
    consistent, and the one kept holds records an error at that offset said were left out. Read on an error's
    path only."""
    at = _start(first)
    shared = _manifests_at(names, at)
    follow = next(
        (n for n in shared if n != first and _rows(fs, f"{where}/{n}") == _start(second) - at), None
    )
    keep = (
        "copy them out first: their manifests name their files, which are garbage once no manifest names them"
    )
    if follow is not None:
        others = [n for n in shared if n != follow]
        return (
            f"To repair it once every append has ended: remove {', '.join(f'{where}/{n}' for n in others)}, "
            f"so that the log reads {follow}, which {second} follows, and append the removed segments' "
            f"records again ({keep}). {follow}'s records are then read: do not append them again, though "
            f"an error at offset {at} may have said they were left out"
        )
    return (
        f"To repair it once every append has ended: remove manifests until each offset is in one segment (at "
        f"offset {at}: {', '.join(shared)}; {second} and those after it), and append the removed segments' "
        f"records again ({keep})"
    )


def sweep(fs: Root, directory: str, partition: int, below: int, keep: set[str]) -> int:
    """Delete data files of ``partition`` starting below offset ``below`` that no manifest in ``keep`` names;
    bytes freed."""
    freed = 0
    where = f"{directory}/part-{partition}"
    for name in fs.listdir(where):
        if (
            name.endswith(".parquet")
            and name[:12].isdigit()
            and int(name[:12]) < below
            and f"part-{partition}/{name}" not in keep
        ):
            freed += fs.size(f"{where}/{name}")
            fs.delete(f"{where}/{name}")
    return freed
