"""Appending a Spark DataFrame to an input log: the executors check and write, the driver publishes manifests.

No record passes through the driver's Python. One Spark job computes, for
each row of the DataFrame,

* the declared fields, converted with Spark's own casts where the column's
  type differs but is compatible (any integer type for an integer field,
  range-checked with ``try_cast``; integers or fractions for ``DOUBLE``; an
  exact decimal; strings for a date or timestamp…);
* ``_bad``: ``NULL``, or the first problem (field, message, the row as JSON)
  — an undeclared column, an incompatible type, a value that does not
  convert exactly, ``NULL`` in a ``NOT NULL`` field (also inside structs),
  a ``VARCHAR(n)`` too long;
* its partition (``crc32`` of the key as a string, as for Python records;
  rows without a key are spread by row id), and its offset: the row's rank
  within its partition in the DataFrame's order
  (``monotonically_increasing_id``), after the partition's end offset;

and writes the good rows, partitioned by segment, under
``input/<name>/spark/<id>/_segment=<k>/``, the bad ones under
``_segment=-1``, having recorded the offsets it starts at in
``spark/<id>.json`` first (:func:`sweep_spark` leaves an append in progress
alone). The driver then reads the row counts from the Parquet
footers and publishes one manifest per partition — or, if there are bad
rows, raises :class:`~falkirk.spark.errors.RecordError` for the first (and
deletes what was written), or with ``dead_letter=True`` writes them to the
dead-letter log. The good files carry ``_bad`` as an all-``NULL`` column,
which readers (given the log's schema) never see.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import uuid
from collections.abc import Mapping
from functools import reduce
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import RecordError, StorageError
from falkirk.spark.pipeline.store import ingest
from falkirk.spark.pipeline.store import segments as seg
from falkirk.spark.pipeline.store.manifest import FileEntry

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from falkirk.spark.pipeline.store.inputlog import InputLog

__all__ = ["append_frame", "sweep_spark"]

_MASK = (1 << 33) - 1  # monotonically_increasing_id: partition id << 33 | row within the partition


def _plain(t: Any) -> Any:
    """``t`` as the data holds it: CHAR/VARCHAR as STRING, nested fields nullable (lengths and NOT NULL are
    checked)."""
    from pyspark.sql.types import (
        ArrayType,
        CharType,
        MapType,
        StringType,
        StructField,
        StructType,
        VarcharType,
    )

    if isinstance(t, (CharType, VarcharType)):
        return StringType()
    if isinstance(t, ArrayType):
        return ArrayType(_plain(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(_plain(t.keyType), _plain(t.valueType), True)
    if isinstance(t, StructType):
        return StructType([StructField(f.name, _plain(f.dataType), True) for f in t.fields])
    return t


def _nested_bad(c: Column, t: Any) -> Column | None:
    """True where a non-null value ``c`` of declared type ``t`` breaks a nested rule (NOT NULL fields,
    lengths)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, CharType, MapType, StructType, VarcharType

    if isinstance(t, (CharType, VarcharType)):
        return F.length(c) > t.length
    terms: list[Column] = []
    if isinstance(t, StructType):
        for f in t.fields:
            child = c.getField(f.name)
            if not f.nullable:
                terms.append(child.isNull())
            inner = _nested_bad(child, f.dataType)
            if inner is not None:
                terms.append(child.isNotNull() & inner)
    elif isinstance(t, (ArrayType, MapType)):
        element = t.elementType if isinstance(t, ArrayType) else t.valueType
        probe = _nested_bad(F.lit(None).cast(_plain(element)), element)
        if probe is not None:
            values = c if isinstance(t, ArrayType) else F.map_values(c)
            terms.append(
                F.exists(
                    values,
                    lambda x: (
                        x.isNotNull() & F.coalesce(_nested_bad(x, element) or F.lit(False), F.lit(False))
                    ),
                )
            )
    return reduce(lambda a, b: a | b, terms) if terms else None


