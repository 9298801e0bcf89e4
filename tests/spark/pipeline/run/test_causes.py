"""Failure attribution: a failed step reports its root cause; an unreadable input is the input's problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Pipeline, RecoveryError, StepError
from falkirk.spark.pipeline.run import runners
from falkirk.spark.pipeline.run.causes import root_cause, unreadable_input

pytestmark = [pytest.mark.spark]


def _records(epoch: int) -> list[dict[str, Any]]:
    return [{"user": f"u{i}", "n": i + epoch} for i in range(20)]


def _pipe(root: Path, spark: Any, step: Any) -> Pipeline:
    p = Pipeline(root, spark, fsync=False)
    p.input("clicks", "user STRING, n BIGINT", source=_records)
    p.step(step, regime=Ephemeral())
    p.output("out", inputs=[step.__name__])
    return p


def test_user_error_in_a_udf_is_reported_and_not_retried_blindly(spark: Any, tmp_path: Path) -> None:
    """A KeyError in the user's UDF: reported by name and place (not ``Py4JJavaError … o123.count``), and
    retried once (one recovery) instead of three times."""
    from pyspark.sql import functions as F

    calls: list[int] = []

    def lookup(clicks: Any, *, epoch: int) -> Any:
        calls.append(epoch)

        def region(user):  # type: ignore[no-untyped-def]
            return {"u1": "eu"}[user]  # KeyError for every other user

        return clicks.select(F.udf(region, "string")("user").alias("region"))

    with pytest.raises(StepError) as err:
        _pipe(tmp_path, spark, lookup).run(1)
    text = str(err.value)
    assert "KeyError: 'u" in text and "in region" in text, text
    assert ".count" not in text
    assert calls == [0, 0] and err.value.step == "lookup"


@pytest.mark.parametrize("kind", ["driver", "analysis"])
def test_deterministic_errors_stop_after_one_recovery(spark: Any, tmp_path: Path, kind: str) -> None:
    """A KeyError raised by the step on the driver, or a query naming a missing column: two attempts, then StepError."""
    calls: list[int] = []

    def broken(clicks: Any, *, epoch: int) -> Any:
        calls.append(epoch)
        if kind == "driver":
            return {"a": clicks}["b"]
        return clicks.select("usr")

    with pytest.raises(StepError, match="KeyError: 'b'" if kind == "driver" else "usr") as err:
        _pipe(tmp_path, spark, broken).run(1)
    assert calls == [0, 0] and "stopped after 2 attempts" in str(err.value)


def test_input_file_gone_is_an_input_problem_not_retried(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input file that vanished before the step read it: one clear error naming the input, no step retries.
    (The epoch is read by Spark's reader: a small one read on the driver already holds its records.)"""
    from falkirk.spark.pipeline.store import inputread

    monkeypatch.setattr(inputread, "DRIVER_MAX_ROWS", -1)
    calls: list[int] = []

    def count(clicks: Any, *, epoch: int) -> Any:
        calls.append(epoch)
        for f in (tmp_path / "input" / "clicks").rglob("*.parquet"):
            f.unlink()  # the data behind the (lazy) DataFrame disappears before Spark reads it
        return clicks

    with pytest.raises(RecoveryError, match=r"step clicks: input at epoch 0") as err:
        _pipe(tmp_path, spark, count).run(1)
    assert "input at epoch 0 is unusable: unreadable while" in str(err.value)
    assert "FILE_NOT_EXIST" in str(err.value) or "does not exist" in str(err.value)
    assert calls == [0]  # not retried as if the step were at fault


def test_root_cause_of_plain_errors() -> None:
    """Errors without a Spark wrapper keep their own first line; error classes and Caused-by chains are found."""
    assert root_cause(ValueError("bad value\nmore")) == "bad value"
    assert root_cause(RuntimeError("An error occurred while calling o5.count.\nCaused by: java.io.IOException: disk gone")) \
        == "disk gone"
    assert unreadable_input("[PATH_NOT_FOUND] Path does not exist: file:/r/input/a/x", "file:///r", ["a", "b"]) == "a"
    assert unreadable_input("KeyError: 'a'", "file:///r", ["a"]) is None


def test_job_groups_do_not_collide_across_pipelines(spark: Any, tmp_path: Path) -> None:
    """Two pipelines of the same shape in one SparkSession: the second, failure-free, reports no task retries
    (its job groups are its own; before, it counted the first one's retried task)."""
    def copy(clicks: Any) -> Any:
        return clicks.select("user", "n")

    first = _pipe(tmp_path / "a", spark, copy).run(1, fail="copy@0:task")
    assert any("Spark retried 1 failed task" in n for n in first.journal.notes), first.journal.notes
    second = _pipe(tmp_path / "b", spark, copy).run(1)
    assert not [n for n in second.journal.notes if "retried" in n], second.journal.notes


