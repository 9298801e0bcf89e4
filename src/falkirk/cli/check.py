"""``falkirk check FILE``: validate a scenario without solving it."""

from __future__ import annotations

import argparse
from typing import Any

from falkirk.cli._common import add_file_argument, failed_summary, read_scenario

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``check`` command."""
    parser = subparsers.add_parser(
        "check",
        help="validate a scenario file",
        description="Validate a scenario file: print a one-line summary, or the first problem "
        "(with its JSON path) and exit with status 2.",
    )
    add_file_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read ``args.file`` and print ``ok: N processors, M edges, failed: …``."""
    scenario = read_scenario(args.file)
    df = scenario.dataflow
    p, e = len(df.processors), len(df.edges)
    print(f"ok: {p} processor{'s' * (p != 1)}, {e} edge{'s' * (e != 1)}, failed: {failed_summary(scenario)}")
    return 0
