"""benchmarks/advisor.py: a 50-step pipeline is advised by the heuristic search (its time is printed, not asserted)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from benchmarks.advisor import main, synthetic  # noqa: E402

from falkirk.spark.pipeline.plan.advising import advise  # noqa: E402


def test_fifty_steps_are_advised(capsys: pytest.CaptureFixture[str]) -> None:
    """50 steps: coordinate descent from Young's spacings, never worse than the current regimes."""
    pipe, costs = synthetic(50)
    assert len(pipe.steps) == 50
    advice = advise(pipe, costs, 0.01)
    assert "coordinate descent" in advice.search
    assert advice.advised.total <= advice.current.total
    main([8])
    assert "8 steps, seed 7, rate 0.01: advise" in capsys.readouterr().out
