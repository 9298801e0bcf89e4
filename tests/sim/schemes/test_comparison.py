"""The scheme comparison (benchmarks/schemes.py) at tiny size, and the simulator's cost counters."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from falkirk.sim import (
    Commit,
    Ephemeral,
    Failure,
    Lazy,
    Link,
    Node,
    Output,
    SimGraph,
    Simulation,
    Source,
    Sum,
    check_run,
)
from falkirk.sim.schemes import SCHEMES

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "schemes.py"
TINY = {"epochs": 3, "per_epoch": 2, "random_cases": 3}


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """benchmarks/schemes.py, imported from its path."""
    spec = importlib.util.spec_from_file_location("falkirk_bench_schemes", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def doc(bench: ModuleType) -> dict:
    """The comparison document of a tiny run."""
    return bench.compare(size=TINY, out=io.StringIO())


def test_every_registered_scheme_runs_every_workload_without_divergence(doc: dict) -> None:
    """Each scheme in SCHEMES runs the 2 fixed families + the random graphs, and the oracle accepts all."""
    assert set(doc["schemes"]) == set(SCHEMES)
    for name, row in doc["total"].items():
        assert row["runs"] == 2 + TINY["random_cases"], name
        assert row["divergences"] == 0, [r["problem"] for r in doc["runs"] if not r["ok"]]
    assert json.loads(json.dumps(doc)) == doc


def test_the_numbers_reflect_what_each_scheme_does(doc: dict) -> None:
    """Input logging writes no state and never releases its input log; counters are never negative."""
    total = doc["total"]
    assert total["dbsp-input-log"]["checkpoint_bytes"] == 0
    assert total["dbsp-input-log"]["log_bytes_end"] > 0
    assert total["dbsp-checkpoint-delta"]["checkpoint_bytes"] > 0
    assert total["dbsp-persistent"]["checkpoint_bytes"] > 0
    for run in doc["runs"]:
        assert all(run[m] >= 0 for m in ("recomputed", "checkpoint_bytes", "log_bytes_peak", "recovery_steps"))
        assert run["log_bytes_peak"] >= run["log_bytes_end"]


def test_markdown_has_one_table_per_family(bench: ModuleType, doc: dict) -> None:
    """The markdown summary lists every scheme in each family's table and in the total."""
    text = bench.markdown(doc)
    assert text.count("| scheme | runs | divergences |") == 4
    for name in SCHEMES:
        assert text.count(f"| {name} |") == 4


def test_schemes_only_change_the_policies(bench: ModuleType) -> None:
    """with_scheme keeps the graph (processors, operators, edges, inputs) and only swaps policies."""
    w = bench.workloads(epochs=2, per_epoch=1, random_cases=1)[-1]
    for scheme in SCHEMES.values():
        g = bench.with_scheme(w.graph, scheme, 0)
        assert [(n.name, repr(n.op), n.domain) for n in g.spec.nodes] == [
            (n.name, repr(n.op), n.domain) for n in w.graph.spec.nodes
        ]
        assert g.spec.links == w.graph.spec.links and g.inputs == w.graph.inputs


def _graph() -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("sum", Sum(), Lazy(logs=["e2"])), Node("out", Output(), Commit())],
        [Link("e1", "src", "sum"), Link("e2", "sum", "out")],
        inputs={"src": [[1, 2], [3], [4]]},
    )


def test_counters_without_failures() -> None:
    """A failure-free measured run recomputes nothing, needs no recovery, and logs only while unacknowledged."""
    r = Simulation(_graph(), seed=1, measure=True).run()
    plain = Simulation(_graph(), seed=1).run()
    assert r.output == plain.output and r.events == plain.events == r.steps
    assert r.recovery_steps == 0 and r.replayed == 0
    assert r.checkpoint_bytes > 0 and r.log_bytes_peak > 0
    assert plain.checkpoint_bytes == plain.log_bytes_peak == 0  # only measured when asked


def test_counters_with_a_failure() -> None:
    """A failure makes the run re-execute events and take recovery steps; the oracle still agrees."""
    verdict = check_run(_graph(), [Failure(6, {"sum"})], seed=1)
    assert verdict.ok and verdict.result is not None and verdict.reference is not None
    r = Simulation(_graph(), seed=1, failures=[Failure(6, {"sum"})], measure=True).run()
    assert r.events == verdict.result.events > verdict.reference.events
    assert r.recovery_steps > 0
