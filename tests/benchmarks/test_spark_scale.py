"""Smoke test of benchmarks/spark_scale/: each scale workload on both systems at a tiny size, not the benchmark.

Each workload runs in the shared session as the benchmark's driver processes do: the failure-free run of
each system (the reference), then the run whose failing step fails inside its Spark job (falkirk recovers
the step in the same driver; the stream's query stops and is restarted in the same session); every output
equals its reference as a multiset, and the two systems' references equal each other. The SIGKILLed and
restarted drivers need processes of their own: the benchmark's (``--plan smoke`` runs them in minutes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchmarks.spark_scale.fit import fit, fits
from benchmarks.spark_scale.phases import adapter, compared, phase_fail, run_falkirk, run_stream
from benchmarks.spark_scale.plan import configurations, point, points
from benchmarks.spark_scale.points import backfill_means, summarise, verdict
from benchmarks.spark_scale.report import markdown, targets

pytestmark = pytest.mark.spark


# W2 is W3's code at another churn (benchmarks/spark_scale/keyed.py): W3 stands for both here.
@pytest.mark.parametrize("workload,n,churn", [("W3", 200, 1.0), ("ysb", 600, None), ("flagship", 300, None)])
def test_each_scale_workload_recovers_identically_on_both_systems(
    spark: Any, tmp_path: Path, workload: str, n: int, churn: float | None,
) -> None:
    """Failure-free and in-step-failure runs of both systems: every output identical to its reference, and the
    two systems' references identical to each other."""
    pytest.importorskip("pandas", reason="the stream's state functions need pandas")
    from falkirk.spark.pipeline.tools.verify import output_differences

    p = point(workload, n, churn, epochs=3, crash=1)
    wl = adapter({"workload": workload})
    wl.write_input(tmp_path / "input", p.size)
    form = wl.stream_form(p.size)
    assert form is not None
    refs = {}
    for system, regimes in (("streaming", None), ("falkirk", "shipped")):
        base = tmp_path / system
        spec = {"workload": workload, "system": system, "size": p.size, "base": str(base),
                "input": str(tmp_path / "input"), "form": form, "regimes": regimes}
        if system == "streaming":
            meter, _ = run_stream(wl, spark, base / "reference", spec)
        else:
            meter = run_falkirk(wl, spark, base / "reference", spec, [])["meter"]
        figures = meter.figures()
        assert len(figures["cpus"]) == p.epochs and figures["bytes"].get("state", 0) > 0
        assert min(figures["driver_cpus"]) > 0 and figures["peak_rss_jvm"] > 0
        out = phase_fail(spec, spark)
        assert out["identical"], (system, out["differences"])
        assert out["recovery_cpu_s"] > 0 and out["rows_compared"] > 0
        refs[system] = base / "reference"
    for name in wl.outputs:
        rows, differ = output_differences(spark, refs["falkirk"], refs["streaming"], name)
        assert rows > 0 and not differ, (name, differ)
    assert compared(spark, wl, refs["falkirk"], refs["streaming"], p.epochs)["identical"]


def test_w2s_broadcast_and_changes_forms_give_the_join_forms_output_and_recover(spark: Any, tmp_path: Path) -> None:
    """``falkirk-bcast`` (W2's step broadcasting the updates), ``falkirk-changes`` (the step returning only the
    updated keys, ``changes=True``) and ``falkirk-differential`` (those with differential deltas): each one's
    failure-free output equals the shipped form's and the NumPy computation of W2, and its in-step failure
    recovers to it; other workloads refuse the forms."""
    from benchmarks.spark_matrix.w2_w3 import expected_changes

    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.tools.verify import output_differences, output_rows

    p = point("W2", 300, 0.2, epochs=4, crash=2)
    wl = adapter({"workload": "W2"})
    wl.write_input(tmp_path / "input", p.size)
    refs = {}
    for regimes in ("shipped", "broadcast", "changes", "differential"):
        base = tmp_path / regimes
        spec = {"workload": "W2", "system": "falkirk", "size": p.size, "base": str(base),
                "input": str(tmp_path / "input"), "form": None, "regimes": regimes}
        run_falkirk(wl, spark, base / "reference", spec, [])
        out = phase_fail(spec, spark)
        assert out["identical"], (regimes, out["differences"])
        refs[regimes] = base / "reference"
    expected = expected_changes("W2", p.size, p.epochs)
    for form in ("broadcast", "changes", "differential"):
        rows, differ = output_differences(spark, refs["shipped"], refs[form], "changes")
        assert rows > 0 and not differ, (form, differ)
        assert output_rows(spark, Root(str(refs[form])), "changes") == expected, form
    from benchmarks.spark_matrix.w2_w3 import falkirk_keyed

    with pytest.raises(ValueError, match="'changes' for W2"):
        falkirk_keyed(tmp_path / "w3", spark, "W3", p.size, "lazy3", "broadcast")
    with pytest.raises(ValueError, match="needs a changes=True regime"):
        falkirk_keyed(tmp_path / "w2", spark, "W2", p.size, "lazy3", "changes")


