"""``detach``: a copy cut from its lineage and from its plan's size estimate (a local checkpoint of its own).

A state joined with each epoch's changes and detached again every epoch must keep the rows a pure-Python fold
computes (multisets), and carry no size estimate of the joins that made it — Spark's default before it is cached,
the cache's own size after (the estimate of a join is the product of its sides': carried over, it grows with every
join — a plain local checkpoint in its place is the check's negative control) — and be held in Spark's columnar
cache whose batches are one local checkpoint: its blocks found by ``missing_blocks``, its materialisation seen by
``materialised``.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections import Counter
from typing import Any

import pytest

from falkirk.spark.pipeline.run import session as S

pytestmark = [pytest.mark.spark]

KEYS, EPOCHS = 40, 12


def reported_gone(df: Any, partitions: int) -> list[int] | None:
    """``missing_blocks(df)`` once it reports every partition gone, or as it stands after 60 s.

    Freed blocks go asynchronously and the status store hears of it later still (its listener bus lags under load,
    as on a CI machine running two test workers): ``missing_blocks`` waits only for a block reported *missing*, so a
    block just freed may still be reported held for a while."""
    gone = list(range(partitions))
    deadline = time.monotonic() + 60
    while (missing := S.missing_blocks(df, wait=0.0)) != gone and time.monotonic() < deadline:
        time.sleep(0.1)
    return missing


def changes(epoch: int) -> list[tuple[int, int]]:
    return [((epoch * 7 + i * 3) % KEYS, epoch * 10 + i) for i in range(9)]


def folded(epochs: int) -> Counter[tuple[int, int]]:
    """The state after ``epochs`` epochs, by a pure-Python fold: each change adds its value to its key's total."""
    totals: dict[int, int] = {}
    for e in range(epochs):
        for k, v in changes(e):
            totals[k] = totals.get(k, 0) + v
    return Counter(totals.items())


def looped(spark: Any, cut: Any) -> Any:
    """The state after ``EPOCHS`` epochs, each a full outer join of the state with the epoch's changes, cut by
    ``cut`` every epoch."""
    from pyspark.sql import functions as F

    state = None
    for e in range(EPOCHS):
        upd = spark.createDataFrame(changes(e), "k BIGINT, v BIGINT").groupBy("k").agg(F.sum("v").alias("n"))
        if state is None:
            new = upd.withColumnRenamed("n", "total")
        else:
            both = state.join(upd, "k", "full_outer")
            new = both.select("k", (F.coalesce("total", F.lit(0)) + F.coalesce("n", F.lit(0))).alias("total"))
        state = cut(new)
        state.count()
    return state


def estimate(df: Any) -> int:
    return int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())


def test_a_state_detached_every_epoch_keeps_its_rows_and_no_estimate(spark: Any) -> None:
    from pyspark.sql import functions as F

    state = looped(spark, lambda df: S.detach(df, eager=False))
    assert Counter(tuple(r) for r in state.collect()) == folded(EPOCHS)
    # cached: the cache's own size, as Spark measured it while caching
    relation = state._jdf.queryExecution().withCachedData()
    assert relation.getClass().getName().endswith(".InMemoryRelation")
    loaded = relation.cacheBuilder().loadedMaterializedStats()  # (rows, bytes) once every batch is cached
    assert loaded.isDefined() and int(str(loaded.get()._1())) == len(folded(EPOCHS))
    assert estimate(state) == int(str(loaded.get()._2()))
    # not cached yet: Spark's default estimate, where it knows nothing of the plan's size
    default = int(spark._jsparkSession.sessionState().conf().defaultSizeInBytes())
    upd = spark.createDataFrame(changes(EPOCHS), "k BIGINT, n BIGINT")
    joined = state.join(upd, "k", "full_outer").select("k", (F.coalesce("total", F.lit(0)) + F.coalesce("n", F.lit(0))))
    assert estimate(S.detach(joined, eager=False)) == default
    # the control: a plain local checkpoint carries the joins' estimate (else the check above proves nothing)
    plain = looped(spark, lambda df: df.localCheckpoint(eager=False))
    assert Counter(tuple(r) for r in plain.collect()) == folded(EPOCHS) and estimate(plain) != default
    # one local checkpoint, materialised by the count: its blocks are where the application says
    assert S.materialised(state)
    assert S.missing_blocks(state) == []


