"""``falkirk pipeline plan ROOT --fail STEP``: what-if plans for a pipeline's root, from the command line.

The command is a plug-in of the ``falkirk`` command line (entry point group
``falkirk.cli``): the solver's CLI does not depend on :mod:`falkirk.spark`. It reads
``ROOT/pipeline.json`` and the manifests only — no Spark, nothing written —
and prints the plan :meth:`Pipeline.plan_failure <falkirk.spark.Pipeline.plan_failure>`
gives: each step's frontier, action and the constraint behind it, the
epochs recomputed, the logs replayed, and the cheapest ``log=True`` that
would roll back less. An object-store root takes its endpoint and
credentials from the environment or from ``--storage-option KEY=VALUE``
(``docs/storage.md``)::

    falkirk pipeline plan s3a://bucket/runs/run1 --fail cc --storage-option endpoint_url=http://127.0.0.1:8333
"""

from __future__ import annotations

import argparse
import json
import posixpath
from typing import TYPE_CHECKING, Any

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.store.connectors import storage_option
from falkirk.spark.pipeline.store.fscalls import DEFAULT_TIMEOUT
from falkirk.spark.pipeline.store.rootfs import Root

if TYPE_CHECKING:
    from falkirk.spark.pipeline.plan.costs import Costs

__all__ = ["add_storage_options", "register", "run_advise", "run_plan", "run_verify"]


def register(subparsers: Any) -> None:
    """Add the ``pipeline`` command (``plan``, ``verify``, ``advise``)."""
    parser = subparsers.add_parser(
        "pipeline",
        help="what-if rollback plans of a falkirk.spark pipeline's root",
        description="Plans for a falkirk.spark pipeline from its root (pipeline.json and the manifests).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    plan = actions.add_parser(
        "plan",
        help="the plan falkirk would execute if STEP failed now",
        description="Print the rollback plan falkirk would execute if the given steps failed after the last "
        "epoch every step completed (or after epoch --at), without running anything.",
    )
    plan.add_argument("root", metavar="ROOT", help="the pipeline's root (a path or URI)")
    plan.add_argument(
        "--fail", action="append", required=True, metavar="STEP", help="a step that fails (repeatable)"
    )
    plan.add_argument("--at", type=int, help="plan at the boundary after this epoch (default: the last one)")
    plan.add_argument("--draw", metavar="PNG", help="also draw the plan to this file (falkirk[draw])")
    plan.add_argument("--json", action="store_true", help="print the falkirk-plan/1 document instead")
    add_storage_options(plan)
    plan.set_defaults(run=run_plan)
    verify = actions.add_parser(
        "verify",
        help="check every file under ROOT against its manifest",
        description="Check every checkpoint, log, complete marker and output under ROOT against its manifest "
        "(files, sizes, checksums), the Eager databases' committed epochs and the input log; nothing is changed. "
        "Exit status 1 when something is damaged.",
    )
    verify.add_argument("root", metavar="ROOT", help="the pipeline's root (a path or URI)")
    add_storage_options(verify)
    verify.set_defaults(run=run_verify)
    advise = actions.add_parser(
        "advise",
        help="each step's regime chosen from the measured costs under ROOT",
        description="Advise each step's regime (log=True, Lazy(every=k), Eager, incremental=True) from the costs "
        "measured under ROOT (journal/profile.json, else the journal of the runs) and the rollback closure of each "
        "failure; nothing is run or changed (docs/advisor.md).",
    )
    advise.add_argument("root", metavar="ROOT", help="the pipeline's root (a path or URI)")
    advise.add_argument(
        "--failure-rate",
        type=float,
        required=True,
        metavar="RATE",
        help="expected failures per epoch (e.g. 0.01)",
    )
    advise.add_argument(
        "--failures",
        action="append",
        metavar="KIND",
        help="a failure kind: each-step (default), driver, a step, or STEP+STEP (repeatable)",
    )
    advise.add_argument(
        "--storage-budget", type=float, metavar="BYTES", help="at most this many bytes per epoch"
    )
    advise.add_argument(
        "--objective", choices=("cpu", "wall"), default="cpu", help="what to minimise (default cpu)"
    )
    advise.add_argument(
        "--accepted-only",
        action="store_true",
        help="only changes a restart on this root accepts (no new logs, no kind changes)",
    )
    advise.add_argument(
        "--min-saving",
        type=float,
        metavar="FRACTION",
        help="keep the current regimes unless the advised ones save at least this fraction "
        "(default: the measured steady cost's relative standard error)",
    )
    advise.add_argument(
        "--costs",
        action="append",
        metavar="FILE",
        help="price with this falkirk-costs/1 document (a profile.json) instead of ROOT's; given "
        "several times (profiles from several driver processes), with the median of them",
    )
    advise.add_argument(
        "--allow-domino",
        action="store_true",
        help="consider regimes under which a failure in one branch rolls another back past its "
        "checkpoints, through an unlogged step they share (by default the advice stops that)",
    )
    advise.add_argument("--json", action="store_true", help="print the falkirk-advice/1 document instead")
    advise.add_argument("--draw", metavar="PNG", help="also draw the assignments evaluated (falkirk[draw])")
    add_storage_options(advise)
    advise.set_defaults(run=run_advise)


