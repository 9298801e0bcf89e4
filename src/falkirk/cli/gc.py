"""``falkirk gc FILE [--json] [--output NAME]``: low-watermarks for garbage collection (SPEC §6).

Solves the scenario with every processor failed (its own ``failed`` field
is ignored) and prints, per processor, the low-watermark ``lw(p)`` below
which it never rolls back, how many of its checkpoints are strictly inside
it (deletable, keeping the one at ``lw(p)``), then the logged messages
senders may delete, the input sources may acknowledge and, for processors
declared with ``--output``, the committed output. ``--json`` prints the
``falkirk-plan/1`` document ``falkirk solve --json`` prints for the same
file with ``"failed": "all"``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from typing import Any

from falkirk.cli._common import add_file_argument, read_scenario, show_frontier
from falkirk.domains import Frontier
from falkirk.errors import UnknownNameError
from falkirk.solver import Dataflow, solve_frontiers
from falkirk.solver.monitor.reports import Changes

__all__ = ["register", "run", "watermark_report"]


def register(subparsers: Any) -> None:
    """Add the ``gc`` command."""
    parser = subparsers.add_parser(
        "gc",
        help="low-watermarks for garbage collection",
        description="Compute the low-watermarks of a scenario (SPEC §6: solve with every processor failed, "
        "using only persisted checkpoints) and what they let the system delete or acknowledge.",
    )
    add_file_argument(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help='print the falkirk-plan/1 document (what `falkirk solve --json` prints with "failed": "all")',
    )
    parser.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="PROCESSOR",
        help="declare an external output, to show its committed frontier (repeatable)",
    )
    parser.set_defaults(run=run)


def watermark_report(df: Dataflow, watermarks: Mapping[str, Frontier], outputs: Iterable[str] = ()) -> str:
    """The human-readable report of ``watermarks`` for ``df`` (shared with ``falkirk monitor status``).

    >>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
    >>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(1), Checkpoint(2)]),
    ...                Processor("b", "epoch", checkpoints=[Checkpoint(2)])], [Edge("ab", "a", "b")])
    >>> print(watermark_report(df, solve_frontiers(df, "all").frontiers, ["b"]))
    processor  kind    low-watermark  checkpoints  deletable
    ---------  ------  -------------  -----------  ---------
    a          input   2              2            1
    b          output  2              1            0
    <BLANKLINE>
    logged messages senders may delete (times inside the receiver's low-watermark):
      ab (a -> b): 2
    <BLANKLINE>
    input sources may acknowledge:
      a: 2
    <BLANKLINE>
    committed external output:
      b: 2
    """
    outs = frozenset(outputs)
    changes = Changes.of(df, watermarks, outs)
    rows = [("processor", "kind", "low-watermark", "checkpoints", "deletable")]
    for p, lw in watermarks.items():
        proc = df.processors[p]
        kind = (
            "output"
            if p in outs
            else "input"
            if p in changes.inputs
            else "stateless"
            if proc.stateless
            else "stateful"
        )
        cks = [m.frontier for m in df.candidates(p, failed=True)[1:]]
        deletable = "-" if proc.stateless else str(sum(f <= lw and f != lw for f in cks))
        rows.append((p, kind, show_frontier(lw), str(len(cks)), deletable))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    sections = (
        (
            "logged messages senders may delete (times inside the receiver's low-watermark):",
            changes.logs,
            True,
        ),
        ("input sources may acknowledge:", changes.inputs, False),
        ("committed external output:", changes.outputs, False),
    )
    for title, values, edge in sections:
        if values:
            lines += ["", title]
            for name, f in values.items():
                label = f"{name} ({df.edges[name].src} -> {df.edges[name].dst})" if edge else name
                lines.append(f"  {label}: {show_frontier(f)}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Compute and print the low-watermarks of ``args.file``."""
    scenario = read_scenario(args.file)
    df = scenario.dataflow
    for p in args.output:
        if p not in df.processors:
            raise UnknownNameError(f"--output names unknown processor {p!r}")
    plan = solve_frontiers(df, "all")
    if args.json:
        print(json.dumps(plan.to_json(), indent=2))
        return 0
    print("low-watermarks (every processor failed, SPEC §6)\n")
    print(watermark_report(df, plan.frontiers, args.output))
    return 0
