"""Incremental keyed state: deltas hold exactly the changed keys, and the snapshot plus its deltas is the state."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from falkirk.spark import PipelineError
from falkirk.spark.pipeline.store import keyed
from falkirk.spark.pipeline.store.delta import DELETED, apply, check_columns, diff

pytestmark = pytest.mark.spark

SCHEMA = "k BIGINT, v BIGINT, s STRING"
keys = st.one_of(st.none(), st.integers(0, 7))
rows_of_key = st.lists(st.tuples(st.one_of(st.none(), st.integers(-2, 2)), st.sampled_from(["a", "b", None])),
                       max_size=2)
#: one epoch's changes: per key, the rows it has from now on (``[]``: deleted)
epochs = st.dictionaries(keys, rows_of_key, max_size=4)


def _state(table: dict[Any, list[tuple[Any, Any]]]) -> list[tuple[Any, Any, Any]]:
    return [(k, v, s) for k, rows in table.items() for v, s in rows]


#: up to three epochs of changes: a chain long enough for the order of the deltas to matter, short enough that
#: an example's Spark plans (one diff per change, their union, the chain applied) cost seconds, not tens of them
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(start=epochs, changes=st.lists(epochs, min_size=1, max_size=3))
def test_snapshot_plus_deltas_is_the_state_after_any_upserts_and_deletes(spark: Any, start: dict, changes: list) -> None:
    """After any sequence of upserts and deletes (null keys, null values and several rows per key included), the
    snapshot with every delta applied in order equals the full state, and each delta names exactly the keys whose
    rows changed: their rows now, or one tombstone for a key that has none left."""
    from functools import reduce

    from pyspark.sql import functions as F

    tables = [dict(start)]
    for change in changes:
        tables.append({k: v for k, v in {**tables[-1], **change}.items() if v})
    frames = [spark.createDataFrame(_state(t), SCHEMA) for t in tables]
    # computed as a checkpoint computes them: straight into a keyed layout (3 partitions, 8 key groups)
    deltas = [diff(new, old, "k", place=lambda both: keyed.placed(both, "k", 3, 8))
              for old, new in zip(frames, frames[1:], strict=False)]
    tagged = reduce(lambda a, b: a.unionByName(b), [d.withColumn("i", F.lit(i)) for i, d in enumerate(deltas)])
    got: dict[int, list[Any]] = {i: [] for i in range(len(deltas))}
    placed = F.floor(F.col(keyed.KG) * 3 / 8).cast("int") == F.col(keyed.SUBTASK)
    for r in tagged.withColumn("placed", (F.col(keyed.KG) == keyed.key_group("k", 8)) & placed).collect():
        got[r["i"]].append((r["k"], r["v"], r["s"], r[DELETED]))
        assert r["placed"], r  # with its key group and the partition owning it
    for i, (old, new) in enumerate(zip(tables, tables[1:], strict=False)):
        changed = {k for k in set(old) | set(new) if Counter(old.get(k, [])) != Counter(new.get(k, []))}
        want = [(k, v, s, False) for k in changed for v, s in new.get(k, [])]
        want += [(k, None, None, True) for k in changed if not new.get(k)]
        assert Counter(got[i]) == Counter(want), (i, old, new)
    deltas = [d.drop(keyed.KG, keyed.SUBTASK, keyed.SALT) for d in deltas]
    restored = apply(frames[0], deltas, "k").collect()
    assert Counter(tuple(r) for r in restored) == Counter(_state(tables[-1]))


def test_a_delta_laid_out_for_writing_shuffles_once(spark: Any) -> None:
    """Computed into a keyed checkpoint's layout, a delta's plan has one shuffle (both states into the owning
    partitions; the comparison, the rows and the tombstones come out of one pass inside them: no second exchange
    for the layout, no branch computing the comparison again), and it is the delta computed by the key."""
    old = spark.createDataFrame([(k, k % 3, "a") for k in range(50)], SCHEMA)
    new = spark.createDataFrame([(k, k % 3 + (k % 7 == 0), "a") for k in range(3, 60)], SCHEMA)
    d = diff(new, old, "k", place=lambda both: keyed.placed(both, "k", 2, 16))
    rows = d.collect()
    final = d._jdf.queryExecution().executedPlan().toString().split("== Initial Plan ==")[0]
    shuffles = [line for line in final.splitlines() if line.lstrip(" :+-*()0123456789").startswith("Exchange ")]
    assert len(shuffles) == 1 and "ReusedExchange" not in final, final  # computed once, in one pass
    assert sorted(r["k"] for r in rows if r[DELETED]) == [0, 1, 2]  # keys gone
    assert sorted(r["k"] for r in rows if not r[DELETED]) == [k for k in range(3, 60) if k >= 50 or k % 7 == 0]
    by_key = diff(new, old, "k").collect()  # the default: shuffled by the key, no layout columns
    assert Counter(tuple(r) for r in by_key) == Counter(tuple(r[c] for c in ("k", "v", "s", DELETED)) for r in rows)


def test_map_columns_are_refused_naming_the_step(spark: Any) -> None:
    """Rows with a map cannot be compared by Spark: incremental state holding one is a PipelineError naming it."""
    df = spark.createDataFrame([(1, {"a": 1})], "k BIGINT, m MAP<STRING, BIGINT>")
    with pytest.raises(PipelineError, match="step 'totals': incremental state cannot hold map columns \\(m\\)"):
        check_columns(df, "totals")
    check_columns(spark.createDataFrame([(1, [1])], "k BIGINT, a ARRAY<BIGINT>"), "totals")
