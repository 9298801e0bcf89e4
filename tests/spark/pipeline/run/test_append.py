"""A state that only grows (``append=True``): the step returns only the rows to append.

``history`` keeps every event it was sent and outputs, each epoch, per user over **all** of them the sum and
the count. With ``append=True`` it returns the epoch's events as its new state; without, the whole history
(the reference form, run with falkirk off). Every run's output is compared, as multisets, with a pure-Python
count over the seeded input, and the checkpoints with what was appended: each chained checkpoint holds exactly
the epochs' rows since the one before.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
from spark_support import churn, state_checkpoints

from falkirk.spark import Eager, Lazy, Pipeline, PipelineError
from falkirk.spark.pipeline.declare.regimes import Keyed
from falkirk.spark.pipeline.plan.planner import epoch_of
from falkirk.spark.pipeline.run import appended

pytestmark = [pytest.mark.spark]

EPOCHS = 8
#: rows of ``churn`` per epoch
PER_EPOCH = len(churn(0))


def history_pipeline(root: Path, spark: Any, *, append: bool = True, every: int = 2, columns: bool = False,
                     **options: Any) -> Any:
    """input ``events`` → ``Lazy(every, append)`` ``history`` → output ``report``. ``columns``: at epoch 2 the step
    appends rows with a column the state does not have."""
    from pyspark.sql import functions as F

    pipe = Pipeline(root, spark, **{"fsync": False, **options})
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=churn)

    def history(events: Any, *, state: Any, epoch: int) -> Any:
        rows = events.select("user", "amount")
        seen = rows if state is None else state.unionByName(rows)
        out = seen.groupBy("user").agg(F.sum("amount").alias("amount"), F.count("*").alias("n"))
        if columns and epoch == 2:
            rows = rows.withColumn("extra", F.lit(1))
        return out, (rows if append else seen)

    pipe.step(history, inputs=["events"], regime=Lazy(every=every, append=append))
    pipe.output("report", inputs=["history"])
    return pipe


def oracle(epochs: int) -> dict[int, collections.Counter[tuple[int, int, int]]]:
    """Per epoch, the report's rows as a multiset, counted in Python over the seeded input."""
    out: dict[int, collections.Counter[tuple[int, int, int]]] = {}
    sums: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0])
    for e in range(epochs):
        for r in churn(e):
            sums[r["user"]][0] += r["amount"]
            sums[r["user"]][1] += 1
        out[e] = collections.Counter((u, a, n) for u, (a, n) in sums.items())
    return out


def reported(spark: Any, root: Path, epochs: int) -> dict[int, collections.Counter[tuple[int, int, int]]]:
    got = spark.read.parquet(str(root / "output" / "report")).collect()
    out: dict[int, collections.Counter[tuple[int, int, int]]] = {e: collections.Counter() for e in range(epochs)}
    for r in got:
        out[r["epoch"]][(r["user"], r["amount"], r["n"])] += 1
    return out


def chained(root: Path) -> dict[int, dict[str, Any]]:
    """The state checkpoints of ``history`` that are chained (their ``delta`` extra), by epoch."""
    return {e: m["extra"]["delta"] for e, m in state_checkpoints(root, "history").items() if "delta" in m["extra"]}


def test_the_reference_form_gives_the_oracles_output(spark: Any, tmp_path: Path) -> None:
    """The step returning its whole history, falkirk off: the oracle's output (the test's pipeline is right)."""
    history_pipeline(tmp_path, spark, append=False, durable=False).run(EPOCHS)
    assert reported(spark, tmp_path, EPOCHS) == oracle(EPOCHS)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_failures_recover_through_the_chain_and_each_link_holds_only_what_was_appended(
    spark: Any, tmp_path: Path, concurrency: int
) -> None:
    """Failures before, in the middle of, in a task of and after ``history``'s epochs (checkpoints after every
    second epoch): the output equals the oracle's; the first checkpoint is the state whole, every later one
    holds exactly the rows appended since the one it is chained to, and its chain names checkpoints that
    exist."""
    fail = ["history@1:mid", "history@3:before", "history@4:task", "history@5:mid", "history@6:after"]
    result = history_pipeline(tmp_path, spark, gc=False, concurrency=concurrency).run(EPOCHS, fail=fail)
    assert len(result.journal.recoveries) == len(fail) - 1  # the failed task is retried by Spark itself
    assert reported(spark, tmp_path, EPOCHS) == oracle(EPOCHS)
    manifests = state_checkpoints(tmp_path, "history")
    links = chained(tmp_path)
    assert sorted(manifests) == [1, 3, 5, 7] and sorted(links) == [3, 5, 7]
    assert manifests[1]["rows"] == 2 * PER_EPOCH  # the first: the state whole
    for e, link in links.items():
        assert link["append"] is True and link["chain"] and link["chain"][0] == 1
        assert all(c in manifests for c in link["chain"])
        assert manifests[e]["rows"] == PER_EPOCH * (e - link["chain"][-1])  # only what was appended since
        assert link["state_rows"] == PER_EPOCH * (e + 1)


