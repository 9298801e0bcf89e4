"""Keyed state by key group, and restoring it into a different number of partitions.

A stateful step declared with a key (``Lazy(every=2, key="user",
partitions=3)``) keeps its state the way Flink keeps keyed state (seed 001):
every key belongs to one of ``max_parallelism`` **key groups**
(``pmod(xxhash64(key), max_parallelism)``), and partition ``i`` of ``n``
owns the contiguous range of key groups :func:`key_group_range` gives it.
A checkpoint is written as one directory per partition
(``_subtask=i/``), each holding exactly that partition's key groups, and
the manifest records the layout.

Restoring at a **different** parallelism ``m`` (rescaling on recovery) is a
redistribution by key group: new partition ``j`` needs the old partitions
whose ranges overlap its own (:func:`plan_rescale`), reads them and keeps
the records of its key groups, which the restored DataFrame holds in its
partition ``j``. Keyed state has no order to keep, so nothing else is
needed; a step's *output* is recomputed from its inputs and is not
affected by the new layout.

>>> key_group_range(0, 3, 16), key_group_range(2, 3, 16)
((0, 5), (11, 15))
>>> [subtask_of(g, 3, 16) for g in (0, 5, 6, 10, 11, 15)]
[0, 0, 1, 1, 2, 2]
>>> plan_rescale(2, 3, 16)
{0: [0], 1: [0, 1], 2: [1]}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.store.jvm import once

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "KG",
    "SUBTASK",
    "SALT",
    "key_group_range",
    "subtask_of",
    "plan_rescale",
    "key_group",
    "layout",
    "placed",
    "tagged",
    "partition_exactly",
    "check_layout",
    "spark_hash",
]

#: column holding a record's key group while it is laid out (a function of the key; checkpoints written before
#: 2026-12-04 hold it in their files, later ones do not: a reader computes it from the key)
KG = "_kg"
#: directory partition column of a keyed checkpoint (``_subtask=i``)
SUBTASK = "_subtask"
#: column a keyed layout's rows are hash-partitioned by (a function of ``_subtask``; dropped before writing)
SALT = "_falkirk_partition"
_salts: dict[int, list[int]] = {}


def key_group_range(subtask: int, parallelism: int, max_parallelism: int) -> tuple[int, int]:
    """The key groups ``(first, last)`` (inclusive) that partition ``subtask`` of ``parallelism`` owns.

    The same assignment as Flink's ``KeyGroupRangeAssignment``: contiguous,
    sizes differing by at most one, every group owned exactly once.
    """
    if not 0 < parallelism <= max_parallelism:
        raise PipelineError(
            f"parallelism {parallelism} must be between 1 and max_parallelism={max_parallelism}"
        )
    if not 0 <= subtask < parallelism:
        raise PipelineError(f"partition {subtask} does not exist at parallelism {parallelism}")
    first = (subtask * max_parallelism + parallelism - 1) // parallelism
    last = ((subtask + 1) * max_parallelism - 1) // parallelism
    return first, last


def subtask_of(group: int, parallelism: int, max_parallelism: int) -> int:
    """The partition of ``parallelism`` that owns key group ``group``."""
    return group * parallelism // max_parallelism


def plan_rescale(old: int, new: int, max_parallelism: int) -> dict[int, list[int]]:
    """For each new partition, the old partitions it must read (their key-group ranges overlap)."""
    before = [key_group_range(i, old, max_parallelism) for i in range(old)]
    plan: dict[int, list[int]] = {}
    for j in range(new):
        lo, hi = key_group_range(j, new, max_parallelism)
        plan[j] = [i for i, (first, last) in enumerate(before) if first <= hi and last >= lo]
    return plan


def _owner(group: Column, parallelism: int, max_parallelism: int) -> Column:
    """:func:`subtask_of` as a column expression."""
    from pyspark.sql import functions as F

    return F.floor(group * parallelism / max_parallelism).cast("int")


def _owner_of_kg(parallelism: int, max_parallelism: int) -> Column:
    """:func:`_owner` of the ``_kg`` column, made once per JVM (:func:`~.jvm.once`)."""
    from pyspark.sql import functions as F

    return once(
        ("owner", parallelism, max_parallelism), lambda: _owner(F.col(KG), parallelism, max_parallelism)
    )


def _owner_of_key(key: str, parallelism: int, max_parallelism: int) -> Column:
    """:func:`_owner` of column ``key``'s key group, made once per JVM (:func:`~.jvm.once`)."""
    return once(
        ("owner-of-key", key, parallelism, max_parallelism),
        lambda: _owner(key_group(key, max_parallelism), parallelism, max_parallelism),
    )


def key_group(key: str, max_parallelism: int) -> Column:
    """The key group of column ``key``: ``pmod(xxhash64(key), max_parallelism)`` (made once per JVM: a keyed
    step lays its state out with it at every checkpoint, :func:`~.jvm.once`)."""
    from pyspark.sql import functions as F

    return once(
        ("key_group", key, max_parallelism),
        lambda: F.pmod(F.xxhash64(F.col(key)), F.lit(max_parallelism)).cast("int"),
    )


