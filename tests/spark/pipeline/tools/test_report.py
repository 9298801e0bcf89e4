"""The recovery report: falkirk's measured cost next to a global rollback and a replay from the start."""

from __future__ import annotations

from pathlib import Path

import pytest

from falkirk.spark import Batch, Lazy, Pipeline
from falkirk.spark.pipeline.plan.planner import Planner
from falkirk.spark.pipeline.run.journal import Journal, Recovery
from falkirk.spark.pipeline.tools.report import costs, format_recovery, last_common_checkpoint


def _journal() -> tuple[Pipeline, Journal, Recovery]:
    """src -> a (Lazy every 2) ; a failed after epoch 3, restored from its checkpoint at 1 and redid 2 and 3."""
    pipe = Pipeline("memory://falkirk-test/report")
    pipe.input("src", "x BIGINT")

    @pipe.step(regime=Lazy(every=2))
    def a(src, *, state):  # type: ignore[no-untyped-def]
        return src, src

    journal = Journal()
    for e in range(4):
        journal.executed("src", e, rows=10 + e, seconds=0.1, redo=False)
        journal.executed("a", e, rows=3 + e, seconds=0.5, redo=False)
    rec = Recovery(1, "a failed", ("a",), {"src": 3, "a": 3}, {"src": [3], "a": [1]})
    rec.replayed["src->a"] = (2, 3)
    journal.recoveries.append(rec)
    for e in (2, 3):
        journal.executed("a", e, rows=3 + e, seconds=0.6, redo=True, recovery=1)
    planner = Planner(pipe.dataflow(), known={"src": [3], "a": [1]}, monitor=False)
    rec.plan = planner.plan(["a"], {})
    return pipe, journal, rec


def test_costs_count_what_was_redone_and_what_each_alternative_would_redo() -> None:
    """falkirk redid a@2–3 and replayed src 2–3; a global rollback goes to the last common checkpoint (1)."""
    pipe, journal, rec = _journal()
    assert last_common_checkpoint(rec, ["a"]) == 1
    mine, glob, start = costs(journal, rec, inputs={"src"}, stateful=["a"])
    # by hand: a's rows at 2 and 3 are 5 + 6; src's at 2 and 3 are 12 + 13; from the start a 3..6, src 10..13
    assert (mine.recomputed, mine.reread, mine.pairs) == (11, 25, 2)
    assert (glob.recomputed, glob.reread, glob.pairs) == (11, 25, 2)
    assert glob.scheme == "global rollback to epoch 1"
    assert (start.recomputed, start.reread, start.pairs) == (18, 46, 4)
    assert mine.seconds == 1.0 and start.seconds == 2.0  # first executions' times (0.5 s each), not the redos'


def test_the_report_names_each_steps_action_and_the_constraint_behind_it() -> None:
    """The plan's lines say a restores to 1 because it failed, and the replay names the edge and epochs."""
    pipe, journal, rec = _journal()
    text = format_recovery(journal, rec, inputs=set(pipe.inputs), stateful=["a"])
    lines = text.splitlines()
    assert lines[0] == "recovery 1: a failed"
    row = next(line.split() for line in lines if line.strip().startswith("a "))
    assert row[:4] == ["a", "restore", "1", "3"] and "failed" in " ".join(row[4:])
    assert "replayed from logs: src->a epochs 2–3" in text
    assert any(line.startswith("input replay from the start") and line.split()[5:7] == ["18", "46"]
               for line in lines), text


