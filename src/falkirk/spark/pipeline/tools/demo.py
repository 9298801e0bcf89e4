"""``python -m falkirk.spark.demo``: the flagship pipeline with an injected failure, then the recovery report.

Runs :mod:`falkirk.spark.pipeline.tools.flagship` for ``--epochs`` epochs under
``ROOT/run`` with the failures given by ``--fail`` (default: the
lazy-checkpoint step ``cc`` fails mid-way through epoch 7), prints progress
per epoch and step, the recovery report (each step's rollback frontier and
action with the constraint that forced it; records recomputed and recovery
wall time next to a global rollback and a replay from the start), runs the
same input without failures and without falkirk under ``ROOT/reference``,
and checks that the responses and the SQLite database are identical. Exits
with status 1 if they are not. ``ROOT/run`` is resumed if it already holds
a run (a restarted driver), so ``--fail cc@5:kill`` followed by a second
invocation without it demonstrates recovery after ``SIGKILL``.

On a cluster, give the master and a root every node reaches (a path on a
shared mount, or a URI: ``s3a://``, ``abfss://``, ``gs://``)::

    python -m falkirk.spark.demo --master spark://HOST:7077 --root /mnt/shared/falkirk/demo

An object-store root takes its endpoint and credentials from the
environment or from ``--storage-option KEY=VALUE`` (repeatable; the
executors need the same settings as ``spark.hadoop.fs.s3a.*``, see
``docs/storage.md``)::

    python -m falkirk.spark.demo --root s3a://bucket/demo --storage-option endpoint_url=http://127.0.0.1:8333

or run it through ``spark-submit`` (the master and settings then come from
``spark-submit``; ``--master`` is not needed)::

    spark-submit --master spark://HOST:7077 $(python -c "import falkirk.spark.demo as d; print(d.__file__)") \
        --root s3a://bucket/falkirk/demo

>>> args = parser().parse_args(["--fail", "cc@3:before", "--epochs", "5"])
>>> [str(f) for f in args.fail], args.epochs, args.cc
(['cc@3:before'], 5, 'unionfind')
>>> parser().parse_args(["--master", "spark://h:7077", "--root", "file:///shared/demo"]).root
'file:///shared/demo'
>>> parser().parse_args(["--root", "s3a://b/demo", "--storage-option", "endpoint_url=http://127.0.0.1:8333"]).storage_options
[('endpoint_url', 'http://127.0.0.1:8333')]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from falkirk.spark.pipeline.run.failures import Injection
from falkirk.spark.pipeline.tools.cli import add_storage_options

__all__ = ["main", "parser"]


def _failure(text: str) -> Injection | None:
    try:
        return None if text == "none" else Injection.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    p = argparse.ArgumentParser(
        prog="python -m falkirk.spark.demo",
        description="Run the paper's Figure 1 pipeline on PySpark with an injected failure and "
        "report falkirk's selective recovery.",
    )
    p.add_argument(
        "--fail",
        action="append",
        type=_failure,
        metavar="STEP@EPOCH[:WHERE]",
        help="inject a failure (repeatable); WHERE: before, mid (default), task, job, kill, "
        "kill-mid, executor, after. Default: cc@7:mid. Use --fail none for a failure-free run",
    )
    p.add_argument("--epochs", type=int, default=10, help="epochs to run (default 10)")
    p.add_argument(
        "--root",
        help="directory or URI (file://, s3a://, abfss://, gs://) for the run "
        "(default: a new temporary directory); on a cluster, storage every node reaches",
    )
    add_storage_options(p)
    p.add_argument(
        "--master", help="Spark master URL (default local[2,3]; under spark-submit, spark-submit's)"
    )
    p.add_argument("--remote", metavar="sc://HOST:PORT", help="run through a Spark Connect server instead")
    p.add_argument("--events", type=int, default=4000, help="events per epoch (default 4000)")
    p.add_argument("--queries", type=int, default=60, help="queries per epoch (default 60)")
    p.add_argument("--users", type=int, default=300, help="distinct users (default 300)")
    p.add_argument("--nodes", type=int, default=1500, help="graph nodes (default 1500)")
    p.add_argument("--seed", type=int, default=7, help="seed of the synthetic data (default 7)")
    p.add_argument("--cc-every", type=int, default=3, help="checkpoint interval of cc (default 3)")
    p.add_argument(
        "--cc",
        choices=("unionfind", "propagation"),
        default="unionfind",
        help="cc's algorithm: union–find in one task per epoch (default), or label propagation, "
        "one Spark job per iteration (the iterative step); same outputs",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="N",
        help="step executions at a time (default 1: one after another); docs/spark.md, "
        "'Running steps concurrently'",
    )
    p.add_argument(
        "--no-reference", action="store_true", help="skip the failure-free reference run and the check"
    )
    p.add_argument("--quiet", action="store_true", help="no per-epoch progress and no progress bar")
    p.add_argument(
        "--bar",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a live progress bar of the step executions left (default: when standard error is a terminal)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log each step's start and finish (rows, seconds): the falkirk.spark logger at INFO",
    )
    p.add_argument(
        "--spark-log",
        action="store_true",
        help="let Spark's own console output (log4j banner, startup warnings, stage bars) through; "
        "by default the JVM's console output goes to a log file whose path is printed",
    )
    return p


def _say(quiet: bool) -> Any:
    def say(line: str) -> None:
        if not quiet or not line.startswith(("epoch", "  redo")):
            print(line, flush=True)

    return say


def _session(master: str | None, remote: str | None = None, spark_log: Path | None = None) -> Any:
    """The demo's SparkSession: ``local[2,3]``, the given master, a Connect server, or spark-submit's session.

    ``spark_log``: where the JVM's console output goes (``None``: the terminal).
    """
    from pyspark.sql import SparkSession

    from falkirk.spark.pipeline.run.session import LOCAL_DEFAULTS, local_session, quiet

    if remote is not None:
        return SparkSession.builder.remote(remote).appName("falkirk-demo").getOrCreate()
    if master is None and os.environ.get("PYSPARK_GATEWAY_PORT"):  # launched by spark-submit
        builder = SparkSession.builder.appName("falkirk-demo")
        for key, value in LOCAL_DEFAULTS.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        quiet(spark)
        return spark
    return local_session(
        master or "local[2,3]", "falkirk-demo", console=spark_log is None, console_log=spark_log
    )


def _join(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}" if "://" in root else str(Path(root) / name)


def _picture(plan: Any, path: Path | None, title: str) -> str:
    if path is None:
        return "plan picture skipped (the root is not a local directory)"
    try:
        from falkirk.cli.render import render_plan

        render_plan(plan, str(path), title=title, subtitle="failed: " + ", ".join(sorted(plan.failed)))
    except Exception as exc:  # matplotlib missing, or the renderer changed
        return f"plan picture skipped ({type(exc).__name__}: {exc})"
    return f"plan picture: {path}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; the exit status is 0 when the recovered output is identical to the reference."""
    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.tools.flagship import build
    from falkirk.spark.pipeline.tools.report import format_recovery
    from falkirk.spark.pipeline.tools.verify import compare_runs

    args = parser().parse_args(argv)
    fails = [Injection("cc", 7, "mid")] if args.fail is None else [f for f in args.fail if f is not None]
    root = args.root or tempfile.mkdtemp(prefix="falkirk-demo-")
    storage = {"storage_options": dict(args.storage_options), "storage_timeout": args.storage_timeout}
    top = Root(root, storage_options=storage["storage_options"], timeout=args.storage_timeout)
    size = {
        "events_per_epoch": args.events,
        "queries_per_epoch": args.queries,
        "users": args.users,
        "nodes": args.nodes,
        "seed": args.seed,
        "cc_every": args.cc_every,
        "cc": args.cc,
    }
    t0 = time.perf_counter()
    say = _say(args.quiet)
    if args.verbose:
        logging.basicConfig(format="%(asctime)s %(name)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
        logging.getLogger("falkirk").setLevel(logging.INFO)
    bar = (not args.quiet and sys.stderr.isatty()) if args.bar is None else args.bar
    say(f"falkirk Spark demo: the Figure 1 pipeline (cc by {args.cc}), {args.epochs} epochs, root {root}")
    from falkirk.spark.pipeline.run.session import console_log_path

    spark_log = None if args.spark_log or args.remote else console_log_path("falkirk-demo-spark")
    spark = _session(args.master, args.remote, spark_log)
    say(
        f"Spark {spark.version}, master {spark.conf.get('spark.master', '?')}; "
        f"failures: {', '.join(map(str, fails)) or 'none'}"
    )
    if spark_log is not None and spark_log.exists():
        say(f"Spark's own console output (log4j): {spark_log} (--spark-log shows it here)")
    pipe = build(_join(root, "run"), spark, concurrency=args.concurrency, **storage, **size)
    say(
        "steps: "
        + ", ".join(
            f"{n} ({pipe.steps[n].regime.kind})" if n in pipe.steps else f"{n} (input)" for n in pipe.order
        )
    )
    # with -v the log shows every line the progress callback would print, and more
    result = pipe.run(args.epochs, fail=fails, progress=None if args.verbose else say, bar=bar)
    t_run = time.perf_counter() - t0
    inputs = set(pipe.inputs)
    stateful = [n for n in pipe.steps if not pipe.stateless(n)]
    report = [
        format_recovery(result.journal, r, inputs=inputs, stateful=stateful)
        for r in result.journal.recoveries
    ]
    report += result.journal.notes
    report += [lat.describe() + " (input available → output committed)" for lat in result.latency.values()]
    if result.journal.recoveries:
        first = result.journal.recoveries[0]
        report.append(_picture(first.plan, top.local_path("plan.png"), f"falkirk plan: {first.cause}"))
    say("")
    say("=" * 100)
    say("RECOVERY REPORT" if result.journal.recoveries else "no recovery was needed")
    say("=" * 100)
    text = "\n\n".join(report)
    say(text)
    top.replace("report.txt", (text + "\n").encode())
    say(
        f"\nroot size after the run (GC on): {result.root_bytes / 1e6:.2f} MB; report: {top.local_path('report.txt') or top.describe('report.txt')}"
    )
    status = 0
    if not args.no_reference:
        ref_root = _join(root, "reference")
        top.delete("reference", recursive=True)
        say("\nreference: the same input, no failure, falkirk off (durable=False) …")
        t1 = time.perf_counter()
        ref = build(ref_root, spark, durable=False, **storage, **size)
        ref.run(args.epochs)
        say(f"reference run: {time.perf_counter() - t1:.1f} s")
        cmp = compare_runs(spark, pipe, pipe.location, ref.location)
        for d in cmp.differences:
            say(f"  DIFFERENCE {d.describe()}")
        say(f"compared {cmp.rows_compared} rows (responses and the SQLite database)")
    say(f"demo wall time: {time.perf_counter() - t0:.1f} s (pipeline with recovery: {t_run:.1f} s)")
    if not args.no_reference:
        print(f"recovered output identical to failure-free run: {cmp.identical}", flush=True)
        status = 0 if cmp.identical else 1
    return status


def entry(argv: Sequence[str] | None = None) -> int:
    """:func:`main` as a command: Ctrl-C ends it with falkirk's one line (the root is consistent), status
    130."""
    from falkirk.spark.errors import RunInterrupted

    try:
        return main(argv)
    except RunInterrupted as exc:
        print(f"falkirk demo: {exc}", file=sys.stderr, flush=True)
        return 130
    except KeyboardInterrupt:
        print("falkirk demo: interrupted (Ctrl-C) outside the pipeline run", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(entry())
