"""Failure specifications: parsing, validation, firing once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

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


def test_a_task_that_runs_after_the_run_settled_leaves_no_marker(spark: Any, tmp_path: Path) -> None:
    """A run's markers live in its own directory of markers, which :meth:`Injector.settle` removes: a straggling
    task of the failed job (Spark does not interrupt a cancelled task's thread), run here by asking for the wrapped
    frame again after the settle, fails as before but finds no directory to leave its marker in, so the driver's
    temporary directory is as it was before the run; the settle found the fired job failure fired and the empty
    frame's task failure unfired."""
    inj = Injector(["s@1:job", "s@2:task"])
    inj.here = str(tmp_path)
    rows = spark.range(4, numPartitions=2)
    failing = inj.wrap("s", 1, rows)
    empty = inj.wrap("s", 2, rows.where("id < 0"))
    with pytest.raises(Exception, match="falkirk injected task failure"):
        failing.collect()
    assert empty.collect() == []
    (run,) = os.listdir(tmp_path)
    assert run.startswith(f"falkirk-injections-{_place()}-{os.getpid()}-")
    assert len(os.listdir(tmp_path / run)) == 1  # the job failure's marker; the empty frame's task saw no row
    assert [str(i) for i in inj.settle()] == ["s@2:task"]
    assert [str(i) for i in inj.fired] == ["s@1:job"] and os.listdir(tmp_path) == []
    with pytest.raises(Exception, match="falkirk injected task failure"):
        failing.collect()  # the late task: it fails all the same ...
    assert os.listdir(tmp_path) == []  # ... and leaves nothing behind


def test_a_sweep_removes_the_directories_of_markers_of_drivers_that_are_gone(tmp_path: Path) -> None:
    """A dead driver's directory of markers goes with what is in it; a live driver's (this one's) and another
    place's stay."""
    here = _place()
    elsewhere = "0" * 8 if here != "0" * 8 else "1" * 8
    dead = f"falkirk-injections-{here}-{_dead_pid()}-{uuid.uuid4().hex}"
    alive = f"falkirk-injections-{here}-{os.getpid()}-{uuid.uuid4().hex}"
    other = f"falkirk-injections-{elsewhere}-{_dead_pid()}-{uuid.uuid4().hex}"
    for name in (dead, alive, other):
        (tmp_path / name).mkdir()
        (tmp_path / name / _marker_name()).touch()
    assert sweep_markers(str(tmp_path)) == [dead]
    assert sorted(os.listdir(tmp_path)) == sorted([alive, other])
