"""``python -m falkirk.spark.demo``: the flagship pipeline with an injected failure, then the recovery report.

Runs :mod:`falkirk.spark.pipeline.flagship` for ``--epochs`` epochs under
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

>>> args = parser().parse_args(["--fail", "cc@3:before", "--epochs", "5"])
>>> [str(f) for f in args.fail], args.epochs
(['cc@3:before'], 5)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from falkirk.spark.pipeline.failures import Injection

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
    p.add_argument("--fail", action="append", type=_failure, metavar="STEP@EPOCH[:WHERE]",
                   help="inject a failure (repeatable); WHERE: before, mid (default), task, job, kill, "
                   "kill-mid. Default: cc@7:mid. Use --fail none for a failure-free run")
    p.add_argument("--epochs", type=int, default=10, help="epochs to run (default 10)")
    p.add_argument("--root", type=Path, help="directory for the run (default: a new temporary directory)")
    p.add_argument("--events", type=int, default=4000, help="events per epoch (default 4000)")
    p.add_argument("--queries", type=int, default=60, help="queries per epoch (default 60)")
    p.add_argument("--users", type=int, default=300, help="distinct users (default 300)")
    p.add_argument("--nodes", type=int, default=1500, help="graph nodes (default 1500)")
    p.add_argument("--seed", type=int, default=7, help="seed of the synthetic data (default 7)")
    p.add_argument("--cc-every", type=int, default=3, help="checkpoint interval of cc (default 3)")
    p.add_argument("--no-reference", action="store_true", help="skip the failure-free reference run and the check")
    p.add_argument("--quiet", action="store_true", help="no per-epoch progress")
    return p


def _say(quiet: bool) -> Any:
    def say(line: str) -> None:
        if not quiet or not line.startswith(("epoch", "  redo")):
            print(line, flush=True)

    return say


def _picture(plan: Any, path: Path, title: str) -> str:
    try:
        from falkirk.cli._render import render_plan

        render_plan(plan, str(path), title=title, subtitle="failed: " + ", ".join(sorted(plan.failed)))
    except Exception as exc:  # matplotlib missing, or the renderer changed
        return f"plan picture skipped ({type(exc).__name__}: {exc})"
    return f"plan picture: {path}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; the exit status is 0 when the recovered output is identical to the reference."""
    from falkirk.spark.pipeline.flagship import build
    from falkirk.spark.pipeline.report import format_recovery
    from falkirk.spark.pipeline.session import local_session
    from falkirk.spark.pipeline.verify import compare_runs

    args = parser().parse_args(argv)
    fails = [Injection("cc", 7, "mid")] if args.fail is None else [f for f in args.fail if f is not None]
    root = args.root or Path(tempfile.mkdtemp(prefix="falkirk-demo-"))
    size = {"events_per_epoch": args.events, "queries_per_epoch": args.queries, "users": args.users,
            "nodes": args.nodes, "seed": args.seed, "cc_every": args.cc_every}
    t0 = time.perf_counter()
    say = _say(args.quiet)
    say(f"falkirk Spark demo: the Figure 1 pipeline, {args.epochs} epochs, root {root}")
    spark = local_session()
    say(f"Spark {spark.version}, master {spark.sparkContext.master}; failures: {', '.join(map(str, fails)) or 'none'}")
    pipe = build(root / "run", spark, **size)
    say("steps: " + ", ".join(f"{n} ({pipe.steps[n].regime.kind})" if n in pipe.steps else f"{n} (input)"
                               for n in pipe.order))
    result = pipe.run(args.epochs, fail=fails, progress=say)
    t_run = time.perf_counter() - t0
    inputs = set(pipe.inputs)
    stateful = [n for n in pipe.steps if not pipe.stateless(n)]
    report = [format_recovery(result.journal, r, inputs=inputs, stateful=stateful) for r in result.journal.recoveries]
    report += result.journal.notes
    if result.journal.recoveries:
        first = result.journal.recoveries[0]
        report.append(_picture(first.plan, root / "plan.png", f"falkirk plan: {first.cause}"))
    say("")
    say("=" * 100)
    say("RECOVERY REPORT" if result.journal.recoveries else "no recovery was needed")
    say("=" * 100)
    text = "\n\n".join(report)
    say(text)
    (root / "report.txt").write_text(text + "\n", encoding="utf-8")
    say(f"\nroot size after the run (GC on): {result.root_bytes / 1e6:.2f} MB; report: {root / 'report.txt'}")
    status = 0
    if not args.no_reference:
        ref_root = root / "reference"
        shutil.rmtree(ref_root, ignore_errors=True)
        say("\nreference: the same input, no failure, falkirk off (durable=False) …")
        t1 = time.perf_counter()
        ref = build(ref_root, spark, durable=False, **size)
        ref.run(args.epochs)
        say(f"reference run: {time.perf_counter() - t1:.1f} s")
        cmp = compare_runs(spark, pipe, root / "run", ref_root)
        for d in cmp.differences:
            say(f"  DIFFERENCE {d.describe()}")
        say(f"compared {cmp.rows_compared} rows (responses and the SQLite database)")
    say(f"demo wall time: {time.perf_counter() - t0:.1f} s (pipeline with recovery: {t_run:.1f} s)")
    if not args.no_reference:
        print(f"recovered output identical to failure-free run: {cmp.identical}", flush=True)
        status = 0 if cmp.identical else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
