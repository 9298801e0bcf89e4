"""The flagship application: the paper's Figure 1, on synthetic data it generates itself.

A high-throughput event stream is reduced by two ephemeral steps, one feeding
a heavy per-epoch batch computation (batch regime: its output is logged)
and one feeding a computation updated every epoch (incremental connected
components; lazy checkpoint every ``cc_every`` epochs). User queries are
joined with both (ephemeral);
statistics of the answers go to an SQLite database (eager: one transaction
per epoch); the answers are the external output (one Parquet partition per
epoch, overwritten on replay)::

    events ─┬─ parse_batch ── heavy ──────┐
            └─ parse_graph ── cc ─────────┤
    queries ──────────────────────────── answer ─┬─ stats      (SQLite)
                                                  └─ responses  (Parquet)

``cc`` comes in two algorithms with identical outputs (each node's
component is the smallest node id in it), chosen by ``build(cc=...)``:

* ``"unionfind"`` (default): :func:`cc_unionfind`, one ``applyInPandas``
  task per epoch that seeds a union–find with the state and adds the
  epoch's links (:func:`union_find`; the Structured Streaming benchmark's
  stateful operator runs the same function);
* ``"propagation"``: :func:`cc_propagation`, label propagation to a fixed
  point, one Spark job per iteration — the showcase of an iterative step.

Everything is integer arithmetic, so a recomputation gives bit-identical
output. ``examples/flagship.py`` runs it; ``python -m falkirk.spark.demo``
runs it with a failure and prints the recovery report.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.api import Pipeline
from falkirk.spark.pipeline.declare.regimes import Batch, Eager, Ephemeral, Lazy
from falkirk.spark.pipeline.run.session import SMALL_DATA, detach

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "build",
    "CC_ALGORITHMS",
    "EVENT_SCHEMA",
    "QUERY_SCHEMA",
    "events_source",
    "queries_source",
    "union_find",
    "cc_unionfind",
    "cc_propagation",
]

EVENT_SCHEMA = "user BIGINT, kind STRING, category STRING, amount BIGINT, src BIGINT, dst BIGINT"
QUERY_SCHEMA = "qid BIGINT, user BIGINT, node BIGINT"
CATEGORIES = ("books", "games", "music", "sports", "tools", "travel")
STATS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS answer_stats (epoch INTEGER PRIMARY KEY, queries INTEGER NOT NULL, "
    "answered INTEGER NOT NULL, spend INTEGER NOT NULL, components INTEGER NOT NULL, cumulative INTEGER NOT NULL)"
)


def events_source(per_epoch: int, users: int, nodes: int, seed: int) -> Any:
    """``source(epoch)`` producing ``per_epoch`` synthetic events (3% of them graph links).

    >>> batch = list(events_source(10, users=5, nodes=8, seed=1)(0))
    >>> len(batch), sorted(batch[0])
    (10, ['amount', 'category', 'dst', 'kind', 'src', 'user'])
    """

    def source(epoch: int) -> list[dict[str, Any]]:
        rnd = random.Random(seed * 1_000_003 + epoch)
        out = []
        for _ in range(per_epoch):
            r = rnd.random()
            kind = "link" if r < 0.03 else "purchase" if r < 0.35 else "view"
            link = kind == "link"
            out.append(
                {
                    "user": rnd.randrange(users),
                    "kind": kind,
                    "category": rnd.choice(CATEGORIES),
                    "amount": 0 if link else rnd.randrange(1, 500),
                    "src": rnd.randrange(nodes) if link else None,
                    "dst": rnd.randrange(nodes) if link else None,
                }
            )
        return out

    return source


def queries_source(per_epoch: int, users: int, nodes: int, seed: int) -> Any:
    """``source(epoch)`` producing ``per_epoch`` user queries (a user and a graph node each)."""

    def source(epoch: int) -> list[dict[str, Any]]:
        rnd = random.Random(seed * 7_000_003 + epoch)
        return [
            {"qid": epoch * 1_000_000 + i, "user": rnd.randrange(users), "node": rnd.randrange(nodes)}
            for i in range(per_epoch)
        ]

    return source


def _detached(df: DataFrame) -> DataFrame:
    return detach(df, eager=False)


# -- the steps ---------------------------------------------------------------------------------------
def parse_batch(events: DataFrame) -> DataFrame:
    """Ephemeral: the fields the batch computation needs."""
    from pyspark.sql import functions as F

    return events.where(F.col("kind") != "link").select(
        "user", "category", "amount", (F.col("kind") == "purchase").cast("long").alias("purchase")
    )


def parse_graph(events: DataFrame) -> DataFrame:
    """Ephemeral: the graph edges for the iterative computation."""
    return events.where("kind = 'link'").select("src", "dst")


def heavy(parse_batch: DataFrame) -> DataFrame:
    """Batch: a deliberately heavy per-epoch aggregation (several group-bys and joins)."""
    from pyspark.sql import functions as F

    per_cat_user = parse_batch.groupBy("user", "category").agg(
        F.sum("amount").alias("spend"), F.count("*").alias("events"), F.sum("purchase").alias("purchases")
    )
    per_cat = per_cat_user.groupBy("category").agg(
        F.sum("spend").alias("cat_spend"), F.countDistinct("user").alias("cat_users")
    )
    joined = per_cat_user.join(F.broadcast(per_cat), "category")
    per_user = joined.groupBy("user").agg(
        F.sum("spend").alias("spend"),
        F.sum("events").alias("events"),
        F.sum("purchases").alias("purchases"),
        F.max(F.struct("spend", "category")).alias("best"),
        F.sum(F.floor(F.col("spend") * 1000 / F.col("cat_spend"))).cast("long").alias("share_permille"),
        F.max("cat_users").alias("peers"),
    )
    rank = per_user.groupBy("best.category").agg(F.max("spend").alias("cat_max"))
    return per_user.join(F.broadcast(rank), per_user.best.category == rank.category).select(
        "user",
        "spend",
        "events",
        "purchases",
        F.col("best.category").alias("top_category"),
        "share_permille",
        "peers",
        (F.col("spend") == F.col("cat_max")).alias("category_leader"),
    )


def union_find(parent: dict[int, int], src: Iterable[int], dst: Iterable[int]) -> dict[int, int]:
    """Add the edges ``src[i]–dst[i]`` to the forest ``parent``; every node's root (the smallest node id of
    its component).

    ``parent`` maps each node to its parent (a node -> component map is such a
    forest; a parent missing from the keys becomes a root); it is updated in
    place (union by the smaller root, path compression). Cost: about
    O(nodes + edges) dictionary operations.

    >>> union_find({1: 1, 4: 1, 7: 7}, [4, 9], [7, 8])
    {1: 1, 4: 1, 7: 1, 9: 8, 8: 8}
    """

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while x != root:
            parent[x], x = root, parent[x]
        return root

    for root in set(parent.values()) - parent.keys():
        parent[root] = root
    for s, d in zip(src, dst, strict=True):
        parent.setdefault(s, s)
        parent.setdefault(d, d)
        a, b = find(s), find(d)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {n: find(n) for n in list(parent)}


#: The schema of :func:`cc_unionfind`'s one grouped input: the state's ``(node, comp)`` rows (``seed``) and
#: the epoch's links ``(src, dst)``, in one group ``g``.
_UF_INPUT = "g INT, a BIGINT, b BIGINT, seed BOOLEAN"


def _components(pdf: Any) -> Any:
    """The ``applyInPandas`` function of :func:`cc_unionfind`: the seeded union–find over one group's rows."""
    import pandas as pd

    seed = pdf["seed"].astype(bool)
    parent = dict(zip(pdf["a"][seed].tolist(), pdf["b"][seed].tolist(), strict=True))
    links = pdf[~seed]
    comps = union_find(parent, links["a"].tolist(), links["b"].tolist())
    return pd.DataFrame(
        {
            "node": pd.Series(list(comps), dtype="int64"),
            "comp": pd.Series(list(comps.values()), dtype="int64"),
        }
    )


