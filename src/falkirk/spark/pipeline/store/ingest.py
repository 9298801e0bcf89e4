"""What :meth:`InputLog.append <falkirk.spark.pipeline.store.inputlog.InputLog.append>` takes, chunk by chunk.

:func:`chunks` turns any accepted input into lists of records or Arrow
``RecordBatch``\\ es of at most :data:`CHUNK` records (an append of more is
streamed: several data files per partition, one segment each); :func:`accept`
checks one chunk with the vectorised check and hands its good records to the
:class:`~falkirk.spark.pipeline.store.segments.SegmentWriter`. A chunk that
fails is searched for its bad records
(:func:`~falkirk.spark.pipeline.store.convert.bad_records`): the first raises
:class:`~falkirk.spark.errors.RecordError` where the record would have gone
(partition, offset, its index in the append), or with ``dead_letter`` every
bad record is set aside for the dead-letter log (:func:`divert` writes it).

=====================================  ============================================
``data``                               read as
=====================================  ============================================
an iterable of mappings                lists of up to :data:`CHUNK` records
``pyarrow.Table`` / ``RecordBatch``    its batches (no copy)
pandas ``DataFrame``                   ``pyarrow.Table.from_pandas`` (pandas'
                                       missing values — ``NaN``, ``None``,
                                       ``NaT`` — are ``NULL``; the index is
                                       not a column)
a path, or a list of paths             Parquet files (or directories of them),
                                       streamed by ``pyarrow.dataset``; a URI
                                       goes through fsspec
Spark ``DataFrame``                    written by Spark itself
                                       (:mod:`~falkirk.spark.pipeline.store.sparkinput`)
=====================================  ============================================
"""

from __future__ import annotations

import json
import os
import uuid
import zlib
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import PipelineError, RecordError
from falkirk.spark.pipeline.store import segments as seg
from falkirk.spark.pipeline.store.convert import Rejected, bad_records

if TYPE_CHECKING:
    import pyarrow as pa

    from falkirk.spark.pipeline.store.inputlog import InputLog

__all__ = ["CHUNK", "accept", "chunks", "divert", "is_spark_frame"]

#: Records converted and written at a time (an append of more writes several files per partition).
CHUNK = 1 << 20


def is_spark_frame(data: Any) -> bool:
    """Whether ``data`` is a Spark DataFrame (classic or Spark Connect), without importing PySpark."""
    return type(data).__module__.startswith("pyspark.sql") and hasattr(data, "sparkSession")


def _is_pandas(data: Any) -> bool:
    return (
        type(data).__module__.startswith("pandas")
        and hasattr(data, "to_records")
        and hasattr(data, "columns")
    )


def _parquet_paths(data: Any) -> list[str] | None:
    """``data`` as a list of Parquet paths, if it is a path or a non-empty list of them."""
    if isinstance(data, (str, os.PathLike)):
        return [os.fspath(data)]
    if isinstance(data, (list, tuple)) and data and all(isinstance(p, (str, os.PathLike)) for p in data):
        return [os.fspath(p) for p in data]
    return None


def chunks(log: InputLog, data: Any) -> Iterator[Any]:
    """``data`` as lists of records or Arrow RecordBatches of at most :data:`CHUNK` records (see the
    table)."""
    import pyarrow as pa

    size = CHUNK
    if _is_pandas(data):
        data = pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        yield from data.to_batches(max_chunksize=size)
        return
    paths = _parquet_paths(data)
    if paths is not None:
        yield from _parquet_batches(log, paths, size)
        return
    if isinstance(data, (list, tuple)):
        yield from (list(data[i : i + size]) for i in range(0, len(data), size))
        return
    try:
        items = iter(data)
    except TypeError:
        raise PipelineError(
            f"input {log.name!r}: cannot append a {type(data).__name__}; give mappings, a pyarrow Table or "
            "RecordBatch, a pandas or Spark DataFrame, or Parquet paths"
        ) from None
    while chunk := list(islice(items, size)):
        yield chunk


