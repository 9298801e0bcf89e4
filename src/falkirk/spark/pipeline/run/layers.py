"""Keyed state updated in place: a ``changes=True`` step's state as a base and the changes since.

A step declared ``Lazy(key=..., changes=True)`` (or ``Eager``) returns, as
its new state, only its **changes** — every row of each key it adds or
changes, a tombstone (``_deleted`` true) for each key it removes — in the
format of an incremental delta (:mod:`~falkirk.spark.pipeline.store.delta`).
Its runner (:class:`~falkirk.spark.pipeline.run.runners.StepRunner`) keeps
the state as :class:`Layers`:

* ``base`` — a local checkpoint of a whole state;
* ``overlay`` — a local checkpoint of every change since, newest per key
  (the previous overlay's rows of the keys the epoch did not name, and the
  epoch's changes), compacted into a new base once its rows pass
  :data:`COMPACT_AT` of the base's (or, at an epoch whose checkpoint is a
  snapshot, once they would pass it before the next snapshot: the snapshot
  is then written from the new base);
* ``view`` — what the step is given as ``state``: the base's rows of the
  keys the overlay does not name, and the overlay's live rows.

Where every change since the base was collected on the driver (small
changes are: the job making them collects them) and they are few, the
overlay is held on the driver (:func:`on_driver`, :func:`merged_table`): the
merge is an Arrow filter and concatenation, no Spark job, and an executor's
loss takes none of it.

An epoch then costs a scan of the base (the step's own reads of ``state``)
and the changes, not a new DataFrame of every key. :func:`lookup` reads the
rows of a few keys from the layers with the small set of keys probed first.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import attrs

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.store.delta import DELETED, gone
from falkirk.spark.pipeline.store.jvm import once

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "AMONG_MAX",
    "BLIND_FRACTION",
    "BROADCAST_MAX",
    "COMPACT_AT",
    "DRIVER_MAX_BYTES",
    "DRIVER_MAX_ROWS",
    "Layers",
    "among",
    "check_changes",
    "counted",
    "counted_with",
    "driver_keyed",
    "keys_of",
    "layers_of",
    "live",
    "lookup",
    "marked",
    "merge",
    "merge_blind",
    "merged_table",
    "on_driver",
    "register",
    "view",
]

#: the changes since the base are compacted into a new base once their rows pass this fraction of the base's
#: (each epoch's view joins the base with their keys, broadcast)
COMPACT_AT = 0.1

#: the most keys a join of the layers broadcasts (a broadcast is collected on the driver): of the changes since
#: the base, for the view (beyond: a join that shuffles the base), and of an epoch's changes, to merge them into
#: those (beyond: a join that shuffles both)
BROADCAST_MAX = 2_000_000

#: the most rows, and Arrow bytes, of the changes since the base held on the driver (:func:`on_driver`); beyond,
#: they are a local checkpoint on the executors, merged by a Spark job
DRIVER_MAX_ROWS = 65_536
DRIVER_MAX_BYTES = 8 << 20

#: an epoch's changes are merged by broadcasting their keys without counting them first (no job of its own)
#: while the step's changes the epoch before had at most this fraction of :data:`BROADCAST_MAX` rows
BLIND_FRACTION = 0.25


@attrs.frozen
class Layers:
    """A ``changes=True`` step's state: ``base`` with every change since applied (``overlay``)."""

    #: what the step is given as its state: the base without the overlay's keys, and the overlay's live rows
    view: Any
    #: a local checkpoint of a whole state
    base: Any
    #: the changes since ``base`` (newest per key, ``_deleted`` marking tombstones): a local checkpoint, or rows
    #: held on the driver (:attr:`overlay_table`); ``None``: none
    overlay: Any
    #: the epoch's own changes, ``_deleted`` added (an incremental checkpoint's delta)
    changes: Any
    #: the overlay's rows (restored from a checkpoint: at most that; the rows of its deltas)
    overlay_rows: int
    base_rows: int
    #: the state's key column
    key: str
    #: the overlay's keys, where the driver knows them all (the changes since the base were collected:
    #: :func:`among` names them in a plan, where a join would broadcast them with a job of its own); ``None``: not
    overlay_keys: frozenset[int] | None = None
    #: the overlay's rows as Arrow, where it is held on the driver (:func:`on_driver`: every change since the base
    #: was collected, and they are few); ``None``: it is a local checkpoint on the executors
    overlay_table: Any = None


