"""Smoke test of benchmarks/spark_vs_streaming.py: both sides run 2 tiny epochs and give the same answers.

The crash and the restarted driver need separate processes (the benchmark
itself runs them and fails loudly when a recovered run differs from its
failure-free run); here both systems run failure-free on the shared session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchmarks.spark_vs_streaming import (
    PEER,
    Streaming,
    advise_flagship,
    algorithm,
    check_targets,
    falkirk_pipeline,
    frontier,
    incremental_available,
    journal_steady,
    like_for_like,
    run_falkirk,
    write_stream_input,
)

SIZE = {"events_per_epoch": 300, "queries_per_epoch": 20, "users": 300, "nodes": 1500, "seed": 7, "cc_every": 3}


def test_streaming_and_falkirk_run_two_epochs_with_the_same_outputs(spark: Any, tmp_path: Path) -> None:
    """Responses and statistics equal as multisets; times, CPU and bytes written present and positive."""
    pytest.importorskip("pandas", reason="applyInPandasWithState needs pandas")
    pytest.importorskip("pyarrow", reason="applyInPandasWithState needs pyarrow")
    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.tools.verify import output_rows, table_rows

    write_stream_input(tmp_path / "input", SIZE, 2)
    st = Streaming(spark, tmp_path / "input", tmp_path / "streaming")
    st.run()
    fk = run_falkirk({"config": "falkirk", "size": SIZE, "epochs": 2}, spark, tmp_path / "falkirk", [])

    got = output_rows(spark, Root(str(tmp_path / "streaming")), "responses")
    ref = output_rows(spark, Root(str(tmp_path / "falkirk")), "responses")
    assert sorted(got) == sorted(ref) == [0, 1]
    assert all(sum(ref[e].values()) == SIZE["queries_per_epoch"] for e in ref)
    assert got == ref
    stats = table_rows(tmp_path / "streaming" / "stats.sqlite", "answer_stats")
    assert sum(stats.values()) == 2
    assert stats == table_rows(tmp_path / "falkirk" / "stats.sqlite", "answer_stats")

    for clock in (st.clock, fk["clock"]):
        walls, cpus = clock.per_epoch()
        assert len(walls) == len(cpus) == 2 and min(walls) > 0 and min(cpus) > 0
    assert {"offsets", "commits", "state"} <= set(st.written.bytes) and min(st.written.bytes.values()) > 0
    assert sum(v for k, v in fk["bytes"].items() if k != "input log") > 0
    # the input log was filled before the run (timed from then on): the run itself wrote none of it
    assert fk["input_bytes"] > 0 and fk["bytes"].get("input log", 0) < fk["input_bytes"] / 10
    assert not any(x.redo for x in fk["result"].journal.executions) and fk["result"].journal.recoveries == []


def test_tuned_configuration_logs_what_the_what_if_suggests_and_pairs_by_algorithm(tmp_path: Path) -> None:
    """falkirk-tuned: log=True on parse_graph (plan_failure('cc')'s suggestion for a crash in cc), incremental cc
    where falkirk has it; each falkirk configuration is compared with the streaming one of the same algorithm."""
    pipe = falkirk_pipeline("falkirk-tuned", tmp_path / "tuned", None, SIZE, crash=4)
    assert [n for n in pipe.steps if pipe.steps[n].regime.log and pipe.steps[n].regime.kind != "batch"] == ["parse_graph"]
    assert getattr(pipe.steps["cc"].regime, "incremental", False) == incremental_available()
    assert algorithm("falkirk-propagation") == "propagation" and PEER[algorithm("falkirk-tuned")] == "streaming"
    summary = {
        "streaming": {"cc": "unionfind", "peer": None, "cpu_median_s": 2.0, "recovery_cpu_s": 10.0, "bytes_per_epoch": 10},
        "falkirk-tuned": {"cc": "unionfind", "peer": "streaming", "cpu_median_s": 2.0, "recovery_cpu_s": 8.0,
                          "bytes_per_epoch": 20},
    }
    ratios = like_for_like(summary)
    assert ratios == {"falkirk-tuned": {"cpu_median_s": 1.0, "recovery_cpu_s": 0.8, "bytes_per_epoch": 2.0}}
    targets = check_targets(summary, ratios, ["falkirk-tuned"])
    assert [targets[k]["met"] for k in ("cpu_median_s", "recovery_cpu_s", "bytes_per_epoch")] == [True, True, False]
    assert targets["frontier"]["met"]


def test_frontier_keeps_the_non_dominated_points() -> None:
    assert frontier({"a": (1.0, 9.0), "b": (2.0, 2.0), "c": (3.0, 3.0), "d": (2.0, 2.0)}) == ["a", "b", "d"]


def test_advised_configuration_profiles_advises_and_runs_the_advice(spark: Any, tmp_path: Path) -> None:
    """falkirk-advised: a warm-up and a profile (cc failing in-process) on scratch roots, advice for a driver failure
    with predictions for both assignments, then a run with the advised regimes whose outputs equal the shipped ones'."""
    pytest.importorskip("pandas", reason="the union-find cc needs pandas")
    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.tools.verify import output_rows

    spec = {"config": "falkirk-advised", "size": SIZE, "epochs": 3, "crash": 2, "base": str(tmp_path / "advised")}
    advice = advise_flagship(spec, spark, tmp_path / "advised")
    assert advice["unit"] in ("cpu", "wall") and advice["failed"] == ["all"] and len(advice["failures"]) == 1
    for which in ("current", "advised"):
        assert advice["predicted"][which]["steady_cpu_s"] > 0 and advice["predicted"][which]["recovery_cpu_s"] >= 0
    assert not (tmp_path / "advised" / "warm-up").exists() and not (tmp_path / "advised" / "profile").exists()
    fk = run_falkirk(spec, spark, tmp_path / "advised" / "reference", [])
    got = {n: fk["pipe"].steps[n].regime.describe() for n in advice["regimes"]}
    assert got == advice["regimes"]
    ref = run_falkirk({"config": "falkirk", "size": SIZE, "epochs": 3}, spark, tmp_path / "shipped", [])
    assert journal_steady(fk["result"], 3) > 0 and journal_steady(ref["result"], 3) > 0
    assert output_rows(spark, Root(str(tmp_path / "advised" / "reference")), "responses") == output_rows(
        spark, Root(str(tmp_path / "shipped")), "responses")
