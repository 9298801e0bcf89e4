"""Reading items back with Spark: the DataFrame a manifest describes, from exactly the files it lists.

:func:`read_frame` reads one item (checkpoint, logged epoch, output) after
:meth:`Storage.verify <falkirk.spark.pipeline.store.storage.Storage.verify>`
has checked its files; :func:`read_tagged` reads several in one scan, each
row tagged with the item it came from; :func:`read_many` several of one
schema in one scan, untagged. Only the files a manifest lists are
read, never a directory listing: a file a failed write left beside them is
not data. :class:`~falkirk.spark.pipeline.store.storage.Storage` exposes
them as methods (``storage.read_frame(spark, m)``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from attrs import evolve

from falkirk.spark.errors import CorruptDataError
from falkirk.spark.pipeline.store.manifest import Manifest, manifest_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["read_frame", "read_many", "read_partitioned", "read_tagged"]


def _schema(m: Manifest) -> Any:
    """``m``'s schema (a ``StructType``); :class:`CorruptDataError` if it has none, or claims rows without
    files."""
    from pyspark.sql.types import StructType

    if m.schema is None:
        raise CorruptDataError(
            m.step, m.kind, m.epoch, "has no schema", path=manifest_path(m.step, m.kind, m.epoch)
        )
    if not m.files and m.rows > 0:
        raise CorruptDataError(
            m.step,
            m.kind,
            m.epoch,
            f"claims {m.rows} rows but lists no data file",
            path=manifest_path(m.step, m.kind, m.epoch),
        )
    return StructType.fromJson(json.loads(m.schema))


def read_frame(storage: Storage, spark: SparkSession, m: Manifest, *, verify: bool = True) -> DataFrame:
    """The DataFrame ``m`` describes, read from exactly its listed files (verified first)."""
    if verify:
        storage.verify(m)
    schema = _schema(m)
    if not m.files:  # empty by its plan (``limit(0)``): no job reads it (Frames.planned_empty)
        return spark.createDataFrame([], schema).limit(0)
    base = storage.fs.spark_uri(m.location or "")
    reader = spark.read.schema(schema)
    if any("/" in f.name for f in m.files):  # partitioned directories: their values are columns
        reader = reader.option("basePath", base)
    return reader.parquet(*(f"{base}/{f.name}" for f in m.files))


def read_many(
    storage: Storage, spark: SparkSession, ms: Sequence[Manifest], *, verify: bool = True
) -> DataFrame:
    """The rows of several unpartitioned items of one schema (an ``append=True`` state's chain), from exactly
    their listed files, in **one scan**, with the first's schema."""
    if verify:
        for m in ms:
            storage.verify(m)
    for m in ms:
        _schema(m)  # each has one, and lists files for its rows
        if any("/" in f.name for f in m.files):
            raise CorruptDataError(
                m.step,
                m.kind,
                m.epoch,
                "lists files in partition directories, where the chain it belongs to has none",
                path=manifest_path(m.step, m.kind, m.epoch),
            )
    files = [f"{storage.fs.spark_uri(m.location or '')}/{f.name}" for m in ms for f in m.files]
    schema = _schema(ms[0])  # the columns in the order of the chain's first (as the state's union keeps them)
    if not files:  # empty by its plan (``limit(0)``): no job reads it (Frames.planned_empty)
        return spark.createDataFrame([], schema).limit(0)
    return spark.read.schema(schema).parquet(*files)


def read_partitioned(
    storage: Storage, spark: SparkSession, m: Manifest, column: str, n: int, *, verify: bool = True
) -> DataFrame:
    """The DataFrame ``m`` describes in exactly ``n`` partitions, partition ``i`` holding the rows of its files
    under ``column=i/`` (``column`` itself not read), without a shuffle: each directory's files are read by one
    task. For an item written with ``partitionBy(column)``, ``column`` in ``0 .. n-1``; files outside those
    directories are a :class:`CorruptDataError`, an absent directory an empty partition.

    A union of ``n`` one-partition reads, plus an empty child of no partitions: Spark's partition-aware
    union (``spark.sql.unionOutputPartitioning``) would otherwise see ``n`` children of one partition each
    and zip them into a single partition. That child is an empty RDD, so a classic session only (through
    Spark Connect: :func:`read_frame` and a shuffle)."""
    from functools import reduce

    if verify:
        storage.verify(m)
    by: dict[int, list[Any]] = {i: [] for i in range(n)}
    for f in m.files:
        head = f.name.split("/", 1)[0]
        name, _, value = head.partition("=")
        if name != column or not value.isdigit() or int(value) not in by:
            raise CorruptDataError(
                m.step,
                m.kind,
                m.epoch,
                f"lists {f.name!r}, outside the {n} directories {column}=0 .. {column}={n - 1}",
                path=manifest_path(m.step, m.kind, m.epoch),
            )
        by[int(value)].append(f)
    schema = _schema(m)
    cols = [c for c in schema.fieldNames() if c != column]
    # an absent directory is an empty partition Spark's optimizer cannot fold away (a Python RDD of no rows):
    # read_frame's empty read, a limit(0), would be dropped from the union and shift the partitions after it
    parts = [
        (
            read_frame(storage, spark, evolve(m, files=tuple(by[i])), verify=False)
            if by[i]
            else spark.createDataFrame([], schema)
        )
        .select(*cols)
        .coalesce(1)
        for i in range(n)
    ]
    if n > 1:  # an empty child of no partitions: else Spark zips n single partitions into one
        parts.append(spark.createDataFrame(spark.sparkContext.emptyRDD(), parts[0].schema))
    return reduce(lambda a, b: a.union(b), parts)


def _told_apart(ms: Sequence[Manifest], tags: Sequence[int]) -> tuple[int, dict[str, int]] | None:
    """The fewest last components of a file's path (``depth``) that give every name one tag, and the tag of each
    name; ``None`` if even the names with their item's directory do not."""
    files = [
        (f"{m.location or ''}/{f.name}".split("/"), t) for m, t in zip(ms, tags, strict=True) for f in m.files
    ]
    deepest = max(f.name.count("/") for m in ms for f in m.files) + 1  # the item's own directory at most
    for depth in range(1, deepest + 1):
        tag_of: dict[str, int] = {}
        if all(tag_of.setdefault("/".join(parts[-depth:]), t) == t for parts, t in files):
            return depth, tag_of
    return None


def read_tagged(
    storage: Storage,
    spark: SparkSession,
    ms: Sequence[Manifest],
    column: str,
    tags: Sequence[int] | None = None,
    *,
    verify: bool = True,
) -> DataFrame:
    """The rows of several manifests' data, read in **one scan**, each with ``column`` (an int): the tag of
    the manifest listing its file (``tags[i]`` for ``ms[i]``; default ``i``).

    Columns: the manifests' data columns by name (the first's order,
    then new ones; null where a file lacks one). Partition columns
    (``name=value/`` directories) are not read: the files of different
    manifests lie under different directories.

    One scan, not a union of one read per manifest: Spark plans,
    schedules and opens each scan apart, which for a chain of small
    checkpoints costs several times reading them. A row's manifest is
    told by the last components of its path (``_metadata.file_path``),
    as many as the deepest name a manifest lists has: unique per written
    file. If two files are not told apart that way, or a column's type
    differs between the manifests, they are read one by one and unioned
    instead.
    """
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    tags = list(range(len(ms))) if tags is None else list(tags)
    if verify:
        for m in ms:
            storage.verify(m)
    schemas = [_schema(m) for m in ms]
    partition_cols = {
        part.split("=", 1)[0] for m in ms for f in m.files for part in f.name.split("/")[:-1] if "=" in part
    }
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
    if not any(m.files for m in ms):
        return spark.createDataFrame([], merged).withColumn(column, F.lit(None).cast("int"))
    # a file is told by the fewest last components of its path that give every name one tag: its name alone
    # (``_metadata.file_name``, no string taken apart per row) unless two manifests hold files of that name (a
    # keyed item's task writes a file of the same name into each partition directory: the same manifest's)
    paths = [f"{storage.fs.spark_uri(m.location or '')}/{f.name}" for m in ms for f in m.files]
    told = _told_apart(ms, tags)
    if not agree or told is None or any(not m.location for m in ms if m.files):
        frames = [
            read_frame(storage, spark, m, verify=False).drop(*partition_cols).withColumn(column, F.lit(t))
            for m, t in zip(ms, tags, strict=True)
        ]
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    depth, tag_of_name = told
    tag_of = F.create_map(*[F.lit(v) for name, t in tag_of_name.items() for v in (name, t)])
    name = (
        F.col("_metadata.file_name")
        if depth == 1
        else F.substring_index(F.col("_metadata.file_path"), "/", -depth)
    )
    return (
        spark.read.schema(merged).parquet(*paths).withColumn(column, F.element_at(tag_of, name).cast("int"))
    )
