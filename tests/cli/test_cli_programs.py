"""The command line as a program: `python -m falkirk`, the `falkirk` script, and the example script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import EXAMPLES, ROOT, SPEC_ANSWER, SPEC_EXAMPLE


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, env=env, timeout=120)


def test_python_dash_m_falkirk_solves(tmp_path: Path) -> None:
    """`python -m falkirk solve FILE --json` prints the SPEC §9 answer."""
    result = _run(sys.executable, "-m", "falkirk", "solve", str(SPEC_EXAMPLE), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == SPEC_ANSWER


def test_console_script_reports_errors_without_traceback(tmp_path: Path) -> None:
    """The installed `falkirk` script checks a good file and rejects a bad one with status 2."""
    script = shutil.which("falkirk", path=str(Path(sys.executable).parent)) or shutil.which("falkirk")
    if script is None:
        pytest.skip("the falkirk console script is not installed")
    ok = _run(script, "check", str(EXAMPLES[0]))
    assert ok.returncode == 0 and ok.stdout.startswith("ok: ")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "falkirk-scenario/1", "processors": {"p": {"domain": "epoch", "stateles": true}}}')
    result = _run(script, "check", str(bad))
    assert result.returncode == 2
    assert result.stderr == "falkirk: error: processors.p.stateles: unknown field 'stateles' in a processor " \
        "(did you mean 'stateless'?); known fields: domain, arity, stateless, logs, checkpoints, live\n"


def test_example_script_explains_the_spec_example() -> None:
    """examples/solve_spec_example.py prints the table and sink's explanation and checks the answer."""
    result = _run(sys.executable, str(ROOT / "examples" / "solve_spec_example.py"))
    assert result.returncode == 0, result.stderr
    assert "sink       rollback  1" in result.stdout
    assert "Why does sink roll back to 1?" in result.stdout
    assert "matches the answer given in SPEC §9: yes" in result.stdout
    assert "matches `falkirk solve spec_example.json --json`: yes" in result.stdout


def test_example_script_json_mode() -> None:
    """`solve_spec_example.py --json` prints only the plan document."""
    result = _run(sys.executable, str(ROOT / "examples" / "solve_spec_example.py"), "--json")
    assert result.returncode == 0 and json.loads(result.stdout) == SPEC_ANSWER
