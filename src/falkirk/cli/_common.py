"""Helpers shared by the ``falkirk`` subcommands: reading scenarios and reporting errors."""

from __future__ import annotations

import argparse
import sys

from falkirk.domains import Frontier
from falkirk.errors import ScenarioError
from falkirk.scenario import Scenario, load, loads
from falkirk.solver import encode_frontier

__all__ = ["CommandError", "add_file_argument", "failed_summary", "read_scenario", "report", "show_frontier"]


class CommandError(Exception):
    """A command cannot run (e.g. a missing optional dependency); ``status`` is the exit code."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def add_file_argument(parser: argparse.ArgumentParser) -> None:
    """The ``FILE`` argument every command takes."""
    parser.add_argument(
        "file", metavar="FILE", help="scenario file (falkirk-scenario/1 JSON); '-' reads standard input"
    )


def read_scenario(path: str) -> Scenario:
    """The scenario in ``path`` (``-`` = standard input)."""
    if path == "-":
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        return loads(stream.read())
    return load(path)


def failed_summary(scenario: Scenario) -> str:
    """``"sum, sink"``, ``"all"`` or ``"none"``."""
    if scenario.failed == "all":
        return "all"
    return ", ".join(scenario.failed_names) or "none"


def show_frontier(f: Frontier) -> str:
    """A frontier's canonical encoding as compact text (``2``, ``top``, ``{"a": 3}``)."""
    enc = encode_frontier(f)
    if isinstance(enc, (str, int)):
        return str(enc)
    import json

    return json.dumps(enc, separators=(", ", ": "))


def report(exc: BaseException, source: str | None) -> None:
    """Print ``falkirk: error: <where>: <message>`` on one line of stderr."""
    if isinstance(exc, ScenarioError) and exc.path:
        text = str(exc)
    elif isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else source
        reason = exc.strerror or str(exc)
        text = f"{where}: {reason}" if where is not None else reason
    elif source is not None:
        text = f"{'<stdin>' if source == '-' else source}: {exc}"
    else:
        text = str(exc)
    print("falkirk: error: " + " ".join(text.split()), file=sys.stderr)
