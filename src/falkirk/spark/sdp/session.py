"""The ``spark`` an SDP definition file sees under falkirk: the real session, except where a query reads.

``spark-pipelines`` hands each definition module a Spark Connect session and
sends every query function's DataFrame to the server, which resolves table
names there. falkirk runs the query functions itself, once per epoch, so the
names a query reads must resolve to *falkirk's* data of that epoch: a
:class:`PipelineSession` forwards everything to the real session except

* ``spark.table(name)``, ``spark.read.table(name)`` (also after
  ``.format(...)``, ``.option(...)``…) — a batch read;
* ``spark.readStream.table(name)`` — a streaming read;
* ``spark.readStream.format(F).schema(S)....load(path)`` (and ``.json(path)``,
  ``.csv``, ``.parquet``, ``.orc``, ``.text``, ``.xml``) — a file stream, which
  becomes a falkirk input log (:class:`FileSource`);
* ``spark.sql(...)`` inside a query function (refused: its table names
  cannot be resolved per epoch).

Each of these asks the **binding** active in the current context
(:func:`bound`): the discovery pass of :mod:`~falkirk.spark.sdp.graph`
records the read and answers with an empty DataFrame of the right schema;
an epoch's step (:mod:`~falkirk.spark.sdp.build`) answers with that epoch's
delta or snapshot. Outside any binding (module-level code of a definition
file) every call goes to the real session.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from attrs import frozen

from falkirk.spark.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["PipelineSession", "FileSource", "Binding", "bound", "FILE_FORMATS"]

#: Streaming file formats falkirk reads into an input log (each update: the files not read before).
FILE_FORMATS = frozenset({"json", "csv", "parquet", "orc", "text", "xml", "avro"})
#: Options of Spark's file stream source that shape *when* files are read, not what a record is: not passed to
#: the batch read of an update's new files.
STREAM_ONLY_OPTIONS = frozenset(
    {
        "maxfilespertrigger",
        "maxbytespertrigger",
        "latestfirst",
        "filenameonly",
        "maxfileage",
        "cleansource",
        "sourcearchivedir",
        "maxcachedfiles",
        "discardcachedinputratio",
    }
)


@frozen
class FileSource:
    """A file stream a flow reads:
    ``spark.readStream.format(format).schema(schema).options(...).load(path)``."""

    format: str
    schema: Any  # a pyspark StructType
    path: str
    options: tuple[tuple[str, str], ...] = ()

    def batch_options(self) -> dict[str, str]:
        """The options that describe the records (for a batch read of the new files)."""
        return {k: v for k, v in self.options if k.lower() not in STREAM_ONLY_OPTIONS}

    def describe(self) -> str:
        return f"{self.format} files under {self.path}"


class Binding(Protocol):
    """What answers a query function's reads (see the module docstring)."""

    def table(self, name: str, *, streaming: bool) -> DataFrame: ...

    def files(self, source: FileSource) -> DataFrame: ...

    def sql(self) -> None: ...


_binding: ContextVar[Binding | None] = ContextVar("falkirk_sdp_binding", default=None)


@contextlib.contextmanager
def bound(binding: Binding) -> Iterator[None]:
    """Answer the reads of query functions called inside with ``binding``."""
    token = _binding.set(binding)
    try:
        yield
    finally:
        _binding.reset(token)


