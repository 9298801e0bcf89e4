"""A driver killed with SIGKILL (between epochs, then mid-epoch) and restarted gives identical output.

The killed drivers are separate processes (``python -m falkirk.spark.demo``);
the last restart runs in the test process (a new executor on the same root,
with nothing in memory: the same code path as a new driver process, without
paying for a third JVM).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, SMALL, assert_identical, demo_args, flagship

from falkirk.spark.pipeline.tools.flagship import events_source
from falkirk.spark.pipeline.tools.report import costs, redone

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _demo(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "falkirk.spark.demo", *demo_args(root, "--quiet", *extra)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)


def test_sigkill_between_and_mid_epoch_then_restart(spark: Any, reference: Path, tmp_path: Path) -> None:
    """Killed before epoch 2 starts, then during cc's epoch 3; the third driver resumes and finishes identically."""
    first = _demo(tmp_path, "--fail", "events@2:kill")
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    run = tmp_path / "run"
    assert (run / "input" / "events" / "cuts" / "00000001.json").exists()
    assert not (run / "input" / "events" / "cuts" / "00000002.json").exists()

    second = _demo(tmp_path, "--fail", "cc@3:kill-mid")
    assert second.returncode == -signal.SIGKILL, second.stderr[-2000:]
    assert "recovery 1: plan" in second.stdout  # it resumed from the persisted state

    result = flagship(run, spark).run(EPOCHS)  # the third driver
    (rec,) = result.journal.recoveries
    assert rec.restart and set(rec.failed) == set(result.done)
    assert rec.plan.actions["cc"] == "restore"  # from its checkpoint at 1: the one at 3 was never published
    _restart_counts_what_it_executes_again(result, rec)
    assert_identical(spark, run, reference)


def test_a_resumed_driver_counts_what_it_executes_again(spark: Any, tmp_path: Path) -> None:
    """A new driver on a root whose Lazy step checkpointed at 2 but completed 4: rolling re-executes 3 and 4,
    journalled as redo of the restart's recovery, which the report counts; the output it feeds had committed 3 and
    4, which are final: kept, what rolling sent again for them discarded."""
    from spark_support import all_regimes

    from falkirk.spark.pipeline.tools.report import costs, format_recovery

    all_regimes(tmp_path, spark).run(5)
    result = all_regimes(tmp_path, spark).run(6)
    (rec,) = result.journal.recoveries
    assert rec.restart and rec.done_at_failure["rolling"] == 4  # from the execution records, not the checkpoint
    again = sorted((x.step, x.epoch) for x in result.journal.executions if x.redo and not x.discarded)
    assert again == [("rolling", 3), ("rolling", 4)], again
    kept = sorted((x.step, x.epoch) for x in result.journal.executions if x.discarded)
    assert kept == [("report", 3), ("report", 4)], kept
    assert rec.discarded == {"report": [3, 4]}
    assert all(x.recovery == rec.index for x in result.journal.executions if x.redo)
    assert all(not x.redo for x in result.journal.executions if x.epoch == 5)
    # a local master: the restart's CPU, from its session being up until every step was back, is measured too
    assert rec.finished is not None and rec.cpu_seconds is not None and rec.cpu_seconds > 0
    mine = costs(result.journal, rec, inputs={"events"}, stateful=["rolling", "alerts", "report"])[0]
    assert mine.pairs == 2 and mine.recomputed > 0
    text = format_recovery(result.journal, rec, inputs={"events"}, stateful=["rolling", "alerts", "report"])
    assert "driver (re)start: every step resumes from what the root holds" in text and "resumed: all 6 steps" in text


def _restart_counts_what_it_executes_again(result: Any, rec: Any) -> None:
    """The second driver died in cc@3 (cc_every=2: checkpoints after epochs 1, 3): events, queries, parse_batch,
    heavy and parse_graph had completed 3, cc and the steps after it 2. cc restores 1; parse_graph (unlogged) resends
    2-3 (C2); answer and stats had consumed cc@2 and roll back to 1 (C3). Executed again: parse_graph 2-3, cc 2 —
    known to the third driver only from the execution records under the root — answer and stats 2; responses had
    committed 2, which is final (kept, what answer sent again for it discarded). Read again: events 2-3 and
    queries 2-3 from the input log (source rows), heavy 2-3 from its log."""
    assert sorted(redone(result.journal, rec)) == [
        ("answer", 2), ("cc", 2), ("parse_graph", 2), ("parse_graph", 3), ("stats", 2)]
    assert rec.discarded == {"responses": [2]}
    mine = costs(result.journal, rec, inputs={"events", "queries"}, stateful=["cc", "stats", "responses"])[0]
    assert mine.source_rows == 2 * SMALL["events_per_epoch"] + 2 * SMALL["queries_per_epoch"]
    source = events_source(SMALL["events_per_epoch"], SMALL["users"], SMALL["nodes"], SMALL["seed"])
    heavy_rows = [len({r["user"] for r in source(e) if r["kind"] != "link"}) for e in (2, 3)]
    assert mine.log_rows == sum(heavy_rows)
    phases = rec.phases()
    assert phases["session start"] is None  # the test session was running already
    later = [phases[p] for p in ("metadata rebuild", "validation", "replay/recompute", "catch-up")]
    assert all(v is not None and v >= 0 for v in later), phases
    assert sum(later) == pytest.approx(rec.caught_up - rec.started)  # the phases cover the restart without gaps


def test_an_input_log_filled_ahead_is_read_once_and_nothing_is_recovered(
    spark: Any, reference: Path, tmp_path: Path,
) -> None:
    """Every input epoch appended and cut by a producer before the first run: the run starts fresh (no recovery),
    executes every input epoch once, counts nothing as redone, and gives the reference's output."""
    pipe = flagship(tmp_path, spark)
    for inp in pipe.inputs.values():
        for e in range(EPOCHS):
            inp.log.append(inp.source(e), batch=f"epoch-{e}")
            inp.log.cut(e)
    result = pipe.run(EPOCHS)
    assert result.journal.recoveries == []
    assert [x for x in result.journal.executions if x.redo] == []
    read = sorted((x.step, x.epoch) for x in result.journal.executions if x.step in pipe.inputs)
    assert read == sorted((i, e) for i in pipe.inputs for e in range(EPOCHS))
    assert_identical(spark, tmp_path, reference)