def cc_unionfind(
    parse_graph: DataFrame, *, state: DataFrame | None, spark: SparkSession
) -> tuple[DataFrame, DataFrame]:
    """Lazy checkpoint: incremental connected components by union–find; state and output are ``(node, comp)``.

    The state (every node seen, with its component's smallest node id) and the
    epoch's links go to one group of ``groupBy(...).applyInPandas(...)``, which
    seeds a union–find with the state and adds the links (:func:`union_find`):
    one Python task over the whole component map, two Spark jobs per epoch
    with the checkpoint's materialisation. The same labels as
    :func:`cc_propagation`.
    """
    from pyspark.sql import functions as F

    rows = parse_graph.select(
        F.lit(0).alias("g"), F.col("src").alias("a"), F.col("dst").alias("b"), F.lit(False).alias("seed")
    )
    if state is not None:
        rows = state.select(
            F.lit(0).alias("g"), F.col("node").alias("a"), F.col("comp").alias("b"), F.lit(True).alias("seed")
        ).unionByName(rows)
    out = rows.groupBy("g").applyInPandas(_components, "node BIGINT, comp BIGINT")
    return out, out


def cc_propagation(
    parse_graph: DataFrame, *, state: DataFrame | None, spark: SparkSession
) -> tuple[DataFrame, DataFrame]:
    """Lazy checkpoint: incremental connected components by label propagation; state and output are ``(node,
    comp)``.

    The epoch's edges are contracted onto the current components, labels are
    propagated to a fixed point (minimum label, with pointer jumping) over
    the contracted graph — one Spark job per iteration: each iteration is
    :func:`~falkirk.spark.pipeline.run.session.detach`-ed (lineage and size estimate cut)
    and materialised by its convergence test — and every node is relabelled.
    The small sides of joins are broadcast.
    """
    from pyspark.sql import functions as F

    small = F.broadcast
    labels = state if state is not None else spark.createDataFrame([], "node BIGINT, comp BIGINT")
    ends = parse_graph.select(F.col("src").alias("node")).union(
        parse_graph.select(F.col("dst").alias("node"))
    )
    comp_of = (
        ends.distinct()
        .join(small(labels), "node", "left")
        .select("node", F.coalesce("comp", "node").alias("comp"))
        .transform(_detached)
    )
    a = comp_of.select(F.col("node").alias("src"), F.col("comp").alias("a"))
    b = comp_of.select(F.col("node").alias("dst"), F.col("comp").alias("b"))
    ce = parse_graph.join(small(a), "src").join(small(b), "dst").where("a != b").select("a", "b")
    ce = ce.union(ce.select(F.col("b").alias("a"), F.col("a").alias("b"))).distinct().transform(_detached)
    lab = ce.select(F.col("a").alias("c"), F.col("a").alias("lab")).distinct()
    for _ in range(100):
        prop = ce.join(small(lab), ce.a == lab.c).select(F.col("b").alias("c"), "lab")
        step = lab.withColumn("own", F.lit(True)).unionByName(prop.withColumn("own", F.lit(False)))
        new = (
            step.groupBy("c")
            .agg(F.min("lab").alias("lab"), F.min(F.when(F.col("own"), F.col("lab"))).alias("old"))
            .transform(_detached)
        )
        hop = new.select(F.col("c").alias("h"), F.col("lab").alias("far"))
        new = (
            new.join(small(hop), new.lab == hop.h, "left")
            .select("c", F.least("lab", F.coalesce("far", "lab")).alias("lab"), "old")
            .transform(_detached)
        )
        lab = new.select("c", "lab")
        if new.where("lab < old").count() == 0:
            break
    relabel = lab.withColumnRenamed("c", "comp").withColumnRenamed("lab", "new")
    every = labels.unionByName(comp_of).distinct()
    out = every.join(small(relabel), "comp", "left").select("node", F.coalesce("new", "comp").alias("comp"))
    return out, out