def test_a_restarted_driver_reads_the_chain_in_one_scan(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline stopped after epoch 6 (checkpoints at 1, 3, 5: a full one and two chained to it) and started
    again restores epoch 5 by reading the three checkpoints' files together, and goes on to the oracle's
    output."""
    from falkirk.spark.pipeline.store.storage import Storage

    history_pipeline(tmp_path, spark, gc=False).run(6)
    reads: list[list[int]] = []
    read_many = Storage.read_many

    def spy(self: Any, spark: Any, ms: Any, **kw: Any) -> Any:
        reads.append([m.epoch for m in ms])
        return read_many(self, spark, ms, **kw)

    monkeypatch.setattr(Storage, "read_many", spy)
    again = history_pipeline(tmp_path, spark, gc=False).run(EPOCHS)
    assert reads == [[1, 3, 5]]
    assert epoch_of(again.journal.recoveries[0].plan.frontiers["history"]) == 5
    assert reported(spark, tmp_path, EPOCHS) == oracle(EPOCHS)


def test_the_chain_and_the_parts_are_bounded_and_collection_keeps_what_restores(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a chain of at most 2 checkpoints and 2 parts held, a checkpoint every epoch and garbage collection
    on: full checkpoints recur, the parts are compacted, every checkpoint left names only checkpoints left, and
    failures late in the run (restoring after compaction and collection) still give the oracle's output."""
    monkeypatch.setattr(Keyed, "APPEND_CHAIN", 2)
    monkeypatch.setattr(appended, "PARTS", 2)
    compactions: list[int] = []
    compacted = appended.compacted

    def spy(parts: Any, detach: Any, step: str) -> Any:
        out, dropped = compacted(parts, detach, step)
        compactions.append(len(dropped))
        return out, dropped

    monkeypatch.setattr(appended, "compacted", spy)
    result = history_pipeline(tmp_path, spark, every=1).run(EPOCHS, fail=["history@6:mid", "history@7:before"])
    assert len(result.journal.recoveries) == 2
    assert reported(spark, tmp_path, EPOCHS) == oracle(EPOCHS)
    assert any(n >= 2 for n in compactions)
    manifests = state_checkpoints(tmp_path, "history")
    assert manifests, "collection left no checkpoint"
    for m in manifests.values():
        link = m["extra"].get("delta")
        if link:
            assert len(link["chain"]) < 2 + 1 and all(c in manifests for c in link["chain"])
    full = [e for e, m in manifests.items() if "delta" not in m["extra"]]
    assert full, "no full checkpoint left to restore from"


def test_rows_appended_with_other_columns_are_refused_naming_the_step(spark: Any, tmp_path: Path) -> None:
    """Rows returned to append with a column the state lacks: the run stops naming the step, ``append=True`` and
    both sets of columns."""
    with pytest.raises(Exception) as info:
        history_pipeline(tmp_path, spark, columns=True, gc=False).run(4)
    text = str(info.value) + str(getattr(info.value, "__cause__", ""))
    assert "history" in text and "append=True" in text and "extra" in text


def test_append_declarations_that_cannot_hold_are_refused() -> None:
    for bad in ({"key": "user"}, {"incremental": True, "key": "user"}, {"changes": True, "key": "user"}):
        with pytest.raises(PipelineError, match="append=True"):
            Lazy(append=True, **bad)
    with pytest.raises(PipelineError, match="append="):
        Eager(database="s.sqlite", tables={"t": "epoch"}, append=True)
    assert Lazy(every=3, append=True).describe()["append"] is True
    assert "append" not in Lazy(every=3).describe()