def spark_hash(value: int) -> int:
    """Spark's ``hash()`` of a ``BIGINT`` (Murmur3 x86 32-bit, seed 42), computed in Python.

    >>> spark_hash(0), spark_hash(1), spark_hash(-7)
    (-1670924195, -1712319331, 222034016)
    """
    mask = 0xFFFFFFFF

    def mix_k1(k: int) -> int:
        k = (k * 0xCC9E2D51) & mask
        k = ((k << 15) | (k >> 17)) & mask
        return (k * 0x1B873593) & mask

    def mix_h1(h: int, k: int) -> int:
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        return (h * 5 + 0xE6546B64) & mask

    v = value & 0xFFFFFFFFFFFFFFFF
    h = mix_h1(42, mix_k1(v & mask))
    h = mix_h1(h, mix_k1(v >> 32)) ^ 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def _salt_values(n: int) -> list[int]:
    """Values ``v_j`` with ``pmod(hash(v_j), n) == j``: hash-partitioning by ``v_j`` sends rows to partition
    ``j``.

    Found without a Spark job (:func:`spark_hash`, checked against Spark by
    ``tests/spark/pipeline/store/test_keyed.py``).

    >>> _salt_values(3)
    [3, 0, 1]
    """
    if n not in _salts:
        first: dict[int, int] = {}
        v = 0
        while len(first) < n:
            first.setdefault(spark_hash(v) % n, v)
            v += 1
        _salts[n] = [first[j] for j in range(n)]
    return _salts[n]


def partition_exactly(df: DataFrame, subtask: Column, n: int, *, keep: bool = False) -> DataFrame:
    """``df`` in ``n`` partitions, row ``r`` in partition ``subtask(r)`` (``0 <= subtask < n``).

    ``keep``: keep the column the rows are hash-partitioned by (``_salt``,
    a function of ``subtask``), so that an operator clustered by it and
    more columns runs without another shuffle.
    """
    from pyspark.sql import functions as F

    salts = once(("salts", n), lambda: F.array(*[F.lit(v).cast("bigint") for v in _salt_values(n)]))
    out = df.withColumn(SALT, F.element_at(salts, subtask + 1)).repartition(n, SALT)
    return out if keep else out.drop(SALT)


def tagged(df: DataFrame, key: str, parallelism: int, max_parallelism: int) -> DataFrame:
    """``df`` with the partition owning each row's key group, not moved: for writing with
    ``partitionBy(SUBTASK)``.

    The write puts each row in its partition's directory wherever the row
    sits, so a checkpoint needs no shuffle into the layout: each of at most
    ``parallelism`` tasks (``df``'s partitions, coalesced without a shuffle
    if more) writes a file into each directory it has rows for, after a
    sort of its own rows by partition. At 10^7 rows that is about half the
    CPU of shuffling them into the layout first (benchmarks/README.md).
    The key group itself is not written: a reader computes it from the key
    (:func:`restore`), and a column more in every file cost about 0.6 of
    the write's 3.5 CPU-s at 10^7 rows of two columns.
    """
    return df.withColumn(SUBTASK, _owner_of_key(key, parallelism, max_parallelism)).coalesce(parallelism)


def layout(df: DataFrame, key: str, parallelism: int, max_parallelism: int) -> DataFrame:
    """``df`` with its key group and owning partition, each row moved into that partition of ``parallelism``
    (a shuffle; a checkpoint is written from :func:`tagged`, which moves nothing)."""
    return placed(df, key, parallelism, max_parallelism)[0].drop(SALT)


def placed(df: DataFrame, key: str, parallelism: int, max_parallelism: int) -> tuple[DataFrame, list[str]]:
    """:func:`layout` keeping the column the rows are hash-partitioned by, and the columns a row gained: its
    key group, its partition and that column, all functions of the key (an operator clustered by the key and
    them runs without another shuffle; drop the last before writing)."""
    from pyspark.sql import functions as F

    with_kg = df.withColumn(KG, key_group(key, max_parallelism))
    owner = _owner_of_kg(parallelism, max_parallelism)
    subtask = once(("col", SUBTASK), lambda: F.col(SUBTASK))
    return (
        partition_exactly(with_kg.withColumn(SUBTASK, owner), subtask, parallelism, keep=True),
        [KG, SUBTASK, SALT],
    )


def restore(
    df: DataFrame,
    key: str,
    parallelism: int,
    max_parallelism: int,
    *,
    within: Callable[[DataFrame, str], DataFrame] | None = None,
) -> DataFrame:
    """Checkpoint rows keyed by ``key`` redistributed into ``parallelism`` partitions by their key groups
    (computed from the key: a ``_kg`` column in older checkpoints' files is not read); internal columns
    dropped.

    ``within(rows, by)``: applied to the redistributed rows before that;
    ``by`` names the column they are hash-partitioned by, a function of the
    key group, so all rows of a key share a partition and an operator
    clustered by ``[by, key]`` (a per-key window) needs no further shuffle.
    """

    cols = [c for c in df.columns if c not in (KG, SUBTASK)]
    owner = _owner_of_key(key, parallelism, max_parallelism)
    if within is None:
        return partition_exactly(df, owner, parallelism).select(*cols)
    return within(partition_exactly(df, owner, parallelism, keep=True), SALT).select(*cols)


def check_layout(df: DataFrame, key: str, parallelism: int, max_parallelism: int) -> list[Any]:
    """Rows of ``df`` that sit in a partition other than the one owning their key group (empty: correct)."""
    from pyspark.sql import functions as F

    owner = _owner(key_group(key, max_parallelism), parallelism, max_parallelism)
    return (
        df.select(F.col(key), F.spark_partition_id().alias("partition"), owner.alias("owner"))
        .where("partition != owner")
        .collect()
    )
