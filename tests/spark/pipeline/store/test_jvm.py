"""Objects made once per JVM (:func:`falkirk.spark.pipeline.store.jvm.once`): kept per gateway and owner, made
again for another of either; keyed layouts built from the kept columns are the layouts of fresh ones."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from falkirk.spark.pipeline.store import jvm, keyed


def test_a_value_is_kept_per_key_and_owner_and_made_again_for_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gateways = [object()]
    monkeypatch.setattr(jvm, "_gateway", lambda: gateways[0])
    made: list[str] = []

    def make(tag: str) -> Any:
        made.append(tag)
        return object()

    a, b = object(), object()
    first = jvm.once(("k",), lambda: make("1"), owner=a)
    assert jvm.once(("k",), lambda: make("2"), owner=a) is first  # kept
    other = jvm.once(("k",), lambda: make("3"), owner=b)  # another owner: made again, and kept for it
    assert other is not first and jvm.once(("k",), lambda: make("4"), owner=b) is other
    assert jvm.once(("j",), lambda: make("5")) is jvm.once(("j",), lambda: make("6"))  # no owner
    gateways[0] = object()  # another JVM: nothing made for the old one is returned
    assert jvm.once(("j",), lambda: make("7")) is not None and made == ["1", "3", "5", "7"]
    monkeypatch.setattr(jvm, "_gateway", lambda: (gateways[0], True))  # the same JVM, the other kind of API
    assert jvm.once(("j",), lambda: make("8")) is not None and made[-1] == "8"


def test_the_memo_keeps_at_most_its_limit_the_oldest_made_dropped_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jvm, "_gateway", lambda: "a gateway of this test's")
    monkeypatch.setattr(jvm, "LIMIT", 5)
    made: list[int] = []

    def make(i: int) -> Any:
        made.append(i)
        return object()

    kept = {i: jvm.once(("limit", i), lambda i=i: make(i)) for i in range(5)}
    assert jvm.once(("limit", 0), lambda: make(-1)) is kept[0]  # within the limit: all kept
    for i in range(5, 8):  # three more: the three oldest made (0, 1, 2) go
        kept[i] = jvm.once(("limit", i), lambda i=i: make(i))
    assert len(jvm._memo[1]) == 5
    assert all(jvm.once(("limit", i), lambda: make(-1)) is kept[i] for i in range(3, 8))
    assert made == list(range(8))  # nothing kept was made again
    again = jvm.once(("limit", 0), lambda: make(100))  # dropped: made again, now the newest
    assert again is not kept[0] and made[-1] == 100 and len(jvm._memo[1]) == 5
    assert ("limit", 3) not in jvm._memo[1]  # the oldest made then went


@pytest.mark.spark
def test_layouts_from_kept_columns_are_those_of_fresh_ones(spark: Any) -> None:
    """Two layouts of the same rows, the second built from the columns the first made, agree row for row with
    the key-group arithmetic (``check_layout`` builds its owner column afresh)."""
    from pyspark.sql import functions as F

    df = spark.range(0, 500).select(F.col("id").alias("k"), (F.col("id") * 3).alias("v"))
    kept = keyed.key_group("k", 16)
    assert keyed.key_group("k", 16) is kept  # made once
    # each key's group computed here, by an expression of the test's own
    groups = {r.k: r.g for r in df.select("k", F.pmod(F.xxhash64("k"), F.lit(16)).alias("g")).collect()}
    for _ in range(2):
        laid_out = keyed.layout(df, "k", 3, 16)
        assert keyed.check_layout(laid_out, "k", 3, 16) == []
        rows = laid_out.select("k", "v", keyed.KG, keyed.SUBTASK, F.spark_partition_id().alias("p")).collect()
        assert sorted((r.k, r.v) for r in rows) == [(i, 3 * i) for i in range(500)]
        assert all(r[keyed.KG] == groups[r.k] for r in rows)
        assert all(r[keyed.SUBTASK] == keyed.subtask_of(r[keyed.KG], 3, 16) == r.p for r in rows)
    restored = keyed.restore(laid_out.drop(keyed.SUBTASK), "k", 2, 16)
    parts = restored.select("k", F.spark_partition_id().alias("p")).collect()
    assert sorted(r.k for r in parts) == list(range(500))
    assert keyed.check_layout(restored, "k", 2, 16) == []


@pytest.mark.spark
def test_a_kept_aliased_column_names_a_new_attribute_in_each_plan(spark: Any) -> None:
    """What keeping columns across epochs rests on: a column (Spark 4's ``Column`` is a node, turned into an
    expression at each use) used in two plans gives each its own attribute, so two epochs' frames built from one
    kept column join and union as frames built from fresh columns do."""
    from pyspark.sql import functions as F

    kept = jvm.once(("test-alias",), lambda: F.when(F.col("x") > 1, None).otherwise(F.col("x")).alias("x"))
    df = spark.range(5).withColumnRenamed("id", "x")
    a, b = df.select(kept), df.select(kept)
    ids = [str(f._jdf.queryExecution().analyzed().output().apply(0).exprId().id()) for f in (a, b)]
    assert ids[0] != ids[1]
    assert sorted(r.x for r in a.unionByName(b).collect() if r.x is not None) == [0, 0, 1, 1]
    assert a.join(b, "x").count() == 2


@pytest.mark.spark
def test_a_class_is_looked_up_by_its_whole_name_once(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`~falkirk.spark.pipeline.store.jvm.jclass`: one py4j call for the class, none the next time; the
    handle is the class's (its static methods and an object's ``MODULE$`` answer), not a package's."""
    from py4j.clientserver import ClientServerConnection
    from py4j.java_gateway import JavaClass

    sent: list[str] = []
    original = ClientServerConnection.send_command
    me = threading.get_ident()

    def counting(self: Any, command: str) -> Any:
        if threading.get_ident() == me:  # not py4j's finalizer thread freeing objects meanwhile
            sent.append(command)
        return original(self, command)

    view = spark.sparkContext._jvm
    monkeypatch.setattr(jvm, "_memo", (None, {}))  # nothing kept from other tests
    monkeypatch.setattr(ClientServerConnection, "send_command", counting)
    option = jvm.jclass(view, "scala.Option")
    looked_up = len(sent)
    assert isinstance(option, JavaClass) and looked_up == 1
    assert jvm.jclass(view, "scala.Option") is option and len(sent) == looked_up  # kept: no call
    assert not option.empty().isDefined()
    relations = jvm.jclass(view, "org.apache.spark.sql.execution.columnar.InMemoryRelation$")
    module = relations.__getattr__("MODULE$")
    assert "InMemoryRelation" in module.getClass().getName()
    sent.clear()
    walked = view.scala.Option  # the attribute walk: a call per name
    assert isinstance(walked, JavaClass) and len(sent) == 2
