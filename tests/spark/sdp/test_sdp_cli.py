"""``falkirk sdp run``: the dry run prints the graph and the solver's plan; a run prints what it executed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sdp_support import UPDATES, clone

from falkirk.cli import main

pytestmark = pytest.mark.spark


def test_dry_run_then_refresh_from_the_command_line(spark: Any, sdp_reference: Any, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """--dry-run --refresh prints every dataset's regime and the plan, changes nothing; the run then executes
    exactly the plan's redo, and a refresh of an unknown dataset is an error naming the known ones."""
    where = clone(sdp_reference.last, tmp_path / "p")
    root = where / "pipeline-storage" / "falkirk"
    before = sorted(p.relative_to(root) for p in root.rglob("*") if "meta.sqlite" not in p.name)
    assert main(["sdp", "run", str(where), "--dry-run", "--refresh", "user_totals", "--no-gc"]) == 0
    out = capsys.readouterr().out
    assert f"{UPDATES} update(s) completed" in out
    assert "user_totals   materialized view  eager(log=true, key=user)" in out
    assert "kept incrementally: aggregate of clean_orders by user" in out
    assert "recomputed in full: its query has a Join" in out
    assert "refreshed: held to epoch" in out
    assert sorted(p.relative_to(root) for p in root.rglob("*") if "meta.sqlite" not in p.name) == before

    last = UPDATES - 1
    assert main(["sdp", "run", "--spec", str(where / "spark-pipeline.yml"), "--refresh", "user_totals", "-q",
                 "--no-gc"]) == 0
    out = capsys.readouterr().out
    assert (f"refresh of epoch {last} done: 3 step execution(s): clean_orders@{last}, user_totals@{last}, "
            f"big_orders@{last}") in out

    assert main(["sdp", "run", str(where), "--refresh", "nothing_like_it", "--dry-run"]) == 2
    assert "'nothing_like_it' is not a dataset or flow of pipeline 'orders'" in capsys.readouterr().err


def test_advise_from_the_command_line(spark: Any, sdp_reference: Any, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """falkirk sdp advise prices the regimes with the costs measured under the root and prints the advice, and
    the spec settings that would apply it (here: none changes)."""
    where = clone(sdp_reference.last, tmp_path / "p")
    assert main(["sdp", "advise", str(where), "--failure-rate", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "advice for failure rate 0.05/epoch" in out
    assert "user_totals" in out and ("falkirk.regime." in out or "the advice changes no dataset's regime" in out)
