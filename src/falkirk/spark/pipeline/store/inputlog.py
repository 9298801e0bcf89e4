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

import json
import os
import re
import uuid
from typing import TYPE_CHECKING, Any

from attrs import frozen

from falkirk.spark.errors import CorruptDataError, PipelineError, StorageError
from falkirk.spark.pipeline.store import ingest
from falkirk.spark.pipeline.store import segments as seg
from falkirk.spark.pipeline.store.arrowschema import log_fields, read_ddl
from falkirk.spark.pipeline.store.convert import Converter
from falkirk.spark.pipeline.store.manifest import Manifest
from falkirk.spark.pipeline.store.records import RecordSchema, parse_schema
from falkirk.spark.pipeline.store.rootfs import Root
from falkirk.spark.pipeline.store.storage import Storage, as_root

if TYPE_CHECKING:
    import datetime as dt

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["Cut", "InputLog"]

_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")


@frozen
class Cut:
    """Epoch ``epoch`` of an input: offsets ``[start[k], end[k])`` of every partition ``k``."""

    epoch: int
    start: dict[int, int]
    end: dict[int, int]

    @property
    def records(self) -> int:
        """How many records the epoch holds."""
        return sum(self.end[k] - self.start[k] for k in self.end)


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
        self, directory: Root | str | os.PathLike[str], name: str, schema: str, *, partitions: int = 1,
        key: str | None = None, fsync: bool = True, dead_letter: bool = False, checksums: bool = True,
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
                f"({', '.join(f.name for f in self.record_schema.fields)})")
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
        with ``dead_letter``, the bad ones diverted.
        """
        if batch is not None and not _KEY.match(batch):
            raise PipelineError(f"input {self.name!r}: batch key {batch!r} may only use letters, digits, '_', '-', '.'")
        segs = {k: self.segments(k) for k in range(self.partitions)}
        ends = self.end_offsets(segs)
        skip = {k for k, s in segs.items() if batch is not None and s and s[-1].batch == batch}
        if ingest.is_spark_frame(data):
            from falkirk.spark.pipeline.store.sparkinput import append_frame

            return append_frame(self, data, batch, ends, skip)
        writer = seg.SegmentWriter(self.fs, self.dir, self.name, ends, batch, skip=skip, checksums=self.checksums)
        rejected: list[dict[str, Any]] = []
        index, spread = 0, 0
        try:
            for chunk in ingest.chunks(self, data):
                spread = ingest.accept(self, chunk, index, spread, writer, rejected)
                index += len(chunk)
            if rejected:  # first, as before: a crash after it leaves a batch that is simply sent again
                self._divert(rejected, batch)
            return writer.commit()
        except BaseException:
            writer.abort()
            raise

    # -- dead letters ------------------------------------------------------------------
    @property
    def dead_letter_dir(self) -> str:
        """Where diverted records go, relative to the root (``dead-letter/<batch>.jsonl``, one JSON object each)."""
        return f"{self.dir}/dead-letter"

    def _divert(self, rejected: list[dict[str, Any]], batch: str | None) -> None:
        text = "".join(json.dumps({"input": self.name, "batch": batch, **r}, sort_keys=True) + "\n" for r in rejected)
        try:
            self.fs.publish(f"{self.dead_letter_dir}/{batch or uuid.uuid4().hex}.jsonl", text.encode("utf-8"))
        except FileExistsError:
            pass  # this batch was sent before: its bad records are already there

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

    # -- cuts ------------------------------------------------------------------------
    def _cut_path(self, epoch: int) -> str:
        return f"{self.dir}/cuts/{epoch:08d}.json"

    def cut_epochs(self) -> list[int]:
        """Epochs with a recorded cut, ascending."""
        return sorted(int(n[:-5]) for n in self.fs.listdir(f"{self.dir}/cuts") if n.endswith(".json") and n[:-5].isdigit())

    def get_cut(self, epoch: int) -> Cut | None:
        """The recorded cut of ``epoch``, or ``None``."""
        try:
            doc = json.loads(self.fs.read_bytes(self._cut_path(epoch)))
            start = {int(k): int(v) for k, v in doc["start"].items()}
            end = {int(k): int(v) for k, v in doc["end"].items()}
        except FileNotFoundError:
            return None
        except StorageError:
            raise  # the store did not answer: not a corrupt cut
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptDataError(self.name, "input", epoch, f"is unreadable ({type(exc).__name__}: {exc})",
                                   path=self._cut_path(epoch)) from None
        if sorted(start) != list(range(self.partitions)) or sorted(end) != list(range(self.partitions)):
            raise CorruptDataError(self.name, "input", epoch, f"does not describe the input's {self.partitions} "
                                   "partition(s)", path=self._cut_path(epoch))
        return Cut(epoch, start, end)

    def last_cut(self) -> Cut | None:
        """The most recent cut, or ``None``."""
        epochs = self.cut_epochs()
        return self.get_cut(epochs[-1]) if epochs else None

    def cut(self, epoch: int) -> Cut:
        """Epoch ``epoch``'s cut: the recorded one, or a new one at the current end offsets.

        A new cut must follow the previous epoch's (``CorruptDataError`` if
        that one is missing: epochs are cut in order).
        """
        existing = self.get_cut(epoch)
        if existing is not None:
            return existing
        prev = self.get_cut(epoch - 1) if epoch > 0 else None
        if epoch > 0 and prev is None:
            raise CorruptDataError(self.name, "input", epoch - 1, "is missing (epochs are cut in order)",
                                   path=self._cut_path(epoch - 1))
        start = prev.end if prev else {k: 0 for k in range(self.partitions)}
        if epoch == 0 and not self.fs.exists(f"{self.dir}/acknowledged.json"):
            self.fs.replace(f"{self.dir}/acknowledged.json", json.dumps({"epoch": -1}).encode())
        end = self.end_offsets()
        c = Cut(epoch, dict(start), {k: max(end[k], start[k]) for k in range(self.partitions)})
        doc = json.dumps({"epoch": epoch, "start": c.start, "end": c.end}, sort_keys=True).encode()
        try:
            self.fs.publish(self._cut_path(epoch), doc)
        except FileExistsError:  # another driver cut it first: a cut never changes, so use that one
            return self.get_cut(epoch) or c
        return c

    # -- reading -----------------------------------------------------------------------
    def _cut_segments(self, cut: Cut) -> list[tuple[seg.SegmentManifest, bool, bool]]:
        """``(manifest, legacy, whole)`` of every segment holding ``cut``'s records (``whole``: none outside it)."""
        out = []
        for k in range(self.partitions):
            lo, hi = cut.start[k], cut.end[k]
            if lo == hi:
                continue
            covered = lo
            segs = self.segments(k)
            for s, nxt in zip(segs, [*segs[1:], None], strict=True):
                if s.start >= hi or (nxt is not None and nxt.start <= lo):
                    continue  # wholly before or after the cut (segments do not overlap)
                m = self._manifest(s, cut.epoch)
                if s.start + m.rows <= lo:
                    continue
                if s.start > covered:
                    break
                out.append((m, s.legacy, lo <= s.start and s.start + m.rows <= hi))
                covered = max(covered, s.start + m.rows)
            if covered < hi:
                raise self._gap(k, covered, hi, cut.epoch)
        return out

    def _gap(self, k: int, covered: int, hi: int, epoch: int) -> CorruptDataError:
        """Offsets ``covered..hi-1`` of partition ``k`` are in no segment: name the lost manifest if its data is there."""
        where = f"{self.dir}/part-{k}"
        stem = seg.segment_name(covered, None)
        orphans = sorted(n for n in self.fs.listdir(where) if n.startswith(stem) and n.endswith(".parquet"))
        if orphans:  # the segment's data files are there, its manifest is not: the manifest was lost
            lost = f"{where}/{orphans[0].split('.', 1)[0]}.json"
            return CorruptDataError(self.name, "input", epoch, f"is missing: the segment manifest of offsets "
                                    f"{covered}.. of partition {k} (its data files are there), so offsets "
                                    f"{covered}..{hi - 1} of epoch {epoch} cannot be read", path=lost)
        return CorruptDataError(self.name, "input", epoch, f"is missing offsets {covered}..{hi - 1} of epoch {epoch} "
                                "(a deleted or truncated segment)", path=f"{where}/")

    def check(self, epoch: int, *, verify: bool = False) -> None:
        """Whether epoch ``epoch`` can be read again: its cut and every record of it are in the log.

        With ``verify``, every data file's checksum is compared too.

        ``CorruptDataError`` otherwise, whose ``path`` names the missing cut
        (saying whether garbage collection collected it) or the partition
        whose records are missing.
        """
        try:
            cut = self.get_cut(epoch)
        except CorruptDataError as err:
            raise CorruptDataError(self.name, "input", epoch, f"is unreadable ({err.detail})",
                                   path=self._cut_path(epoch)) from None
        acked = self.acknowledged()
        collected = f"was collected by garbage collection (epochs up to {acked} are acknowledged)"
        if cut is None:
            raise CorruptDataError(self.name, "input", epoch, collected if epoch < acked else "is missing",
                                   path=self._cut_path(epoch))
        try:
            self.files(cut)
        except CorruptDataError as err:
            if epoch <= acked:
                raise CorruptDataError(self.name, "input", epoch, collected, path=err.path) from None
            raise
        if verify:
            self.verify(cut)

    def _as_manifest(self, cut: Cut, found: list[tuple[seg.SegmentManifest, bool, bool]]) -> Manifest:
        """The cut's data files as one manifest, for :meth:`Storage.verify <falkirk.spark.pipeline.store.storage.Storage.verify>`."""
        return Manifest(self.name, "input", cut.epoch, cut.records, self.dir, [f for m, _, _ in found for f in m.files])

    def files(self, cut: Cut) -> list[str]:
        """The data files holding ``cut``'s records; ``CorruptDataError`` if a segment or file is missing or truncated."""
        m = self._as_manifest(cut, self._cut_segments(cut))
        Storage(self.fs, checksums=False).verify(m)
        return [f"{self.dir}/{f.name}" for f in m.files]

    def verify(self, cut: Cut) -> None:
        """:meth:`files`, and every data file's checksum (``CorruptDataError`` if one differs)."""
        Storage(self.fs, checksums=self.checksums).verify(self._as_manifest(cut, self._cut_segments(cut)))

    def read(self, spark: SparkSession, epoch: int) -> DataFrame:
        """The records of ``epoch`` (its recorded cut) as a DataFrame with ``_partition`` and ``_offset``.

        Parquet segments are read with Spark's Parquet reader (a step reads
        only the columns it uses); JSON-line segments of older logs in
        ``FAILFAST`` mode, so a malformed line fails instead of becoming NULLs.
        """
        from pyspark.sql import functions as F

        c = self.get_cut(epoch)
        if c is None:
            raise CorruptDataError(self.name, "input", epoch, "is missing", path=self._cut_path(epoch))
        schema = read_ddl(self.record_schema)
        found = self._cut_segments(c)
        frames = []
        for legacy in (False, True):
            mine = [(m, whole) for m, old, whole in found if old == legacy]
            if not mine:
                continue
            uris = [self.fs.spark_uri(f"{m.location}/{f.name}") for m, _ in mine for f in m.files]
            reader = spark.read.schema(schema)
            df = reader.option("mode", "FAILFAST").json(uris) if legacy else reader.parquet(*uris)
            if not all(whole for _, whole in mine):
                cond: Column | None = None
                for k in sorted({m.partition for m, _ in mine}):
                    term = (F.col("_partition") == k) & F.col("_offset").between(c.start[k], c.end[k] - 1)
                    cond = term if cond is None else cond | term
                assert cond is not None
                df = df.where(cond)
            frames.append(df)
        if not frames:
            return spark.createDataFrame([], schema)
        return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])

    def to_arrow(self, epoch: int | None = None) -> pa.Table:
        """The records of ``epoch`` (or of the whole log), read on the driver with pyarrow (tests, small logs).

        Segments written as JSON lines (older logs) are read by Spark only
        (:meth:`read`): ``CorruptDataError`` names them.
        """
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        arrow_schema = pa.schema([*self.converter.arrow_schema, *log_fields()])
        if epoch is None:
            manifests = [(self._manifest(s, -1), s.legacy) for k in range(self.partitions) for s in self.segments(k)]
            cut = None
        else:
            cut = self.get_cut(epoch)
            if cut is None:
                raise CorruptDataError(self.name, "input", epoch, "is missing", path=self._cut_path(epoch))
            manifests = [(m, legacy) for m, legacy, _ in self._cut_segments(cut)]
        tables = []
        for m, legacy in manifests:
            if legacy:
                raise CorruptDataError(self.name, "input", -1 if epoch is None else epoch,
                                       f"segment part-{m.partition}/{m.files[0].name} is JSON lines: read it with Spark")
            for f in m.files:
                with self.fs.fs.open(self.fs.full(f"{m.location}/{f.name}"), "rb") as fh:
                    t = pq.read_table(fh, schema=arrow_schema)
                if cut is not None:
                    k = m.partition
                    t = t.filter(pc.and_(pc.greater_equal(t["_offset"], cut.start[k]), pc.less(t["_offset"], cut.end[k])))
                tables.append(t)
        return pa.concat_tables(tables) if tables else arrow_schema.empty_table()

    # -- acknowledgement -------------------------------------------------------------------
    def acknowledged(self) -> int:
        """The last epoch acknowledged (its records may be deleted); ``-1``: none.

        Recorded in ``acknowledged.json`` (written with the first cut, then by
        :meth:`acknowledge`). A log written before that record existed says
        nothing; its oldest cut is then taken as acknowledged, as garbage
        collection keeps exactly the cut of the epoch it acknowledged.
        """
        try:
            return int(json.loads(self.fs.read_bytes(f"{self.dir}/acknowledged.json"))["epoch"])
        except FileNotFoundError:
            return min(self.cut_epochs(), default=-1)
        except (ValueError, KeyError, TypeError):
            return -1

    def acknowledge(self, epoch: int) -> int:
        """Delete segments wholly inside epochs ``≤ epoch`` and cuts before ``epoch``; bytes freed.

        The acknowledged epoch is recorded first (``acknowledged.json``), so
        a later reader can tell records garbage collection removed from
        records lost otherwise.
        """
        c = self.get_cut(epoch)
        if c is None:
            return 0
        if epoch > self.acknowledged():
            self.fs.replace(f"{self.dir}/acknowledged.json", json.dumps({"epoch": epoch}).encode())
        freed = 0
        for k in range(self.partitions):
            segs = self.segments(k)
            for s, nxt in zip(segs, segs[1:], strict=False):  # never the last segment: it gives the end offset
                if nxt.start <= c.end[k]:
                    freed += self._delete_segment(s)
            kept = {f.name for s in self.segments(k) if not s.legacy and s.start < c.end[k]
                    for f in self._manifest(s, epoch).files}
            freed += seg.sweep(self.fs, self.dir, k, c.end[k], kept)
        for e in self.cut_epochs():
            if e < epoch:
                freed += self.fs.size(self._cut_path(e))
                self.fs.delete(self._cut_path(e))
        return freed

    def _delete_segment(self, s: seg.Segment) -> int:
        """Delete segment ``s``: its manifest first (it stops existing), then its data; bytes freed."""
        freed = self.fs.size(s.path)
        try:
            files = [] if s.legacy else list(self._manifest(s, -1).files)
        except CorruptDataError:
            files = []
        self.fs.delete(s.path)
        for f in files:
            freed += f.size
            self.fs.delete(f"{self.dir}/{f.name}")
        if any(f.name.startswith("spark/") for f in files):
            from falkirk.spark.pipeline.store.sparkinput import sweep_spark

            sweep_spark(self)
        return freed


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
