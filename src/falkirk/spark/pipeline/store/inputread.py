"""Reading an input log's epoch again: which segments hold it, whether it is all there, its records.

An epoch's records are those of its :class:`~falkirk.spark.pipeline.store.inputcuts.Cut`
in every partition; the segments holding them are found from the segment
manifests (:mod:`~falkirk.spark.pipeline.store.segments`), and a gap —
offsets in no segment — is a :class:`~falkirk.spark.errors.CorruptDataError`
naming the lost segment manifest when its data files are still there.
:func:`check` says whether an epoch can be replayed (its cut and every
record; garbage collection's work told apart from a loss), :func:`files`
and :func:`verify` check its data files' sizes and checksums
(:meth:`Storage.verify <falkirk.spark.pipeline.store.storage.Storage.verify>`),
:func:`read` gives its records to Spark (a small epoch read on the driver, as a local relation:
:data:`DRIVER_MAX_ROWS`) and :func:`to_arrow` to the driver.
:class:`~falkirk.spark.pipeline.store.inputlog.InputLog` exposes these
functions as methods (``log.read(spark, epoch)``…).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from falkirk.spark.errors import CorruptDataError
from falkirk.spark.pipeline.store import segments as seg
from falkirk.spark.pipeline.store.arrowschema import log_fields, read_ddl
from falkirk.spark.pipeline.store.inputcuts import Cut, cut_path
from falkirk.spark.pipeline.store.jvm import once
from falkirk.spark.pipeline.store.manifest import Manifest
from falkirk.spark.pipeline.store.storage import Storage

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from falkirk.spark.pipeline.store.inputlog import InputLog

_log = logging.getLogger(__name__)

__all__ = ["check", "files", "verify", "read", "on_driver", "to_arrow", "DRIVER_MAX_ROWS", "DRIVER_MAX_BYTES"]

#: an epoch of at most this many records, in Parquet files of at most :data:`DRIVER_MAX_BYTES` in all and as
#: many again in Arrow once read, is read on the driver (pyarrow) and given to Spark as a local relation
#: (:func:`read`): no Spark job reads its files, each job that uses it takes its rows from the driver, and a plan
#: over it alone (the keys of a ``lookup``, say) is collected without a job. Larger epochs are read by Spark's
#: Parquet reader, in tasks.
DRIVER_MAX_ROWS = 16_384
DRIVER_MAX_BYTES = 4 << 20

#: the declared types an epoch read on the driver may hold: those whose Arrow and Parquet readings Spark takes
#: alike (a timestamp's time zone, a decimal's or a nested type's conversion are left to Spark's reader)
_DRIVER_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INT",
        "BIGINT",
        "FLOAT",
        "DOUBLE",
        "BOOLEAN",
        "STRING",
        "VARCHAR",
        "CHAR",
        "DATE",
    }
)


def _cut_segments(log: InputLog, cut: Cut) -> list[tuple[seg.SegmentManifest, bool, bool]]:
    """``(manifest, legacy, whole)`` of every segment holding ``cut``'s records (``whole``: none outside
    it)."""
    out = []
    for k in range(log.partitions):
        lo, hi = cut.start[k], cut.end[k]
        if lo == hi:
            continue
        covered = lo
        segs = log.segments(k)
        prev: seg.Segment | None = None
        for s, nxt in zip(segs, [*segs[1:], None], strict=True):
            if s.start >= hi or (nxt is not None and nxt.start <= lo):
                continue  # wholly before or after the cut (two included that overlap: an error below)
            m = seg.read_manifest(log.fs, s, log.name, cut.epoch)
            if s.start + m.rows <= lo:
                continue
            if s.start > covered:
                break
            if prev is not None and s.start < covered:  # both would be read: offsets claimed twice
                raise _overlap(log, k, prev, s, min(covered, s.start + m.rows), cut.epoch)
            out.append((m, s.legacy, lo <= s.start and s.start + m.rows <= hi))
            covered, prev = max(covered, s.start + m.rows), s
        if covered < hi:
            raise _gap(log, k, covered, hi, cut.epoch)
    return out


class _Overlap(CorruptDataError):
    """Two segments hold the same offsets (:func:`_overlap`): never garbage collection's doing."""