#: the layers behind each view a runner handed out, by ``id`` of the view (for :func:`lookup`)
_VIEWS: weakref.WeakValueDictionary[int, Layers] = weakref.WeakValueDictionary()


def register(layers: Layers) -> None:
    """``layers.view`` is a step's state from now on (:func:`lookup` reads it through its layers)."""
    _VIEWS[id(layers.view)] = layers


def marked(changes: DataFrame, step: str) -> DataFrame:
    """``changes`` with its ``_deleted`` column (false where it has none), checked to be boolean."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    if DELETED not in changes.columns:
        return changes.withColumn(DELETED, F.lit(False))
    kind = changes.schema[DELETED].dataType
    if not isinstance(kind, BooleanType):
        raise PipelineError(
            f"step {step!r} (changes=True): its column {DELETED!r} is {kind.simpleString()}; it marks a removed "
            "key and must be boolean"
        )
    return changes


def live(rows: DataFrame) -> DataFrame:
    """The rows of ``rows`` (with ``_deleted``) that are not tombstones, without ``_deleted``."""
    return rows.where(once(("live",), lambda: ~gone())).drop(DELETED)


def view(base: DataFrame, overlay: DataFrame, key: str, rows: int, named: Column | None = None) -> DataFrame:
    """``base`` with ``overlay`` (``rows`` rows) applied: the base's rows of the keys the overlay does not name,
    and its live rows (a scan of the base against the overlay's keys, broadcast up to :data:`BROADCAST_MAX`;
    no shuffle). ``named``: whether a row's key is one of the overlay's, known on the driver (:func:`among`):
    a filter, no broadcast."""
    from pyspark.sql import functions as F

    if named is not None:
        return base.where(_outside(named)).unionByName(live(overlay))
    keys = overlay.select(key)
    return _joined(base, F.broadcast(keys) if rows <= BROADCAST_MAX else keys, key, "left_anti").unionByName(
        live(overlay)
    )


def _joined(
    rows: DataFrame, keys: DataFrame, key: str, how: str, columns: list[str] | None = None
) -> DataFrame:
    """The rows of ``rows`` whose key is (``how="left_semi"``) or is not (``"left_anti"``) among ``keys``, their
    columns in ``rows``'s order (``columns``: that order, known) — a join on a named column puts that column
    first; a state is given to its step in the order the step first returned it, so that a ``union`` by position
    still lines its columns up. Names are quoted (a dot is part of a name here); columns that share a name are
    left as the join gives them."""
    from pyspark.sql import functions as F

    order = rows.columns if columns is None else columns
    out = rows.join(keys, key, how)
    if order[0] == key or len(set(order)) != len(order):
        return out
    return out.select(*[F.col("`" + c.replace("`", "``") + "`") for c in order])


def merge_blind(last: int | None) -> bool:
    """Whether an epoch's changes, ``last`` rows the epoch before (``None``: unknown), are merged by broadcasting
    their keys uncounted: a step's changes may grow from one epoch to the next, so only while the last were far
    under :data:`BROADCAST_MAX` (their keys are collected on the driver).

    >>> merge_blind(10_000), merge_blind(None), merge_blind(BROADCAST_MAX)
    (True, False, False)
    >>> merge_blind(int(BLIND_FRACTION * BROADCAST_MAX)), merge_blind(int(BLIND_FRACTION * BROADCAST_MAX) + 1)
    (True, False)
    """
    return last is not None and last <= BLIND_FRACTION * BROADCAST_MAX


def merge(
    overlay: DataFrame, changes: DataFrame, key: str, rows: int | None, named: Column | None = None
) -> DataFrame:
    """The changes since the base once an epoch's ``changes`` (with ``_deleted``; ``rows`` rows, ``None``: not
    counted, see :func:`merge_blind`) are applied to ``overlay`` (the changes since before): ``overlay``'s rows of
    the keys ``changes`` does not name, and ``changes``. Their keys are broadcast when uncounted or up to
    :data:`BROADCAST_MAX`; beyond, both sides are shuffled by key. ``named``: whether a row's key is one of the
    changes', known on the driver (:func:`among`): a filter, no broadcast, no job."""
    from pyspark.sql import functions as F

    if named is not None:
        return overlay.where(_outside(named)).unionByName(changes)
    keys = changes.select(key)
    small = rows is None or rows <= BROADCAST_MAX
    return overlay.join(F.broadcast(keys) if small else keys, key, "left_anti").unionByName(changes)


