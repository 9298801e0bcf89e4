"""The partial-order benchmark family (benchmarks/graphs.py: product_loops) and its loop projections."""

from __future__ import annotations

import itertools

import pytest
from benchmarks.graphs import FEEDBACK, LOOP_EXIT, make, product_loops
from benchmarks.solver import partial_orders

from falkirk.domains import Epoch, Frontier, Product
from falkirk.solver import check_consistent, solve_frontiers

LOOP, EPOCH = Product(2), Epoch()
FEED = FEEDBACK.bind(LOOP, LOOP, "fb")
EXIT = LOOP_EXIT.bind(LOOP, EPOCH, "out")


def _loop_frontiers() -> list[Frontier]:
    """Small product(2) frontiers: ⊤, ∅ and every antichain of up to two times below (3, 3)."""
    times = list(itertools.product(range(3), range(3)))
    out = [Frontier.top(LOOP), Frontier.empty(LOOP)]
    out += [Frontier.before(LOOP, [t]) for t in times]
    out += [Frontier.before(LOOP, [a, b]) for a, b in itertools.combinations(times, 2)]
    return out


def test_product_loops_shape() -> None:
    """Blocks of epoch processors then a product(2) loop body: one way in, one feedback, one way out per block."""
    g = product_loops(40, length=3, between=2, seed=1)
    assert (g.n, g.domain) == (40, "loop")
    assert g.inner is not None and g.kind is not None
    assert g.inner.tolist()[:5] == [False, False, True, True, True]
    assert [g.kind.tolist().count(k) for k in range(4)] == [8 * 1 + 8 * 2, 8, 8, 7]
    df = g.dataflow()
    assert (len(df.processors), len(df.edges)) == (g.n, g.m)
    assert {str(df.domains[p]) for p in df.processors} == {"epoch", "product(2)"}
    assert {b.spec.name for b in df.bound.values()} == {"identity", "epoch_to_loop", "feedback", "loop_exit"}
    chains = [df.candidates(p, failed=True) for p in df.processors if not df.processors[p].stateless]
    assert any(len(m.frontier.antichain) == 2 for c in chains for m in c)  # (epoch, iteration) frontiers
    with pytest.raises(ValueError, match="fixes the domains"):
        make("product_loops", 20, domain="sequence")


@pytest.mark.parametrize("seed", range(4))
def test_worklist_and_round_robin_agree_on_product_loops(seed: int) -> None:
    """Both strategies return the same consistent plan on small product_loops graphs, some of it rolled back."""
    g = make("product_loops", 60, seed=seed, failures=2, checkpoints=(1, 6))
    df, failed = g.dataflow(), g.failed_names()
    wl = solve_frontiers(df, failed, strategy="worklist")
    rr = solve_frontiers(df, failed, strategy="round_robin")
    assert wl.frontiers == rr.frontiers
    assert wl.notification_frontiers == rr.notification_frontiers
    assert (
        check_consistent(df, wl.frontiers, failed=failed, notification_frontiers=wl.notification_frontiers)
        == []
    )
    assert any(not f.is_top for f in wl.frontiers.values())


@pytest.mark.parametrize("f", _loop_frontiers(), ids=str)
def test_feedback_and_exit_residuals_are_galois_adjoints(f: Frontier) -> None:
    """φ(f) ⊆ y iff f ⊆ φ⁺(y) for the feedback and exit projections (the residual C2 needs)."""
    for y in _loop_frontiers():
        back = FEED.residual(y)
        assert back is not None and (FEED.apply(f) <= y) == (f <= back)
    for k in [None, -1, 0, 1, 2, 3]:
        y = Frontier.top(EPOCH) if k is None else EPOCH.frontier(k)
        back = EXIT.residual(y)
        assert back is not None and (EXIT.apply(f) <= y) == (f <= back)


def test_feedback_advances_the_iteration() -> None:
    """The feedback image of 'iterations below 2' is 'iterations below 3'; the exit keeps epochs with a time."""
    below = Frontier.before(LOOP, [(0, 2)])
    assert FEED.apply(below) == Frontier.before(LOOP, [(0, 3)])
    assert EXIT.apply(Frontier.before(LOOP, [(1, 2), (2, 0)])) == EPOCH.frontier(1)
    assert EXIT.apply(below) == Frontier.top(EPOCH)


def test_partial_orders_section_reports_checks() -> None:
    """Section 7 of benchmarks/solver.py times both strategies and reports the worklist's constraint checks."""
    (row,) = partial_orders([30], budget=5.0)
    assert row["round_robin_complete"] and row["worklist_checks"] > 0
    assert row["us_per_check"] > 0 and row["ratio"] > 0
    assert row["worklist_examinations"] <= row["worklist_checks"]
