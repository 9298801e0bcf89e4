"""``falkirk draw FILE -o plan.png``: a picture of the rollback plan (needs ``falkirk[draw]``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from falkirk.cli._common import add_file_argument, failed_summary, read_scenario

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``draw`` command."""
    parser = subparsers.add_parser(
        "draw",
        help="draw the rollback plan as a picture (needs matplotlib)",
        description="Draw the dataflow with its rollback plan: processors coloured by action and "
        "labelled with their frontier, failed ones outlined in red, logged edges dashed with the "
        "messages to replay. Needs matplotlib (pip install 'falkirk[draw]').",
    )
    add_file_argument(parser)
    parser.add_argument(
        "-o", "--output", required=True, metavar="IMAGE", help="image file to write, e.g. plan.png"
    )
    parser.add_argument("--title", help="title of the picture (default: the scenario file name)")
    parser.add_argument("--dpi", type=int, default=150, help="resolution (default: 150)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Solve ``args.file`` and draw the plan into ``args.output``."""
    from falkirk.cli.render import render_plan

    scenario = read_scenario(args.file)
    plan = scenario.solve()
    what = "all (low-watermarks)" if scenario.failed == "all" else failed_summary(scenario)
    title = args.title or ("rollback plan" if args.file == "-" else f"rollback plan: {Path(args.file).name}")
    render_plan(plan, args.output, title=title, subtitle=f"failed: {what}", dpi=args.dpi)
    print(f"wrote {args.output}")
    return 0
