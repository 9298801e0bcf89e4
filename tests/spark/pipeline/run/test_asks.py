"""``Pipeline.plan_failure`` asked from another thread during a run: the plan is made on the run's thread (the
run's state is that thread's alone), the asker waits for it, and once the run has ended it is made from the
root."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Lazy, Pipeline
from falkirk.spark.pipeline.run.asks import RunThread
from falkirk.spark.pipeline.run.state import RunState


def _records(epoch: int) -> list[dict[str, Any]]:
    return [{"user": f"u{i % 7}", "n": i + epoch} for i in range(30)]


def test_a_question_is_answered_on_the_run_thread_its_error_raised_to_the_asker() -> None:
    box = RunThread()
    got: list[Any] = []

    def ask(fn: Any) -> None:
        try:
            got.append(box.call(fn))
        except ZeroDivisionError as exc:
            got.append(exc)

    askers = [threading.Thread(target=ask, args=(f,)) for f in (threading.get_ident, lambda: 1 // 0)]
    for a in askers:
        a.start()
    while sum(1 for _ in box._queue) < 2:  # both queued, neither answered
        pass
    assert got == []
    box.serve()
    for a in askers:
        a.join()
    assert threading.get_ident() in got and any(isinstance(g, ZeroDivisionError) for g in got), got
    assert box.call(lambda: "here") == "here"  # on the run's thread: at once


def test_a_question_asked_after_the_run_ended_is_not_queued() -> None:
    box = RunThread()
    box.close()
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(box.call(lambda: "late")))
    t.start()
    t.join(timeout=10)
    assert not t.is_alive() and out == [None]  # the caller asks the root instead


@pytest.mark.spark
@pytest.mark.parametrize("concurrency", [1, 2])
def test_plan_failure_from_another_thread_during_a_run(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrency: int
) -> None:
    from pyspark.sql import functions as F

    made_on: list[int] = []
    what_if = RunState.what_if

    def recorded(self: RunState, failed: Any, storage: Any) -> Any:
        made_on.append(threading.get_ident())
        return what_if(self, failed, storage)

    monkeypatch.setattr(RunState, "what_if", recorded)
    pipe = Pipeline(tmp_path, spark, fsync=False, concurrency=concurrency)
    pipe.input("clicks", "user STRING, n BIGINT", source=_records)
    pipe.step(lambda clicks: clicks.select("user", (F.col("n") * 2).alias("n")), name="up", regime=Ephemeral())
    def sums(up: Any, *, state: Any, epoch: int) -> Any:  # running totals per user
        new = up if state is None else state.unionByName(up)
        new = new.groupBy("user").agg(F.sum("n").alias("n"))
        return new, new

    pipe.step(sums, inputs=["up"], regime=Lazy(every=2))
    pipe.output("out", inputs=["sums"])
    plans: list[Any] = []
    over = threading.Event()

    def monitor() -> None:  # a dashboard's thread, asking as long as the run goes
        while not over.is_set():
            plans.append(pipe.plan_failure("sums"))

    asker = threading.Thread(target=monitor)
    started: list[bool] = []

    def progress(line: str) -> None:
        if not started:
            started.append(True)
            asker.start()

    run_thread = threading.get_ident()
    pipe.run(6, progress=progress)
    during = list(made_on)
    over.set()
    asker.join(timeout=120)
    assert started and not asker.is_alive()
    # every plan made during the run was made on the run's thread, and some were
    assert during and set(during) == {run_thread}, (len(during), set(during))
    assert plans and all(p.failed == ("sums",) for p in plans)
