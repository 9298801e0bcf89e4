"""Benchmark: the recovery schemes side by side on the same workloads and failures (issue 8).

Every scheme registered in :data:`falkirk.sim.schemes.SCHEMES` (falkirk's
mixed per-processor policies, Quokka, Flink unaligned, DBSP's three …) runs
the **same graphs with the same failure schedules and scheduler seeds**; the
scheme only chooses the policies (``Scheme.policy`` with one chooser seed
per workload and scheme). Workloads:

* ``pipeline`` — ``src → map → sum → running total → out``, failing the sum,
  then the source with the output, then the map with the running total;
* ``join`` — two sources through a map and a filter into a buffer (whose
  state grows every epoch), plus a per-epoch sum to a second output, with
  three failures of their own;
* ``random`` — random graphs of :func:`falkirk.sim.cases.build_case`,
  restricted to what every scheme accepts (no loops if one refuses loops,
  and so on), each with its random failure schedule.

Failure steps of the fixed families are fractions of the failure-free run's
length. Each run is measured (``Simulation(measure=True)``, see
:class:`falkirk.sim.Result`) and checked by the oracle
(:func:`falkirk.sim.check_run`); divergences are counted and must be 0:

* **records recomputed** — events executed minus the events of the
  failure-free run with the same choices, plus events replayed from history
  logs: work done again because of failures;
* **checkpoint bytes** — pickled size of the state written (snapshots,
  deltas, a transactional store's write sets);
* **log bytes peak / end** — pickled size of what must be kept for replay:
  logged messages, history logs, and input read but not yet acknowledged
  to its source (DBSP's input log);
* **recovery steps** — per failure, scheduler steps until every processor
  has settled again every time it had settled before the failure.

Run ``python -m benchmarks.schemes`` (or ``--quick``, under a minute); the
same seed always gives the same workloads.
Prints the tables and writes ``benchmarks/results/schemes.json`` and
``benchmarks/results/schemes.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import define, field

from falkirk.sim import (
    Buffer,
    Failure,
    Filter,
    Link,
    Map,
    Node,
    Output,
    RunningTotal,
    SimGraph,
    Simulation,
    Source,
    Sum,
)
from falkirk.sim.cases import Case, RandomChooser, build_case, check_case
from falkirk.sim.policies import Commit, Ephemeral, Never
from falkirk.sim.schemes import SCHEMES, Role, Scheme

RESULTS = Path(__file__).with_name("results")
METRICS = ("recomputed", "checkpoint_bytes", "log_bytes_peak", "log_bytes_end", "recovery_steps")
HEADERS = ("records recomputed", "checkpoint bytes", "log bytes peak", "log bytes end", "recovery steps")


@define
class Workload:
    """A graph (its policies are replaced per scheme), a failure schedule and a scheduler seed."""

    name: str
    family: str
    graph: SimGraph
    failures: list[Failure]
    seed: int


@define
class Run:
    """One scheme on one workload: the oracle's verdict and the measured counters."""

    workload: str
    family: str
    scheme: str
    ok: bool
    problem: str = ""
    metrics: dict[str, int] = field(factory=dict)


def with_scheme(graph: SimGraph, scheme: Scheme, seed: int) -> SimGraph:
    """``graph`` with every processor's policy chosen by ``scheme`` (chooser seed ``seed``)."""
    c = RandomChooser(seed)
    nodes = []
    for node in graph.spec.nodes:
        outs = graph.outputs_of[node.name]
        leaves = any(graph.links[e].transform in ("leave", "sequence") for e in outs)
        role = Role(node.name, node.op, tuple(outs), node.domain, stateless_ok=not leaves and node.domain != "sequence")
        nodes.append(Node(node.name, node.op, scheme.policy(c, role), node.domain))
    return graph.replace(nodes=nodes)


def _plain(nodes: Sequence[tuple[str, Any]], links: Sequence[tuple[str, str]], inputs: dict[str, list[list[int]]]) -> SimGraph:
    """A graph with placeholder policies (every scheme replaces them)."""

    def placeholder(op: Any) -> Any:
        return Commit() if isinstance(op, Output) else Ephemeral() if isinstance(op, Source) else Never()

    return SimGraph(
        [Node(n, op, placeholder(op)) for n, op in nodes],
        [Link(f"e{i}", s, d) for i, (s, d) in enumerate(links)],
        inputs=inputs,
    )