#: the most keys :func:`among` names in a plan
AMONG_MAX = 4096


def keys_of(table: Any, key: str) -> frozenset[int] | None:
    """The keys of ``table`` (Arrow, collected) as a set, for :func:`among`: at most :data:`AMONG_MAX` integers,
    none null; else ``None``.

    >>> import pyarrow as pa
    >>> sorted(keys_of(pa.table({"k": pa.array([3, 1, 3], pa.int64())}), "k"))
    [1, 3]
    >>> keys_of(pa.table({"k": pa.array([1, None], pa.int64())}), "k") is None
    True
    >>> keys_of(pa.table({"k": pa.array(["a"])}), "k") is None
    True
    """
    import pyarrow as pa

    column = table.column(key)
    if not pa.types.is_integer(column.type) or column.null_count or len(column) > AMONG_MAX:
        return None
    return frozenset(column.to_pylist())


def among(keys: frozenset[int] | None, key: str) -> Column | None:
    """Whether a row's ``key`` is one of ``keys`` (:func:`keys_of`), as a predicate holding them as literals
    (Spark looks them up in a hash set); ``None`` for ``None`` or more than :data:`AMONG_MAX` keys."""
    if keys is None or len(keys) > AMONG_MAX:
        return None
    from pyspark.sql import functions as F

    if not keys:
        return F.lit(False)
    name = "`" + key.replace("`", "``") + "`"
    return F.expr(f"{name} IN ({', '.join(map(str, sorted(keys)))})")


def _outside(named: Column) -> Column:
    """The rows :func:`among`'s ``named`` does not hold, a null key among them (as a left anti join keeps it)."""
    from pyspark.sql import functions as F

    return ~F.coalesce(named, F.lit(False))


def layers_of(state: Any) -> Layers | None:
    """The layers whose view ``state`` is (``None``: ``state`` is no ``changes=True`` step's view)."""
    layers = _VIEWS.get(id(state)) if state is not None else None
    return layers if layers is not None and layers.view is state else None


def counted(frame: DataFrame, key: str, step: str) -> int:
    """Materialise ``frame`` (a :func:`~falkirk.spark.pipeline.run.session.detach`-ed state part) with one job,
    its rows; refuse a null key (a join matches no null key, so it could be neither replaced nor removed in
    memory, while a restore resolves null as one key)."""
    return _counted(frame, None, key, step)[0]


def counted_with(frame: DataFrame, also: DataFrame, key: str, step: str) -> tuple[int, int]:
    """:func:`counted`, and the rows of ``also`` counted by the same job: ``(rows of frame, rows of also)``
    (the step's changes, which its output often is: that output then needs no count job of its own)."""
    return _counted(frame, also, key, step)


def _counted(frame: DataFrame, also: DataFrame | None, key: str, step: str) -> tuple[int, int]:
    from pyspark.sql import functions as F

    def zero(name: str) -> Any:
        return F.lit(0).cast("bigint").alias(name)

    counts = frame.select(
        *once(
            ("counted", key),
            lambda: [
                F.count(F.lit(1)).alias("n"),
                F.count_if(F.col(key).isNull()).alias("null"),
                zero("also"),
            ],
        )
    )
    if also is not None:  # one job: both counts, side by side, summed
        other = also.select(
            *once(("counted-also",), lambda: [zero("n"), zero("null"), F.count(F.lit(1)).alias("also")])
        )
        counts = counts.unionByName(other).select(
            *once(("counted-sum",), lambda: [F.sum(c).alias(c) for c in ("n", "null", "also")])
        )
    row = counts.first()
    n, null, rows = (int(row["n"]), int(row["null"]), int(row["also"])) if row is not None else (0, 0, 0)
    _refuse_null_keys(null, key, step)
    return n, rows