class PipelineSession:
    """The real ``SparkSession`` with a query function's reads answered by the active binding."""

    def __init__(self, spark: SparkSession) -> None:
        object.__setattr__(self, "_spark", spark)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._spark, name, value)

    @property
    def read(self) -> _Reader:
        return _Reader(self._spark.read)

    @property
    def readStream(self) -> _StreamReader:  # noqa: N802 - PySpark's name
        return _StreamReader(self._spark)

    def table(self, tableName: str) -> DataFrame:  # noqa: N803 - PySpark's name
        b = _binding.get()
        return self._spark.table(tableName) if b is None else b.table(tableName, streaming=False)

    def sql(self, *args: Any, **kwargs: Any) -> DataFrame:
        b = _binding.get()
        if b is not None:
            b.sql()
        return self._spark.sql(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<falkirk SDP session over {self._spark!r}>"


class _Reader:
    """``spark.read``: ``.table(name)`` is the binding's; every other call is the real reader's."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader

    def table(self, tableName: str) -> DataFrame:  # noqa: N803 - PySpark's name
        b = _binding.get()
        return self._reader.table(tableName) if b is None else b.table(tableName, streaming=False)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._reader, name)
        if not callable(attr):
            return attr
        kind = type(self._reader)

        def call(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            return _Reader(out) if isinstance(out, kind) else out

        return call


class _StreamReader:
    """``spark.readStream``: a table read or a file stream, recorded; anything else is refused."""

    def __init__(
        self,
        spark: Any,
        fmt: str | None = None,
        schema: Any = None,
        options: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self._spark, self._format, self._schema, self._options = spark, fmt, schema, options

    def _with(self, **changes: Any) -> _StreamReader:
        return _StreamReader(
            self._spark,
            changes.get("fmt", self._format),
            changes.get("schema", self._schema),
            changes.get("options", self._options),
        )

    def format(self, source: str) -> _StreamReader:
        return self._with(fmt=source)

    def schema(self, schema: StructType | str) -> _StreamReader:
        return self._with(schema=schema)

    def option(self, key: str, value: Any) -> _StreamReader:
        return self._with(options=(*self._options, (key, _text(value))))

    def options(self, **options: Any) -> _StreamReader:
        return self._with(
            options=(*self._options, *((k, _text(v)) for k, v in options.items() if v is not None))
        )

    def table(self, tableName: str) -> DataFrame:  # noqa: N803 - PySpark's name
        b = _binding.get()
        if b is None:
            return self._spark.readStream.table(tableName)
        return b.table(tableName, streaming=True)

    def load(
        self,
        path: str | None = None,
        format: str | None = None,
        schema: Any = None,  # noqa: A002
        **options: Any,
    ) -> DataFrame:
        reader = self.format(format) if format is not None else self
        reader = reader.schema(schema) if schema is not None else reader
        reader = reader.options(**options) if options else reader
        return reader._files(path)

    def _files(self, path: str | None) -> DataFrame:
        b = _binding.get()
        fmt = (self._format or "").lower()
        if b is None:  # module-level code: Spark's own stream
            real = self._spark.readStream
            real = real.format(self._format) if self._format else real
            real = real.schema(self._schema) if self._schema is not None else real
            return real.options(**dict(self._options)).load(path)
        if fmt not in FILE_FORMATS:
            raise PipelineError(
                f"a streaming read of format {self._format!r}: falkirk sdp streams from files "
                f"({', '.join(sorted(FILE_FORMATS))}, read into an input log) and from datasets of the pipeline "
                "(spark.readStream.table); read other sources into files first"
            )
        if not path:
            raise PipelineError(f"a streaming read of {fmt} files without a path: give .load(path)")
        if self._schema is None:
            raise PipelineError(
                f"a streaming read of {fmt} files under {path} without a schema: falkirk's input "
                "log needs one, as Spark's file stream does: add .schema(...)"
            )
        return b.files(FileSource(fmt, _struct(self._spark, self._schema), str(path), self._options))

    def __getattr__(self, name: str) -> Any:
        if name in FILE_FORMATS:

            def read(path: str | None = None, **options: Any) -> DataFrame:
                return self.format(name).options(**options)._files(path)

            return read
        raise PipelineError(
            f"spark.readStream.{name}: not supported by falkirk sdp (format(...).load(path) of "
            "files, or table(name) of a dataset of the pipeline)"
        )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _struct(spark: Any, schema: Any) -> Any:
    """``schema`` as a StructType (a DDL string is parsed by Spark)."""
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    return spark.createDataFrame([], schema).schema