def test_detach_is_a_local_checkpoint_made_by_its_first_use(spark: Any) -> None:
    """Lazy: not materialised until its first use, which materialises it; the plan is a bare local checkpoint, the
    join under it gone (what ``materialised`` and ``missing_blocks`` read); its blocks are the columnar cache's."""
    from pyspark.sql import functions as F

    left = spark.range(100).select(F.col("id").alias("k"), (F.col("id") * 2).alias("a"))
    right = spark.range(50, 150).select(F.col("id").alias("k"), (F.col("id") * 3).alias("b"))
    joined = left.join(right, "k", "full_outer")
    cut = S.detach(joined, eager=False)
    plan = cut._jdf.queryExecution().analyzed()
    assert plan.getClass().getName().endswith(".InMemoryRelation")
    assert not S.materialised(cut) and S.held_bytes(cut) is None
    assert Counter(tuple(r) for r in cut.collect()) == Counter(tuple(r) for r in joined.collect())
    assert S.materialised(cut) and S.missing_blocks(cut) == []
    # what it holds: at least the block managers' report for its batches (a small checkpoint's test, incremental)
    held = S.held_bytes(cut)
    infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    reported = [int(i.memSize()) + int(i.diskSize()) for i in infos if i.id() == plan.cacheBuilder().cachedColumnBuffers().id()]
    assert held is not None and reported and held >= reported[0] > 0
    blocks = plan.cacheBuilder().cachedColumnBuffers()
    assert blocks.isLocallyCheckpointed() and blocks.isCheckpointed()
    # the cache forgot the plan its batches were made from (a scan of an empty RDD in its place)
    assert plan.cacheBuilder().cachedPlan().execute().getNumPartitions() == 0
    assert blocks.getNumPartitions() > 0
    assert not cut.is_cached  # not in Spark's cache manager: unpersist() leaves it, the JVM's collection frees it
    # freed: its blocks gone, and a read fails (its lineage is cut) instead of computing it again
    cut.unpersist()
    assert S.missing_blocks(cut, wait=0.0) == []
    S.free(cut)
    assert reported_gone(cut, blocks.getNumPartitions()) == list(range(blocks.getNumPartitions()))
    with pytest.raises(Exception, match="(?i)checkpoint"):
        cut.collect()
    eager = S.detach(joined)
    assert S.materialised(eager) and eager.count() == 150


def test_a_query_over_a_state_detached_again_and_again_does_not_carry_the_earlier_epochs_plans(spark: Any) -> None:
    """What Spark's SQL listener records of a query over a state (its plan graph, kept per query) is the same
    after 3 and after 9 epochs: the state's cache does not lead back to the plans of the epochs before it (a
    regression: the cache of rows that kept the plan they came from made that graph, and memory, grow with every
    epoch)."""
    jvm = spark.sparkContext._jvm

    def nodes(info: Any) -> int:
        n, it = 1, info.children().iterator()
        while it.hasNext():
            n += nodes(it.next())
        return n

    def graph_after(epochs: int) -> tuple[int, Counter[tuple[int, int]]]:
        from pyspark.sql import functions as F

        state = None
        for e in range(epochs):
            upd = spark.createDataFrame(changes(e), "k BIGINT, n BIGINT")
            new = upd.withColumnRenamed("n", "total") if state is None else state.join(upd, "k", "full_outer").select(
                "k", (F.coalesce("total", F.lit(0)) + F.coalesce("n", F.lit(0))).alias("total"))
            state = S.detach(new)
        query = state.groupBy("k").agg(F.sum("total").alias("total"))
        plan = query._jdf.queryExecution().executedPlan()
        return nodes(jvm.org.apache.spark.sql.execution.SparkPlanInfo.fromSparkPlan(plan)), Counter(
            tuple(r) for r in query.collect())

    (few, rows3), (many, rows9) = graph_after(3), graph_after(9)
    assert rows3 == folded(3) and rows9 == folded(9)
    assert few == many


def live(jmap: str, pid: int, suffixes: tuple[str, ...]) -> dict[str, int]:
    """Live instances in JVM ``pid`` of the classes whose names end with ``suffixes`` (``jmap -histo:live``, which
    collects the garbage first)."""
    out = subprocess.run([jmap, "-histo:live", str(pid)], capture_output=True, text=True, check=True).stdout
    got = dict.fromkeys(suffixes, 0)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            for suffix in suffixes:
                if parts[3].endswith(suffix):
                    got[suffix] += int(parts[1])
    return got


def test_a_state_detached_every_epoch_does_not_keep_the_states_before_it_alive(spark: Any) -> None:
    """A state joined with each epoch's changes and detached again, the state before freed, 48 times: the driver's
    JVM does not hold one more cache builder and two more shuffle dependencies per epoch (a regression: each cache
    kept the plan its batches came from, which reached the state before, so every state and shuffle of the run
    stayed referenced — here at least 28 builders and 56 shuffle dependencies more at epoch 40 than at epoch 12).
    What the JVM holds otherwise comes and goes (up to about 25 builders in a probe of 120 epochs, some of them
    referenced a while by Spark's own bookkeeping), so the check takes the fewest of three counts late in the run.
    The rows are the fold's."""
    import gc

    from pyspark.sql import functions as F

    jmap = shutil.which("jmap")
    if jmap is None:
        pytest.skip("jmap (the JDK's) is not on PATH: cannot count the JVM's live objects")
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    names = (".CachedRDDBuilder", ".ShuffleDependency")
    state, counted = None, {}
    for e in range(48):
        upd = spark.createDataFrame(changes(e), "k BIGINT, n BIGINT").repartition(3, "k")
        new = upd.withColumnRenamed("n", "total") if state is None else state.join(upd, "k", "full_outer").select(
            "k", (F.coalesce("total", F.lit(0)) + F.coalesce("n", F.lit(0))).alias("total"))
        new = S.detach(new)
        if state is not None:
            S.free(state)
        state = new
        if e + 1 in (12, 40, 44, 48):
            gc.collect()
            counted[e + 1] = live(jmap, pid, names)
    assert Counter(tuple(r) for r in state.collect()) == folded(48)
    late = {name: min(counted[e][name] for e in (40, 44, 48)) for name in names}
    assert late[".CachedRDDBuilder"] < counted[12][".CachedRDDBuilder"] + 28, counted
    assert late[".ShuffleDependency"] < counted[12][".ShuffleDependency"] + 56, counted


