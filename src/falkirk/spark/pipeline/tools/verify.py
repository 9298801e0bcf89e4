"""Compare the external effects of two runs: output partitions and SQLite tables, row for row.

:func:`compare_runs` reads, for every :class:`~falkirk.spark.pipeline.declare.regimes.Output`
step, every epoch partition under ``root/output/<step>`` and, for every
eager step with a database, its declared tables, in two pipeline roots. The
rows are compared as multisets, so a duplicated or missing row shows up
(the count of each is reported).

Outputs are compared by Spark (:func:`output_differences`: each side's
multiset difference, ``exceptAll``, counted per epoch): the driver receives
one count per epoch that differs, never the rows, so comparing outputs of
millions of rows per epoch costs the driver nothing in proportion to them.
:func:`output_rows` (every row in the driver, as multisets) is for small
outputs and tests.

>>> Difference("responses", 3, missing=1, extra=0).describe()
'responses epoch 3: 1 missing row(s), 0 unexpected row(s)'
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import frozen

from falkirk.spark.pipeline.declare.regimes import Output
from falkirk.spark.pipeline.store.eagerdb import database_path
from falkirk.spark.pipeline.store.rootfs import Root
from falkirk.spark.pipeline.store.storage import as_root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from falkirk.spark.pipeline.declare.definition import Definition as Pipeline

__all__ = ["Difference", "Comparison", "compare_runs", "output_differences", "output_rows", "table_rows"]


@frozen
class Difference:
    """Rows of ``what`` at ``epoch`` present in the reference but not the run (``missing``) or vice versa."""

    what: str
    epoch: int | None
    missing: int
    extra: int

    def describe(self) -> str:
        where = f"{self.what} epoch {self.epoch}" if self.epoch is not None else self.what
        return f"{where}: {self.missing} missing row(s), {self.extra} unexpected row(s)"


@frozen
class Comparison:
    """The outcome of :func:`compare_runs`: ``identical`` and what differs."""

    identical: bool
    rows_compared: int
    differences: tuple[Difference, ...]


def output_rows(
    spark: SparkSession,
    root: Root | str | os.PathLike[str],
    step: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[int, Counter[tuple[Any, ...]]]:
    """The rows of every epoch partition of output ``step`` under ``root`` (a path or URI, opened with
    ``storage_options``, or a :class:`~falkirk.spark.pipeline.store.rootfs.Root`), as multisets."""
    fs = as_root(root, storage_options=storage_options)
    out: dict[int, Counter[tuple[Any, ...]]] = {}
    base = f"output/{step}"
    for d in fs.listdir(base):
        if not d.startswith("epoch="):
            continue
        files = [fs.spark_uri(f"{base}/{d}/{n}") for n in fs.listdir(f"{base}/{d}") if n.startswith("part-")]
        if not files:
            out[int(d.split("=")[1])] = Counter()
            continue
        rows = spark.read.parquet(*files).collect()
        out[int(d.split("=")[1])] = Counter(tuple(r) for r in rows)
    return out


def _epoch_files(fs: Root, step: str) -> dict[int, list[str]]:
    """The data files (``part-*``) of every epoch partition of output ``step``, as Spark URIs (one listing per
    epoch)."""
    base = f"output/{step}"
    return {
        int(d.split("=")[1]): [
            fs.spark_uri(f"{base}/{d}/{n}") for n in fs.listdir(f"{base}/{d}") if n.startswith("part-")
        ]
        for d in fs.listdir(base)
        if d.startswith("epoch=")
    }


_EPOCH = "__falkirk_epoch"


def _tagged(spark: SparkSession, files: dict[int, list[str]]) -> Any:
    """Every row of ``files`` with its epoch (from its file's path), or ``None`` when there is no file."""
    from pyspark.sql import functions as F

    paths = [f for fs in files.values() for f in fs]
    if not paths:
        return None
    return spark.read.parquet(*paths).select(
        "*",
        F.regexp_extract(F.col("_metadata.file_path"), r"epoch=(\d+)/[^/]*$", 1).cast("long").alias(_EPOCH),
    )


def output_differences(
    spark: SparkSession,
    root: Root | str | os.PathLike[str],
    reference: Root | str | os.PathLike[str],
    step: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[int, dict[int, tuple[int, int]]]:
    """Output ``step`` under ``root`` against the same output under ``reference``, as multisets per epoch,
    computed by Spark: ``(rows in the reference, {epoch: (missing, extra)})`` for each epoch that differs.

    ``missing``: rows of the reference's epoch that the run lacks (counted with multiplicity), ``extra``: rows
    the run has beyond the reference's. Two jobs per side (a count, each side's ``exceptAll`` counted by
    epoch); the driver receives one row per differing epoch, never the outputs' rows.
    """
    from pyspark.sql import functions as F

    got_fs, ref_fs = (
        as_root(root, storage_options=storage_options),
        as_root(reference, storage_options=storage_options),
    )
    got, ref = _tagged(spark, _epoch_files(got_fs, step)), _tagged(spark, _epoch_files(ref_fs, step))
    compared = 0 if ref is None else ref.count()
    if got is None and ref is None:
        return compared, {}

    def by_epoch(a: Any, b: Any) -> dict[int, int]:
        if a is None:
            return {}
        rest = a if b is None else a.exceptAll(b.select(*a.columns))
        return {int(r[0]): int(r[1]) for r in rest.groupBy(_EPOCH).agg(F.count(F.lit(1))).collect()}

    missing, extra = by_epoch(ref, got), by_epoch(got, ref)
    return compared, {e: (missing.get(e, 0), extra.get(e, 0)) for e in sorted(set(missing) | set(extra))}


def table_rows(path: Path, table: str) -> Counter[tuple[Any, ...]]:
    """The rows of ``table`` in the SQLite database at ``path``, as a multiset (empty if absent)."""
    if not path.exists():
        return Counter()
    with contextlib.closing(sqlite3.connect(path)) as db:
        if (
            db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
            is None
        ):
            return Counter()
        return Counter(db.execute(f'SELECT * FROM "{table}"').fetchall())


def _diff(what: str, epoch: int | None, ref: Counter[Any], got: Counter[Any]) -> Difference | None:
    missing = sum((ref - got).values())
    extra = sum((got - ref).values())
    return Difference(what, epoch, missing, extra) if missing or extra else None


def compare_runs(
    spark: SparkSession,
    pipeline: Pipeline,
    root: Root | str | os.PathLike[str],
    reference: Root | str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> Comparison:
    """Compare the external effects of ``pipeline`` run at ``root`` with those at ``reference`` (paths or
    URIs).

    Outputs are compared per epoch (by Spark, :func:`output_differences`) and SQLite tables whole, as
    multisets: a duplicated or a missing row is a difference. ``storage_options`` open roots given as URIs
    (pass two opened :class:`~falkirk.spark.pipeline.store.rootfs.Root` objects to give them different ones).
    """
    root = as_root(root, storage_options=storage_options)
    reference = as_root(reference, storage_options=storage_options)
    diffs: list[Difference] = []
    compared = 0
    for name, step in pipeline.steps.items():
        if isinstance(step.regime, Output):  # by Spark: the driver sees counts, not rows
            rows, differ = output_differences(spark, root, reference, name)
            compared += rows
            diffs += [Difference(name, e, missing, extra) for e, (missing, extra) in differ.items()]
        db = getattr(step.regime, "database", None)
        if db:
            for table in [*step.regime.tables, "falkirk_epochs"]:  # type: ignore[attr-defined]
                path_got = database_path(root, name, db)
                path_ref = database_path(reference, name, db)
                ref_rows, got_rows = table_rows(path_ref, table), table_rows(path_got, table)
                compared += sum(ref_rows.values())
                d = _diff(f"{Path(db).name}:{table}", None, ref_rows, got_rows)
                if d:
                    diffs.append(d)
    return Comparison(not diffs and compared > 0, compared, tuple(diffs))
