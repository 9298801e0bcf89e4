"""Smoke tests of the benchmark graph families (benchmarks/graphs.py)."""

from __future__ import annotations

import numpy as np
import pytest
from benchmarks.graphs import FAMILIES, make

from falkirk.solver import solve_frontiers
from falkirk.solver.vectorised.engine import solve_total


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("domain", ["epoch", "sequence"])
def test_family_builds_a_valid_dataflow(family: str, domain: str) -> None:
    """Every family, in both domains, yields a Dataflow of the announced size that the solver accepts."""
    g = make(family, 40, seed=3, domain=domain, checkpoints=(1, 5))
    df = g.dataflow()
    assert (len(df.processors), len(df.edges)) == (g.n, g.m)
    plan = solve_frontiers(df, g.failed_names(), strategy="worklist")
    assert set(plan.frontiers) == set(df.processors)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_array_form_matches_dataflow(family: str) -> None:
    """The direct array form of an epoch graph solves to the same epochs as its Dataflow."""
    for seed in range(3):
        g = make(family, 30, seed=seed, failures=2, checkpoints=(1, 8))
        plan = solve_frontiers(g.dataflow(), g.failed_names(), strategy="round_robin").to_json()
        prob = g.problem()
        got = [("empty" if x == -1 else x) for x in prob.epochs(solve_total(prob).f)]
        assert got == [plan["frontiers"][g.name(p)] for p in range(g.n)]


def test_family_options_are_honoured() -> None:
    """Checkpoint counts stay in range, failures and the stateless fraction are drawn as asked."""
    g = make("random_dag", 500, seed=1, checkpoints=(2, 4), stateless=0.0, failures=5)
    counts = np.diff(g.ck_ptr)
    assert counts.min() >= 1 and counts.max() <= 4  # duplicates drawn may merge (at least one left)
    assert not g.stateless.any() and g.failed.sum() == 5
    assert make("shuffle", 64, width=8).m == 7 * 64
    with pytest.raises(ValueError, match="unknown family"):
        make("star", 10)
