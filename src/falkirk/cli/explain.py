"""``falkirk explain FILE PROCESSOR``: why a processor rolls back as far as it does."""

from __future__ import annotations

import argparse
from typing import Any

from falkirk.cli._common import add_file_argument, read_scenario, show_frontier
from falkirk.errors import UnknownNameError
from falkirk.scenario.paths import did_you_mean

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``explain`` command."""
    parser = subparsers.add_parser(
        "explain",
        help="explain one processor's rollback",
        description="Print the chain of constraints (C1 failure, C2 discarded, C3 delivered, "
        "C4 notifications) that moved PROCESSOR to its frontier, causes first.",
    )
    add_file_argument(parser)
    parser.add_argument("processor", metavar="PROCESSOR", help="name of a processor of the scenario")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Solve ``args.file`` and print the explanation for ``args.processor``."""
    scenario = read_scenario(args.file)
    names = list(scenario.dataflow.processors)
    name = args.processor
    if name not in names:
        raise UnknownNameError(
            f"unknown processor {name!r}{did_you_mean(name, names)}; known: {', '.join(names)}"
        )
    plan = scenario.solve()
    lines = plan.explain(name)
    if not lines:
        print(f"{name} keeps ⊤: nothing forced it to roll back")
        return 0
    action, f = plan.actions[name], show_frontier(plan.frontiers[name])
    print(f"{name}: {action} {'from' if action == 'restart' else 'to'} {f}")
    for line in lines:
        print(f"  {line}")
    return 0