def _overlap(
    log: InputLog, k: int, prev: seg.Segment, s: seg.Segment, end: int, epoch: int
) -> CorruptDataError:
    """Segment ``s`` of partition ``k`` starts inside ``prev``, both held by the cut of ``epoch`` (offsets
    ``s.start..end-1`` in both): two appends ran at once
    (:func:`~falkirk.spark.pipeline.store.segments.check_alone`)."""
    where = f"{log.dir}/part-{k}"
    first, second = (p.path.rsplit("/", 1)[-1] for p in (prev, s))
    return _Overlap(
        log.name,
        "input",
        epoch,
        f"has offsets {s.start}..{end - 1} of partition {k} in two segments ({first} and {second}): appends "
        f"ran at once, and the log cannot tell which records epoch {epoch} holds there. "
        + seg.overlap_remedy(log.fs, where, first, second, log.fs.listdir(where)),
        path=f"{where}/",
    )


def _gap(log: InputLog, k: int, covered: int, hi: int, epoch: int) -> CorruptDataError:
    """Offsets ``covered..hi-1`` of partition ``k`` are in no segment: name the lost manifest if its data is
    there."""
    where = f"{log.dir}/part-{k}"
    stem = seg.segment_name(covered, None)
    orphans = sorted(n for n in log.fs.listdir(where) if n.startswith(stem) and n.endswith(".parquet"))
    if orphans:  # the segment's data files are there, its manifest is not: the manifest was lost
        lost = f"{where}/{orphans[0].split('.', 1)[0]}.json"
        return CorruptDataError(
            log.name,
            "input",
            epoch,
            f"is missing: the segment manifest of offsets "
            f"{covered}.. of partition {k} (its data files are there), so offsets "
            f"{covered}..{hi - 1} of epoch {epoch} cannot be read",
            path=lost,
        )
    return CorruptDataError(
        log.name,
        "input",
        epoch,
        f"is missing offsets {covered}..{hi - 1} of epoch {epoch} (a deleted or truncated segment)",
        path=f"{where}/",
    )


def check(log: InputLog, epoch: int, *, verify: bool = False) -> None:
    """Whether epoch ``epoch`` can be read again: its cut and every record of it are in the log.

    With ``verify``, every data file's checksum is compared too.

    ``CorruptDataError`` otherwise, whose ``path`` names the missing cut
    (saying whether garbage collection collected it) or the partition
    whose records are missing.
    """
    try:
        cut = log.get_cut(epoch)
    except CorruptDataError as err:
        raise CorruptDataError(
            log.name, "input", epoch, f"is unreadable ({err.detail})", path=cut_path(log, epoch)
        ) from None
    acked = log.acknowledged()
    collected = f"was collected by garbage collection (epochs up to {acked} are acknowledged)"
    if cut is None:
        raise CorruptDataError(
            log.name, "input", epoch, collected if epoch < acked else "is missing", path=cut_path(log, epoch)
        )
    try:
        log.files(cut)
    except CorruptDataError as err:
        if epoch <= acked and not isinstance(err, _Overlap):
            raise CorruptDataError(log.name, "input", epoch, collected, path=err.path) from None
        raise
    if verify:
        log.verify(cut)


def _as_manifest(log: InputLog, cut: Cut, found: list[tuple[seg.SegmentManifest, bool, bool]]) -> Manifest:
    """The cut's data files as one manifest, for :meth:`Storage.verify
    <falkirk.spark.pipeline.store.storage.Storage.verify>`."""
    return Manifest(
        log.name, "input", cut.epoch, cut.records, log.dir, [f for m, _, _ in found for f in m.files]
    )


