"""Fuzz the rollback machinery end to end: ``python -m falkirk.testing.fuzz --cases N --seed S``.

Each case is a random simulator graph with a policy mix, a failure schedule
and a scheduler seed (:func:`falkirk.sim.cases.build_case`, case ``i`` drawn
from ``random.Random(S * 1000003 + i)``); it diverges when the oracle
(:func:`falkirk.sim.check_run`) rejects it or the simulator crashes. The
command prints progress, ends with ``N cases, K divergences`` and, when
``K > 0``, the first divergent case shrunk to a small readable
counterexample with the rollback plans of its run. Exit status 1 if any case
diverged.

``--broken`` mixes in the deliberately wrong ``WrongLog`` policy (it claims
to log edges it does not log), to see the fuzzer catch it. ``--planner``
picks where rollback plans and low-watermarks come from: the incremental
``monitor`` (default) or the reference ``solver``. ``--scheme`` fuzzes one
of the seeds' recovery schemes (:mod:`falkirk.sim.schemes`) instead of
falkirk's own policy mix. ``--schedule pipelined`` runs every case with the
pipelined schedule (a window drawn per case, up to ``--max-window``), ``any``
draws the schedule per case (:mod:`falkirk.sim.schedule`).

>>> import io
>>> buf = io.StringIO()
>>> report = fuzz(20, seed=1, out=buf)
>>> buf.getvalue().splitlines()[-1]
'20 cases, 0 divergences'
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from attrs import define, field

from falkirk.sim import SimGraph, Simulation
from falkirk.sim.cases import Case, RandomChooser, build_case, check_case
from falkirk.sim.planner import PLANNERS, Planner
from falkirk.sim.schedule import SCHEDULES
from falkirk.sim.schemes import SCHEMES
from falkirk.sim.shrink import shrink

__all__ = ["FuzzReport", "case_for", "fuzz", "main"]


@define
class FuzzReport:
    """How many cases ran, which diverged, and the shrunk first counterexample."""

    cases: int
    divergent: list[int] = field(factory=list)
    first: Case | None = None
    problem: str = ""
    seconds: float = 0.0


def case_for(seed: int, i: int, **options: Any) -> Case:
    """Case ``i`` of the fuzz run with seed ``seed``."""
    return build_case(RandomChooser(seed * 1_000_003 + i), **options)


def _problem(case: Case, planner: Callable[[SimGraph], Planner] | None = None) -> str | None:
    """The oracle's complaint about ``case`` (``None`` if it recovers correctly)."""
    try:
        verdict = check_case(case, planner=planner)
    except Exception as exc:  # a crash is a finding too
        return f"crash: {type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc(limit=4))
    return None if verdict.ok else verdict.problem


def _plans(case: Case, planner: Callable[[SimGraph], Planner] | None) -> list[str]:
    try:
        sim = Simulation(
            case.graph,
            seed=case.seed,
            failures=case.failures,
            trace=True,
            planner=None if planner is None else planner(case.graph),
            schedule=case.schedule,
            window=case.window,
        )
        return sim.run().trace
    except Exception as exc:
        return [f"(the run raised {type(exc).__name__}: {exc})"]


