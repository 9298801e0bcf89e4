"""The recovery report: falkirk's measured cost next to a global rollback and a replay from the start."""

from __future__ import annotations

from falkirk.spark import Lazy, Pipeline
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