def _logged_journal() -> tuple[Pipeline, Journal, Recovery]:
    """src -> b (Batch: logged) -> c (Lazy every 2); c failed at epoch 3 (b had done 3), restored 1, redid 2 and 3
    from b's log: the source is not read again, b's log is."""
    pipe = Pipeline("memory://falkirk-test/report-logged")
    pipe.input("src", "x BIGINT")

    @pipe.step(regime=Batch())
    def b(src):  # type: ignore[no-untyped-def]
        return src

    @pipe.step(regime=Lazy(every=2))
    def c(b, *, state):  # type: ignore[no-untyped-def]
        return b, b

    journal = Journal()
    for e in range(4):
        journal.executed("src", e, rows=100 + e, seconds=0.1, redo=False)
        journal.executed("b", e, rows=20 + e, seconds=0.2, redo=False)
        if e < 3:
            journal.executed("c", e, rows=5 + e, seconds=0.5, redo=False)
    rec = Recovery(1, "c failed", ("c",), {"src": 3, "b": 3, "c": 2}, {"src": [3], "b": [3], "c": [1]},
                   started=10.0, plan_seconds=0.004, rebuild_seconds=0.004, validation_seconds=0.1, validated=10.2)
    rec.replayed["b->c"] = (2, 3)
    journal.recoveries.append(rec)
    journal.executed("c", 2, rows=7, seconds=0.6, redo=True, recovery=1)
    journal.executed("c", 3, rows=8, seconds=0.6, redo=False)
    rec.finished, rec.caught_up = 11.0, 11.5
    rec.plan = Planner(pipe.dataflow(), known={"src": [3], "b": [3], "c": [1]}, monitor=False).plan(["c"], {})
    return pipe, journal, rec


def test_source_rows_and_log_rows_are_counted_apart() -> None:
    """A replay of a logged step's output counts as log rows, not source rows; c@3 (never completed) is not redone."""
    pipe, journal, rec = _logged_journal()
    mine, glob, start = costs(journal, rec, inputs={"src"}, stateful=["c"])
    # by hand: c redid epoch 2 only (7 rows); b's log replayed epochs 2 and 3 (22 + 23); no source row re-read
    assert (mine.recomputed, mine.source_rows, mine.log_rows, mine.pairs) == (7, 0, 45, 1)
    # a global rollback to c's checkpoint at 1: src, b at 2-3 and c at 2 recomputed, the source re-read
    assert (glob.recomputed, glob.source_rows, glob.log_rows, glob.pairs) == (22 + 23 + 7, 102 + 103, 0, 3)
    assert (start.source_rows, start.log_rows) == (100 + 101 + 102 + 103, 0)


def test_the_report_gives_the_wall_time_by_phase_and_what_was_executed_again() -> None:
    """The phases line adds up the recovery's timestamps; the executed-again line lists each step's epochs and rows."""
    pipe, journal, rec = _logged_journal()
    assert rec.phases() == pytest.approx({"session start": None, "metadata rebuild": 0.004, "validation": 0.1,
                                          "replay/recompute": 0.8, "catch-up": 0.5})
    text = format_recovery(journal, rec, inputs=set(pipe.inputs), stateful=["c"])
    assert ("  wall time by phase: session start - (not measured) · metadata rebuild 0.00 s · validation 0.10 s · "
            "replay/recompute 0.80 s · catch-up 0.50 s") in text.splitlines()
    assert "  executed again: c 2 (7 rows)" in text.splitlines()
    header = next(line for line in text.splitlines() if line.startswith("scheme"))
    assert [c.strip() for c in header.split("  ") if c.strip()][1:4] == [
        "records recomputed", "source rows re-read", "log rows replayed"]


def test_an_execution_record_keeps_its_size_however_long_the_process_ran(tmp_path: Path) -> None:
    """Differences of large CPU and clock counters carry rounding noise (1.44 → 1.4400000000000048): a record is
    written to the microsecond, so a long-lived driver's records do not grow (regression: the S3 soak's records
    grew by ~60 bytes over 300 epochs); what is read back is the measurement."""
    import json

    from falkirk.spark.pipeline.store.rootfs import Root

    root = Root(tmp_path, fsync=False)
    journal = Journal(root)
    late = 1e4 + 1.44 - 1e4  # 1.4400000000000546
    journal.executed("cc", 7, rows=3, seconds=late, redo=False, cpu=late, jit=late, started=123456.7890123456)
    doc = json.loads(root.read_bytes("journal/cc/00000007.json"))
    floats = {k: v for k, v in doc.items() if isinstance(v, float)}
    assert set(floats) >= {"seconds", "cpu", "jit", "first_seconds", "first_cpu", "first_jit", "started"}
    assert all(len(repr(v).split(".")[1]) <= 6 for v in floats.values()), floats
    assert floats["cpu"] == 1.44 and floats["started"] == 123456.789012
    again = Journal(root)
    again.load(["cc"])
    assert again.seconds("cc", 7) == 1.44 and again.cpu("cc", 7) == 1.44