def _convert(c: Column, source: Any, declared: Any) -> tuple[Column, Column | None, bool]:
    """``(converted, lossy, compatible)``: ``c`` as the declared type, where the conversion changed a
    value."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    target = _plain(declared)
    if _plain(source).simpleString() == target.simpleString():
        return c.cast(target), None, True
    ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    exact = None
    if isinstance(target, ints) and isinstance(source, ints):
        exact = True
    elif isinstance(target, (T.FloatType, T.DoubleType)) and isinstance(
        source, (*ints, T.FloatType, T.DoubleType)
    ):
        return c.cast(target), None, True
    elif isinstance(target, T.DecimalType) and isinstance(source, (*ints, T.DecimalType)):
        exact = True
    elif isinstance(target, T.StringType) and isinstance(source, (T.StringType, T.CharType, T.VarcharType)):
        return c.cast(target), None, True
    elif isinstance(target, (T.DateType, T.TimestampType, T.TimestampNTZType)) and isinstance(
        source, T.StringType
    ):
        exact = False
    elif isinstance(target, (T.TimestampType, T.TimestampNTZType)) and isinstance(
        source, (T.TimestampType, T.TimestampNTZType)
    ):
        return c.cast(target), None, True
    elif isinstance(target, T.DateType) and isinstance(source, T.DateType):
        return c, None, True
    if exact is None:
        return F.lit(None).cast(target), c.isNotNull(), False
    converted = F.try_cast(c, target) if hasattr(F, "try_cast") else c.try_cast(target)
    lossy = c.isNotNull() & (converted.isNull() | (converted != c if exact else F.lit(False)))
    return converted, lossy, True


def _checked(log: InputLog, df: DataFrame) -> DataFrame:
    """``df`` as the declared fields plus ``_bad`` (NULL, or the first problem), ``_mid`` and
    ``_partition``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DataType, StructType

    declared = DataType.fromDDL(log.schema)
    assert isinstance(declared, StructType)
    source = {f.name: f.dataType for f in df.schema.fields}
    names = ", ".join(f.name for f in declared.fields)
    problems: list[tuple[Column, str, Column]] = []  # (bad?, field, message)
    for extra in (n for n in source if n not in {f.name for f in declared.fields}):
        problems.append(
            (F.lit(True), extra, F.lit(f"field {extra!r}: not declared in the schema (declared: {names})"))
        )
    columns = []
    for f in declared.fields:
        if f.name not in source:
            columns.append(F.lit(None).cast(_plain(f.dataType)).alias(f.name))
            if not f.nullable:
                problems.append(
                    (F.lit(True), f.name, F.lit(f"field {f.name!r}: missing, but declared NOT NULL"))
                )
            continue
        c = F.col(f"`{f.name}`")
        converted, lossy, compatible = _convert(c, source[f.name], f.dataType)
        columns.append(converted.alias(f.name))
        what = F.concat(
            F.lit(
                f"field {f.name!r}: expected {f.dataType.simpleString().upper()}, got "
                f"{source[f.name].simpleString()} "
            ),
            F.coalesce(c.cast("string"), F.lit("?")),
        )
        if lossy is not None:
            problems.append((lossy, f.name, what))
        if not f.nullable:
            problems.append((c.isNull(), f.name, F.lit(f"field {f.name!r}: None, but declared NOT NULL")))
        if compatible:
            nested = _nested_bad(converted, f.dataType)
            if nested is not None:
                problems.append((converted.isNotNull() & nested, f.name, what))
    bad = F.lit(None).cast("struct<field: string, problem: string, record: string>")
    for test, field, message in reversed(problems):
        bad = F.when(
            test,
            F.struct(
                F.lit(field).alias("field"),
                message.alias("problem"),
                F.to_json(F.struct(*[F.col(f"`{n}`") for n in source])).alias("record"),
            ),
        ).otherwise(bad)
    mid = F.monotonically_increasing_id()
    out = df.select(*columns, bad.alias("_bad"), mid.alias("_mid"))
    spread = F.pmod(F.col("_mid"), F.lit(log.partitions)).cast("int")
    if log.key is None or log.partitions == 1:
        part = spread
    else:
        key = F.col(f"`{log.key}`")
        part = F.when(key.isNull(), spread).otherwise(
            F.pmod(F.crc32(key.cast("string").cast("binary")), F.lit(log.partitions)).cast("int")
        )
    return out.withColumn("_partition", part)


