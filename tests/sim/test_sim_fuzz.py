"""The fuzz command: clean on the real policies, loud and readable on a broken one."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from falkirk.sim import SolverPlanner
from falkirk.testing.fuzz import case_for, fuzz, main


@pytest.mark.slow
def test_fuzz_finds_no_divergence() -> None:
    """150 random cases (graphs, policy mixes, failures) recover correctly, with either planner."""
    buf = io.StringIO()
    report = fuzz(100, seed=11, out=buf)
    assert report.divergent == [], buf.getvalue()
    assert buf.getvalue().splitlines()[-1] == "100 cases, 0 divergences"
    assert fuzz(50, seed=12, out=buf, planner=SolverPlanner).divergent == [], buf.getvalue()


def test_fuzz_catches_the_wrong_log_policy() -> None:
    """With WrongLog mixed in, the fuzzer reports divergences and a shrunk, readable counterexample."""
    buf = io.StringIO()
    report = fuzz(60, seed=5, out=buf, broken=True, quiet=True)
    text = buf.getvalue()
    assert report.divergent and report.first is not None
    assert text.splitlines()[-1] == f"60 cases, {len(report.divergent)} divergences"
    assert "WrongLog(claims=" in text and "problem: output differs" in text and "rollbacks:" in text
    original = case_for(5, report.divergent[0], broken=True)
    assert len(report.first.graph.nodes) <= len(original.graph.nodes)
    assert len(report.first.describe()) <= len(original.describe())


def test_cases_are_reproducible() -> None:
    """Case i of a seed is always the same case."""
    assert case_for(3, 7).describe() == case_for(3, 7).describe()
    assert case_for(3, 7).describe() != case_for(4, 7).describe()


def test_main_exit_status_and_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    """main() returns 0 when clean, 1 on divergences, and rejects bad arguments."""
    assert main(["--cases", "5", "--seed", "2", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "5 cases, 0 divergences"
    assert main(["--cases", "10", "--seed", "5", "--broken", "--quiet", "--no-shrink"]) == 1
    assert "first divergent case" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--cases", "-1"])


def test_python_dash_m_entry_point() -> None:
    """`python -m falkirk.testing.fuzz` runs and prints the summary line."""
    out = subprocess.run(
        [sys.executable, "-m", "falkirk.testing.fuzz", "--cases", "3", "--seed", "1"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert out.splitlines()[-1] == "3 cases, 0 divergences"


def test_the_bar_counts_cases_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """``--bar``: a tqdm bar of the cases on stderr, the progress lines go, the summary stays on stdout."""
    assert main(["--cases", "20", "--bar"]) == 0
    out, err = capsys.readouterr()
    assert "20/20" in err and "fuzz" in err
    assert "fuzz: " not in out and out.strip().endswith("20 cases, 0 divergences")
