"""benchmarks/spark_advisor.py's pooling of several measuring drivers (the Spark runs are the benchmark's)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from benchmarks.spark_advisor import profile_failures, summary


def _run(steady: float, recovery: float, redo_cc: float) -> dict[str, Any]:
    return {"steady": steady, "steady_with_jit": steady + 1, "steady_by_step": {"cc": steady / 2},
            "replay_recompute": recovery / 10, "recovery_cpu": recovery, "recovery_cpu_with_jit": recovery + 1,
            "redo": {"src": 0.0, "cc": redo_cc}}


def test_several_drivers_pool_by_the_median_of_each_drivers_median() -> None:
    """Each number is the median over the drivers of the driver's median over its runs, not the median of all runs
    (an outlying driver counts once, whatever its number of runs); each driver's medians and errors are kept."""
    prediction = SimpleNamespace(recovery=SimpleNamespace(value=2.0, se=0.1), by_step={"src": 0.5, "cc": 1.5})
    costs = SimpleNamespace(unit="cpu", nodes={"cc": SimpleNamespace(compute=0.4)})
    totals = SimpleNamespace(steady=4.0, se={"steady": 0.2})
    groups = [[_run(1, 1, 0.1), _run(2, 2, 0.2), _run(3, 3, 0.3)],
              [_run(10, 10, 1.0), _run(10, 11, 1.1), _run(11, 12, 1.2)],
              [_run(4, 4, 0.4), _run(5, 5, 0.5), _run(6, 6, 0.6)]]
    out = summary(groups, prediction, {"cc": "Lazy(every=3)"}, totals, costs)
    driver_medians = [2, 10, 5]
    assert out["steady"]["measured"] == sorted(driver_medians)[1]
    assert out["recovery"]["measured_cpu"] == 5  # driver medians 2, 11, 5
    assert out["recovery_by_step"]["cc"]["measured_redo"] == pytest.approx(0.5)
    assert out["steady"]["error"] == pytest.approx((5 - 4.0) / 4.0)
    assert out["recovery"]["error"] == pytest.approx((5 - 2.0) / 2.0)
    assert [d["steady"] for d in out["drivers"]] == driver_medians
    assert [d["recovery_cpu_error"] for d in out["drivers"]] == pytest.approx([0.0, 4.5, 1.5])
    assert len(out["steady"]["each"]) == 9 and out["repeats"] == 3
    skewed = [[_run(1, 1, 0), _run(1, 1, 0), _run(1, 1, 0)], [_run(2, 2, 0)], [_run(3, 3, 0)]]
    out = summary(skewed, prediction, {}, totals, costs)
    assert out["steady"]["measured"] == 2  # driver medians 1, 2, 3; the median of all five runs would be 1
    one = summary([groups[1]], prediction, {}, totals, costs)
    assert one["steady"]["measured"] == 10 and "drivers" not in one


def test_profile_failures_spread_over_the_run() -> None:
    assert profile_failures(9, 1) == [3]
    assert profile_failures(9, 3) == [1, 4, 7]