def append_frame(
    log: InputLog, df: DataFrame, batch: str | None, ends: dict[int, int], skip: set[int]
) -> dict[int, int]:
    """Append Spark DataFrame ``df`` to ``log`` (see the module docstring); how many records went to each
    partition."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    checked = _checked(log, df)
    segment = F.when(F.col("_bad").isNotNull(), F.lit(-1)).otherwise(F.col("_partition"))
    rows = checked.withColumn("_segment", segment).where(
        (F.col("_segment") == -1) | ~F.col("_partition").isin(sorted(skip) or [-2])
    )
    rank = F.row_number().over(Window.partitionBy("_segment").orderBy("_mid")) - 1
    start = F.create_map(*[F.lit(x) for k in range(log.partitions) for x in (k, ends[k])])
    rows = rows.withColumn("_offset", (F.try_element_at(start, F.col("_segment")) + rank).cast("long"))
    fields = [f.name for f in log.record_schema.fields]
    location = f"{log.dir}/spark/{uuid.uuid4().hex[:12]}"
    # the offsets it starts at, before anything of it is written: garbage collection tells an append in
    # progress from the leftovers of one that ended by them (sweep_spark)
    log.fs.replace(
        f"{location}.json", json.dumps({"starts": {str(k): ends[k] for k in range(log.partitions)}}).encode()
    )
    try:
        rows.select(
            *[F.col(f"`{n}`") for n in fields],
            "_partition",
            "_offset",
            "_segment",
            F.when(F.col("_segment") == -1, F.struct("_bad", "_mid")).alias("_bad"),
        ).write.partitionBy("_segment").parquet(log.fs.spark_uri(location))
        found = _files(log, location)
        bad = found.pop(-1, [])
        problems = _bad_rows(log, bad) if bad else []
        if problems and not log.dead_letter:
            raise _first_error(log, checked, problems[0], ends)
    except BaseException:
        log.fs.delete(location, recursive=True)
        log.fs.delete(f"{location}.json")
        raise
    if bad:
        _dead_letters(log, checked, problems, batch)
        for name, _, _ in bad:
            log.fs.delete(f"{log.dir}/{posixpath.dirname(name)}", recursive=True)
    written = {}
    published: list[seg.SegmentManifest] = []
    for k in sorted(found):
        entries = found[k]
        n = sum(r for _, _, r in entries)
        files = tuple(
            FileEntry(name, size, log.fs.checksum(f"{log.dir}/{name}") if log.checksums else "")
            for name, size, _ in entries
        )
        manifest = seg.SegmentManifest(log.name, k, ends[k], n, batch, log.dir, files)
        seg.publish_manifest(log.fs, log.dir, manifest)
        published.append(manifest)
        written[k] = n
    seg.check_alone(log.fs, log.dir, published)
    return written


def _files(log: InputLog, location: str) -> dict[int, list[tuple[str, int, int]]]:
    """The Parquet files Spark wrote, by segment: ``(name relative to the log, size, rows)`` from their
    footers."""
    out: dict[int, list[tuple[str, int, int]]] = {}
    listed = list(log.fs.walk_files(location))
    if log.fsync:  # what the executors wrote: each file, then the directories whose entries they are
        for name, _ in listed:
            log.fs.sync_file(f"{location}/{name}", checksum=False, fsync=True)
        log.fs.sync_dir(location, {posixpath.dirname(name) for name, _ in listed}, created=True)
    parts = {
        f"{location}/{name}": size
        for name, size in listed
        if posixpath.dirname(name).startswith("_segment=") and posixpath.basename(name).startswith("part-")
    }
    for rel, rows in log.fs.parquet_rows(parts).items():  # the footers, read together
        if not isinstance(rows, int):
            raise StorageError(f"{log.fs.describe(rel)}, written by Spark for input {log.name}: {rows}")
        if rows:
            segment = int(posixpath.basename(posixpath.dirname(rel)).split("=", 1)[1])
            out.setdefault(segment, []).append((rel[len(log.dir) + 1 :], parts[rel], rows))
    return out


def _bad_rows(log: InputLog, files: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """The bad rows Spark wrote aside (``_segment=-1``), in the DataFrame's order."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for name, _, _ in files:
        with log.fs.fs.open(log.fs.full(f"{log.dir}/{name}"), "rb") as fh:
            table = pq.read_table(fh, columns=["_partition", "_bad"])
        for r in table.to_pylist():
            rows.append({"partition": r["_partition"], "mid": r["_bad"]["_mid"], **r["_bad"]["_bad"]})
    return sorted(rows, key=lambda r: r["mid"])


