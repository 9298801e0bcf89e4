"""``falkirk pipeline plan ROOT --fail STEP``: what-if plans for a pipeline's root, from the command line.

The command is a plug-in of the ``falkirk`` command line (entry point group
``falkirk.cli``): the solver's CLI does not depend on :mod:`falkirk.spark`. It reads
``ROOT/pipeline.json`` and the manifests only — no Spark, nothing written —
and prints the plan :meth:`Pipeline.plan_failure <falkirk.spark.Pipeline.plan_failure>`
gives: each step's frontier, action and the constraint behind it, the
epochs recomputed, the logs replayed, and the cheapest ``log=True`` that
would roll back less.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register", "run_plan", "run_verify"]


def register(subparsers: Any) -> None:
    """Add the ``pipeline`` command (``plan``, ``verify``)."""
    parser = subparsers.add_parser(
        "pipeline",
        help="what-if rollback plans of a falkirk.spark pipeline's root",
        description="Plans for a falkirk.spark pipeline from its root (pipeline.json and the manifests).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    plan = actions.add_parser(
        "plan", help="the plan falkirk would execute if STEP failed now",
        description="Print the rollback plan falkirk would execute if the given steps failed after the last "
        "epoch every step completed (or after epoch --at), without running anything.")
    plan.add_argument("root", metavar="ROOT", help="the pipeline's root (a path or URI)")
    plan.add_argument("--fail", action="append", required=True, metavar="STEP", help="a step that fails (repeatable)")
    plan.add_argument("--at", type=int, help="plan at the boundary after this epoch (default: the last one)")
    plan.add_argument("--draw", metavar="PNG", help="also draw the plan to this file (falkirk[draw])")
    plan.add_argument("--json", action="store_true", help="print the falkirk-plan/1 document instead")
    plan.set_defaults(run=run_plan)
    verify = actions.add_parser(
        "verify", help="check every file under ROOT against its manifest",
        description="Check every checkpoint, log, complete marker and output under ROOT against its manifest "
        "(files, sizes, checksums), the Eager databases' committed epochs and the input log; nothing is changed. "
        "Exit status 1 when something is damaged.")
    verify.add_argument("root", metavar="ROOT", help="the pipeline's root (a path or URI)")
    verify.set_defaults(run=run_verify)


def run_plan(args: argparse.Namespace) -> int:
    """Print (and draw) the what-if plan."""
    from falkirk.spark.pipeline.api import Pipeline

    pipe = Pipeline.from_root(args.root)
    what = pipe.plan_failure(args.fail, at=args.at)
    if args.json:
        print(json.dumps(what.plan.to_json(), indent=2, ensure_ascii=False))
    else:
        print(what.table())
    if args.draw:
        what.draw(args.draw)
        print(f"plan picture: {args.draw}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """Print the problems found under the root (exit status 1 if any)."""
    from falkirk.spark.pipeline.api import Pipeline
    from falkirk.spark.pipeline.plan.feasible import verify_root
    from falkirk.spark.pipeline.store.storage import Storage

    pipe = Pipeline.from_root(args.root)
    checked, problems = verify_root(pipe, Storage(pipe.location, fsync=False))
    for p in problems:
        print(f"damaged: {p}")
    print(f"{'ok' if not problems else 'NOT OK'}: {checked} item(s) checked under {pipe.location.uri}, "
          f"{len(problems)} damaged")
    return 1 if problems else 0