def _refuse_null_keys(null: int, key: str, step: str) -> None:
    if null:
        raise PipelineError(
            f"step {step!r} (changes=True): {null} row(s) of its state have a null key {key!r}; the keys of "
            "state updated in place must not be null (filter them out, or give them a value)"
        )


def merged_table(overlay: Any, changes: Any, key: str, step: str) -> Any:
    """:func:`merge` on the driver: the rows of Arrow ``overlay`` (the changes since the base, ``None``: none)
    whose key ``changes`` (an epoch's, with ``_deleted``, collected) does not name, then ``changes``, in
    ``overlay``'s columns (else ``changes``'), every one nullable (an epoch's changes may hold a null where the
    plan of an earlier one's promised none); a null key among the changes is refused, as :func:`counted`
    refuses it.

    >>> import pyarrow as pa
    >>> old = pa.table({"k": [1, 2, 3], "v": [10, 20, 30], "_deleted": [False] * 3})
    >>> new = pa.table({"v": [21, 40], "k": [2, 4], "_deleted": [False, True]})
    >>> merged_table(old, new, "k", "s").to_pylist()  # doctest: +NORMALIZE_WHITESPACE
    [{'k': 1, 'v': 10, '_deleted': False}, {'k': 3, 'v': 30, '_deleted': False},
     {'k': 2, 'v': 21, '_deleted': False}, {'k': 4, 'v': 40, '_deleted': True}]
    >>> strict = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.int64(), False)])
    >>> merged_table(pa.table({"k": [1], "v": [1]}, schema=strict), pa.table({"v": [None], "k": [2]}), "k", "s")
    pyarrow.Table
    k: int64
    v: int64
    ----
    k: [[1],[2]]
    v: [[1],[null]]
    >>> merged_table(None, pa.table({"k": pa.array([None], pa.int64())}), "k", "s")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    falkirk.spark.errors.PipelineError: step 's' (changes=True): 1 row(s) of its state have a null key 'k'; ...
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    _refuse_null_keys(changes.column(key).null_count, key, step)
    if overlay is None:
        return changes.cast(_nullable(changes.schema))
    schema = _nullable(overlay.schema)
    kept = overlay.filter(pc.invert(pc.is_in(overlay.column(key), value_set=changes.column(key))))
    return pa.concat_tables([kept.cast(schema), changes.select(overlay.column_names).cast(schema)])


def _nullable(schema: Any) -> Any:
    """Arrow ``schema`` with every field nullable."""
    import pyarrow as pa

    return pa.schema([f.with_nullable(True) for f in schema])


def driver_keyed(key_type: Any) -> bool:
    """Whether a state keyed by a column of Spark type ``key_type`` may have its changes merged on the driver
    (:func:`merged_table`), or its keys named in a plan (:func:`_few_keys`): an integer, which Arrow's and
    Spark's joins and an IN list compare alike (a float's ``-0.0`` and ``NaN``, a string's collation, they may
    not).

    >>> from pyspark.sql.types import DoubleType, LongType, StringType
    >>> driver_keyed(LongType()), driver_keyed(DoubleType()), driver_keyed(StringType())
    (True, False, False)
    """
    from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

    return isinstance(key_type, (ByteType, ShortType, IntegerType, LongType))


def on_driver(table: Any, like: DataFrame) -> DataFrame:
    """The rows of Arrow ``table`` as a DataFrame with the types of ``like``'s columns (each of ``table``'s, by
    name; every one nullable, as :func:`merged_table` gives them), held on the driver (a local relation: no job
    makes it, no executor holds it, so an executor's loss takes none of it:
    :func:`~falkirk.spark.pipeline.run.session.held_on_driver`)."""
    from pyspark.sql.types import StructField, StructType

    from falkirk.spark.pipeline.run.session import held_on_driver

    schema = StructType([StructField(c, like.schema[c].dataType, True) for c in table.column_names])
    return held_on_driver(like.sparkSession.createDataFrame(table, schema), table.nbytes)


def check_changes(rows: DataFrame, base: DataFrame, step: str) -> None:
    """Refuse changes (``rows``, with ``_deleted``) whose columns are not the state's (``base``)."""
    have = [(f.name, f.dataType.simpleString()) for f in rows.schema.fields if f.name != DELETED]
    want = [(f.name, f.dataType.simpleString()) for f in base.schema.fields]
    if sorted(have) != sorted(want):
        raise PipelineError(
            f"step {step!r} (changes=True): the changes it returned have columns "
            f"{', '.join(f'{n} {t}' for n, t in have)}; its state has {', '.join(f'{n} {t}' for n, t in want)}"
        )


