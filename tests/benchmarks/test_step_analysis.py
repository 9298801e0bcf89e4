"""benchmarks/step_analysis.py measures the matrix's YSB step functions themselves, and no case runs a Spark job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_each_case_builds_the_ysb_frames_without_a_job_and_counts_its_py4j_calls(
    spark: Any, tmp_path: Path
) -> None:
    from benchmarks.spark_matrix.configs import SIZES
    from benchmarks.spark_matrix.ysb_input import events_table
    from benchmarks.step_analysis import CASES, Py4jCalls, cases, measure, prepare

    from falkirk.spark.pipeline.run.cpu import TreeMeter
    from falkirk.spark.pipeline.run.session import job_group

    size = {**SIZES["quick"]["YSB"], "events": 500}
    pipe, files, schemas = prepare(spark, tmp_path, size)
    fns = cases(spark, pipe, files, schemas)
    assert set(fns) == set(CASES)
    # the steps case is the pipeline's own code: the state it makes holds the epoch's views, counted per window
    output, state = fns["steps"]()
    views = [r for r in events_table(1, size).to_pylist() if r["event_type"] == "view"]
    assert sum(r["n"] for r in state.where("n IS NOT NULL").collect()) == len(views)
    assert output.columns == ["campaign_id", "window_start", "count"]
    meter = TreeMeter()
    with job_group(spark, "step-analysis-test"), Py4jCalls() as calls:
        for c in CASES:
            cpu, py4j = measure(fns[c], 2, meter, calls)
            assert py4j > 0, c  # each case asks the JVM
            assert cpu is None or cpu >= 0
    # no case ran a Spark job
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("step-analysis-test") == []
