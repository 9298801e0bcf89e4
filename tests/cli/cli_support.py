"""Shared constants and fixtures for the command-line tests.

(Not a conftest.py: scripts/test.sh runs pytest with --doctest-modules over tests/,
which clashes with a second conftest module.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from falkirk.cli import main

ROOT = Path(__file__).resolve().parents[2]
#: The scenario file of SPEC §9, beside the clone (CI checks shared/ out next to it).
#: SPEC §9's example, as the repository carries it (the design folder's copy plus ``x-`` annotations).
SPEC_EXAMPLE = ROOT / "examples" / "scenarios" / "spec_example.json"
#: The example scenarios shipped with the repository.
EXAMPLES = sorted((ROOT / "examples" / "scenarios").glob("*.json"))

#: The answer SPEC §9 gives for its example.
SPEC_ANSWER = {
    "format": "falkirk-plan/1",
    "frontiers": {"src": 2, "sum": 2, "sink": 1},
    "notification_frontiers": {"src": 2, "sum": 2, "sink": 1},
    "actions": {"src": "rollback", "sum": "restore", "sink": "rollback"},
    "replay": {"e2": {"log_frontier": 2, "exclude": 1}},
}


def spec_example() -> Path:
    """Path of SPEC §9's example scenario inside the repository."""
    assert SPEC_EXAMPLE.exists(), SPEC_EXAMPLE
    return SPEC_EXAMPLE


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``falkirk *argv`` in-process; return (exit status, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
