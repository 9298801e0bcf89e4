"""A stateful step may return its output as a function of its new state: ``return (lambda made: ...), new``.

An output built on the DataFrame the step returns as its state (its top keys, say) is computed from that
DataFrame's lineage by the output's job, and the state again by the job that makes it (a local checkpoint):
the work that made the state is done twice each epoch. Returned as a function, the output is computed from the
state as made, so that work is done once. Checked here: the function is given the very DataFrame that is the
step's state at its next epoch, the output's plan reads it rather than the join that made it, every output epoch
equals the one computed in Python (a failure in the middle of the step included), and a function given where
there is no state is refused naming the step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Lazy, Pipeline, PipelineError

pytestmark = [pytest.mark.spark]

EPOCHS = 6
TOP = 3


def events(epoch: int) -> list[dict[str, Any]]:
    return [{"user": (epoch * 3 + i) % 7, "amount": (epoch * 11 + i * 5) % 13 + 1} for i in range(6)]


def _top_by_epoch() -> dict[int, list[tuple[int, int]]]:
    """Per epoch, the ``TOP`` users by running total (ties by user), as (user, total)."""
    totals: dict[int, int] = {}
    out = {}
    for e in range(EPOCHS):
        for r in events(e):
            totals[r["user"]] = totals.get(r["user"], 0) + r["amount"]
        out[e] = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    return out


def test_the_output_is_computed_from_the_state_as_made(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    given: list[Any] = []  # what the output function was given, per call
    states: list[tuple[int, Any]] = []  # the state each call of the step was given
    plans: list[str] = []
    pipe = Pipeline(tmp_path, spark, fsync=False, gc=False)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=events)

    def totals(events: Any, *, state: Any, epoch: int) -> Any:
        states.append((epoch, state))
        now = events.groupBy("user").agg(F.sum("amount").alias("total"))
        new = now if state is None else state.join(now, "user", "full_outer").select(
            "user", (F.coalesce(state["total"], F.lit(0)) + F.coalesce(now["total"], F.lit(0))).alias("total"))

        def top(made: Any) -> Any:
            given.append(made)
            out = made.orderBy(F.desc("total"), "user").limit(TOP)
            plans.append(out._jdf.queryExecution().optimizedPlan().toString())
            return out

        return top, new

    pipe.step(totals, inputs=["events"], regime=Lazy(every=2, key="user"))
    pipe.output("leaders", inputs=["totals"])
    result = pipe.run(EPOCHS, fail=["totals@3:mid"])
    assert [str(f) for f in result.fired] == ["totals@3:mid"]
    # each call's state is what the output function of the call before was given, but for the first call after
    # the failure: it starts from the state restored from a checkpoint before epoch 3
    assert len(given) == len(states) > EPOCHS
    follows = [states[i + 1][1] is given[i] for i in range(len(states) - 1)]
    assert follows.count(False) == 1 and 0 < states[follows.index(False) + 1][0] <= 3
    # the output reads the state as made (a scan of its rows), not the join that made it
    assert all("Join" not in p for p in plans), plans[-1]
    want = _top_by_epoch()
    for e in range(EPOCHS):
        m = json.loads((tmp_path / "manifests" / "leaders" / "output" / f"{e:08d}.json").read_text())
        got = spark.read.parquet(str(tmp_path / m["location"])).select("user", "total").collect()
        assert sorted((tuple(r) for r in got), key=lambda r: (-r[1], r[0])) == want[e], e


def test_a_function_for_an_output_without_state_is_refused(spark: Any, tmp_path: Path) -> None:
    pipe = Pipeline(tmp_path, spark, fsync=False, gc=False, durable=False)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, source=events)
    pipe.step(lambda events: (lambda made: made), name="clean", inputs=["events"], regime=Ephemeral())
    pipe.output("out", inputs=["clean"])
    with pytest.raises(PipelineError, match="step 'clean'.*function of its new state.*has no state"):
        pipe.run(1)
