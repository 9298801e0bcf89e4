"""``falkirk sdp``: run a Spark Declarative Pipelines project under falkirk, from the command line.

A plug-in of the ``falkirk`` command line (entry point group ``falkirk.cli``)::

    falkirk sdp run [SPEC]                        # one update: the new files, every step once
    falkirk sdp run [SPEC] --refresh user_totals  # redo its latest update and what must follow; nothing else
    falkirk sdp run [SPEC] --full-refresh orders  # a streaming table rebuilt from its first update
    falkirk sdp run [SPEC] --dry-run              # the graph, the regimes and what the run would do
    falkirk sdp advise [SPEC] --failure-rate 0.01 # regimes chosen from the measured costs, as spec settings

``SPEC`` is the spec file or a directory searched as ``spark-pipelines``
searches it (default: the current one). ``--refresh``/``--full-refresh``
take comma-separated names and repeat, as ``spark-pipelines``' options do.
"""

from __future__ import annotations

import argparse
from typing import Any

from falkirk.spark.pipeline.tools.cli import add_storage_options

__all__ = ["register", "run_sdp", "run_advise"]


def _names(value: str) -> list[str]:
    return [t.strip() for t in value.split(",") if t.strip()]


def _regime(value: str) -> tuple[str, str]:
    name, eq, regime = value.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f"{value!r}: expected NAME=REGIME, e.g. user_totals=lazy(every=3)")
    return name.strip(), regime.strip()


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec",
        nargs="?",
        metavar="SPEC",
        help="spark-pipeline.yml, or a directory searched for it "
        "as spark-pipelines does (default: the current directory)",
    )
    parser.add_argument(
        "--spec", dest="spec_option", metavar="SPEC", help="the same as SPEC (spark-pipelines' spelling)"
    )
    parser.add_argument("--root", help="falkirk's root (default: the spec's storage + /falkirk)")
    parser.add_argument(
        "--regime",
        action="append",
        type=_regime,
        default=[],
        metavar="NAME=REGIME",
        help="a dataset's or flow's regime, over the spec's falkirk.regime.NAME and table properties "
        "(repeatable; e.g. user_totals=lazy(every=3))",
    )
    parser.add_argument(
        "--no-gc",
        dest="gc",
        action="store_false",
        help="keep every checkpoint, log and input epoch (a streaming table's --full-refresh needs its "
        "input log from the first update)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--master",
        default="local[2,3]",
        help="Spark master of the session falkirk starts (default local[2,3])",
    )
    where.add_argument("--remote", metavar="URL", help="run through Spark Connect (sc://HOST:PORT)")
    add_storage_options(parser)


def register(subparsers: Any) -> None:
    """Add the ``sdp`` command (``run``, ``advise``)."""
    parser = subparsers.add_parser(
        "sdp",
        help="run a Spark Declarative Pipelines project under falkirk",
        description="Run an SDP project (spark-pipeline.yml and its Python definitions) as a falkirk pipeline: one "
        "run is one update; refreshes, failures and changed queries are recovered selectively (docs/sdp.md).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser(
        "run",
        help="run one update, or refresh datasets",
        description="Run one update of the project (the new files of every file stream), or "
        "with --refresh/--full-refresh redo those datasets and what falkirk's solver says must "
        "follow.",
    )
    _common(run)
    run.add_argument(
        "--refresh",
        type=_names,
        action="extend",
        default=[],
        metavar="X[,Y]",
        help="redo these datasets' latest update and what must follow (no new update)",
    )
    run.add_argument(
        "--full-refresh",
        type=_names,
        action="extend",
        default=[],
        metavar="X[,Y]",
        help="recompute these materialized views from whole tables, rebuild these streaming tables "
        "from their first update",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="print the graph, the regimes and the plan; run nothing"
    )
    run.add_argument(
        "--fail",
        action="append",
        default=[],
        metavar="FLOW[:WHERE]",
        help="inject a failure into this flow's step (tests, demos; WHERE as in docs/spark.md)",
    )
    run.add_argument(
        "--advise",
        type=float,
        metavar="RATE",
        help="run with the regimes the advisor chooses for this failure rate per epoch (from the "
        "costs measured under the root)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    run.set_defaults(run=run_sdp)
    advise = actions.add_parser(
        "advise",
        help="each dataset's regime chosen from the measured costs",
        description="Advise each dataset's regime from the costs falkirk measured under the "
        "root, within what each kind of dataset may take; prints the advice and the spec "
        "settings that apply it. Nothing is run.",
    )
    _common(advise)
    advise.add_argument(
        "--failure-rate",
        type=float,
        required=True,
        metavar="RATE",
        help="expected failures per epoch (e.g. 0.01)",
    )
    advise.set_defaults(run=run_advise)


def _project(args: argparse.Namespace) -> Any:
    from falkirk.spark.errors import PipelineError

    try:
        from falkirk.spark.sdp.project import Project
        from falkirk.spark.sdp.spec import load_spec
    except ImportError as exc:  # PySpark before 4.1, or without the pipelines extra
        raise PipelineError(
            f"falkirk sdp needs pyspark.pipelines (PySpark 4.1 or newer; pip install 'falkirk[sdp]'): {exc}"
        ) from None

    spec = load_spec(args.spec_option or args.spec)
    if args.remote:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.remote(args.remote)
        for k, v in spec.spark_conf.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
    else:
        from falkirk.spark.pipeline.run.session import local_session

        spark = local_session(args.master, "falkirk-sdp", conf=spec.spark_conf)
    return Project(
        spec,
        spark,
        root=args.root,
        regimes=dict(args.regime),
        gc=args.gc,
        storage_options=dict(args.storage_options),
    )


def run_sdp(args: argparse.Namespace) -> int:
    """Run (or dry-run) one update or the refreshes asked for."""
    project = _project(args)
    if args.advise is not None:
        advice = project.apply_advice(args.advise)
        print(advice.text)
    if args.dry_run:
        print(project.plan(refresh=args.refresh, full_refresh=args.full_refresh))
        return 0
    update = project.run(
        refresh=args.refresh,
        full_refresh=args.full_refresh,
        fail=args.fail,
        progress=None if args.quiet else print,
    )
    for note in update.notes:
        print(f"note: {note}")
    print(update.summary())
    return 0


def run_advise(args: argparse.Namespace) -> int:
    """Print the advice and the spec settings that apply it."""
    project = _project(args)
    print(project.advise(args.failure_rate).text)
    return 0
