"""Incremental keyed state: a full snapshot every ``m`` epochs and, in between, one delta per epoch.

A step declared ``Lazy(key=..., incremental=True, snapshot_every=m)`` (or
``Eager``) checkpoints every epoch, but writes in full only every ``m``-th
epoch (a **snapshot**: the keyed layout of
:mod:`~falkirk.spark.pipeline.store.keyed`). The epochs between write a
**delta**: the rows of the keys whose rows changed since the epoch before.
Both are checkpoints under ``data/<step>/checkpoint/`` with a manifest each
(files, sizes, checksums), laid out by key group (``_subtask=i/``), so the
solver sees every epoch with a delta as a restore point.

A delta holds, for every key whose rows changed between the previous state
and this one (added, changed or removed):

* every row the key has now (``_deleted`` false), or
* if it has none now, one **tombstone**: the key, ``_deleted`` true, the
  other columns null.

**Applying** a delta to a state drops every row whose key the delta names
and adds its rows that are not tombstones. **Restoring** epoch ``e`` reads
its snapshot and each delta after it, in order — in one pass
(:func:`newest`): per key, the rows of the latest delta that names it, else
the snapshot's rows. The delta's manifest records that **chain**
(``extra["delta"]["chain"]``: the snapshot's epoch, then the deltas' before
it), so a restore, a check of it (every file of the chain) and garbage
collection (keep the chain of the oldest retained restore point) need only
manifests. A delta may name more keys than changed in its epoch: a
``differential=True`` step whose state's base is the chain's snapshot
writes every change since that snapshot (per key the newest rows, a
tombstone for a removed key), chained to the snapshot alone — applied to
the snapshot, it gives the same state, and a restore reads two
checkpoints (:class:`~falkirk.spark.pipeline.run.incremental.StateCheckpoints`).

Rows are compared with Spark's grouping equality (the state's columns are
grouped on): ``NaN`` equals ``NaN`` and ``-0.0`` equals ``0.0``, so a
change between those alone is not seen. Map columns cannot be grouped on:
incremental state with one is refused (:func:`check_columns`).

Cost per epoch: one job, which shuffles the previous and the new state
together straight into the checkpoint's layout (:func:`diff`), compares
them and writes the delta, counting its rows on the way (through Spark
Connect a count job first). Restoring reads the snapshot and all its
deltas in one scan, shuffles them once into the step's partitions (as
restoring a full checkpoint does) and resolves each key there, after a
sort within each partition (:func:`newest`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.store.jvm import once

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from falkirk.spark.pipeline.store.manifest import Manifest

__all__ = ["DELETED", "SEQ", "check_columns", "diff", "apply", "newest", "chain", "gone"]

#: column of a delta: ``True`` on a tombstone (the key has no rows any more)
DELETED = "_deleted"
_W = "_falkirk_w"
_NEW = "_falkirk_new"
_OLD = "_falkirk_old"
_CHANGED = "_falkirk_changed"
_ANY = "_falkirk_any"
_LEAST = "_falkirk_least"
#: column tagging a restore's rows with their checkpoint: 0 the snapshot, 1, 2, ... its deltas in order
SEQ = "_falkirk_seq"
_LATEST = "_falkirk_latest"


def chain(m: Manifest) -> list[int]:
    """The epochs of the checkpoints ``m`` is restored through, before itself: ``[]`` for a full checkpoint,
    else the snapshot's epoch and the deltas' after it, in order."""
    d = m.extra.get("delta")
    return [int(e) for e in d["chain"]] if d else []


def gone() -> Column:
    """Whether a row is a tombstone: ``coalesce(_deleted, false)`` (a column made once per JVM, see
    :func:`~falkirk.spark.pipeline.store.jvm.once`: a ``changes=True`` step reads it several times an epoch)."""
    from pyspark.sql import functions as F

    return once(("gone", DELETED), lambda: F.coalesce(F.col(DELETED), F.lit(False)))


def _has_map(dtype: Any) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(dtype, MapType):
        return True
    if isinstance(dtype, ArrayType):
        return _has_map(dtype.elementType)
    if isinstance(dtype, StructType):
        return any(_has_map(f.dataType) for f in dtype.fields)
    return False


def check_columns(df: DataFrame, step: str) -> None:
    """Refuse (:class:`~falkirk.spark.errors.PipelineError`) incremental state whose rows cannot be
    compared."""
    bad = [f.name for f in df.schema.fields if _has_map(f.dataType)]
    if bad:
        raise PipelineError(
            f"step {step!r}: incremental state cannot hold map columns ({', '.join(bad)}): deltas compare rows and "
            "Spark cannot compare maps; store them as arrays of (key, value) structs, or use incremental=False"
        )


def diff(
    new: DataFrame,
    old: DataFrame,
    key: str,
    *,
    place: Callable[[DataFrame], tuple[DataFrame, list[str]]] | None = None,
) -> DataFrame:
    """The delta from state ``old`` to state ``new`` (same columns, keyed by ``key``): see the module
    docstring.

    One shuffle of both states; the rest (a grouping on every column, then
    per-key windows) runs within its partitions, once. A row present
    ``n`` times in ``new`` appears ``n`` times in the delta.

    ``place(rows)``: that shuffle, returning the rows hash-partitioned and
    the columns it added, functions of the key that the rows are partitioned
    by (:func:`falkirk.spark.pipeline.store.keyed.placed`: the delta comes
    out laid out for writing, with no second shuffle); the delta keeps them
    (after the state's columns). Default: by the key, no column added.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = new.columns
    both = new.select(*cols, F.lit(1).alias(_W)).unionByName(old.select(*cols, F.lit(-1).alias(_W)))
    spread, by = place(both) if place is not None else (both.repartition(F.col(key)), [])
    rows = spread.groupBy(*cols, *by).agg(
        F.sum(F.when(F.col(_W) > 0, 1).otherwise(0)).alias(_NEW),
        F.sum(F.when(F.col(_W) < 0, 1).otherwise(0)).alias(_OLD),
    )
    per_key = Window.partitionBy(key, *by)
    row = F.struct(*cols)  # the grouped rows of a key are distinct: one of them is its least
    rows = (
        rows.withColumn(_CHANGED, F.max((F.col(_NEW) != F.col(_OLD)).cast("int")).over(per_key))
        .withColumn(_ANY, F.max(_NEW).over(per_key))
        .withColumn(_LEAST, F.min(row).over(per_key).eqNullSafe(row))
        .where(F.col(_CHANGED) == 1)
    )
    # one pass (no union of upserts and tombstones, which would compute the rows above twice): a row of a key
    # that has rows now is repeated as often as it occurs; a key that has none gets one tombstone, from its
    # least row
    gone = F.col(_ANY) == 0
    copies = F.when(F.col(_NEW) > 0, F.col(_NEW)).when(gone & F.col(_LEAST), 1).otherwise(0).cast("int")
    out = rows.select(*cols, *by, F.explode(F.array_repeat(gone, copies)).alias(DELETED))
    return out.select(
        *[F.col(c) if c == key else F.when(F.col(DELETED), None).otherwise(F.col(c)).alias(c) for c in cols],
        *by,
        DELETED,
    )


def apply(base: DataFrame, deltas: Sequence[DataFrame], key: str) -> DataFrame:
    """``base`` with ``deltas`` applied in order (each with the state's columns and ``_deleted``):
    :func:`newest` of all their rows, tagged."""
    from functools import reduce

    from pyspark.sql import functions as F

    if not deltas:
        return base
    cols = base.columns
    rows = reduce(
        lambda a, b: a.unionByName(b),
        [d.select(*cols, DELETED, F.lit(i).alias(SEQ)) for i, d in enumerate(deltas, 1)],
        base.select(*cols, F.lit(False).alias(DELETED), F.lit(0).alias(SEQ)),
    )
    return newest(rows, key).select(*cols)


def newest(rows: DataFrame, key: str, by: Sequence[str] = (), *, tombstones: bool = False) -> DataFrame:
    """The rows of the state that a snapshot and its deltas restore, from all their rows tagged in ``SEQ``:
    the snapshot's 0, the deltas' 1, 2, ... in order (``_deleted`` null counts as false). Per key: the rows of
    the latest delta naming it, else the snapshot's. Columns as ``rows``'s. ``tombstones``: a removed key
    keeps its latest tombstone row (deltas resolved into the changes they make together).

    A per-key window partitioned by ``[key, *by]``: one shuffle, or none
    when ``rows`` is already hash-partitioned by ``by`` (columns that are
    functions of the key; :func:`falkirk.spark.pipeline.store.keyed.restore`
    gives them), so a restore reads the snapshot and its deltas in one scan
    and shuffles them once, as a full checkpoint's restore does.

    Not a join of the rows with each key's latest delta: Spark pushes a
    semi-join into every branch of a union of deltas (the chain read once
    per delta), and a broadcast one costs a job and a hash probe per row.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # key first: the sort before the window compares rows by a prefix of the first column (``by`` is constant
    # within a partition)
    out = rows.withColumn(_LATEST, F.max(SEQ).over(Window.partitionBy(key, *by)))
    latest = F.col(SEQ) == F.col(_LATEST)
    return out.where(latest if tombstones else latest & ~gone()).select(*rows.columns)