def _index(checked: DataFrame, mids: list[int]) -> dict[int, int]:
    """Each row id's position in the DataFrame (rows of earlier Spark partitions, then its rank in its
    own)."""
    from pyspark.sql import functions as F

    counts: dict[int, int] = dict(
        checked.groupBy(F.shiftright(F.col("_mid"), 33).alias("p")).count().collect()
    )
    before, total = {}, 0
    for p in sorted(counts):
        before[p], total = total, total + counts[p]
    return {m: before.get(m >> 33, 0) + (m & _MASK) for m in mids}


def _first_error(
    log: InputLog, checked: DataFrame, first: dict[str, Any], ends: dict[int, int]
) -> RecordError:
    from pyspark.sql import functions as F

    k, mid = first["partition"], first["mid"]
    before = checked.where(
        F.col("_bad").isNull() & (F.col("_partition") == k) & (F.col("_mid") < mid)
    ).count()
    index = _index(checked, [mid])[mid]
    return RecordError(log.name, k, ends[k] + before, index, first["field"], first["problem"])


def _dead_letters(
    log: InputLog, checked: DataFrame, problems: list[dict[str, Any]], batch: str | None
) -> None:
    index = _index(checked, [p["mid"] for p in problems])
    ingest.divert(
        log,
        [
            {
                "index": index[p["mid"]],
                "partition": p["partition"],
                "field": p["field"],
                "problem": p["problem"],
                "record": json.loads(p["record"]),
            }
            for p in problems
        ],
        batch,
    )


#: a run's directory under ``spark/`` (``uuid4().hex[:12]``), and its record of start offsets
_RUN = re.compile(r"^[0-9a-f]{12}$")
_RECORD = re.compile(r"^[0-9a-f]{12}\.json$")


#: records already reported unreadable (:func:`_unreadable_record`), so that each is said once per process
_REPORTED: set[str] = set()


def _unreadable_record(log: InputLog, rel: str, exc: Exception) -> None:
    """Say (once per process) that an append's record cannot be read, so its run is never swept."""
    where = log.fs.describe(rel)
    if where in _REPORTED:
        return
    _REPORTED.add(where)
    run = posixpath.basename(rel)[: -len(".json")]
    logging.getLogger(__name__).warning(
        "input %r: %s cannot be read (%s: %s), so what it records (the start offsets of the DataFrame append "
        "that wrote spark/%s/) is unknown and that run is kept, never swept; it was damaged outside falkirk. "
        "Once no append is in progress, delete spark/%s/ and the record if no manifest names the run's files "
        "(else write the record again)",
        log.name,
        where,
        type(exc).__name__,
        exc,
        run,
        run,
    )


