"""A stateful step may return its output as a function of its new state: ``return (lambda made: ...), new``.

An output built on the DataFrame the step returns as its state (its top keys, say) is computed from that
DataFrame's lineage by the output's job, and the state again by the job that makes it (a local checkpoint):
the work that made the state is done twice each epoch. Returned as a function, the output is computed from the
state as made, so that work is done once. Checked here: the function is given the very DataFrame that is the
step's state at its next epoch, every output epoch equals the one computed in Python (a failure in the middle of
the step included, and one of the output's job, which makes the state: retried in place, its output not left in
Spark's cache), and a function given where there is no state, a function giving no DataFrame and a function
with no state returned beside it are refused naming the step.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Eager, Ephemeral, Lazy, Pipeline, PipelineError

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


def _leaders(
    root: Path, spark: Any, given: list[Any], states: list[tuple[int, Any]], bad: str = "", ticks: Path | None = None
) -> Pipeline:
    """``events`` → ``totals`` (``Lazy(every=2)``: running totals per user; its output, as a function of its new
    state, the ``TOP`` users) → output ``leaders``. ``given``/``states``: what each call of the output function
    and of the step was given. ``bad``: ``"frame"`` (the function gives no DataFrame), ``"none"`` (no state
    returned beside it). ``ticks``: a directory where every row of a new state, each time Spark computes it,
    leaves a line (its epoch) in a file of the Python worker that computed it."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    pipe = Pipeline(root, spark, fsync=False, gc=False)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=events)

    def totals(events: Any, *, state: Any, epoch: int) -> Any:
        states.append((epoch, state))
        now = events.groupBy("user").agg(F.sum("amount").alias("total"))
        new = now if state is None else state.join(now, "user", "full_outer").select(
            "user", (F.coalesce(state["total"], F.lit(0)) + F.coalesce(now["total"], F.lit(0))).alias("total"))
        if ticks is not None:
            where = str(ticks)

            def tick(_):  # type: ignore[no-untyped-def]  # no hints: PySpark would infer a pandas UDF
                import os

                with open(os.path.join(where, str(os.getpid())), "a") as f:
                    f.write(f"{epoch}\n")
                return True

            new = new.where(F.udf(tick, BooleanType(), useArrow=False).asNondeterministic()(F.col("user")))

        def top(made: Any) -> Any:
            given.append(made)
            return made.count() if bad == "frame" else made.orderBy(F.desc("total"), "user").limit(TOP)

        return top, (None if bad == "none" else new)

    pipe.step(totals, inputs=["events"], regime=Lazy(every=2, key="user"))
    pipe.output("leaders", inputs=["totals"])
    return pipe


def _outputs_are_the_leaders(spark: Any, root: Path) -> None:
    want = _top_by_epoch()
    for e in range(EPOCHS):
        m = json.loads((root / "manifests" / "leaders" / "output" / f"{e:08d}.json").read_text())
        got = spark.read.parquet(str(root / m["location"])).select("user", "total").collect()
        assert sorted((tuple(r) for r in got), key=lambda r: (-r[1], r[0])) == want[e], e


def test_the_output_is_computed_from_the_state_as_made(spark: Any, tmp_path: Path) -> None:
    given: list[Any] = []  # what the output function was given, per call
    states: list[tuple[int, Any]] = []  # the state each call of the step was given
    result = _leaders(tmp_path, spark, given, states).run(EPOCHS, fail=["totals@3:mid"])
    assert [str(f) for f in result.fired] == ["totals@3:mid"]
    # each call's state is what the output function of the call before was given, but for the first call after
    # the failure: it starts from the state restored from a checkpoint before epoch 3
    assert len(given) == len(states) > EPOCHS
    follows = [states[i + 1][1] is given[i] for i in range(len(states) - 1)]
    assert follows.count(False) == 1 and 0 < states[follows.index(False) + 1][0] <= 3
    _outputs_are_the_leaders(spark, tmp_path)


