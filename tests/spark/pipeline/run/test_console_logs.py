"""A driver's Spark console log (``local_session``'s and the demo's default): one file per driver process in the
temporary directory, and the logs of drivers that have ended pruned to the newest few, so that a machine starting
many drivers (the suite, a benchmark) does not collect one file per process. A running driver's log stays."""

from __future__ import annotations

import os
from pathlib import Path

from falkirk.spark.pipeline.run.session import KEPT_CONSOLE_LOGS, console_log_path

#: above any Linux pid_max (at most 2^22): no process has these pids
GONE = 5_000_000


def _log(directory: Path, name: str, mtime: float) -> Path:
    path = directory / name
    path.write_text("log4j banner\n")
    os.utime(path, (mtime, mtime))
    return path


def test_the_logs_of_ended_drivers_are_pruned_to_the_newest(tmp_path: Path) -> None:
    ended = [_log(tmp_path, f"falkirk-spark-{GONE + i}.log", 1_000_000 + i) for i in range(KEPT_CONSOLE_LOGS + 5)]
    running = _log(tmp_path, f"falkirk-spark-{os.getppid()}.log", 1.0)  # older than all, its driver alive
    others = [
        _log(tmp_path, f"falkirk-demo-spark-{GONE}.log", 2.0),  # another prefix: its own pruning
        _log(tmp_path, "falkirk-spark-notes.log", 3.0),  # not a driver's log
        _log(tmp_path, f"falkirk-spark-{GONE}.log.old", 4.0),
    ]
    mine = console_log_path("falkirk-spark", tmp_path)
    assert mine == tmp_path / f"falkirk-spark-{os.getpid()}.log" and not mine.exists()
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == sorted([p.name for p in ended[-KEPT_CONSOLE_LOGS:]] + [running.name] + [p.name for p in others])
    mine.write_text("this driver's\n")
    os.utime(mine, (0.5, 0.5))  # the oldest of all: kept while this process runs
    assert console_log_path("falkirk-spark", tmp_path) == mine
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, mine.name])


def test_a_directory_that_cannot_be_listed_still_gives_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "not-there"
    assert console_log_path("falkirk-demo-spark", missing) == missing / f"falkirk-demo-spark-{os.getpid()}.log"