def _batches(epochs: int, per_epoch: int, salt: int) -> list[list[int]]:
    return [[(e * 7 + i * 3 + salt) % 10 for i in range(per_epoch)] for e in range(epochs)]


def families(epochs: int, per_epoch: int) -> list[tuple[str, SimGraph, list[tuple[float, set[str]]]]]:
    """The fixed workload families: ``(name, graph, [(fraction of the run, failed processors)])``."""
    pipeline = _plain(
        [("src", Source()), ("map", Map(mul=3, add=1)), ("sum", Sum()), ("total", RunningTotal()), ("out", Output())],
        [("src", "map"), ("map", "sum"), ("sum", "total"), ("total", "out")],
        {"src": _batches(epochs, per_epoch, 0)},
    )
    join = _plain(
        [("src0", Source()), ("src1", Source()), ("map", Map(mul=2)), ("filter", Filter(mod=3, drop=1)),
         ("buffer", Buffer()), ("sum", Sum()), ("out", Output()), ("out2", Output())],
        [("src0", "map"), ("src1", "filter"), ("map", "buffer"), ("filter", "buffer"), ("buffer", "out"),
         ("src0", "sum"), ("sum", "out2")],
        {"src0": _batches(epochs, per_epoch, 1), "src1": _batches(epochs, per_epoch, 5)},
    )
    return [
        ("pipeline", pipeline, [(0.3, {"sum"}), (0.55, {"src", "out"}), (0.8, {"map", "total"})]),
        ("join", join, [(0.3, {"buffer"}), (0.6, {"src1", "sum"}), (0.85, {"buffer", "out"})]),
    ]


def case_limits() -> dict[str, Any]:
    """The most restrictive ``case_options`` over the registered schemes (random graphs all accept)."""
    out: dict[str, Any] = {"max_ops": 4, "max_failures": 3}
    for s in SCHEMES.values():
        for k in ("loops", "sequences", "nondeterministic"):
            if k in s.case_options and not s.case_options[k]:
                out[k] = False
        for k in ("max_ops", "max_failures"):
            if k in s.case_options:
                out[k] = min(out[k], s.case_options[k])
    return out


def workloads(*, epochs: int, per_epoch: int, random_cases: int, seed: int = 0) -> list[Workload]:
    """Every workload of the comparison (see the module docstring)."""
    out = []
    for name, graph, schedule in families(epochs, per_epoch):
        ref = Simulation(with_scheme(graph, SCHEMES["falkirk"], seed), seed=seed).run()
        fails = [Failure(int(frac * ref.events), procs) for frac, procs in schedule]
        out.append(Workload(name, name, graph, fails, seed))
    limits = case_limits()
    for i in range(random_cases):
        case = build_case(RandomChooser(seed * 1_000_003 + i), **limits)
        out.append(Workload(f"random{i}", "random", case.graph, case.failures, case.seed))
    return out


def measure(w: Workload, scheme: Scheme) -> Run:
    """Run ``scheme`` on ``w``: the oracle's verdict and the measured counters."""
    graph = with_scheme(w.graph, scheme, w.seed)
    verdict = check_case(Case(graph, list(w.failures), w.seed))
    if not verdict.ok or verdict.reference is None:
        return Run(w.name, w.family, scheme.name, False, verdict.problem)
    r = Simulation(graph, seed=w.seed, failures=w.failures, measure=True).run()
    metrics = {
        "recomputed": r.events - verdict.reference.events + r.replayed,
        "checkpoint_bytes": r.checkpoint_bytes,
        "log_bytes_peak": r.log_bytes_peak,
        "log_bytes_end": r.log_bytes_end,
        "recovery_steps": r.recovery_steps,
        "events": r.events,
        "checkpoints": r.checkpoints,
        "rollbacks": r.rollbacks,
    }
    return Run(w.name, w.family, scheme.name, True, metrics=metrics)


