"""The source stays formatted and linted as committed: ``ruff format --check src`` and ``ruff check``."""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _ruff() -> str:
    exe = shutil.which("ruff") or str(pathlib.Path(sys.executable).with_name("ruff"))
    if not pathlib.Path(exe).exists():
        pytest.skip("ruff is not installed; install the dev extra")
    return exe


def test_src_is_formatted() -> None:
    """``ruff format --check src``: every module as the formatter writes it (line length 110)."""
    run = subprocess.run([_ruff(), "format", "--check", "src"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def test_src_tests_and_benchmarks_pass_the_linter() -> None:
    """``ruff check src tests benchmarks`` with the project's rules (pyproject.toml)."""
    run = subprocess.run([_ruff(), "check", "src", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
