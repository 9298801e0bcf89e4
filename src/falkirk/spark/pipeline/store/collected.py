"""A small frame written from the driver: its rows collected as Arrow and written as Parquet by pyarrow.

Spark's own write of a few hundred rows costs a job with the file committer's protocol (task attempt files,
their renames, the job's commit): about 0.19 CPU-s of the driver's process tree here for a 300-row keyed state
in two key-group directories, against 0.06 CPU-s for collecting the same rows as Arrow (one job) and writing
the files from the driver (``benchmarks/README.md``, "A small checkpoint written from the driver"). The layout
is Spark's — ``part-*.parquet`` files, one directory ``column=value`` per value of the partition column, that
column left out of the files — so every reader of a checkpoint reads it unchanged.

Only where nothing can differ from what Spark would have written and read back:

* the caller knows the frame is small (a state already computed and held in memory, whose size the cache
  reports; the caller decides, :meth:`~falkirk.spark.pipeline.store.storage.Storage.write_frame`'s
  ``collect``);
* every column is of a type whose Parquet form pyarrow writes as Spark does (:data:`PLAIN`), and the
  partition column, if any, is an integer;
* the frame has rows (an empty one is written by Spark, as before).

:func:`collectable` says whether a schema qualifies; :func:`write` writes a collected table.
"""

from __future__ import annotations

import io
import posixpath
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from falkirk.spark.pipeline.store.rootfs import Root

__all__ = ["PLAIN", "SPARK_ROW_METADATA", "collectable", "write"]

#: Spark types whose Parquet form pyarrow writes as Spark's writer does (timestamps, decimals and nested types
#: are left to Spark: their Parquet annotations differ between the two writers)
PLAIN = frozenset(
    {"boolean", "byte", "short", "integer", "long", "float", "double", "string", "binary", "date"}
)

#: the Parquet footer key under which Spark records a file's Spark schema (read back where no schema is given)
SPARK_ROW_METADATA = "org.apache.spark.sql.parquet.row.metadata"


def collectable(schema: Any, partition_by: str | None) -> bool:
    """Whether a frame of Spark ``schema`` (a ``StructType``), partitioned by ``partition_by``, can be written
    from the driver with Spark's layout (see the module docstring).

    >>> from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType
    >>> def of(*fields):
    ...     return StructType([StructField(name, kind) for name, kind in fields])
    >>> collectable(of(("k", StringType()), ("n", LongType()), ("_subtask", IntegerType())), "_subtask")
    True
    >>> collectable(of(("k", StringType()), ("at", TimestampType())), None), collectable(of(("k", StringType())), "k")
    (False, False)
    """
    names = [f.name for f in schema.fields]
    if len(set(names)) != len(names) or (partition_by is not None and partition_by not in names):
        return False
    for f in schema.fields:
        kind = f.dataType.typeName()
        if kind not in PLAIN or (f.name == partition_by and kind not in ("byte", "short", "integer", "long")):
            return False
    return True


def write(root: Root, location: str, table: pa.Table, schema: Any, partition_by: str | None) -> None:
    """Write ``table`` (collected from a frame of Spark ``schema``) under ``location`` as Spark lays a write out:
    one ``part-00000-<id>.c000.snappy.parquet`` per value of ``partition_by`` in ``partition_by=value/`` (that
    column not in the file), or one file when unpartitioned; each file's footer records its Spark schema as
    Spark's writer does. The files are not flushed or described here (``Storage.describe_files`` does)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    job = uuid.uuid4()
    if partition_by is None:
        parts: list[tuple[str, pa.Table]] = [("", table)]
        fields = schema.fields
    else:
        column = table.column(partition_by)
        rest = table.drop([partition_by])
        parts = [
            (f"{partition_by}={value}", rest.filter(pc.equal(column, value)))
            for value in sorted(pc.unique(column).to_pylist())
        ]
        fields = [f for f in schema.fields if f.name != partition_by]
    metadata = {SPARK_ROW_METADATA: StructType(fields).json()}
    root.makedirs(location)
    for directory, part in parts:
        where = posixpath.join(location, directory) if directory else location
        root.makedirs(where)
        buffer = io.BytesIO()
        pq.write_table(part.replace_schema_metadata(metadata), buffer, compression="snappy")
        root.write_new(posixpath.join(where, f"part-00000-{job}.c000.snappy.parquet"), buffer.getvalue())