def test_a_failed_output_job_is_retried_in_place_and_leaves_nothing_cached(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The output's job fails (it is the job that makes the state): the epoch is retried in place, the output
    it had persisted is not left in Spark's cache, and every output epoch is still the one computed in Python."""
    from falkirk.spark.pipeline.run.frames import Frames

    failed: list[Any] = []
    real = Frames.materialise

    def materialise(self: Any, df: Any, *, persist: bool = True, rows: int | None = None) -> Any:
        try:
            return real(self, df, persist=persist, rows=rows)
        except Exception:
            failed.append(df)
            raise

    monkeypatch.setattr(Frames, "materialise", materialise)
    given: list[Any] = []
    states: list[tuple[int, Any]] = []
    result = _leaders(tmp_path, spark, given, states).run(EPOCHS, fail=["totals@3:job"])
    assert [str(f) for f in result.fired] == ["totals@3:job"]
    assert [r.in_place for r in result.journal.recoveries] == [("totals", 3)]
    assert len(failed) == 1 and not failed[0].is_cached
    _outputs_are_the_leaders(spark, tmp_path)


def _computed(ticks: Path) -> dict[int, int]:
    """Per epoch, the rows of new states Spark computed (``_leaders``' ``ticks``)."""
    seen: dict[int, int] = {}
    for f in ticks.iterdir():
        for line in f.read_text().split():
            seen[int(line)] = seen.get(int(line), 0) + 1
    return seen


def test_a_retry_in_place_takes_up_what_the_failed_job_computed(spark: Any, tmp_path: Path) -> None:
    """The output's job fails after the job's stage that makes the new state completed: the retry in place
    computes no row of that state again (Spark reads the blocks the failed job cached), so every epoch's
    state rows are computed exactly as often as in the failure-free run, and the outputs are still the ones
    computed in Python."""
    counts = {}
    for name, fail in (("clean", []), ("failed", ["totals@3:job"])):
        ticks = tmp_path / f"{name}-ticks"
        ticks.mkdir()
        result = _leaders(tmp_path / name, spark, [], [], ticks=ticks).run(EPOCHS, fail=fail)
        assert [str(f) for f in result.fired] == fail
        _outputs_are_the_leaders(spark, tmp_path / name)
        counts[name] = _computed(ticks)
    assert [r.in_place for r in result.journal.recoveries] == [("totals", 3)]
    users = len({r["user"] for e in range(4) for r in events(e)})
    assert counts["failed"][3] == users  # epoch 3's state: once
    assert counts["failed"] == counts["clean"]


def test_a_function_for_an_output_without_state_is_refused(spark: Any, tmp_path: Path) -> None:
    pipe = Pipeline(tmp_path / "clean", spark, fsync=False, gc=False, durable=False)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, source=events)
    pipe.step(lambda events: (lambda made: made), name="clean", inputs=["events"], regime=Ephemeral())
    pipe.output("out", inputs=["clean"])
    with pytest.raises(PipelineError, match=r"step 'clean'.*function of its new state.*\(ephemeral\) keeps no state"):
        pipe.run(1)
    with pytest.raises(PipelineError, match="step 'totals': the function it returned as its output gave int"):
        _leaders(tmp_path / "frame", spark, [], [], bad="frame").run(1)
    with pytest.raises(PipelineError, match="step 'totals'.*function of its new state, and None as that state"):
        _leaders(tmp_path / "none", spark, [], [], bad="none").run(1)
    # a database step: refused before its epoch's transaction commits (its row is not kept)
    root = tmp_path / "db"
    db_pipe = Pipeline(root, spark, fsync=False, gc=False)
    db_pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, source=events)

    def stats(events: Any, *, db: Any, epoch: int) -> Any:
        db.execute("CREATE TABLE IF NOT EXISTS t (epoch INTEGER)")
        db.execute("INSERT INTO t VALUES (?)", (epoch,))
        return lambda made: made

    db_pipe.step(stats, inputs=["events"], regime=Eager(database="stats.sqlite", tables={"t": "epoch"}))
    with pytest.raises(PipelineError, match="step 'stats'.*function of its new state.*its state is a database"):
        db_pipe.run(1)
    with sqlite3.connect(root / "stats.sqlite") as con:
        assert con.execute("SELECT name FROM sqlite_master WHERE name = 't'").fetchall() == []
