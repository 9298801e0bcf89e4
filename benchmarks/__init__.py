"""Benchmarks of falkirk (issue 9): graph families and timing scripts; results in ``benchmarks/results/``."""


def source_commit() -> str:
    """The checkout a result was measured at, for its file: ``git describe --always --dirty`` (``-dirty``: with
    uncommitted changes to tracked files)."""
    import subprocess
    from pathlib import Path

    return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=Path(__file__).resolve().parent,
                          capture_output=True, text=True).stdout.strip()


def result_header(module: str, argv: list[str] | None, started: str, load_before: tuple[float, ...]) -> dict:
    """What every result file begins with: the command (``python -m benchmarks.<module>`` and its arguments), the
    commit, when it started, and the load average before and now, after the measurement."""
    import os
    import sys

    return {"command": f"python -m benchmarks.{module} " + " ".join(sys.argv[1:] if argv is None else argv),
            "commit": source_commit(), "started": started, "load_before": load_before, "load_after": os.getloadavg()}
