"""The executor's reporter: log records per step, the progress callback's lines, a live bar (no Spark)."""

from __future__ import annotations

import logging

import pytest

from falkirk.spark.pipeline.run.progress import Progress


def test_steps_are_logged_with_rows_and_seconds_and_lines_reach_the_callback(caplog: pytest.LogCaptureFixture) -> None:
    """Start/finish records at INFO on ``falkirk.spark``; failure lines at WARNING; the callback gets lines only."""
    lines: list[str] = []
    p = Progress(lines.append)
    with caplog.at_level(logging.INFO, logger="falkirk.spark"), p.running(2):
        p.step_started("cc", 3, redo=True)
        p.step_finished("cc", 3, rows=120, seconds=0.5, redo=True)
        p.line("FAILURE: step cc failed", level=logging.WARNING)
    got = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "falkirk.spark"]
    assert got == [("INFO", "cc@3 started (redo)"), ("INFO", "cc@3 finished: 120 rows in 0.50 s (redo)"),
                   ("WARNING", "FAILURE: step cc failed")]
    assert lines == ["FAILURE: step cc failed"]


def test_the_bar_counts_executions_and_grows_when_a_recovery_adds_work(capsys: pytest.CaptureFixture[str]) -> None:
    """``bar=True``: a tqdm bar whose total is the executions to do, plus what a recovery adds."""
    lines: list[str] = []
    p = Progress(lines.append, bar=True)
    with p.running(3):
        for epoch in range(2):
            p.step_started("a", epoch, redo=False)
            p.step_finished("a", epoch, rows=1, seconds=0.1, redo=False)
        p.more(2)
        assert (p.bar.n, p.bar.total) == (2, 5)
        p.line("recovery 1: …")
    assert p.bar is None  # closed with the run
    err = capsys.readouterr().err
    assert "falkirk" in err and "2/5" in err
    assert lines == ["recovery 1: …"]


def test_library_logging_is_quiet_by_default() -> None:
    """``import falkirk`` gives the ``falkirk`` logger a NullHandler: nothing reaches stderr unless configured."""
    import falkirk  # noqa: F401

    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("falkirk").handlers)