def files(log: InputLog, cut: Cut) -> list[str]:
    """The data files holding ``cut``'s records; ``CorruptDataError`` if a segment or file is missing or
    truncated."""
    m = _as_manifest(log, cut, _cut_segments(log, cut))
    Storage(log.fs, checksums=False).verify(m)
    return [f"{log.dir}/{f.name}" for f in m.files]


def verify(log: InputLog, cut: Cut) -> None:
    """:func:`files`, and every data file's checksum (``CorruptDataError`` if one differs)."""
    Storage(log.fs, checksums=log.checksums).verify(_as_manifest(log, cut, _cut_segments(log, cut)))


def read(log: InputLog, spark: SparkSession, epoch: int) -> DataFrame:
    """The records of ``epoch`` (its recorded cut) as a DataFrame with ``_partition`` and ``_offset``.

    An epoch within :data:`DRIVER_MAX_ROWS` and :data:`DRIVER_MAX_BYTES`, of
    the types Spark reads alike from Arrow and Parquet, is read on the driver
    and given as a local relation (should the driver fail to read a file,
    Spark's reader reads it, and meets and names the damage as before;
    records its manifests do not account for are refused with
    ``CorruptDataError``).
    Other Parquet segments are read with Spark's Parquet reader (a step reads
    only the columns it uses); JSON-line segments of older logs in
    ``FAILFAST`` mode, so a malformed line fails instead of becoming NULLs.
    """
    from pyspark.sql import functions as F

    c = log.get_cut(epoch)
    if c is None:
        raise CorruptDataError(log.name, "input", epoch, "is missing", path=cut_path(log, epoch))
    schema = read_ddl(log.record_schema)
    found = _cut_segments(log, c)
    held = _on_driver(log, spark, c, found, schema)
    if held is not None:
        return held
    frames = []
    for legacy in (False, True):
        mine = [(m, whole) for m, old, whole in found if old == legacy]
        if not mine:
            continue
        uris = [log.fs.spark_uri(f"{m.location}/{f.name}") for m, _ in mine for f in m.files]
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
    if not frames:  # empty by its plan (``limit(0)``): no job reads it (Frames.planned_empty)
        return spark.createDataFrame([], schema).limit(0)
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


def _on_driver(
    log: InputLog,
    spark: SparkSession,
    cut: Cut,
    found: list[tuple[seg.SegmentManifest, bool, bool]],
    ddl: str,
) -> DataFrame | None:
    """:func:`read`'s epoch as a local relation, where it is small enough (:data:`DRIVER_MAX_ROWS`) and of
    :data:`_DRIVER_TYPES`; ``None`` otherwise, where a file cannot be read here (logged), or where its rows
    grow past :data:`DRIVER_MAX_BYTES` in Arrow (a dictionary-encoded column, say)."""
    if (
        not found
        or cut.records > DRIVER_MAX_ROWS
        or any(legacy for _, legacy, _ in found)
        or any(f.type.name not in _DRIVER_TYPES for f in log.record_schema.fields)
        or sum(f.size for m, _, _ in found for f in m.files) > DRIVER_MAX_BYTES
    ):
        return None
    import pyarrow as pa
    from pyspark.sql.types import DataType, StructType

    try:
        table = _tables(log, [m for m, _, _ in found], cut)
    except CorruptDataError:
        raise  # records the manifests do not account for: Spark's reader would read them without a word
    except (OSError, pa.ArrowException) as exc:
        # damaged or unreachable: Spark's reader meets it, as for any epoch
        _log.info("input %s@%d: read by Spark, not on the driver: %s", log.name, cut.epoch, exc)
        return None
    if table.nbytes > DRIVER_MAX_BYTES:
        return None
    schema = once(("input-schema", ddl), lambda: DataType.fromDDL(ddl))  # parsed by the JVM: once a run
    assert isinstance(schema, StructType)
    df = spark.createDataFrame(table.select(schema.names), schema)
    df._falkirk_input_bytes = table.nbytes  # type: ignore[attr-defined]
    return df


