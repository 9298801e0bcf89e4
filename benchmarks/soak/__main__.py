"""``python -m benchmarks.soak``: run (or resume) a soak, then write its report.

    python -m benchmarks.soak --variant local --epochs 2000 --seed 58 --work /var/tmp/falkirk-soak-local
    python -m benchmarks.soak --report-only --work /var/tmp/falkirk-soak-local

The work directory holds the event log (``events.jsonl``), the drivers' specs and logs, the backups of
damaged files and (local, cluster) the copy of the root a resumed soak starts from. Running the same command
again resumes. The report goes to ``benchmarks/results/soak_<variant>.json`` (and ``.png``) unless ``--out``.
Needs root and ``unshare``: the local and cluster roots live on a tmpfs, the S3 variant's executors reach the
bucket through a FUSE mount, both in the soak's own mount namespace.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from benchmarks.soak import report
from benchmarks.soak.log import EventLog
from benchmarks.soak.schedule import schedule

RESULTS = Path(__file__).resolve().parents[1] / "results"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n")[0])
    ap.add_argument("--variant", choices=("local", "cluster", "s3"), default="local")
    ap.add_argument("--epochs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=58)
    ap.add_argument("--work", type=Path, default=None, help="default: /var/tmp/falkirk-soak-<variant>-<seed>")
    ap.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/soak_<variant>.json")
    ap.add_argument("--every", type=float, default=None, help="one fault every EVERY epochs on average (default 7)")
    ap.add_argument("--slices", default="10,120", help="MIN,MAX epochs of a driver slice (default 10,120)")
    ap.add_argument("--quiet", type=int, default=3, help="no fault before this epoch (default 3)")
    ap.add_argument("--live-heap", type=int, default=0, metavar="N",
                    help="every N epochs a driver forces a full JVM collection and reports the heap left live "
                         "(changes the memory behaviour measured: for a run about memory only; default never)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for every driver's session, over the variant's (repeatable; e.g. "
                         "spark.driver.memory=512m); recorded in the event log, and a resume must give the same")
    ap.add_argument("--report-only", action="store_true", help="write the report from the event log, run nothing")
    ap.add_argument("--no-bar", action="store_true")
    args = ap.parse_args(argv)
    bad = [c for c in args.conf if "=" not in c or not c.split("=", 1)[0].strip()]
    if bad:
        ap.error(f"--conf takes KEY=VALUE, not {bad[0]!r}")
    conf = dict(c.split("=", 1) for c in args.conf)
    work = (args.work or Path(f"/var/tmp/falkirk-soak-{args.variant}-{args.seed}")).resolve()
    out = args.out or RESULTS / f"soak_{args.variant}.json"
    if not args.report_only:
        from benchmarks.soak.variants import enter_private_namespace

        enter_private_namespace(["-m", "benchmarks.soak", *argv])  # its tmpfs or FUSE mount dies with it
        from benchmarks.soak.supervisor import Supervisor
        from benchmarks.soak.variants import make_env

        work.mkdir(parents=True, exist_ok=True)
        env = make_env(args.variant, work)
        lo, hi = (int(x) for x in args.slices.split(","))
        slices = schedule(args.epochs, args.seed, args.variant, quiet=args.quiet, slice_epochs=(lo, hi),
                          **({"every": args.every} if args.every else {}))
        # `kill PID` stops the soak as Ctrl-C does: the driver, the cluster or storage server stopped, resumable
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            Supervisor(env, args.epochs, args.seed, work, slices=slices, bar=not args.no_bar,
                       live_heap=args.live_heap, conf=conf).run()
        except KeyboardInterrupt:
            print(f"\nsoak stopped; the same command resumes ({work})", file=sys.stderr)
    summary = report.write(EventLog(work / "events.jsonl").events(), out)
    print(report.text(summary))
    print(f"report: {out}")
    return 0 if summary["silent_losses"] == 0 and summary["unexplained"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
