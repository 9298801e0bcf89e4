"""``falkirk solve FILE [--json] [--strategy auto|worklist|round_robin|vectorised]``: print the rollback
plan."""

from __future__ import annotations

import argparse
import json
from typing import Any

from falkirk.cli._common import add_file_argument, failed_summary, read_scenario
from falkirk.solver.dispatch import STRATEGIES

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``solve`` command."""
    parser = subparsers.add_parser(
        "solve",
        help="compute the rollback plan of a scenario",
        description="Compute the rollback plan of a scenario (SPEC §5): per processor its frontier "
        "f(p), notification frontier n(p) and action, and the logged messages to replay.",
    )
    add_file_argument(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the falkirk-plan/1 JSON document instead of a table"
    )
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="auto",
        help="solver to use (all give the same plan; default: auto, the vectorised solver on plain "
        "epoch jobs and large totally ordered dataflows, the worklist otherwise)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Solve ``args.file`` and print the plan."""
    scenario = read_scenario(args.file)
    plan = scenario.solve(strategy=args.strategy)
    if args.json:
        print(json.dumps(plan.to_json(), indent=2))
        return 0
    what = (
        "all (low-watermarks for garbage collection)"
        if scenario.failed == "all"
        else failed_summary(scenario)
    )
    print(f"failed: {what}\n")
    print(plan.table())
    return 0