def lookup(state: DataFrame, keys: DataFrame) -> DataFrame:
    """The rows of ``state`` whose key is among ``keys`` — the same rows as
    ``state.join(keys, key, "left_semi")``, in ``state``'s column order — where ``keys`` has one column,
    named as a column of ``state`` (its key).

    For the state of a ``changes=True`` step (what the step is given as ``state``), read from its layers so
    that the whole base is probed only by ``keys`` (broadcast) and the changes since are applied to the rows
    found: a step touching 1 % of a large state then scans it once against a small hash table, instead of
    against every key changed since the last compaction too. Any other DataFrame: the semi-join above, with
    ``keys`` broadcast.
    """
    from pyspark.sql import functions as F

    if len(keys.columns) != 1 or keys.columns[0] not in state.columns:
        raise PipelineError(
            f"lookup: keys must have one column, named as a column of the state (its key); it has "
            f"{keys.columns}, the state {state.columns}"
        )
    key = keys.columns[0]
    wanted = F.broadcast(keys)
    layers = layers_of(state)
    if layers is None or layers.key != key:
        return _joined(state, wanted, key, "left_semi")
    order = layers.base.columns
    few = _few_keys(keys, key, layers)
    if few is not None:  # collected: the layers filtered by them, no broadcast
        found = layers.base.where(few)
        if layers.overlay is None:
            return found
        named = layers.overlay.where(few)
        overlaid = among(layers.overlay_keys, key)
        if overlaid is not None:  # the overlay's keys known on the driver too: no job at all
            return found.where(_outside(overlaid)).unionByName(live(named))
        return _joined(found, F.broadcast(named.select(key)), key, "left_anti", order).unionByName(
            live(named)
        )
    found = _joined(layers.base, wanted, key, "left_semi", order)
    if layers.overlay is None:
        return found
    # the wanted keys the overlay names (few): their base rows are stale, their overlay rows current
    named = layers.overlay.join(wanted, key, "left_semi")
    stale = F.broadcast(named.select(key))
    return _joined(found, stale, key, "left_anti", order).unionByName(live(named))


def collected(df: DataFrame) -> Any:
    """``df``'s rows on the driver, as Arrow: without a Spark job where its plan is rows already there (a local
    relation — an input's small epoch, read on the driver — that Spark's optimiser folded ``df``'s projections,
    filters and limit into), else by ``toArrow``'s job. For columns of plain types (a lookup's keys): rows taken
    without a job are converted from Python values, a timestamp with no time zone."""
    from falkirk.spark.pipeline.run.session import local_scan

    if not local_scan(df):
        return df.toArrow()
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema)
    rows = df.collect()  # the local scan's rows, taken on the driver: no job
    return pa.table(
        {f.name: pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)}, schema=schema
    )


#: per base (by ``id``), whether the last :func:`lookup` of its layers found its keys few (:func:`_few_keys`)
_FEW: dict[int, bool] = {}


def _few_keys(keys: DataFrame, key: str, layers: Layers) -> Column | None:
    """Whether a row's ``key`` is one of ``keys`` (a frame of that one column), as :func:`among`'s predicate,
    where they are at most :data:`AMONG_MAX` integers, none null, and the state's key is an integer too:
    collected on the driver by one job (where a join would broadcast them, a job too, and the layers' two joins
    with them could not share it), read no further than one key past the bound. ``None`` otherwise, and from
    then on for lookups of the same base."""
    if _FEW.get(id(layers.base)) is False:
        return None
    # the state's key too: a join of a string with an integer compares through a cast an IN list may not make
    if not (driver_keyed(keys.schema[key].dataType) and driver_keyed(layers.base.schema[key].dataType)):
        return None
    if len(_FEW) > 64:
        _FEW.clear()
    few = keys_of(collected(keys.limit(AMONG_MAX + 1)), key)
    _FEW[id(layers.base)] = few is not None
    return among(few, key)
