"""A small frame written from the driver: its rows collected as Arrow and written as Parquet by pyarrow.

Spark's own write of a few hundred rows costs a job with the file committer's protocol (task attempt files,
their renames, the job's commit); collecting the same rows as Arrow (one job) and writing the files from the
driver costs a fraction of it (``benchmarks/README.md``, "A small checkpoint written from the driver"). The
layout is Spark's — ``part-*.parquet`` files, one directory ``column=value`` per value of the partition column,
that column left out of the files, the Spark schema and version in each footer — so a reader given the
manifest's schema reads it as it reads Spark's.

Only where nothing can differ from what Spark would have written and read back:

* the caller knows the frame is small (a state already computed and held in memory, whose size the cache
  reports) and that the driver sees the root as the executors do
  (:meth:`~falkirk.spark.pipeline.store.storage.Storage.write_collected`);
* every column is of a type whose Parquet form pyarrow writes as Spark does (:data:`PLAIN`), and the
  partition column, if any, an integer with no nulls;
* the session writes Parquet as pyarrow does here (:func:`session_allows`: Spark's default codec, no Parquet
  encryption);
* a partitioned frame has rows (an empty one is written by Spark, as before; an empty unpartitioned one is one
  file of no rows, as Spark writes it).

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

__all__ = [
    "CODEC",
    "ENCRYPTION",
    "PLAIN",
    "SPARK_ROW_METADATA",
    "SPARK_VERSION",
    "collectable",
    "empty_table",
    "session_allows",
    "write",
]

#: Spark types whose Parquet form pyarrow writes as Spark's writer does (timestamps, decimals and nested types
#: are left to Spark: their Parquet annotations differ between the two writers)
PLAIN = frozenset(
    {"boolean", "byte", "short", "integer", "long", "float", "double", "string", "binary", "date"}
)

#: the Parquet footer key under which Spark records a file's Spark schema (read back where no schema is given)
SPARK_ROW_METADATA = "org.apache.spark.sql.parquet.row.metadata"
#: the Parquet footer key under which Spark records the version that wrote a file
SPARK_VERSION = "org.apache.spark.version"


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


#: Spark's Parquet codec the files are written with (a session set to another is left to Spark's writer)
CODEC = "snappy"

#: Hadoop settings that turn Parquet modular encryption on: a session with any of them is left to Spark's writer
ENCRYPTION = ("parquet.crypto.factory.class", "parquet.encryption.kms.client.class")


def session_allows(spark: Any) -> bool:
    """Whether ``spark`` writes Parquet as :func:`write` does: the codec :data:`CODEC` and no encryption
    (:data:`ENCRYPTION` unset in its Hadoop configuration)."""
    try:
        if str(spark.conf.get("spark.sql.parquet.compression.codec", CODEC)).lower() != CODEC:
            return False
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        return all(hadoop.get(key) is None for key in ENCRYPTION)
    except Exception:  # noqa: BLE001 - not knowable (no JVM here): Spark's writer
        return False


def empty_table(schema: Any, *, large: bool = False) -> pa.Table:
    """The table a frame of Spark ``schema`` (of :func:`collectable` columns) known to have no rows collects
    to, made with no job: Arrow's types for the columns as ``DataFrame.toArrow`` names them (``large``: the
    session's ``spark.sql.execution.arrow.useLargeVarTypes``, large strings and binaries, as ``toArrow``
    then collects them).

    >>> from pyspark.sql.types import DoubleType, StringType, StructField, StructType
    >>> of = StructType([StructField("k", StringType()), StructField("p", DoubleType())])
    >>> t = empty_table(of)
    >>> t.num_rows, t.column_names, [str(f.type) for f in t.schema]
    (0, ['k', 'p'], ['string', 'double'])
    >>> [str(f.type) for f in empty_table(of, large=True).schema]
    ['large_string', 'double']
    """
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema)  # no timestamps here: no time zone to name
    if large:
        wider = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}
        arrow = pa.schema([f.with_type(wider.get(f.type, f.type)) for f in arrow])
    return arrow.empty_table()


def write(
    root: Root, location: str, table: pa.Table, schema: Any, partition_by: str | None, spark_version: str
) -> None:
    """Write ``table`` (collected from a frame of Spark ``schema``) under ``location`` as Spark lays a write out:
    one ``part-00000-<id>.c000.snappy.parquet`` per value of ``partition_by`` in ``partition_by=value/`` (that
    column not in the file), or one ``part-00000-<id>-c000.snappy.parquet`` when unpartitioned (Spark's names for
    them); each file's footer records its Spark schema as
    Spark's writer does (its schema, and ``spark_version``: Spark's reader applies its legacy calendar settings
    only to files that do not name the version that wrote them). ``partition_by``'s column has no nulls. The files
    are not flushed or described here (``Storage.describe_files`` does)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    job, counter = uuid.uuid4(), "-c000" if partition_by is None else ".c000"  # as Spark 4 names its files
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
    metadata = {SPARK_ROW_METADATA: StructType(fields).json(), SPARK_VERSION: spark_version}
    root.makedirs(location)
    for directory, part in parts:
        where = posixpath.join(location, directory) if directory else location
        root.makedirs(where)
        buffer = io.BytesIO()
        pq.write_table(part.replace_schema_metadata(metadata), buffer, compression=CODEC)
        root.write_new(posixpath.join(where, f"part-00000-{job}{counter}.snappy.parquet"), buffer.getvalue())
