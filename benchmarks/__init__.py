"""Benchmarks of falkirk (issue 9): graph families and timing scripts; results in ``benchmarks/results/``."""


def source_commit() -> str:
    """The checkout a result was measured at, for its file: ``git describe --always --dirty`` (``-dirty``: with
    uncommitted changes to tracked files)."""
    import subprocess
    from pathlib import Path

    return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=Path(__file__).resolve().parent,
                          capture_output=True, text=True).stdout.strip()
