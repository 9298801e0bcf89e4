"""benchmarks/advisor_check.py without Spark: the pipelines it checks (built in, or plugged in by name), the
predictions and advice it compares, the report (the Spark runs are the benchmark's)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from benchmarks.advisor_check import (
    DECLARED,
    Target,
    advice_of,
    error,
    inside,
    predictions,
    report,
    score,
    target,
)

from falkirk.spark import Costs, NodeCosts


def _costs(pipe: object, factor: float = 1.0) -> Costs:
    names = pipe.order  # type: ignore[attr-defined]
    return Costs({n: NodeCosts(compute=0.2 * factor, state_write=0.1, state_read=0.1, log_write=0.1, log_read=0.05)
                  for n in names}, restart=2.0 * factor, restart_parts={"cold": 1.0 * factor, "session": 1.0 * factor})


@pytest.mark.parametrize("name", ["flagship", "w4"])
def test_built_in_pipelines_are_priced_from_profiles(name: str) -> None:
    """Each built-in target declares its pipeline without Spark; its step and driver failures are predicted with
    their errors (three profiles pooled) and each profile advises alone."""
    t = target(name, "quick")
    pipe = t.build(DECLARED, None, None)
    assert t.fail in pipe.steps and t.kill in pipe.steps and 0 < t.at < t.epochs
    pooled = Costs.median([_costs(pipe, f) for f in (0.9, 1.0, 1.1)])
    got = predictions(t, pooled, {})
    assert got["steady"]["value"] > 0 and got["steady"]["se"] > 0
    assert got["driver_failure"]["value"] >= pooled.restart and set(got["restart_parts"]) == {"cold", "session"}
    advice = advice_of(t, pooled, 0.05)
    assert advice["verdict"].startswith(("keep", "change")) and "saving" in advice


def test_a_pipeline_plugs_in_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that is not built in is benchmarks/spark_matrix/NAME.py's advisor_target(size), or module:function;
    one that cannot be loaded says how a pipeline plugs in."""
    (tmp_path / "my_ysb.py").write_text(
        "from benchmarks.advisor_check import Target, flagship\n"
        "def advisor_target(size):\n"
        "    t = flagship(size)\n"
        "    return Target('my_ysb', t.build, t.epochs, t.at, t.fail, t.kill)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    t = target("my_ysb:advisor_target", "quick")
    assert isinstance(t, Target) and t.name == "my_ysb"
    with pytest.raises(SystemExit, match="plugs in by defining advisor_target"):
        target("ysb_not_there", "quick")
    sys.modules.pop("my_ysb", None)


def test_errors_and_the_report() -> None:
    """(measured − predicted) ÷ predicted; the report names each profile's verdict and each prediction's error."""
    assert error(2.0, 2.5) == pytest.approx(0.25) and error(0.0, 1.0) is None and error(1.0, None) is None
    who = {"advice": {"verdict": "keep: the saving 1.0 % is within the ±8.0 % uncertainty"},
           "predicted": {"current": {a: {"value": 2.0, "se": 0.1} for a in ("steady", "step_failure",
                                                                           "driver_failure")}},
           "errors": {"current": {"steady": 0.1, "step_failure": -0.2, "driver_failure": None}}}
    doc = {"load_average_start": [3.0, 0, 0], "load_average_end": [2.0, 0, 0], "provisional": True,
           "pipelines": {"flagship": {"same_advice": True, "profiles": [who], "pooled": who,
                                      "measured": {"current": {"steady": 2.2, "step_failure": 1.6,
                                                               "driver_failure": 9.0}}}}}
    text = report(doc)
    assert "provisional" in text and "same advice from every profile: True" in text
    assert "steady 2 ± 0.2 → 2.2 (+10 %)" in text and "step_failure 2 ± 0.2 → 1.6 (-20 %)" in text


def test_a_measurement_inside_the_stated_interval_and_the_range() -> None:
    """``inside``: a measurement against ± 2 s.e. (an estimate's low/high) and against a range (model error
    included); nothing measured is ``None``; the report prints the range when the prediction has one."""
    est = {"value": 2.0, "se": 0.1, "low": 1.8, "high": 2.2}
    assert inside(est, 2.1) and not inside(est, 2.4) and inside(est, None) is None
    assert inside([1.3, 2.7], 2.4) and not inside([1.3, 2.7], 2.8)
    who = {"advice": {"verdict": "keep"},
           "predicted": {"current": {**{a: {"value": 2.0, "se": 0.1} for a in ("steady", "step_failure",
                                                                              "driver_failure")},
                                     "range": {"steady": [1.3, 2.7], "step_failure": [1.3, 2.7],
                                               "driver_failure": [1.3, 2.7]}}},
           "errors": {"current": {"steady": 0.2, "step_failure": 0.0, "driver_failure": 0.0}}}
    doc = {"load_average_start": [1.0, 0, 0], "load_average_end": [1.0, 0, 0], "provisional": False,
           "pipelines": {"ysb": {"same_advice": True, "profiles": [who], "pooled": who,
                                 "measured": {"current": {"steady": 2.4, "step_failure": 2.0,
                                                          "driver_failure": 2.0}}}}}
    assert "steady 2 ± 0.2, range 1.3–2.7 → 2.4 (+20 %)" in report(doc)


def test_figures_closer_than_half_a_clock_tick_are_equal() -> None:
    """CPU seconds come in 0.01-s ticks: a zero prediction and a measurement that is a sum of ticks off zero by
    float rounding (3.6e-15) agree (error 0, inside 0–0, within the tolerance); one tick measured against a zero
    prediction has no relative error and is not within it."""
    assert error(0.0, 3.55e-15) == 0.0 and error(0.0, 0.01) is None and error(0.0, None) is None
    assert inside([0.0, 0.0], 3.55e-15) and not inside([0.0, 0.0], 0.01)
    pred = {"value": 0.0, "se": 0.0, "low": 0.0, "high": 0.0}
    who = {"predicted": {"current": {"steady": {**pred, "value": 2.0, "low": 1.8, "high": 2.2},
                                     "step_failure": pred, "driver_failure": {**pred, "value": 10.0},
                                     "range": {"steady": [1.3, 2.7], "step_failure": [0.0, 0.0],
                                               "driver_failure": [7.0, 13.0]}}}}
    out = {"profiles": [], "pooled": who,
           "measured": {"current": {"steady": 2.1, "step_failure": 3.55e-15, "driver_failure": 12.0}}}
    score(out, 0.25)
    assert who["errors"]["current"] == {"steady": pytest.approx(0.05), "step_failure": 0.0,
                                        "driver_failure": pytest.approx(0.2)}
    assert who["within"] and who["inside_range"]["current"] == {"steady": True, "step_failure": True,
                                                                "driver_failure": True}
    out["measured"]["current"]["step_failure"] = 0.01
    score(out, 0.25)
    assert who["errors"]["current"]["step_failure"] is None and not who["within"]