def test_plan_points_configurations_and_memory() -> None:
    """Every plan spans the sizes it names, smallest first; the stream is measured at Spark's default snapshot
    spacing and the ones asked for; falkirk with its shipped regimes, incremental state and the advisor's."""
    full = points("full", ["W2", "ysb"])
    assert [p.n for p in full][:2] == [10**4, 10**4] and max(p.n for p in full) == 10**7
    assert {p.churn for p in full if p.workload == "W2"} == {0.01, 0.2}
    assert list(configurations("W2", [2, 5])) == ["streaming", "streaming-snap2", "streaming-snap5", "falkirk",
                                                  "falkirk-inc", "falkirk-advised", "falkirk-bcast",
                                                  "falkirk-changes", "falkirk-differential"]
    assert "falkirk-bcast" not in configurations("W3") and "falkirk-changes" not in configurations("W3")


def test_summaries_verdicts_fits_and_targets() -> None:
    """A driver's figures summarised; the frontier per failure kind; a + b·n recovered from exact points; the
    targets read from the points."""
    run = {"walls": [3.0, 1.0, 1.0], "cpus": [5.0, 2.0, 2.0], "jits": [1.0, 0.0, 0.0],
           "driver_cpus": [0.5, 0.1, 0.1], "bytes": {"state": 300, "log": 30}, "peak_rss": 10}
    rec = {"recovery_s": 4.0, "recovery_cpu_s": 8.0, "records_recomputed": 0, "source_rows": 5, "identical": True}
    summary = {
        "streaming": {**summarise(run, rec, {**rec, "recovery_s": 6.0}, 3, 1), "system": "streaming"},
        "falkirk": {**summarise({**run, "cpus": [5.0, 1.5, 1.5]}, {**rec, "recovery_cpu_s": 9.0},
                                {**rec, "recovery_s": 2.0, "recovery_cpu_s": 3.0}, 3, 1), "system": "falkirk"},
    }
    v = verdict(summary)
    assert v["kill"]["frontier"] == ["falkirk", "streaming"] and v["fail"]["falkirk_on_frontier"] == ["falkirk"]
    f = fit([10**4, 10**5, 10**6, 10**7], [0.5 + 2e-6 * n for n in (10**4, 10**5, 10**6, 10**7)])
    assert f["a"] == pytest.approx(0.5) and f["b"] == pytest.approx(2e-6) and f["max_rel_residual"] < 1e-9
    pts = [{"workload": "W2", "n": n, "churn": 0.01, "summary": summary, "verdict": v} for n in (10**4, 10**5)]
    assert fits(pts)["W2-c0.01"]["falkirk"]["cpu_median_s"]["points"] == 2
    t = targets({"points": pts})
    assert t["fail_recovery_wall_at_largest"]["W2-c0.01"]["ratio"] == pytest.approx(2.0 / 6.0)
    assert t["at_largest_keys_1pct"]["W2"]["cpu_median_s"]["ratio"] == pytest.approx(0.75)
    assert "| `W2 n=1e+04 c=0.01` | falkirk |" in markdown({"points": pts})


def test_the_mean_counts_the_checkpointing_epochs_the_median_leaves_out() -> None:
    """A step checkpointing every third epoch: its median per epoch is below the stream's and its mean above it,
    so the frontier by the median holds it and the frontier by the mean does not; points kept before the mean
    was measured get their first driver's mean, marked."""
    rec = {"recovery_s": 4.0, "recovery_cpu_s": 8.0, "identical": True}
    base = {"walls": [1.0] * 6, "jits": [0.0] * 6, "driver_cpus": [0.1] * 6, "bytes": {"state": 6}, "peak_rss": 1}
    stream = summarise({**base, "cpus": [9.0, 2.0, 2.0, 2.0, 2.0, 2.0]}, rec, rec, 6, 2)
    # a checkpoint at epoch 2 (of the window 2..5), dearer; the recovery after a kill dearer than the stream's
    falkirk = summarise({**base, "cpus": [9.0, 3.0, 4.0, 1.5, 1.5, 1.5]}, {**rec, "recovery_cpu_s": 8.5}, rec, 6, 2)
    assert falkirk["cpu_median_s"] == 1.5 and falkirk["cpu_mean_s"] == pytest.approx(2.125)
    summary = {"streaming": {**stream, "system": "streaming"}, "falkirk": {**falkirk, "system": "falkirk"}}
    by_median, by_mean = verdict(summary), verdict(summary, "cpu_mean_s")
    assert by_median["kill"]["frontier"] == ["falkirk", "streaming"] and by_median["fail"]["frontier"] == ["falkirk"]
    assert by_mean["kill"]["frontier"] == ["streaming"] and by_mean["fail"]["falkirk_on_frontier"] == []
    # a point measured before cpu_mean_s: its pooled figures and the first driver's per-epoch list
    old = {k: v for k, v in summary["falkirk"].items() if k != "cpu_mean_s"}
    doc = {"runs": [{"warmup": 2}], "points": [{"run": 0, "summary": {"falkirk": old,
                                                                        "streaming": dict(summary["streaming"])}}]}
    backfill_means(doc)
    got = doc["points"][0]["summary"]
    assert got["falkirk"]["cpu_mean_s"] == pytest.approx(2.125) and got["falkirk"]["cpu_mean_of"] == "first driver"
    assert got["streaming"]["cpu_mean_of"] == "drivers"
    assert doc["points"][0]["verdict_mean"]["fail"]["frontier"] == ["streaming"]
    assert "2.12¹" in markdown({"points": [{"workload": "W2", "n": 10, "churn": 0.01, **doc["points"][0],
                                            "verdict": verdict(got)}]})
