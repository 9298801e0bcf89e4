"""``falkirk monitor --db PATH ACTION``: a persisted incremental monitor (SPEC §6).

* ``status [--json]`` — the low-watermarks and what they allow;
* ``init FILE [--output NAME]`` — create the monitor from a scenario's graph
  and checkpoints (its ``failed`` and ``live`` fields are ignored);
* ``record PROCESSOR JSON`` — record one checkpoint, given as in a scenario
  file (``'{"frontier": 3, "delivered": {"e1": 3}}'``); prints the changes;
* ``ack-output PROCESSOR FRONTIER`` — an external output's service persisted
  everything at times in ``FRONTIER`` (JSON, e.g. ``3``); prints the changes.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from falkirk.cli._common import add_file_argument, read_scenario
from falkirk.cli.gc import watermark_report
from falkirk.errors import MonitorError
from falkirk.solver.monitor import Monitor
from falkirk.solver.monitor.codec import checkpoint_from_json

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``monitor`` command and its actions."""
    parser = subparsers.add_parser(
        "monitor",
        help="inspect or feed a persisted incremental monitor",
        description="Work with an incremental monitor persisted in an SQLite database: low-watermarks "
        "kept up to date as checkpoints are recorded (SPEC §6).",
    )
    parser.add_argument("--db", required=True, metavar="PATH", help="the monitor's SQLite database")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    status = actions.add_parser("status", help="show the low-watermarks and what they allow")
    status.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    status.set_defaults(run=run_status)

    init = actions.add_parser("init", help="create the monitor from a scenario's graph and checkpoints")
    add_file_argument(init)
    init.add_argument(
        "--output", action="append", default=[], metavar="PROCESSOR", help="an external output (repeatable)"
    )
    init.set_defaults(run=run_init)

    record = actions.add_parser("record", help="record one checkpoint of a processor")
    record.add_argument("processor", metavar="PROCESSOR")
    record.add_argument(
        "checkpoint",
        metavar="JSON",
        help="checkpoint metadata as in a scenario file, e.g. '{\"frontier\": 3}'",
    )
    record.set_defaults(run=run_record)

    ack = actions.add_parser(
        "ack-output", help="an external output's service persisted everything up to FRONTIER"
    )
    ack.add_argument("processor", metavar="PROCESSOR")
    ack.add_argument("frontier", metavar="FRONTIER", help="a frontier in JSON (SPEC §7), e.g. 3 or '\"top\"'")
    ack.set_defaults(run=run_ack)


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MonitorError(f"{what} is not valid JSON: {exc}") from None


def run_status(args: argparse.Namespace) -> int:
    """Print the watermarks of the monitor in ``args.db``."""
    with Monitor.open(args.db) as m:
        if args.json:
            doc = {"format": "falkirk-monitor-status/1", **m.current().to_json()}
            doc["checkpoints"] = {p: len(m.checkpoints(p)) for p in m.watermarks}
            print(json.dumps(doc, indent=2))
            return 0
        print(f"monitor {args.db}: low-watermarks (every processor failed, SPEC §6)\n")
        print(watermark_report(m.dataflow(), m.watermarks, m.outputs))
    return 0


def run_init(args: argparse.Namespace) -> int:
    """Create the monitor in ``args.db`` from the scenario ``args.file``."""
    scenario = read_scenario(args.file)
    with Monitor.create(scenario.dataflow, args.db, outputs=args.output) as m:
        print(f"created monitor {args.db}: {len(m.watermarks)} processors")
    return 0


def run_record(args: argparse.Namespace) -> int:
    """Record one checkpoint and print the changes as JSON."""
    doc = _json(args.checkpoint, "the checkpoint")
    if not isinstance(doc, dict):
        raise MonitorError(f"the checkpoint must be a JSON object with a 'frontier', not {args.checkpoint!r}")
    with Monitor.open(args.db) as m:
        print(json.dumps(m.record(args.processor, checkpoint_from_json(doc)).to_json()))
    return 0


def run_ack(args: argparse.Namespace) -> int:
    """Acknowledge an external output's frontier and print the changes as JSON."""
    frontier = _json(args.frontier, "the frontier")
    with Monitor.open(args.db) as m:
        print(json.dumps(m.acknowledge_output(args.processor, frontier).to_json()))
    return 0