def totals(runs: list[Run], schemes: list[str], family: str | None = None) -> dict[str, dict[str, int]]:
    """Per scheme: runs, divergences and the sum of each metric (over ``family``, or all)."""
    out = {}
    for s in schemes:
        rs = [r for r in runs if r.scheme == s and (family is None or r.family == family)]
        row = {"runs": len(rs), "divergences": sum(not r.ok for r in rs)}
        for m in METRICS:
            row[m] = sum(r.metrics.get(m, 0) for r in rs)
        out[s] = row
    return out


def table(rows: dict[str, dict[str, int]]) -> str:
    """A markdown table of :func:`totals`."""
    head = "| scheme | runs | divergences | " + " | ".join(HEADERS) + " |"
    lines = [head, "|" + "---|" * (3 + len(HEADERS))]
    for s, row in rows.items():
        lines.append(f"| {s} | {row['runs']} | {row['divergences']} | " + " | ".join(f"{row[m]:,}" for m in METRICS) + " |")
    return "\n".join(lines)


QUICK = {"epochs": 6, "per_epoch": 3, "random_cases": 25}
FULL = {"epochs": 16, "per_epoch": 6, "random_cases": 150}


def compare(*, quick: bool = False, seed: int = 0, size: dict[str, int] | None = None, out: Any = None) -> dict[str, Any]:
    """Run the comparison; print the tables to ``out``; return the JSON document.

    ``size`` overrides the workload sizes (``epochs``, ``per_epoch``, ``random_cases``).
    """
    out = sys.stdout if out is None else out
    size = dict(size or (QUICK if quick else FULL))
    start = time.process_time()
    ws = workloads(seed=seed, **size)
    names = list(SCHEMES)
    runs = [measure(w, SCHEMES[s]) for w in ws for s in names]
    doc: dict[str, Any] = {
        "format": "falkirk-schemes-benchmark/1",
        "config": {"quick": quick, "seed": seed, **size, "case_limits": case_limits()},
        "schemes": {s: SCHEMES[s].title for s in names},
        "tables": {fam: totals(runs, names, fam) for fam in ("pipeline", "join", "random")},
        "total": totals(runs, names),
        "runs": [
            {"workload": r.workload, "scheme": r.scheme, "ok": r.ok, **({"problem": r.problem} if r.problem else {}), **r.metrics}
            for r in runs
        ],
        "cpu_seconds": round(time.process_time() - start, 1),
    }
    print(markdown(doc), file=out)
    return doc


def markdown(doc: dict[str, Any]) -> str:
    """The tables of a :func:`compare` document as markdown."""
    cfg = doc["config"]
    parts = [
        "# Recovery schemes compared (simulator)",
        "",
        f"Same workloads and failure schedules for every scheme; {cfg['epochs']} epochs × {cfg['per_epoch']} "
        f"records in the fixed families, {cfg['random_cases']} random graphs (options {cfg['case_limits']}); "
        f"seed {cfg['seed']}; {doc['cpu_seconds']} s CPU. Produced by `python -m benchmarks.schemes"
        f"{' --quick' if cfg['quick'] else ''}`; metric definitions in `benchmarks/schemes.py`.",
    ]
    for fam, rows in [*doc["tables"].items(), ("all workloads", doc["total"])]:
        parts += ["", f"## {fam}", "", table(rows)]
    return "\n".join(parts) + "\n"


def dumps(doc: dict[str, Any]) -> str:
    """``doc`` as JSON, indented, with one line per run."""
    head = json.dumps({k: v for k, v in doc.items() if k != "runs"}, indent=1)
    runs = ",\n  ".join(json.dumps(r, separators=(",", ":")) for r in doc["runs"])
    return head[:-2] + ',\n "runs": [\n  ' + runs + "\n ]\n}\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: run, print, write the results; exit 1 on any divergence."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.schemes", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small workloads (under a minute)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the workloads (default 0)")
    ap.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/schemes.{json,md}")
    args = ap.parse_args(argv)
    doc = compare(quick=args.quick, seed=args.seed)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "schemes.json").write_text(dumps(doc))
        (RESULTS / "schemes.md").write_text(markdown(doc))
    bad = doc["total"]
    diverged = sum(row["divergences"] for row in bad.values())
    print(f"{len(doc['runs'])} runs, {diverged} divergences")
    return 1 if diverged else 0


if __name__ == "__main__":
    sys.exit(main())
