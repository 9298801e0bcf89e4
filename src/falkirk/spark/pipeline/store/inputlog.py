"""A partitioned, append-only input log with offsets (the role Kafka plays), cut into epochs.

Each partition is a sequence of JSON-lines **segments**,
``part-<k>/<start-offset>[@<batch>].jsonl``, published write-once through the
root's filesystem (:mod:`~falkirk.spark.pipeline.store.rootfs`; the root may be a
path or a URI); every record carries ``_partition`` and
``_offset``. An **epoch** is a recorded **cut**: the end offset of every
partition, ``cuts/<epoch>.json`` (atomic), so epoch ``e`` is the records
between cut ``e-1`` and cut ``e`` — a sequence→epoch projection. Once
written, a cut never changes: replaying an epoch re-reads exactly its
records. :meth:`InputLog.acknowledge` deletes segments that lie wholly
inside an epoch no step can roll back to any more (the monitor's
low-watermark).

``append(..., batch=key)`` is idempotent per key: a producer that crashed
half-way through a batch (some partitions written) can simply send it again.

**Records are checked** against the declared schema when appended
(:mod:`falkirk.spark.pipeline.store.records`: types, ``NOT NULL``, unknown
fields): a bad record raises :class:`~falkirk.spark.errors.RecordError`
naming the input, partition, offset and field, and nothing of the batch is
written — or, with ``dead_letter=True``, bad records go to
``dead-letter/<batch>.jsonl`` beside the log (with the reason; never
garbage-collected) and the others are appended. Spark reads the log in
``FAILFAST`` mode, so a file that bypassed :meth:`InputLog.append` fails
loudly instead of turning into NULL values.

>>> log = InputLog("memory://falkirk-doc/inputlog", "events", "user BIGINT, v BIGINT", partitions=2, key="user")
>>> log.append([{"user": u, "v": 10 * u} for u in range(5)], batch="b0")
{0: 1, 1: 4}
>>> log.append([{"user": 9, "v": 90}], batch="b0")   # already sent: ignored
{}
>>> log.cut(0).end, log.end_offsets()
({0: 1, 1: 4}, {0: 1, 1: 4})
>>> log.append([{"user": 7, "v": 70}], batch="b1")
{0: 1}
>>> c = log.cut(1); (c.start, c.end)
({0: 1, 1: 4}, {0: 2, 1: 4})
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
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import frozen

from falkirk.spark.errors import CorruptDataError, PipelineError, RecordError, StorageError
from falkirk.spark.pipeline.store.records import RecordSchema, parse_schema
from falkirk.spark.pipeline.store.rootfs import Root
from falkirk.spark.pipeline.store.storage import as_root

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Cut", "InputLog"]

_SEGMENT = re.compile(r"^(\d{12})(?:@([A-Za-z0-9_.-]+))?\.jsonl$")
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


@frozen
class _Segment:
    partition: int
    start: int
    batch: str | None
    path: str


class InputLog:
    """The log of input ``name`` under ``directory`` (see the module docstring).

    ``schema`` is a Spark DDL string of the records' fields (checked at once:
    :class:`~falkirk.spark.errors.SchemaError`); ``key`` names the field that
    chooses the partition (``crc32(str(value)) % partitions``; records without
    a key value are spread round-robin); ``dead_letter`` diverts records that
    do not fit the schema to the dead-letter log instead of refusing the batch.
    """

    def __init__(
        self, directory: Root | str | os.PathLike[str], name: str, schema: str, *, partitions: int = 1,
        key: str | None = None, fsync: bool = True, dead_letter: bool = False,
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
        self.fs = as_root(directory, fsync=fsync)
        self.dir = f"input/{name}"
        for k in range(partitions):
            self.fs.makedirs(f"{self.dir}/part-{k}")
        self.fs.makedirs(f"{self.dir}/cuts")

    # -- segments ---------------------------------------------------------------------
    def segments(self, partition: int) -> list[_Segment]:
        """The segments of ``partition`` in offset order."""
        out = []
        where = f"{self.dir}/part-{partition}"
        for name in self.fs.listdir(where):
            m = _SEGMENT.match(name)
            if m:
                out.append(_Segment(partition, int(m.group(1)), m.group(2), f"{where}/{name}"))
        return sorted(out, key=lambda s: s.start)

    def _lines(self, path: str) -> int:
        return self.fs.read_bytes(path).count(b"\n")

    def end_offsets(self) -> dict[int, int]:
        """The next offset of every partition (what a new cut would end at)."""
        ends = {}
        last = self.last_cut()
        for k in range(self.partitions):
            segs = self.segments(k)
            end = segs[-1].start + self._lines(segs[-1].path) if segs else 0
            ends[k] = max(end, last.end[k] if last else 0)
        return ends

    def append(self, records: Iterable[Mapping[str, Any]], *, batch: str | None = None) -> dict[int, int]:
        """Append ``records`` (one new segment per partition); how many went to each partition.

        With ``batch``, partitions whose last segment already belongs to that
        batch are skipped, so re-sending a batch after a crash is harmless.
        Every record is checked against the schema first (see the module
        docstring): :class:`~falkirk.spark.errors.RecordError` and nothing
        written, or, with ``dead_letter``, the bad ones diverted.
        """
        if batch is not None and not _KEY.match(batch):
            raise PipelineError(f"input {self.name!r}: batch key {batch!r} may only use letters, digits, '_', '-', '.'")
        ends = self.end_offsets()
        parts: dict[int, list[Mapping[str, Any]]] = {}
        rejected: list[dict[str, Any]] = []
        spread = 0
        for i, r in enumerate(records):
            value = r.get(self.key) if self.key and isinstance(r, Mapping) else None
            if value is None:
                k, spread = spread % self.partitions, spread + 1
            else:
                k = zlib.crc32(str(value).encode()) % self.partitions
            problem = self.record_schema.check(r)
            if problem is not None:
                if not self.dead_letter:
                    offset = ends[k] + len(parts.get(k, ()))
                    raise RecordError(self.name, k, offset, i, problem.field, str(problem))
                rejected.append({"index": i, "partition": k, "field": problem.field, "problem": str(problem),
                                 "record": _jsonable(r)})
                continue
            parts.setdefault(k, []).append(self.record_schema.encode(r))
        if rejected:
            self._divert(rejected, batch)
        written = {}
        for k in sorted(parts):
            segs = self.segments(k)
            if batch is not None and segs and segs[-1].batch == batch:
                continue
            start = ends[k]
            name = f"{start:012d}{'@' + batch if batch else ''}.jsonl"
            text = "".join(json.dumps({**r, "_partition": k, "_offset": start + i}, sort_keys=True) + "\n"
                           for i, r in enumerate(parts[k]))
            self.fs.publish(f"{self.dir}/part-{k}/{name}", text.encode("utf-8"))
            written[k] = len(parts[k])
        return written

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
                total += self._lines(f"{self.dead_letter_dir}/{n}")
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
    def files(self, cut: Cut) -> list[str]:
        """The segments holding ``cut``'s records; ``CorruptDataError`` if some are missing."""
        out = []
        for k in range(self.partitions):
            lo, hi = cut.start[k], cut.end[k]
            if lo == hi:
                continue
            covered = lo
            for s in self.segments(k):
                n = self._lines(s.path) if s.start < hi else 0
                if s.start < hi and s.start + n > lo:
                    if s.start > covered:
                        break
                    out.append(s.path)
                    covered = max(covered, s.start + n)
            if covered < hi:
                raise CorruptDataError(
                    self.name, "input", cut.epoch,
                    f"is missing offsets {covered}..{hi - 1} of epoch {cut.epoch} (a deleted or truncated segment)",
                    path=f"{self.dir}/part-{k}/")
        return out

    def check(self, epoch: int) -> None:
        """Whether epoch ``epoch`` can be read again: its cut and every record of it are in the log.

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

    def read(self, spark: SparkSession, epoch: int) -> DataFrame:
        """The records of ``epoch`` (its recorded cut) as a DataFrame with ``_partition`` and ``_offset``."""
        from pyspark.sql import functions as F

        c = self.get_cut(epoch)
        if c is None:
            raise CorruptDataError(self.name, "input", epoch, "is missing", path=self._cut_path(epoch))
        schema = f"{self.schema}, _partition INT, _offset BIGINT"
        files = self.files(c)
        if not files:
            return spark.createDataFrame([], schema)
        # FAILFAST: a malformed line (a file that bypassed append) fails the read instead of becoming NULLs
        df = spark.read.schema(schema).option("mode", "FAILFAST").json([self.fs.spark_uri(p) for p in files])
        cond = None
        for k in range(self.partitions):
            if c.start[k] < c.end[k]:
                term = (F.col("_partition") == k) & F.col("_offset").between(c.start[k], c.end[k] - 1)
                cond = term if cond is None else cond | term
        assert cond is not None  # some partition has records, since some file does
        return df.where(cond)

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
                    freed += self.fs.size(s.path)
                    self.fs.delete(s.path)
        for e in self.cut_epochs():
            if e < epoch:
                freed += self.fs.size(self._cut_path(e))
                self.fs.delete(self._cut_path(e))
        return freed


def _jsonable(value: Any) -> Any:
    """``value`` with anything JSON cannot hold replaced by its ``repr`` (for the dead-letter log)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)
