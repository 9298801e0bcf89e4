"""An input's declared schema as a ``pyarrow.Schema``: the types its segments are checked and written in.

The DDL string is mapped **once** per input log. Where a Spark session is at
hand, Spark's own parser reads it (``DataType.fromDDL``) and PySpark's
``to_arrow_schema`` maps it; otherwise falkirk's parser
(:func:`~falkirk.spark.pipeline.store.records.parse_schema`) and the table
below do — the two give the same schema (``tests/spark/pipeline/store/
test_arrowschema.py`` checks it for every type an input may declare).

==================  ===============================  ======================
declared            Arrow (segments)                 Spark reads
==================  ===============================  ======================
TINYINT … BIGINT    int8 … int64                     the same
FLOAT, DOUBLE       float32, float64
DECIMAL(p, s)       decimal128(p, s)
BOOLEAN             bool
STRING              string
VARCHAR(n), CHAR(n) string, ``n`` in field metadata  STRING (length checked
                                                     when appended)
DATE                date32
TIMESTAMP           timestamp[us, UTC]               instant (Parquet
                                                     ``isAdjustedToUTC``)
TIMESTAMP_NTZ       timestamp[us]                    wall-clock time
ARRAY / MAP / …     list / map<string, …> / struct
==================  ===============================  ======================

``NOT NULL`` becomes a non-nullable field at the top level; inside a struct
every field is nullable in Arrow (the fields of a ``NULL`` struct are
``NULL``, which a non-nullable Arrow field may not hold), and ``NOT NULL``
there is checked, not declared. An Arrow schema has no notion of a
string's maximum length, so ``VARCHAR(n)``/``CHAR(n)`` keep ``n`` in the
field's metadata (:data:`MAX_LENGTH`), where the vectorised check
(:mod:`~falkirk.spark.pipeline.store.convert`) finds it.

>>> from falkirk.spark.pipeline.store.records import parse_schema
>>> s = arrow_schema(parse_schema("user STRING NOT NULL, ts TIMESTAMP, code VARCHAR(3), tags ARRAY<STRING>"))
>>> [(f.name, str(f.type), f.nullable) for f in s]
[('user', 'string', False), ('ts', 'timestamp[us, tz=UTC]', True), ('code', 'string', True), ('tags', 'list<item: string>', True)]
>>> s.field("code").metadata
{b'falkirk.max_length': b'3'}
>>> read_ddl(parse_schema("code VARCHAR(3), `odd name` ARRAY<CHAR(2)>"))
'`code` STRING, `odd name` ARRAY<STRING>, `_partition` INT, `_offset` BIGINT'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from falkirk.spark.pipeline.store.records import Field, RecordSchema, Type

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["MAX_LENGTH", "arrow_schema", "arrow_type", "log_fields", "read_ddl"]

#: Field metadata key holding the ``n`` of ``VARCHAR(n)``/``CHAR(n)``.
MAX_LENGTH = b"falkirk.max_length"


def arrow_type(t: Type) -> pa.DataType:
    """The Arrow type of a declared type (see the module docstring)."""
    import pyarrow as pa

    simple = {
        "TINYINT": pa.int8(),
        "SMALLINT": pa.int16(),
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "FLOAT": pa.float32(),
        "DOUBLE": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "STRING": pa.string(),
        "VARCHAR": pa.string(),
        "CHAR": pa.string(),
        "DATE": pa.date32(),
        "TIMESTAMP": pa.timestamp("us", tz="UTC"),
        "TIMESTAMP_NTZ": pa.timestamp("us"),
    }
    if t.name in simple:
        return simple[t.name]
    if t.name == "DECIMAL":
        return pa.decimal128(*t.params)
    assert t.element is not None or t.name == "STRUCT"
    if t.name == "ARRAY":
        return pa.list_(arrow_type(t.element))  # type: ignore[arg-type]
    if t.name == "MAP":
        return pa.map_(pa.string(), arrow_type(t.element))  # type: ignore[arg-type]
    return pa.struct([_arrow_field(f, nested=True) for f in t.fields])


def _arrow_field(f: Field, *, nested: bool = False) -> pa.Field:
    import pyarrow as pa

    meta = {MAX_LENGTH: str(f.type.params[0]).encode()} if f.type.name in ("VARCHAR", "CHAR") else None
    return pa.field(f.name, arrow_type(f.type), nullable=f.nullable or nested, metadata=meta)


def arrow_schema(schema: RecordSchema, spark: Any = None) -> pa.Schema:
    """The Arrow schema of ``schema``'s fields: Spark's parser and mapping when ``spark`` is a session, else
    falkirk's."""
    import pyarrow as pa

    if spark is not None:
        mapped = _from_spark(schema.ddl, spark)
        if mapped is not None:
            return mapped
    return pa.schema([_arrow_field(f) for f in schema.fields])


