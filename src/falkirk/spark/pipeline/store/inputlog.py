"""A partitioned, append-only input log with offsets (the role Kafka plays), cut into epochs.

Each partition is a sequence of **segments**: Parquet files with the
``_partition`` and ``_offset`` columns, each proven by a write-once manifest
holding its row count and every file's size and checksum
(:mod:`~falkirk.spark.pipeline.store.segments`; the root may be a path or a
URI). An **epoch** is a recorded **cut**: the end offset of every partition,
``cuts/<epoch>.json`` (write-once), so epoch ``e`` is the records between cut
``e-1`` and cut ``e`` — a sequence→epoch projection. Once written, a cut never
changes: replaying an epoch re-reads exactly its records.
:meth:`InputLog.acknowledge` deletes segments that lie wholly inside an epoch
no step can roll back to any more (the monitor's low-watermark).

:meth:`InputLog.append` takes Python mappings, a ``pyarrow.Table`` or
``RecordBatch``, a pandas ``DataFrame``, a path (or a list of paths) of
Parquet files, or a Spark ``DataFrame`` — which Spark's executors write
themselves (:mod:`~falkirk.spark.pipeline.store.sparkinput`); the driver only
publishes the manifests. ``append(..., batch=key)`` is idempotent per key: a
producer that crashed half-way through a batch (some partitions written) can
simply send it again.

**Records are checked** against the declared schema, column by column with
pyarrow (:mod:`~falkirk.spark.pipeline.store.convert`; the rules are
:mod:`~falkirk.spark.pipeline.store.records`'): a bad record raises
:class:`~falkirk.spark.errors.RecordError` naming the input, partition,
offset and field, and nothing of the batch is written — or, with
``dead_letter=True``, bad records go to ``dead-letter/<batch>.jsonl`` beside
the log (with the reason; never garbage-collected) and the others are
appended. Only a chunk that fails the vectorised check is searched record by
record (halving it with the vectorised check first).

Logs written before segments were Parquet keep working: their JSON-lines
segments (``part-<k>/<start>[@<batch>].jsonl``) are read by Spark in
``FAILFAST`` mode beside the Parquet ones, and new appends are Parquet.

This module is the log's interface and its appends (with
:mod:`~falkirk.spark.pipeline.store.ingest`); one module per role beside
it: :mod:`~falkirk.spark.pipeline.store.inputcuts` (cutting epochs,
:class:`Cut`), :mod:`~falkirk.spark.pipeline.store.inputread` (reading an
epoch again, checking it is all there) and
:mod:`~falkirk.spark.pipeline.store.inputgc` (acknowledged epochs, garbage
collection). :class:`InputLog` exposes their functions as methods.

>>> log = InputLog("memory://falkirk-doc/inputlog", "events", "user BIGINT, v BIGINT", partitions=2, key="user")
>>> log.append([{"user": u, "v": 10 * u} for u in range(5)], batch="b0")
{0: 1, 1: 4}
>>> log.append([{"user": 9, "v": 90}], batch="b0")   # already sent: ignored
{}
>>> log.cut(0).end, log.end_offsets()
({0: 1, 1: 4}, {0: 1, 1: 4})
>>> import pyarrow as pa
>>> log.append(pa.table({"user": [7], "v": [70]}), batch="b1")
{0: 1}
>>> c = log.cut(1); (c.start, c.end)
({0: 1, 1: 4}, {0: 2, 1: 4})
>>> log.to_arrow(1).to_pylist()
[{'user': 7, 'v': 70, '_partition': 0, '_offset': 1}]
>>> log.append([{"user": 8, "v": "ten"}])
Traceback (most recent call last):
...
falkirk.spark.errors.RecordError: input 'events', partition 1, offset 4 (record 0 of the batch): field 'v': expected BIGINT, got str 'ten'; nothing of the batch was appended (fix the record, or declare the input with dead_letter=True to divert bad records)
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.store import ingest, inputcuts, inputgc, inputread
from falkirk.spark.pipeline.store import segments as seg
from falkirk.spark.pipeline.store.convert import Converter
from falkirk.spark.pipeline.store.inputcuts import Cut
from falkirk.spark.pipeline.store.records import RecordSchema, parse_schema
from falkirk.spark.pipeline.store.rootfs import Root
from falkirk.spark.pipeline.store.storage import as_root

if TYPE_CHECKING:
    import datetime as dt

    from pyspark.sql import SparkSession

__all__ = ["Cut", "InputLog"]

_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")


class InputLog:
    """The log of input ``name`` under ``directory`` (see the module docstring).

    ``schema`` is a Spark DDL string of the records' fields (checked at once:
    :class:`~falkirk.spark.errors.SchemaError`); ``key`` names the field that
    chooses the partition (``crc32(str(value)) % partitions``; records without
    a key value are spread round-robin); ``dead_letter`` diverts records that
    do not fit the schema to the dead-letter log instead of refusing the batch;
    ``checksums`` records a checksum per data file (verified before a replay);
    ``spark``: a session whose DDL parser and time zone the log uses (naive
    timestamps are read in it; without one, in the driver's local zone).
    """

    def __init__(
        self,
        directory: Root | str | os.PathLike[str],
        name: str,
        schema: str,
        *,
        partitions: int = 1,
        key: str | None = None,
        fsync: bool = True,
        dead_letter: bool = False,
        checksums: bool = True,
        spark: SparkSession | None = None,
    ) -> None:
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise PipelineError(f"input {name!r}: partitions={partitions!r} must be an integer >= 1")
        try:
            self.record_schema: RecordSchema = parse_schema(schema)
        except PipelineError as exc:
            raise type(exc)(f"input {name!r}: {exc}") from None
        if key is not None and self.record_schema.field(key) is None:
            raise PipelineError(
                f"input {name!r}: key={key!r} is not a field of its schema "
                f"({', '.join(f.name for f in self.record_schema.fields)})"
            )
        self.name = name
        self.schema = schema
        self.dead_letter = dead_letter
        self.partitions = partitions
        self.key = key
        self.fsync = fsync
        self.checksums = checksums
        self.spark = spark
        self.fs = as_root(directory, fsync=fsync)
        self.dir = f"input/{name}"
        self._converter: Converter | None = None
        for k in range(partitions):
            self.fs.makedirs(f"{self.dir}/part-{k}")
        self.fs.makedirs(f"{self.dir}/cuts")

    @property
    def converter(self) -> Converter:
        """The schema as Arrow and its vectorised check (made once, on first use)."""
        if self._converter is None:
            self._converter = Converter(self.record_schema, zone=_zone(self.spark), spark=self.spark)
        return self._converter

    # -- segments ---------------------------------------------------------------------
    def segments(self, partition: int) -> list[seg.Segment]:
        """The segments of ``partition`` in offset order."""
        return seg.list_segments(self.fs, self.dir, partition)

    def _manifest(self, s: seg.Segment, epoch: int) -> seg.SegmentManifest:
        return seg.read_manifest(self.fs, s, self.name, epoch)

    def end_offsets(self, segments: dict[int, list[seg.Segment]] | None = None) -> dict[int, int]:
        """The next offset of every partition (what a new cut would end at): read from the last manifests."""
        ends = {}
        last = self.last_cut()
        epoch = last.epoch + 1 if last else 0
        for k in range(self.partitions):
            segs = segments[k] if segments is not None else self.segments(k)
            end = segs[-1].start + self._manifest(segs[-1], epoch).rows if segs else 0
            ends[k] = max(end, last.end[k] if last else 0)
        return ends

    def append(self, data: Any, *, batch: str | None = None) -> dict[int, int]:
        """Append ``data`` (one new segment per partition); how many records went to each partition.

        ``data``: an iterable of mappings, a ``pyarrow.Table``/``RecordBatch``, a
        pandas ``DataFrame``, a Parquet path or list of paths, or a Spark
        ``DataFrame``. With ``batch``, partitions whose last segment already
        belongs to that batch are skipped, so re-sending a batch after a crash
        is harmless. Records are checked first (see the module docstring):
        :class:`~falkirk.spark.errors.RecordError` and nothing written, or,
        with ``dead_letter``, the bad ones diverted. A log takes one appender
        at a time: an append that finds another published a segment at the
        same offset meanwhile, or one overlapping its own, raises
        :class:`~falkirk.spark.errors.StorageError` naming the records left
        out, its own or the other's, or the segments both holding offsets
        (:func:`~falkirk.spark.pipeline.store.segments.check_alone`).
        """
        if batch is not None and not _KEY.match(batch):
            raise PipelineError(
                f"input {self.name!r}: batch key {batch!r} may only use letters, digits, '_', '-', '.'"
            )
        segs = {k: self.segments(k) for k in range(self.partitions)}
        ends = self.end_offsets(segs)
        skip = {k for k, s in segs.items() if batch is not None and s and s[-1].batch == batch}
        if ingest.is_spark_frame(data):
            from falkirk.spark.pipeline.store.sparkinput import append_frame

            return append_frame(self, data, batch, ends, skip)
        writer = seg.SegmentWriter(
            self.fs, self.dir, self.name, ends, batch, skip=skip, checksums=self.checksums
        )
        rejected: list[dict[str, Any]] = []
        index, spread = 0, 0
        try:
            for chunk in ingest.chunks(self, data):
                spread = ingest.accept(self, chunk, index, spread, writer, rejected)
                index += len(chunk)
            if rejected:  # first, as before: a crash after it leaves a batch that is simply sent again
                ingest.divert(self, rejected, batch)
            return writer.commit()
        except BaseException:
            writer.abort()
            raise

    # -- dead letters ------------------------------------------------------------------
    @property
    def dead_letter_dir(self) -> str:
        """Where diverted records go, relative to the root (``dead-letter/<batch>.jsonl``, one JSON object
        each)."""
        return f"{self.dir}/dead-letter"

    def dead_letters(self, batch: str | None = None) -> int:
        """How many records were diverted to the dead-letter log (of one ``batch``, or in all)."""
        if batch is not None:
            names = [f"{batch}.jsonl"]
        else:
            names = [n for n in self.fs.listdir(self.dead_letter_dir) if n.endswith(".jsonl")]
        total = 0
        for n in names:
            try:
                total += self.fs.read_bytes(f"{self.dead_letter_dir}/{n}").count(b"\n")
            except FileNotFoundError:
                pass
        return total

    # -- epochs: cut (inputcuts), read again (inputread), collected (inputgc); defined there -------
    cut_epochs = inputcuts.cut_epochs
    get_cut = inputcuts.get_cut
    last_cut = inputcuts.last_cut
    cut = inputcuts.cut
    check = inputread.check
    files = inputread.files
    verify = inputread.verify
    read = inputread.read
    to_arrow = inputread.to_arrow
    acknowledged = inputgc.acknowledged
    acknowledge = inputgc.acknowledge


def _zone(spark: Any) -> dt.tzinfo | None:
    """The session's time zone (``None``: the driver's local zone, which is also Spark's default)."""
    import datetime as dt
    import zoneinfo

    if spark is None:
        return None
    try:
        name = spark.conf.get("spark.sql.session.timeZone")
    except Exception:  # noqa: BLE001 - a stopped session: the local zone
        return None
    if name in ("UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "UCT", "Etc/UCT", "+00:00", "Zulu"):
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None