def fuzz(
    cases: int,
    *,
    seed: int = 0,
    out: TextIO | None = None,
    quiet: bool = False,
    shrink_first: bool = True,
    planner: Callable[[SimGraph], Planner] | None = None,
    bar: bool = False,
    **options: Any,
) -> FuzzReport:
    """Run ``cases`` cases; print progress and the summary line to ``out`` (default stdout).

    ``planner`` builds the planner under test (default: the monitor);
    ``bar``: a live tqdm bar on stderr instead of the progress lines;
    ``options`` go to :func:`~falkirk.sim.cases.build_case` (``max_ops``,
    ``loops``, ``sequences``, ``nondeterministic``, ``max_failures``, ``broken``, ``scheme``,
    ``final``, ``schedule``, ``max_window``).
    """
    out = sys.stdout if out is None else out
    report = FuzzReport(cases)
    start = time.perf_counter()
    every = max(cases // 10, 1)
    progress: Any = None
    if bar and not quiet:
        from tqdm.auto import tqdm

        progress = tqdm(total=cases, unit="case", desc="fuzz", dynamic_ncols=True)
    for i in range(cases):
        case = case_for(seed, i, **options)
        problem = _problem(case, planner)
        if problem is not None:
            report.divergent.append(i)
            if report.first is None:
                report.first, report.problem = case, problem
        if progress is not None:
            progress.update(1)
            if problem is not None:
                progress.set_postfix(divergences=len(report.divergent))
        elif not quiet and (i + 1) % every == 0 and i + 1 < cases:
            print(
                f"fuzz: {i + 1}/{cases} cases, {len(report.divergent)} divergences, "
                f"{time.perf_counter() - start:.1f} s",
                file=out,
                flush=True,
            )
    report.seconds = time.perf_counter() - start
    if progress is not None:
        progress.close()
    if report.first is not None:
        first = report.first
        if shrink_first:
            first = shrink(first, lambda c: _problem(c, planner) is not None)
            report.first, report.problem = first, _problem(first, planner) or report.problem
        print(
            f"\nfirst divergent case: #{report.divergent[0]} (of {len(report.divergent)}); "
            f"{'shrunk ' if shrink_first else ''}counterexample:",
            file=out,
        )
        print(first.describe(), file=out)
        print(f"problem: {report.problem}", file=out)
        print("rollbacks:", file=out)
        for line in _plans(first, planner):
            print(f"  {line}", file=out)
        print(file=out)
    print(f"{cases} cases, {len(report.divergent)} divergences", file=out, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m falkirk.testing.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000, help="number of cases (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the whole run (default 0)")
    ap.add_argument(
        "--max-ops", type=int, default=4, help="operators per graph besides sources/outputs (default 4)"
    )
    ap.add_argument("--max-failures", type=int, default=3, help="failures per case (default 3)")
    ap.add_argument("--no-loops", action="store_true", help="no loops")
    ap.add_argument("--no-sequences", action="store_true", help="no sequence-domain tails")
    ap.add_argument("--deterministic", action="store_true", help="no non-deterministic operators")
    ap.add_argument("--broken", action="store_true", help="mix in the deliberately wrong WrongLog policy")
    ap.add_argument("--no-shrink", action="store_true", help="print the first divergent case as drawn")
    ap.add_argument(
        "--scheme",
        choices=sorted(SCHEMES),
        default="falkirk",
        help="recovery scheme choosing every processor's policy (default falkirk's mix)",
    )
    ap.add_argument(
        "--planner",
        choices=sorted(PLANNERS),
        default="monitor",
        help="where plans come from (default monitor)",
    )
    ap.add_argument(
        "--schedule",
        choices=[*SCHEDULES, "any"],
        default="sequential",
        help="the schedule of every case, or any (drawn per case; default sequential)",
    )
    ap.add_argument(
        "--max-window", type=int, default=3, help="largest window of a pipelined case (default 3)"
    )
    ap.add_argument("--no-final", action="store_true", help="no final-commit outputs")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    ap.add_argument(
        "--bar",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a live progress bar instead of progress lines (default: when standard error is a terminal)",
    )
    args = ap.parse_args(argv)
    if args.cases < 0 or args.max_ops < 1 or args.max_failures < 0 or args.max_window < 1:
        ap.error("--cases and --max-failures must be >= 0, --max-ops and --max-window >= 1")
    report = fuzz(
        args.cases,
        seed=args.seed,
        quiet=args.quiet,
        bar=sys.stderr.isatty() if args.bar is None else args.bar,
        shrink_first=not args.no_shrink,
        planner=PLANNERS[args.planner],
        max_ops=args.max_ops,
        max_failures=args.max_failures,
        loops=not args.no_loops,
        sequences=not args.no_sequences,
        nondeterministic=not args.deterministic,
        broken=args.broken,
        scheme=None if args.scheme == "falkirk" else SCHEMES[args.scheme],
        final=not args.no_final,
        schedule=None if args.schedule == "any" else args.schedule,
        max_window=args.max_window,
    )
    return 1 if report.divergent else 0


if __name__ == "__main__":
    sys.exit(main())