def sweep_spark(log: InputLog, below: Mapping[int, int]) -> int:
    """Delete what Spark wrote under ``spark/`` that no manifest names and no append in progress may still
    publish; bytes freed.

    ``below``: each partition's end offset in the acknowledged cut. Each
    append records the offsets it starts at (``spark/<id>.json``) before
    Spark writes ``spark/<id>/``: every partition's end then. With one
    appender at a time (what a log supports), a partition's start stays at
    or above ``below`` until the append has published that partition's
    segment, which a manifest then names. So a part no manifest names is
    deleted once its own partition's start is below ``below`` (the rule for
    the driver's files, :func:`~falkirk.spark.pipeline.store.segments.sweep`),
    and the run with its record once none of its parts is left and some
    start is below ``below`` (an append that has published nothing yet has
    none; its bad rows, ``_segment=-1``, are gone before it publishes). A run
    whose record is missing (looked for again: a listing may come in pages)
    was written by code before the record existed, and is swept as then: a
    producer still running that code is not protected. A run whose record
    cannot be read (damaged outside falkirk) is kept, and a warning names the
    record, once per process. Names that are not a run's or a record's (a
    temporary file of a record being written) are left alone.
    """
    base = f"{log.dir}/spark"
    names = [n for n in log.fs.listdir(base) if _RUN.match(n) or _RECORD.match(n)]
    if not names:
        return 0
    runs = {n for n in names if _RUN.match(n)}
    listed = set(names)
    # every run's record, also where the listing did not show it (written before the run, it may have been
    # listed on an earlier page than its run, before it existed)
    records = log.fs.read_many(
        [f"{base}/{n}" for n in names if _RECORD.match(n)]
        + [f"{base}/{r}.json" for r in sorted(runs) if f"{r}.json" not in listed]
    )
    starts: dict[str, dict[int, int] | None] = {}
    for rel, raw in records.items():
        run = posixpath.basename(rel)[: -len(".json")]
        if isinstance(raw, FileNotFoundError):
            if f"{run}.json" in listed:
                starts[run] = (
                    None  # gone meanwhile (a failed append deletes its run, then it): proves nothing
                )
            continue  # a run without a record: older code's
        try:
            starts[run] = {int(k): int(v) for k, v in json.loads(raw)["starts"].items()}
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            starts[run] = None  # unreadable: proves nothing (kept)
            _unreadable_record(log, rel, exc)

    def behind(run: str, k: int | None) -> bool:
        """Whether ``run`` started below the acknowledged cut in partition ``k`` (``None``: in any)."""
        if run not in starts:
            return True
        first = starts[run]
        if first is None:
            return False
        if k is None:
            return any(o < below.get(j, 0) for j, o in first.items())
        return k in first and first[k] < below.get(k, 0)

    named = {
        posixpath.dirname(f.name)
        for k in range(log.partitions)
        for s in log.segments(k)
        if not s.legacy
        for f in seg.read_manifest(log.fs, s, log.name, -1).files
    }
    freed = 0
    for run in names:
        if _RECORD.match(run):
            if run[: -len(".json")] not in runs and behind(run[: -len(".json")], None):
                log.fs.delete(f"{base}/{run}")  # its run went before it (a crash in between)
            continue
        left = False
        for p in log.fs.listdir(f"{base}/{run}"):
            if not p.startswith("_segment="):
                continue
            value = p.split("=", 1)[1]
            k = int(value) if value.lstrip("-").isdigit() else None
            if f"spark/{run}/{p}" in named or k is None or not behind(run, None if k < 0 else k):
                left = True  # published, or perhaps about to be
                continue
            freed += log.fs.size(f"{base}/{run}/{p}")
            log.fs.delete(f"{base}/{run}/{p}", recursive=True)
        if not left and behind(run, None):
            freed += log.fs.size(f"{base}/{run}")
            log.fs.delete(f"{base}/{run}", recursive=True)
            if run in starts:
                log.fs.delete(f"{base}/{run}.json")
    return freed
