"""Failure specifications: parsing, validation, firing once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from falkirk.spark import Injection, PipelineError, StepFailure
from falkirk.spark.pipeline.run.failures import (
    STALE_MARKER_SECONDS,
    Injector,
    _marker_name,
    _place,
    sweep_markers,
)


@pytest.mark.parametrize(("text", "where"), [("cc@7", "mid"), ("cc@7:before", "before"), ("heavy@0:job", "job"),
                                             ("a_b@12:kill-mid", "kill-mid")])
def test_parse(text: str, where: str) -> None:
    """STEP@EPOCH[:WHERE] parses; the default point is mid."""
    inj = Injection.parse(text)
    assert (inj.where, str(inj)) == (where, f"{text.split(':')[0]}:{where}")


@pytest.mark.parametrize("text", ["cc", "cc@", "cc@-1", "@3", "cc@3:later"])
def test_parse_rejects(text: str) -> None:
    """Malformed specifications are rejected with the expected syntax."""
    with pytest.raises(PipelineError, match="STEP@EPOCH"):
        Injection.parse(text)


def test_fires_once_at_its_point() -> None:
    """An injection fires at its step, epoch and point only, and only once."""
    inj = Injector(["cc@2:before"])
    inj.at("cc", 2, "mid")
    inj.at("cc", 1, "before")
    with pytest.raises(StepFailure, match="step cc failed at epoch 2"):
        inj.at("cc", 2, "before")
    inj.at("cc", 2, "before")
    assert [str(i) for i in inj.fired] == ["cc@2:before"] and not inj.pending


def test_unknown_step_is_rejected() -> None:
    """Failures naming a step the pipeline does not have are refused up front."""
    with pytest.raises(PipelineError, match="unknown step 'nope'"):
        Injector("nope@1").validate(["cc", "heavy"])


def _dead_pid() -> int:
    """The process id of a process that has exited (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_sweep_removes_the_markers_of_drivers_that_are_gone_and_nothing_else(tmp_path: Path) -> None:
    """Markers name the driver that made them and its place (machine and process namespace); a sweep removes those
    of dead drivers of this place and day-old ones of the older form (no process id), and leaves a live driver's
    (this one's), another place's, an executor kill's, a fresh older-form one, other files and directories
    alone, and is not upset by a process id no process can have."""
    here = _place()
    mine = _marker_name()
    assert mine.startswith(f"falkirk-injection-{here}-{os.getpid()}-")
    assert _marker_name("executor").startswith(f"falkirk-executor-{here}-")
    dead = f"falkirk-injection-{here}-{_dead_pid()}-{uuid.uuid4().hex}"
    old, fresh = (f"falkirk-injection-{uuid.uuid4().hex}" for _ in range(2))
    elsewhere = "0" * 8 if here != "0" * 8 else "1" * 8
    others = [
        f"falkirk-injection-{elsewhere}-{_dead_pid()}-{uuid.uuid4().hex}",  # another host's or container's driver
        f"falkirk-executor-{here}-{_dead_pid()}-{uuid.uuid4().hex}",  # an executor kill's: never swept
        f"falkirk-injection-{here}-99999999999-{uuid.uuid4().hex}",  # no process has such an id
        "falkirk-injection-notes.txt",
        f"falkirk-injection-{uuid.uuid4().hex}.bak",
        "spark-1234",
    ]
    for name in (mine, dead, old, fresh, *others):
        (tmp_path / name).touch()
    (tmp_path / f"falkirk-injection-{here}-{_dead_pid()}-{uuid.uuid4().hex}").mkdir()  # not a marker: a directory
    a_day_ago = time.time() - STALE_MARKER_SECONDS - 60
    os.utime(tmp_path / old, (a_day_ago, a_day_ago))
    before = set(os.listdir(tmp_path))
    assert sorted(sweep_markers(str(tmp_path))) == sorted([dead, old])
    assert set(os.listdir(tmp_path)) == before - {dead, old}
    assert sweep_markers(str(tmp_path)) == []  # nothing more to sweep
    assert sweep_markers(str(tmp_path / "missing")) == []  # a directory that is not there: nothing, no error
