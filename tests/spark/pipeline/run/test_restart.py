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
from spark_support import EPOCHS, assert_identical, demo_args, flagship

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
    assert_identical(spark, run, reference)


def test_a_resumed_driver_counts_what_it_executes_again(spark: Any, tmp_path: Path) -> None:
    """A new driver on a root whose Lazy step checkpointed at 2 but completed 4: rolling (and the output it
    feeds) re-execute 3 and 4, journalled as redo of the restart's recovery, which the report counts."""
    from spark_support import all_regimes

    from falkirk.spark.pipeline.tools.report import costs, format_recovery

    all_regimes(tmp_path, spark).run(5)
    result = all_regimes(tmp_path, spark).run(6)
    (rec,) = result.journal.recoveries
    assert rec.restart and rec.done_at_failure["rolling"] == 4  # from the execution records, not the checkpoint
    again = sorted((x.step, x.epoch) for x in result.journal.executions if x.redo)
    assert again == [("report", 3), ("report", 4), ("rolling", 3), ("rolling", 4)], again
    assert all(x.recovery == rec.index for x in result.journal.executions if x.redo)
    assert all(not x.redo for x in result.journal.executions if x.epoch == 5)
    mine = costs(result.journal, rec, inputs={"events"}, stateful=["rolling", "alerts", "report"])[0]
    assert mine.pairs == 4 and mine.recomputed > 0
    text = format_recovery(result.journal, rec, inputs={"events"}, stateful=["rolling", "alerts", "report"])
    assert "driver (re)start: every step resumes from what the root holds" in text and "resumed: all 6 steps" in text