def test_two_states_of_one_schema_stay_apart_in_one_query(spark: Any) -> None:
    """Two detached states with the same schema and different rows, each aggregated (an exchange each) in one
    query: Spark compares cache builders as case classes, so builders given the same plan in place of their
    sources would be equal and one's exchange reused for the other's (a regression of an experiment: shared empty
    plans). Their builders are not equal, and the query's rows are a pure-Python count's."""
    from pyspark.sql import functions as F

    rows_a = [(i % 5, i) for i in range(40)]
    rows_b = [(i % 7, i) for i in range(30)]
    a = S.detach(spark.createDataFrame(rows_a, "k BIGINT, v BIGINT").repartition(3, "v"))
    b = S.detach(spark.createDataFrame(rows_b, "k BIGINT, v BIGINT").repartition(3, "v"))
    builder = lambda df: df._jdf.queryExecution().analyzed().cacheBuilder()  # noqa: E731
    assert not builder(a).equals(builder(b))
    query = a.groupBy("k").agg(F.count("*").alias("n")).withColumn("side", F.lit("a")).unionByName(
        b.groupBy("k").agg(F.count("*").alias("n")).withColumn("side", F.lit("b")))
    expected = Counter({(k, n, side) for side, rows in (("a", rows_a), ("b", rows_b))
                        for k, n in Counter(k for k, _ in rows).items()})
    assert Counter(tuple(r) for r in query.select("k", "n", "side").collect()) == expected


def test_the_cache_forgets_its_source_and_keeps_the_batches_detach_made(spark: Any) -> None:
    """What ``detach`` relies on Spark for, checked on this Spark: the cache builder's two plan fields are set
    (a JVM that refuses to set final fields by reflection would leave every earlier state referenced: this
    fails rather than warns), the batches are kept in memory and on disk, the blocks ``free`` and ``missing_blocks`` use are the batches detach made
    even once the builder dropped its own, and the thread's active session is given back."""
    jvm = spark.sparkContext._jvm
    before = jvm.org.apache.spark.sql.SparkSession.getActiveSession()
    df = S.detach(spark.createDataFrame([(i, i * i) for i in range(20)], "k BIGINT, v BIGINT"))
    after = jvm.org.apache.spark.sql.SparkSession.getActiveSession()
    assert after.isDefined() == before.isDefined()
    assert not after.isDefined() or after.get().equals(before.get())
    assert S._forget_warned is False
    builder = df._jdf.queryExecution().analyzed().cacheBuilder()
    assert builder.cachedPlan().execute().getNumPartitions() == 0  # the empty plan, not the source's
    level = builder.storageLevel()
    assert level.useMemory() and level.useDisk() and level.replication() == 1
    batches = S._blocks(df)
    assert batches is not None and batches.id() == builder.cachedColumnBuffers().id()
    assert sorted(tuple(r) for r in df.collect()) == [(i, i * i) for i in range(20)]
    builder.clearCache(True)  # what CacheManager would do: the builder forgets its batches
    assert S._blocks(df).id() == batches.id()  # still the ones detach made
    # freed: no executor holds them, and they are not made again from the builder's empty plan
    assert reported_gone(df, batches.getNumPartitions()) == list(range(batches.getNumPartitions()))


def test_a_detached_copy_is_taken_up_by_a_retry_only_when_its_partitions_cannot_disagree(spark: Any) -> None:
    """``takes_up``: a copy not computed yet whose lineage is determinate may serve a retry; one behind a
    round-robin repartition of unordered rows (Spark's sort before it turned off: indeterminate) may not,
    whatever its rows; a computed copy may while its blocks are held, not once they are freed."""
    from pyspark.sql import functions as F

    grouped = spark.range(200).groupBy((F.col("id") % 17).alias("k")).count()
    assert S.takes_up(S.detach(grouped, eager=False))
    spark.conf.set("spark.sql.execution.sortBeforeRepartition", "false")
    try:
        shuffled = S.detach(grouped.repartition(3), eager=False)
    finally:
        spark.conf.unset("spark.sql.execution.sortBeforeRepartition")
    assert not S.takes_up(shuffled)
    made = S.detach(grouped)
    assert S.materialised(made) and S.takes_up(made)
    S.free(made)  # asynchronous: the status store drops the blocks a moment later
    deadline = time.monotonic() + 20
    while S.takes_up(made) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not S.takes_up(made)
