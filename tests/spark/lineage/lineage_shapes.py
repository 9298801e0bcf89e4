"""The five job shapes the lineage tests compare with Spark (helpers, no tests here).

Each builder takes a SparkContext and returns the RDD whose ``collect()`` is
the job. Data is tiny and every RDD has 2 partitions (28 ms per task).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import add
from typing import Any

from pyspark import StorageLevel


def _pairs(sc: Any, n: int, mod: int, seed: int = 0) -> Any:
    return sc.parallelize(range(n), 2).map(lambda x: ((x * 7 + seed) % mod, x))


def chain(sc: Any) -> Any:
    """source → reduceByKey → re-key → reduceByKey: two shuffles in a row."""
    first = _pairs(sc, 400, 10).reduceByKey(add)
    return first.map(lambda kv: (kv[0] % 3, kv[1])).reduceByKey(add)


def join(sc: Any) -> Any:
    """Two aggregated sources joined on their key."""
    left = _pairs(sc, 300, 8).reduceByKey(add)
    right = _pairs(sc, 200, 6, seed=1).reduceByKey(max)
    return left.join(right)


def diamond(sc: Any) -> Any:
    """One aggregate read by two branches that are joined again."""
    base = _pairs(sc, 400, 12).reduceByKey(add)
    left = base.map(lambda kv: (kv[0] % 4, kv[1])).reduceByKey(add)
    right = base.map(lambda kv: (kv[0] % 3, -kv[1])).reduceByKey(min)
    return left.join(right)


def loop(sc: Any, iterations: int = 3) -> Any:
    """PageRank unrolled: a links shuffle reused by every iteration's join and reduce."""
    edges = sc.parallelize([(i % 6, (i * 5 + 1) % 6) for i in range(24)], 2)
    links = edges.groupByKey().mapValues(lambda vs: sorted(set(vs)))
    ranks = links.map(lambda kv: (kv[0], 1.0))
    for _ in range(iterations):
        contribs = links.join(ranks).flatMap(lambda kv: [(d, kv[1][1] / len(kv[1][0])) for d in kv[1][0]])
        ranks = contribs.reduceByKey(add).mapValues(lambda r: round(0.15 + 0.85 * r, 9))
    return ranks


def cached(sc: Any) -> tuple[Any, Any, Any]:
    """An aggregate persisted on disk, read by two later jobs: (base, first job, second job)."""
    base = _pairs(sc, 400, 10).reduceByKey(add).mapValues(lambda v: v + 1).persist(StorageLevel.DISK_ONLY)
    first = base.map(lambda kv: (kv[0] % 3, kv[1])).reduceByKey(add)
    second = base.filter(lambda kv: kv[0] > 2).map(lambda kv: (kv[0] % 2, kv[1])).reduceByKey(add)
    return base, first, second


#: The shapes with a single job (name → builder).
SHAPES: dict[str, Callable[[Any], Any]] = {"chain": chain, "join": join, "diamond": diamond, "loop": loop}
