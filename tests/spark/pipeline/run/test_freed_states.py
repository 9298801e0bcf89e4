"""A state its step let go of is freed then, not when the JVM next collects it.

A state between checkpoints is a local checkpoint: its blocks live with the
checkpointed RDD, outside Spark's cache manager, so ``unpersist()`` leaves
them cached until the driver's JVM garbage-collects that RDD, many epochs
later under a large heap. Checked here, with real Spark jobs and failures
(one in the middle of the step, one of its job): at every call of the step
the run holds at least one local checkpoint and at most those its state
lives in and the state before (freed once the step and every node
downstream of it completed the epoch that read it, and the state made at
that epoch's end, if any, was made), none of a run is left cached once it
ended (a failed execution's output and new state included), the run
recovers from the two injected failures and from nothing else (a block
freed while a job still reads it fails that job: a recovery more), and
every output epoch equals the one computed in Python; sequentially and with
two executions at a time. The test keeps a reference to every local
checkpoint the run made, so that no garbage collection frees one for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Lazy, Pipeline, lookup

pytestmark = [pytest.mark.spark]

EPOCHS = 10


def events(epoch: int) -> list[dict[str, Any]]:
    return [{"user": (epoch * 5 + i * 3) % 23, "amount": (epoch * 7 + i) % 9 + 1} for i in range(8)]


def _touched_totals() -> dict[int, list[tuple[int, int]]]:
    """Per epoch, the running total of each user the epoch's events name, as (user, total), by user."""
    totals: dict[int, int] = {}
    out = {}
    for e in range(EPOCHS):
        for r in events(e):
            totals[r["user"]] = totals.get(r["user"], 0) + r["amount"]
        out[e] = sorted((u, totals[u]) for u in {r["user"] for r in events(e)})
    return out


def _persisted(spark: Any) -> dict[int, bool]:
    """The RDDs the driver's JVM holds persisted: id → whether it is a local checkpoint."""
    rdds = spark.sparkContext._jsc.getPersistentRDDs()
    return {int(k): bool(rdds.get(k).rdd().isLocallyCheckpointed()) for k in rdds.keySet().toArray()}


def _pipeline(
    root: Path, spark: Any, changes: bool, before: set[int], held: list[int], given: list[Any], concurrency: int
) -> Pipeline:
    """``events`` → ``totals`` (``Lazy(every=3)``: running totals per user, its output the epoch's users' new
    totals; ``changes``: it returns just those, read through ``lookup``) → output ``touched``. ``held``: at each
    call of the step, the local checkpoints held that were not there before the run; ``given``: every state the
    step was given (kept referenced)."""
    from pyspark.sql import functions as F

    pipe = Pipeline(root, spark, fsync=False, gc=False, concurrency=concurrency)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=events)

    def totals(events: Any, *, state: Any) -> Any:
        held.append(sum(1 for rdd, local in _persisted(spark).items() if local and rdd not in before))
        given.append(state)
        now = events.groupBy("user").agg(F.sum("amount").alias("total"))
        if changes:
            old = now if state is None else lookup(state, now.select("user")).unionByName(now)
            new = old.groupBy("user").agg(F.sum("total").alias("total"))
            return new, new
        new = now if state is None else state.join(now, "user", "full_outer").select(
            "user", (F.coalesce(state["total"], F.lit(0)) + F.coalesce(now["total"], F.lit(0))).alias("total"))
        # the output reads the state made this epoch, which is made at the end of the epoch (deferred)
        return new.join(now.select("user"), "user"), new

    pipe.step(totals, inputs=["events"], regime=Lazy(every=3, key="user", changes=changes))
    pipe.output("touched", inputs=["totals"])
    return pipe


@pytest.mark.parametrize(
    ("changes", "concurrency"), [(False, 1), (True, 1), (False, 2)], ids=["whole-state", "changes", "concurrent"]
)
def test_states_let_go_of_are_freed_and_nothing_is_left_cached(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: bool, concurrency: int
) -> None:
    from falkirk.spark.pipeline.run import runners

    made: list[Any] = []  # every local checkpoint the run made, kept referenced
    real = runners.detach
    monkeypatch.setattr(runners, "detach", lambda df, **kw: made.append(real(df, **kw)) or made[-1])
    before = set(_persisted(spark))
    held: list[int] = []
    given: list[Any] = []
    pipe = _pipeline(tmp_path, spark, changes, before, held, given, concurrency)
    result = pipe.run(EPOCHS, fail=["totals@4:mid", "totals@7:job"])
    assert [str(f) for f in result.fired] == ["totals@4:mid", "totals@7:job"]
    assert len(result.journal.recoveries) == 2, [r.cause for r in result.journal.recoveries]
    assert not [r.cause for r in result.journal.recoveries if "CHECKPOINT_RDD" in r.cause]
    assert len(held) == len(given) > EPOCHS  # the failed executions called the step too
    # the state's local checkpoints (a whole state; or a base and its changes) and those of the state before
    # (concurrently: of the states before, while the output, an epoch or two behind, has not completed the epochs
    # that read them): never one per epoch run so far
    assert min(held[1:]) >= 1 and max(held) <= (3 if changes else 2) + (concurrency - 1) * 2, held
    assert len(made) > EPOCHS
    assert set(_persisted(spark)) - before == set()  # nothing of the run left cached
    want = _touched_totals()
    for e in range(EPOCHS):
        m = json.loads((tmp_path / "manifests" / "touched" / "output" / f"{e:08d}.json").read_text())
        got = spark.read.parquet(str(tmp_path / m["location"])).select("user", "total").collect()
        assert sorted(tuple(r) for r in got) == want[e], e