def _from_spark(ddl: str, spark: Any) -> pa.Schema | None:
    """Spark's reading of ``ddl`` mapped by PySpark (``None`` if the session cannot parse here, e.g.
    stopped)."""
    import pyarrow as pa
    from pyspark.sql.types import CharType, DataType, StructType, VarcharType

    try:
        parsed = DataType.fromDDL(ddl)
    except Exception:  # noqa: BLE001 - no usable session: falkirk's own parser gives the same schema
        return None
    assert isinstance(parsed, StructType)

    def field(f: Any, nested: bool) -> pa.Field:
        t, nullable = f.dataType, f.nullable or nested
        if isinstance(t, (CharType, VarcharType)):
            return pa.field(
                f.name, pa.string(), nullable=nullable, metadata={MAX_LENGTH: str(t.length).encode()}
            )
        if isinstance(t, StructType):
            return pa.field(f.name, pa.struct([field(c, True) for c in t.fields]), nullable=nullable)
        return pa.field(f.name, _spark_to_arrow(t), nullable=nullable)

    return pa.schema([field(f, False) for f in parsed.fields])


def _spark_to_arrow(t: Any) -> pa.DataType:
    """PySpark's Arrow mapping of ``t``, with CHAR/VARCHAR inside arrays, maps and structs as strings."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import ArrayType, CharType, MapType, StructType, VarcharType

    if isinstance(t, (CharType, VarcharType)):
        return pa.string()
    if isinstance(t, ArrayType):
        return pa.list_(_spark_to_arrow(t.elementType))
    if isinstance(t, MapType):
        return pa.map_(_spark_to_arrow(t.keyType), _spark_to_arrow(t.valueType))
    if isinstance(t, StructType):
        return pa.struct([pa.field(f.name, _spark_to_arrow(f.dataType)) for f in t.fields])
    return to_arrow_type(t, timezone="UTC")


def log_fields() -> list[pa.Field]:
    """The log's own columns: ``_partition`` (int32) and ``_offset`` (int64)."""
    import pyarrow as pa

    return [
        pa.field("_partition", pa.int32(), nullable=False),
        pa.field("_offset", pa.int64(), nullable=False),
    ]


def _ddl_type(t: Type) -> str:
    if t.name in ("VARCHAR", "CHAR"):
        return "STRING"
    if t.name == "ARRAY":
        return f"ARRAY<{_ddl_type(t.element)}>"  # type: ignore[arg-type]
    if t.name == "MAP":
        return f"MAP<STRING, {_ddl_type(t.element)}>"  # type: ignore[arg-type]
    if t.name == "STRUCT":
        return "STRUCT<" + ", ".join(f"{_quote(f.name)}: {_ddl_type(f.type)}" for f in t.fields) + ">"
    return str(t)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def read_ddl(schema: RecordSchema) -> str:
    """The DDL Spark reads a log with: the declared fields (CHAR/VARCHAR as STRING) and the log's columns.

    Spark refuses CHAR/VARCHAR in a reader's schema; their lengths were
    checked when the records were appended.
    """
    fields = [f"{_quote(f.name)} {_ddl_type(f.type)}" for f in schema.fields]
    return ", ".join([*fields, "`_partition` INT", "`_offset` BIGINT"])