def add_storage_options(parser: argparse.ArgumentParser) -> None:
    """``--storage-option KEY=VALUE`` (repeatable): the root's fsspec options, e.g.
    ``endpoint_url=http://…``."""
    parser.add_argument(
        "--storage-option",
        dest="storage_options",
        action="append",
        type=_storage_option,
        default=[],
        metavar="KEY=VALUE",
        help="an option of the root's filesystem (repeatable; the value is JSON "
        "or a string), e.g. endpoint_url=http://127.0.0.1:8333; see docs/storage.md",
    )
    parser.add_argument(
        "--storage-timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"seconds one operation on an object-store root may take (default {DEFAULT_TIMEOUT:g})",
    )


def _storage_option(text: str) -> tuple[str, Any]:
    try:
        return storage_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_plan(args: argparse.Namespace) -> int:
    """Print (and draw) the what-if plan."""
    from falkirk.spark.pipeline.api import Pipeline

    pipe = Pipeline.from_root(
        args.root, storage_options=dict(args.storage_options), storage_timeout=args.storage_timeout
    )
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

    pipe = Pipeline.from_root(
        args.root, storage_options=dict(args.storage_options), storage_timeout=args.storage_timeout
    )
    checked, problems = verify_root(pipe, Storage(pipe.location, fsync=False))
    for p in problems:
        print(f"damaged: {p}")
    print(
        f"{'ok' if not problems else 'NOT OK'}: {checked} item(s) checked under {pipe.location.uri}, "
        f"{len(problems)} damaged"
    )
    return 1 if problems else 0


def run_advise(args: argparse.Namespace) -> int:
    """Print (and draw) the regime advice from the root alone."""
    from falkirk.spark.pipeline.api import Pipeline

    pipe = Pipeline.from_root(
        args.root, storage_options=dict(args.storage_options), storage_timeout=args.storage_timeout
    )
    failures = [tuple(k.split("+")) if "+" in k else k for k in (args.failures or ["each-step"])]
    costs = (
        _pooled_costs(args.costs, dict(args.storage_options), args.storage_timeout) if args.costs else None
    )
    advice = pipe.advise(
        args.failure_rate,
        failures=failures,
        storage_budget=args.storage_budget,
        objective=args.objective,
        accepted_only=args.accepted_only,
        min_saving=args.min_saving,
        costs=costs,
        allow_domino=args.allow_domino,
    )
    if args.json:
        print(json.dumps(advice.to_json(), indent=2, ensure_ascii=False))
    else:
        print(advice.table())
    if args.draw:
        advice.draw(args.draw)
        if not args.json:
            print(f"advice picture: {args.draw}")
    return 0


def _pooled_costs(paths: list[str], storage_options: dict[str, Any], timeout: float) -> Costs:
    """The ``falkirk-costs/1`` documents at ``paths`` (plain paths or URIs, read as the root is, with its
    storage options), pooled by :meth:`Costs.median` when several; ``PipelineError`` naming the file that
    cannot be read or is not such a document."""
    from falkirk.spark.pipeline.plan.costs import Costs

    profiles = []
    for path in paths:
        folder, name = posixpath.split(path)
        try:
            doc = json.loads(
                Root(folder or ".", storage_options=storage_options, timeout=timeout).read_bytes(name)
            )
        except (OSError, ValueError) as exc:  # StorageError is an OSError
            raise PipelineError(f"--costs {path}: cannot read a falkirk-costs/1 document: {exc}") from exc
        try:
            profiles.append(Costs.from_json(doc))
        except PipelineError as exc:
            raise PipelineError(f"--costs {path}: {exc}") from exc
    return profiles[0] if len(profiles) == 1 else Costs.median(profiles)