def answer(queries: DataFrame, heavy: DataFrame, cc: DataFrame) -> DataFrame:
    """Ephemeral: each query answered from this epoch's batch result and the components."""
    from pyspark.sql import functions as F

    return (
        queries.join(heavy, "user", "left")
        .join(cc, "node", "left")
        .select(
            "qid",
            "user",
            "node",
            F.coalesce("spend", F.lit(0)).alias("spend"),
            F.coalesce("purchases", F.lit(0)).alias("purchases"),
            "top_category",
            F.coalesce("comp", "node").alias("component"),
        )
    )


def stats(answer: DataFrame, *, db: Any, epoch: int) -> None:
    """Eager (SQLite): per-epoch statistics plus a running total, in the epoch's transaction."""
    from pyspark.sql import functions as F

    row = answer.agg(
        F.count("*").alias("n"),
        F.count("top_category").alias("answered"),
        F.coalesce(F.sum("spend"), F.lit(0)).alias("spend"),
        F.countDistinct("component").alias("components"),
    ).collect()[0]
    db.execute(STATS_SCHEMA)
    prev = db.execute("SELECT cumulative FROM answer_stats WHERE epoch = ?", (epoch - 1,)).fetchone()
    db.execute(
        "INSERT INTO answer_stats VALUES (?, ?, ?, ?, ?, ?)",
        (
            epoch,
            row["n"],
            row["answered"],
            row["spend"],
            row["components"],
            (prev[0] if prev else 0) + row["n"],
        ),
    )


