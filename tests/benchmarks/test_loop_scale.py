"""Smoke test of the loop-job benchmark (benchmarks/loops.py) and of product_loops in array form."""

from __future__ import annotations

import pytest
from benchmarks.graphs import make
from benchmarks.loops import CONSTRUCTORS, FAMILIES, one, run

from falkirk.solver import solve_frontiers


@pytest.mark.parametrize("seed", range(3))
def test_product_loops_from_arrays_solve_as_the_objects(seed: int) -> None:
    """Graph.from_arrays of a loop graph (rows, domains, projections) gives the objects' plan, on the loop path."""
    g = make("product_loops", 1200, seed=seed, failures=1 + seed)
    df = g.from_arrays()
    assert df.table.lex_plain and len(df.processors) == g.n and len(df.edges) == g.m
    got = solve_frontiers(df, g.failed_names())
    want = solve_frontiers(g.dataflow(), g.failed_names(), strategy="worklist")
    assert type(got.frontiers).__name__ == "ValueFrontiers"  # the vectorised loop path ran
    assert got.to_json() == want.to_json() and any(a != "keep" for a in got.actions.values())


def test_every_case_runs_and_both_constructors_give_the_same_plan() -> None:
    """At 300 processors each family and constructor reports its times and RSS; the constructors agree."""
    rows = {(label, c): one(label, c, 300) for label, _, _ in FAMILIES for c in CONSTRUCTORS}
    assert all(r["peak_rss_mb"] > 0 and r["total_cpu_s"] >= r["solve_cpu_s"] for r in rows.values())
    for label, _, _ in FAMILIES:
        assert rows[label, "objects"]["check"] == rows[label, "arrays"]["check"]
        assert rows[label, "objects"]["objects_cpu_s"] <= rows[label, "objects"]["build_cpu_s"]


def test_repeated_runs_keep_the_least_total_and_a_ratio_to_random_dag() -> None:
    """With repeat=2 every case runs twice in fresh interpreters, keeps its least total and is compared to random_dag."""
    rows = run([200], repeat=2)
    assert len(rows) == len(FAMILIES) * len(CONSTRUCTORS)
    for r in rows:
        assert len(r["runs_total_cpu_s"]) == 2 and r["total_cpu_s"] == min(r["runs_total_cpu_s"])
        assert r["ratio_to_random_dag"] > 0
    assert {r["ratio_to_random_dag"] for r in rows if r["family"].startswith("random_dag")} == {1.0}