def test_the_quiet_path_counts_what_the_status_tracker_does(spark: Any) -> None:
    """:func:`failed_tasks` with ``quiet=True`` (no attempt failed anywhere, by :func:`all_failed_tasks`) counts the
    group's jobs as reading every stage does; a task attempt that fails and is retried grows the total."""
    from falkirk.spark.pipeline.run.session import all_failed_tasks, failed_tasks, job_group

    def flaky(it: Any) -> Any:
        from pyspark import TaskContext

        if TaskContext.get().attemptNumber() == 0 and TaskContext.get().partitionId() == 0:
            raise RuntimeError("first attempt fails")
        return it

    before = all_failed_tasks(spark)
    assert before is not None
    with job_group(spark, "test-quiet-ok"):
        spark.range(0, 100, numPartitions=2).count()
        spark.range(0, 10).collect()
    assert all_failed_tasks(spark) == before
    quick, exact = failed_tasks(spark, "test-quiet-ok", quiet=True), failed_tasks(spark, "test-quiet-ok")
    assert quick == exact and exact is not None and exact[0] >= 2 and exact[1] == 0
    with job_group(spark, "test-quiet-retried"):
        assert spark.sparkContext.parallelize(range(10), 2).mapPartitions(flaky).count() == 10
    import time

    for _ in range(50):  # the status store follows Spark's listener bus
        if all_failed_tasks(spark) != before:
            break
        time.sleep(0.1)
    assert all_failed_tasks(spark) == before + 1
    assert failed_tasks(spark, "test-quiet-retried") == (1, 1)


