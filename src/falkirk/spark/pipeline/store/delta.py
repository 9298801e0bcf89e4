"""Incremental keyed state: a full snapshot every ``m`` epochs and, in between, one delta per epoch.

A step declared ``Lazy(key=..., incremental=True, snapshot_every=m)`` (or
``Eager``) checkpoints every epoch, but writes in full only every ``m``-th
epoch (a **snapshot**: the keyed layout of
:mod:`~falkirk.spark.pipeline.store.keyed`). The epochs between write a
**delta**: the rows of the keys whose rows changed since the epoch before.
Both are checkpoints under ``data/<step>/checkpoint/`` with a manifest each
(files, sizes, checksums), laid out by key group (``_subtask=i/``, a
``_kg`` column), so the solver sees every epoch with a delta as a restore
point.

A delta holds, for every key whose rows changed between the previous state
and this one (added, changed or removed):

* every row the key has now (``_deleted`` false), or
* if it has none now, one **tombstone**: the key, ``_deleted`` true, the
  other columns null.

**Applying** a delta to a state drops every row whose key the delta names
and adds its rows that are not tombstones. **Restoring** epoch ``e`` reads
its snapshot and each delta after it, in order — in one pass
(:func:`apply`): per key, the rows of the latest delta that names it, else
the snapshot's rows. The delta's manifest records that **chain**
(``extra["delta"]["chain"]``: the snapshot's epoch, then the deltas' before
it), so a restore, a check of it (every file of the chain) and garbage
collection (keep the chain of the oldest retained restore point) need only
manifests.

Rows are compared with Spark's grouping equality (the state's columns are
grouped on): ``NaN`` equals ``NaN`` and ``-0.0`` equals ``0.0``, so a
change between those alone is not seen. Map columns cannot be grouped on:
incremental state with one is refused (:func:`check_columns`).

Cost per epoch: one shuffle of the previous and the new state together
(:func:`diff`), then the delta's own write; restoring costs one read of the
snapshot and of the (small) deltas, and no shuffle beyond the keyed
layout's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from falkirk.spark.pipeline.store.storage import Manifest

__all__ = ["DELETED", "check_columns", "diff", "apply", "chain"]

#: column of a delta: ``True`` on a tombstone (the key has no rows any more)
DELETED = "_deleted"
_W = "_falkirk_w"
_NEW = "_falkirk_new"
_OLD = "_falkirk_old"
_CHANGED = "_falkirk_changed"
_ANY = "_falkirk_any"
_SEQ = "_falkirk_seq"
_K = "_falkirk_k"


def chain(m: Manifest) -> list[int]:
    """The epochs of the checkpoints ``m`` is restored through, before itself: ``[]`` for a full checkpoint,
    else the snapshot's epoch and the deltas' after it, in order."""
    d = m.extra.get("delta")
    return [int(e) for e in d["chain"]] if d else []


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
    """Refuse (:class:`~falkirk.spark.errors.PipelineError`) incremental state whose rows cannot be compared."""
    bad = [f.name for f in df.schema.fields if _has_map(f.dataType)]
    if bad:
        raise PipelineError(
            f"step {step!r}: incremental state cannot hold map columns ({', '.join(bad)}): deltas compare rows and "
            "Spark cannot compare maps; store them as arrays of (key, value) structs, or use incremental=False")


def _null_safe(left: DataFrame, right: DataFrame, key: str, how: str, extra: Any = None) -> DataFrame:
    """``left`` joined with ``right`` (whose key column is ``_K``) on ``key`` ``<=>`` ``_K``."""
    from pyspark.sql import functions as F

    cond = left[key].eqNullSafe(F.col(_K))
    return left.join(right, cond if extra is None else cond & extra, how)


def diff(new: DataFrame, old: DataFrame, key: str) -> DataFrame:
    """The delta from state ``old`` to state ``new`` (same columns, keyed by ``key``): see the module docstring.

    One shuffle of both states by ``key``; the rest (a grouping on every
    column, per-key windows, a distinct) runs within its partitions. A row
    present ``n`` times in ``new`` appears ``n`` times in the delta.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = new.columns
    both = new.select(*cols, F.lit(1).alias(_W)).unionByName(old.select(*cols, F.lit(-1).alias(_W)))
    rows = both.repartition(F.col(key)).groupBy(*cols).agg(
        F.sum(F.when(F.col(_W) > 0, 1).otherwise(0)).alias(_NEW),
        F.sum(F.when(F.col(_W) < 0, 1).otherwise(0)).alias(_OLD))
    per_key = Window.partitionBy(key)
    rows = (rows.withColumn(_CHANGED, F.max((F.col(_NEW) != F.col(_OLD)).cast("int")).over(per_key))
            .withColumn(_ANY, F.max(_NEW).over(per_key))
            .where(F.col(_CHANGED) == 1))
    upserts = rows.where(F.col(_NEW) > 0).select(
        *cols, F.explode(F.array_repeat(F.lit(False), F.col(_NEW).cast("int"))).alias(DELETED))
    types = {f.name: f.dataType for f in new.schema.fields}
    tombstones = rows.where(F.col(_ANY) == 0).select(key).distinct().select(
        *[F.col(c) if c == key else F.lit(None).cast(types[c]).alias(c) for c in cols], F.lit(True).alias(DELETED))
    return upserts.unionByName(tombstones)


def apply(base: DataFrame, deltas: Sequence[DataFrame], key: str, *, broadcast: bool = False) -> DataFrame:
    """``base`` with ``deltas`` applied in order (each with the state's columns and ``_deleted``).

    In one pass: per key, the rows of the latest delta naming it, else
    ``base``'s rows. ``broadcast``: the deltas' keys are few enough to send
    to every task (``base`` is then read once, without a shuffle).
    """
    from functools import reduce

    from pyspark.sql import functions as F

    if not deltas:
        return base
    cols = base.columns
    tagged = reduce(lambda a, b: a.unionByName(b),
                    [d.select(*cols, DELETED, F.lit(i).alias(_SEQ)) for i, d in enumerate(deltas)])
    latest = tagged.groupBy(key).agg(F.max(_SEQ).alias(_SEQ)).select(F.col(key).alias(_K), F.col(_SEQ).alias("_s"))
    rows = _null_safe(tagged, latest, key, "left_semi", extra=tagged[_SEQ] == F.col("_s"))
    keys = latest.select(_K)
    kept = _null_safe(base, F.broadcast(keys) if broadcast else keys, key, "left_anti")
    return kept.unionByName(rows.where(~F.col(DELETED)).select(*cols))