#: ``build(cc=...)``: the connected-components algorithms, by name (the first is the default).
CC_ALGORITHMS = {"unionfind": cc_unionfind, "propagation": cc_propagation}


def build(
    root: str | os.PathLike[str],
    spark: SparkSession | None = None,
    *,
    events_per_epoch: int = 4000,
    queries_per_epoch: int = 60,
    users: int = 300,
    nodes: int = 1500,
    cc_every: int = 3,
    seed: int = 7,
    cc: str = "unionfind",
    **options: Any,
) -> Pipeline:
    """The Figure 1 pipeline rooted at ``root`` (``options`` go to :class:`~falkirk.spark.Pipeline`).

    ``cc`` picks the connected-components algorithm (:data:`CC_ALGORITHMS`:
    ``"unionfind"`` or ``"propagation"``; the step is named ``cc`` either
    way, and a root keeps the algorithm it was started with: the other is a
    code change). Its epochs are small, so it runs with
    :data:`~falkirk.spark.pipeline.run.session.SMALL_DATA` unless
    ``spark_conf`` says otherwise.

    >>> build("memory://falkirk-doc/flagship", cc="bfs")
    Traceback (most recent call last):
    ...
    falkirk.spark.errors.PipelineError: flagship: cc='bfs' is not an algorithm of the flagship; choose unionfind or propagation
    """
    if cc not in CC_ALGORITHMS:
        raise PipelineError(
            f"flagship: cc={cc!r} is not an algorithm of the flagship; choose {' or '.join(CC_ALGORITHMS)}"
        )
    pipe = Pipeline(root, spark, **{"spark_conf": SMALL_DATA, **options})
    pipe.input(
        "events",
        EVENT_SCHEMA,
        partitions=2,
        key="user",
        source=events_source(events_per_epoch, users, nodes, seed),
    )
    pipe.input(
        "queries", QUERY_SCHEMA, partitions=1, source=queries_source(queries_per_epoch, users, nodes, seed)
    )
    pipe.step(parse_batch, regime=Ephemeral())
    pipe.step(heavy, regime=Batch())
    pipe.step(parse_graph, regime=Ephemeral())
    pipe.step(CC_ALGORITHMS[cc], name="cc", regime=Lazy(every=cc_every))
    pipe.step(answer, regime=Ephemeral())
    pipe.step(stats, regime=Eager(database="stats.sqlite", tables={"answer_stats": "epoch"}))
    pipe.output("responses", inputs=["answer"])
    return pipe
