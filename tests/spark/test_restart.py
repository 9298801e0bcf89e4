"""A driver killed with SIGKILL (between epochs, then mid-epoch) and restarted gives identical output."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_support import assert_identical, demo_args

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

    third = _demo(tmp_path, "--fail", "none")
    assert third.returncode == 0, third.stderr[-2000:]
    assert "recovery 1: plan" in third.stdout
    assert_identical(spark, run, reference)