def test_a_codegen_cache_too_small_is_noted_once(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark compiling its generated classes anew every epoch (the driver's CodegenMetrics growing by the same
    amount each epoch) is noted once, naming the setting; this session (local_session: room for 1000 classes)
    compiles next to nothing after its first epochs and gets no note."""
    from falkirk.spark.pipeline.run import watch as watch_module
    from falkirk.spark.pipeline.run.session import codegen_compilations

    def copy(clicks: Any) -> Any:
        return clicks.select("user", "n")

    before = codegen_compilations(spark)
    assert before is not None
    quiet = _pipe(tmp_path / "quiet", spark, copy).run(6)
    after = codegen_compilations(spark)
    assert after is not None and after >= before
    assert not [n for n in quiet.journal.notes if "codegen" in n], quiet.journal.notes

    calls = iter(range(1000, 100_000, 50))  # 50 classes compiled in every epoch
    monkeypatch.setattr(watch_module, "codegen_compilations", lambda _spark: next(calls))
    noisy = _pipe(tmp_path / "noisy", spark, copy).run(6)
    notes = [n for n in noisy.journal.notes if "codegen" in n]
    assert len(notes) == 1 and "spark.sql.codegen.cache.maxEntries=1000" in notes[0] and "50 or more" in notes[0]


def test_a_logged_epoch_that_cannot_be_read_again_is_recomputed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of another step's logged epoch that cannot be read although its data, size and checksum are intact
    (its Hadoop checksum sidecar garbled: what the S3 soak's FUSE mount did to one file) — the reading step fails,
    and when it fails so again the item is taken as lost: the logging step recomputes that epoch to a new place
    and the output equals the failure-free run's (it was a RecoveryError after four identical failures)."""
    # the sidecar is Hadoop's, written by Spark's writer: no log written from the driver (runners._collects)
    monkeypatch.setattr(runners, "COLLECT_MAX_ROWS", -1)
    calls: list[int] = []
    damaged: list[Path] = []

    def garbling(epoch: int) -> None:
        calls.append(epoch)
        if epoch == 1 and calls.count(1) == 2:  # after its injected failure down reads up's log of epoch 1
            for crc in (tmp_path / "a" / "data" / "up" / "log").glob("00000001-*/.*.parquet.crc"):
                crc.write_bytes(crc.read_bytes()[:8] + bytes(b ^ 0xFF for b in crc.read_bytes()[8:]))
                damaged.append(crc)

    result = _logged_pair(tmp_path / "a", spark, garbling).run(3, fail="down@1:mid")
    assert damaged, "up's log of epoch 1 has no checksum sidecar to garble"
    causes = [r.cause for r in result.journal.recoveries]
    assert len(causes) == 2 and "injected failure" in causes[0], causes
    assert "data/up/log/00000001-" in causes[1] and "step down failed at epoch 1" in causes[1], causes
    assert "up" in result.journal.recoveries[1].failed  # the item was taken as lost: up recomputed epoch 1
    assert not any(c.exists() for c in damaged)  # its rolled-back epoch is gone, written anew elsewhere
    _same_outputs(spark, tmp_path)


def _logged_pair(root: Path, spark: Any, seen: Any = None) -> Pipeline:
    """``clicks`` → ``up`` (``Ephemeral(log=True)``) → ``down`` → output ``out``; ``seen(epoch)`` is called by
    each execution of ``down``."""
    from pyspark.sql import functions as F

    def up(clicks: Any) -> Any:
        return clicks.select("user", (F.col("n") * 2).alias("n"))

    def down(up: Any, *, epoch: int) -> Any:
        if seen is not None:
            seen(epoch)
        return up.groupBy("user").agg(F.sum("n").alias("n"))

    p = Pipeline(root, spark, fsync=False)
    p.input("clicks", "user STRING, n BIGINT", source=_records)
    p.step(up, regime=Ephemeral(log=True))
    p.step(down, regime=Ephemeral())
    p.output("out", inputs=["down"])
    return p


def _same_outputs(spark: Any, tmp_path: Path) -> None:
    """``tmp_path/a``'s output (the run with failures) equals that of a failure-free run at ``tmp_path/b``, epoch by
    epoch, as multisets."""
    from collections import Counter

    _logged_pair(tmp_path / "b", spark).run(3)
    for epoch in range(3):
        got, want = (Counter(map(tuple, spark.read.parquet(str(root / "output" / "out" / f"epoch={epoch}")).collect()))
                     for root in (tmp_path / "a", tmp_path / "b"))
        assert got == want and got, epoch


def test_a_logged_epoch_gone_before_its_replay_is_recomputed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A logged epoch's file deleted after the recovery queued its replay and before the reading step started:
    Spark fails as it plans the read, before any job. That is the reading step's failure naming the item, as
    inside its job, and the logging step recomputes the epoch (it stopped the run with a raw AnalysisException
    raised out of ``Steps.start``)."""
    from falkirk.spark.pipeline.run.runners import StepRunner

    deleted: list[Path] = []
    replay = StepRunner.replay

    def losing(self: StepRunner, epoch: int) -> Any:
        if self.name == "up" and epoch == 1 and not deleted:
            for f in (tmp_path / "a" / "data" / "up" / "log").glob("00000001-*/*.parquet"):
                f.unlink()
                deleted.append(f)
        return replay(self, epoch)

    monkeypatch.setattr(StepRunner, "replay", losing)
    result = _logged_pair(tmp_path / "a", spark).run(3, fail="down@1:mid")
    assert deleted, "up's log of epoch 1 was never replayed"
    causes = [r.cause for r in result.journal.recoveries]
    assert len(causes) == 2 and "injected failure" in causes[0], causes
    assert "step down failed at epoch 1" in causes[1] and "reading up's logged epoch 1" in causes[1], causes
    assert "up" in result.journal.recoveries[1].failed  # the item was taken as lost: up recomputed epoch 1
    monkeypatch.setattr(StepRunner, "replay", replay)
    _same_outputs(spark, tmp_path)


def test_a_session_with_sparks_own_page_size_is_noted(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local session falkirk did not build (Spark's own memory page size, a driver of at most 8 GiB) gets one
    run-start note naming ``spark.buffer.pageSize``; this session (local_session: 1 MiB pages) gets none."""
    from falkirk.spark.pipeline.run import executor as executor_module
    from falkirk.spark.pipeline.run.session import pages_note, session_pages_note

    def copy(clicks: Any) -> Any:
        return clicks.select("user", "n")

    assert spark.sparkContext.getConf().get("spark.buffer.pageSize") == "1m"
    assert session_pages_note(spark) is None
    quiet = _pipe(tmp_path / "quiet", spark, copy).run(2)
    assert not [n for n in quiet.journal.notes if "pageSize" in n], quiet.journal.notes

    # the same session as a user's builder would have left it: no page size (its master and heap as they are)
    heap = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**20
    assert pages_note(False, spark.sparkContext.master, heap) is not None  # a 2 GiB local driver
    monkeypatch.setattr(executor_module, "session_pages_note", lambda s: pages_note(False, s.sparkContext.master, heap))
    noisy = _pipe(tmp_path / "noisy", spark, copy).run(2)
    notes = [n for n in noisy.journal.notes if "pageSize" in n]
    assert len(notes) == 1 and "spark.buffer.pageSize=1m" in notes[0] and "docs/spark.md" in notes[0], notes