def _parquet_batches(log: InputLog, paths: list[str], size: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.dataset as ds
    from fsspec.core import url_to_fs

    try:
        fs, _ = url_to_fs(paths[0])
        found = ds.dataset([url_to_fs(p)[1] for p in paths], format="parquet", filesystem=fs)
        yield from found.to_batches(batch_size=size)
    except (OSError, ValueError) as exc:
        raise PipelineError(
            f"input {log.name!r}: cannot read Parquet {paths if len(paths) > 1 else paths[0]!r}: {exc} (append "
            "takes mappings, a pyarrow Table, a pandas or Spark DataFrame, or paths of Parquet files)"
        ) from None


def accept(
    log: InputLog,
    chunk: Any,
    index: int,
    spread: int,
    writer: seg.SegmentWriter,
    rejected: list[dict[str, Any]],
) -> int:
    """Check and write one chunk (records ``index…`` of the append); the next round-robin position.

    Raises :class:`~falkirk.spark.errors.RecordError` for its first bad
    record, or with ``dead_letter`` adds every bad one to ``rejected``.
    """
    import numpy as np
    import pyarrow as pa

    conv, arrow = log.converter, isinstance(chunk, pa.RecordBatch)
    try:
        good = conv.arrow(chunk) if arrow else conv.records(chunk)
    except Rejected:
        good = None
    if good is not None:
        keys = good.column(log.key) if log.key else None
        raw = None
        if keys is not None and not (pa.types.is_integer(keys.type) or pa.types.is_string(keys.type)):
            raw = chunk.column(log.key).to_pylist() if arrow else [r.get(log.key) for r in chunk]
        parts, spread = seg.partitions(keys, raw, log.partitions, spread, good.num_rows)
        writer.add(good, parts)
        return spread
    problems = bad_records(conv, chunk, first_only=not log.dead_letter)
    if not log.dead_letter:
        i, record, problem = problems[0]
        prefix = chunk.slice(0, i).to_pylist(maps_as_pydicts="strict") if arrow else chunk[:i]
        before, _ = python_partitions(log, [*prefix, record], spread)
        k = before[-1]
        raise RecordError(
            log.name, k, writer.offset(k) + before[:-1].count(k), index + i, problem.field, str(problem)
        )
    rows = chunk.to_pylist(maps_as_pydicts="strict") if arrow else chunk
    every, spread = python_partitions(log, rows, spread)
    keep = np.ones(len(rows), dtype=bool)
    keep[[i for i, _, _ in problems]] = False
    good = (
        conv.arrow(chunk.filter(pa.array(keep)))
        if arrow
        else conv.records([r for r, ok in zip(rows, keep.tolist(), strict=True) if ok])
    )
    writer.add(good, np.asarray(every, dtype=np.int32)[keep])
    for i, record, problem in problems:
        rejected.append(
            {
                "index": index + i,
                "partition": every[i],
                "field": problem.field,
                "problem": str(problem),
                "record": jsonable(record),
            }
        )
    return spread


def python_partitions(log: InputLog, records: list[Any], spread: int) -> tuple[list[int], int]:
    """Partitions of ``records`` as given — any values (the error path) — and the next round-robin
    position."""
    out = []
    for r in records:
        value = r.get(log.key) if log.key and isinstance(r, Mapping) else None
        if value is None:
            k, spread = spread % log.partitions, spread + 1
        else:
            k = zlib.crc32(str(value).encode()) % log.partitions
        out.append(k)
    return out, spread


def jsonable(value: Any) -> Any:
    """``value`` with anything JSON cannot hold replaced by its ``repr`` (for the dead-letter log)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return repr(value)


def divert(log: InputLog, rejected: list[dict[str, Any]], batch: str | None) -> None:
    """Write the ``rejected`` records of ``batch`` to ``log``'s dead-letter log, one JSON object a line,
    once."""
    text = "".join(
        json.dumps({"input": log.name, "batch": batch, **r}, sort_keys=True) + "\n" for r in rejected
    )
    try:
        log.fs.publish(f"{log.dead_letter_dir}/{batch or uuid.uuid4().hex}.jsonl", text.encode("utf-8"))
    except FileExistsError:
        pass  # this batch was sent before: its bad records are already there