def on_driver(df: DataFrame) -> int | None:
    """The Arrow bytes of an epoch :func:`read` gave as a local relation, read on the driver; ``None`` for one
    Spark's reader reads.

    >>> class Remote:  # a Spark Connect DataFrame takes an unknown attribute for a column
    ...     def __getattr__(self, name): return f"Column<{name}>"
    >>> on_driver(Remote()) is None
    True
    """
    return vars(df).get("_falkirk_input_bytes")  # not getattr: a Connect DataFrame takes a name for a column


def _tables(log: InputLog, manifests: list[seg.SegmentManifest], cut: Cut | None) -> pa.Table:
    """The records of the Parquet segments ``manifests`` (within ``cut``, if given), read with pyarrow;
    ``CorruptDataError`` (with ``cut``) where a segment's files hold more or fewer records than its manifest
    says, or the cut's offsets of a partition more or fewer than the cut holds."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    arrow_schema = pa.schema([*log.converter.arrow_schema, *log_fields()])
    tables = []
    # the cut's records found, by partition (each it holds records of), and the partition's first file
    held = {} if cut is None else {k: 0 for k in cut.end if cut.end[k] > cut.start[k]}
    where: dict[int, str] = {}
    for m in manifests:
        first = f"{m.location}/{m.files[0].name}" if m.files else f"{m.location}/"
        where.setdefault(m.partition, first)
        rows = 0
        for f in m.files:
            with log.fs.fs.open(log.fs.full(f"{m.location}/{f.name}"), "rb") as fh:
                t = pq.read_table(fh, schema=arrow_schema)
            rows += t.num_rows
            if cut is not None:
                k = m.partition
                t = t.filter(
                    pc.and_(pc.greater_equal(t["_offset"], cut.start[k]), pc.less(t["_offset"], cut.end[k]))
                )
                held[k] = held.get(k, 0) + t.num_rows
            tables.append(t)
        if cut is not None and rows != m.rows:
            raise CorruptDataError(
                log.name,
                "input",
                cut.epoch,
                f"holds {rows} records where its segment manifest says {m.rows} (partition {m.partition}, the "
                f"segment from offset {m.start}, {len(m.files)} file(s), this its first)",
                path=first,
            )
    for k in sorted(held):  # (held only with a cut)
        assert cut is not None
        if held[k] != cut.end[k] - cut.start[k]:
            raise CorruptDataError(
                log.name,
                "input",
                cut.epoch,
                f"has {held[k]} records at offsets {cut.start[k]}..{cut.end[k] - 1} of partition {k}, where its "
                f"cut holds {cut.end[k] - cut.start[k]}: a segment's offsets differ from its manifest's (this the "
                "partition's first file)",
                path=where.get(k, f"{log.dir}/part-{k}/"),
            )
    return pa.concat_tables(tables) if tables else arrow_schema.empty_table()


def to_arrow(log: InputLog, epoch: int | None = None) -> pa.Table:
    """The records of ``epoch`` (or of the whole log), read on the driver with pyarrow (tests, small logs).

    Segments written as JSON lines (older logs) are read by Spark only
    (:func:`read`): ``CorruptDataError`` names them.
    """
    if epoch is None:
        manifests = [
            (seg.read_manifest(log.fs, s, log.name, -1), s.legacy)
            for k in range(log.partitions)
            for s in log.segments(k)
        ]
        cut = None
    else:
        cut = log.get_cut(epoch)
        if cut is None:
            raise CorruptDataError(log.name, "input", epoch, "is missing", path=cut_path(log, epoch))
        manifests = [(m, legacy) for m, legacy, _ in _cut_segments(log, cut)]
    for m, legacy in manifests:
        if legacy:
            raise CorruptDataError(
                log.name,
                "input",
                -1 if epoch is None else epoch,
                f"segment part-{m.partition}/{m.files[0].name} is JSON lines: read it with Spark",
            )
    return _tables(log, [m for m, _ in manifests], cut)
