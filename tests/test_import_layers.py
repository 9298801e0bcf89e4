"""The import contracts in ``pyproject.toml`` hold: layers errors → domains → solver → scenario/sim/testing → cli → spark, spark using only public CLI modules, no cycles inside ``falkirk.solver``, ``falkirk.sim`` or ``falkirk.spark``."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    exe = shutil.which("lint-imports") or str(pathlib.Path(sys.executable).with_name("lint-imports"))
    if not os.path.exists(exe):
        pytest.skip("import-linter (lint-imports) is not installed; install the dev extra")
    return exe


def test_import_contracts_are_kept() -> None:
    """``lint-imports`` reports every contract kept (a new upward import, private CLI import or cycle breaks it)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [_lint_imports(), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout, proc.stdout
