"""What-if plans (Pipeline.plan_failure) against the real failures they predict, for every step of the flagship.

One run of the tiny flagship fails step ``i`` between epochs, right after
epoch ``i`` (``STEP@i:after``). Just before each failure — in the progress
callback, when epoch ``i`` has completed everywhere — the test asks
``plan_failure`` twice: from the running executor, and from the manifests
under the root alone (``at=i``, no Spark). Both must equal the plan the
executor then executes (frontiers and actions) and what it redoes; the
run's output must equal a failure-free run's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import SMALL, flagship

from falkirk.spark import PipelineError, compare_runs
from falkirk.spark.pipeline.plan.planner import epoch_of

STEPS = ["parse_batch", "heavy", "parse_graph", "cc", "answer", "stats", "responses"]
EPOCHS = len(STEPS)


@pytest.fixture(scope="module")
def predicted_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("whatif")
    pipe = flagship(root, spark)
    live: dict[int, Any] = {}
    stored: dict[int, Any] = {}

    def progress(line: str) -> None:
        if line.startswith("epoch"):
            e = int(line.split()[1])
            if e < len(STEPS) and e not in live:
                live[e] = pipe.plan_failure([STEPS[e]])
                stored[e] = pipe.plan_failure([STEPS[e]], at=e)

    result = pipe.run(EPOCHS, fail=[f"{s}@{i}:after" for i, s in enumerate(STEPS)], progress=progress)
    reference = tmp_path_factory.mktemp("whatif-reference")
    flagship(reference, spark, durable=False).run(EPOCHS)
    return pipe, root, reference, result, live, stored


def test_what_if_plans_equal_the_real_failures_for_every_step(predicted_run: Any) -> None:
    """For each step: the live and the stored what-if give the plan the executor then executed, and its redo."""
    pipe, _, _, result, live, stored = predicted_run
    recoveries = [r for r in result.journal.recoveries if not r.restart]
    assert [r.failed for r in recoveries] == [(s,) for s in STEPS]
    for i, rec in enumerate(recoveries):
        real = {n: epoch_of(f) for n, f in rec.plan.frontiers.items()}
        redone: dict[str, list[int]] = {}
        for x in result.journal.executions:
            if x.recovery == rec.index and x.redo:
                redone.setdefault(x.step, []).append(x.epoch)
        for what in (live[i], stored[i]):
            assert what.failed == (STEPS[i],) and what.at == i
            assert what.frontiers == real, (STEPS[i], what.table())
            assert what.plan.actions == rec.plan.actions
            assert {n: (min(es), max(es)) for n, es in redone.items()} == dict(what.redo), (STEPS[i], what.table())
        print(live[i].table())


def test_the_run_with_failures_between_epochs_equals_a_failure_free_run(predicted_run: Any, spark: Any) -> None:
    """``STEP@E:after`` recoveries leave output and database identical to a failure-free run."""
    pipe, root, reference, *_ = predicted_run
    cmp = compare_runs(spark, pipe, root, reference)
    assert cmp.identical, [d.describe() for d in cmp.differences]
    assert cmp.rows_compared >= EPOCHS * SMALL["queries_per_epoch"]


def test_a_stopped_pipeline_plans_from_its_root_without_spark(predicted_run: Any, tmp_path: Path) -> None:
    """After the run, a new Pipeline object (no session, no run) plans from the manifests; bad requests are named."""
    _, root, *_ = predicted_run
    pipe = flagship(root, None)
    what = pipe.plan_failure("cc")
    assert what.at == EPOCHS - 1 and what.plan.actions["cc"] in ("restore", "restart")
    assert "cc" in what.redo and what.table().startswith(f"what if cc failed after epoch {EPOCHS - 1}:")
    with pytest.raises(PipelineError, match="unknown step 'nope'"):
        pipe.plan_failure(["nope"])
    with pytest.raises(PipelineError, match=f"has completed epochs 0..{EPOCHS - 1}"):
        pipe.plan_failure("cc", at=EPOCHS + 3)
    with pytest.raises(PipelineError, match="no epoch has completed yet"):
        flagship(tmp_path, None).plan_failure("cc")


def test_the_cli_prints_the_same_plan_from_the_root_alone(predicted_run: Any, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``falkirk pipeline plan ROOT --fail cc`` rebuilds the shape from pipeline.json: same table as the API."""
    from falkirk.cli import main
    from falkirk.spark import Pipeline

    _, root, *_ = predicted_run
    expected = flagship(root, None).plan_failure("cc").table()
    assert Pipeline.from_root(root).plan_failure("cc").table() == expected
    assert main(["pipeline", "plan", str(root), "--fail", "cc"]) == 0
    assert capsys.readouterr().out.strip() == expected
    assert main(["pipeline", "plan", str(root), "--fail", "cc", "--json"]) == 0
    assert '"format": "falkirk-plan/1"' in capsys.readouterr().out
    assert main(["pipeline", "plan", str(tmp_path), "--fail", "cc"]) == 2
    assert "holds no pipeline" in capsys.readouterr().err


def test_the_cli_plans_an_s3_root_given_storage_options(predicted_run: Any, s3_server: Any,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The same root copied to S3 (SeaweedFS on loopback): ``--storage-option`` carries the endpoint and the
    credentials, and the plan is the local root's, read through the object store alone."""
    import uuid

    import s3fs
    from objectstore import BUCKET

    from falkirk.cli import main

    _, root, *_ = predicted_run
    uri = f"s3a://{BUCKET}/whatif-{uuid.uuid4().hex[:8]}"
    opts = s3_server.options()
    s3fs.S3FileSystem(key=opts["key"], secret=opts["secret"], endpoint_url=opts["endpoint_url"],
                      skip_instance_cache=True).put(str(root), uri.replace("s3a://", ""), recursive=True)
    expected = flagship(root, None).plan_failure("cc").table()
    assert main(["pipeline", "plan", uri, "--fail", "cc", *(f"--storage-option={k}={v}" for k, v in opts.items())]) == 0
    assert capsys.readouterr().out.strip() == expected
    assert main(["pipeline", "plan", uri, "--fail", "cc", "--storage-option", f"endpoint_url={opts['endpoint_url']}",
                 "--storage-option", "key=falkirk", "--storage-option", "secret=wrong", "--storage-timeout", "10"]) == 2
    assert f"root {uri}: look up bucket '{BUCKET}' of {uri} failed: PermissionError" in capsys.readouterr().err


def test_the_suggestion_names_the_log_that_keeps_a_sibling_at_top(tmp_path: Path) -> None:
    """An Eager step fails; its stateless parent re-sends to both it and a Lazy sibling, so the sibling rolls
    back too. The what-if suggests log=True on the parent, and planning with it confirms the smaller cost."""
    from falkirk.spark import Eager, Ephemeral, Lazy, Pipeline
    from falkirk.spark.pipeline.plan.planner import TOP, Planner
    from falkirk.spark.pipeline.plan.whatif import boundary_live, what_if

    pipe = Pipeline(tmp_path, None)
    pipe.input("events", "user BIGINT")
    pipe.step(lambda events: events, name="clean", inputs=["events"], regime=Ephemeral())
    pipe.step(lambda clean, *, state: (clean, clean), name="sessions", inputs=["clean"], regime=Lazy(every=2))
    pipe.step(lambda clean, *, db: None, name="stats", inputs=["clean"],
              regime=Eager(database="s.sqlite", tables={"t": "epoch"}))
    known = {"events": [4], "clean": [4], "sessions": [1, 3], "stats": [2, 3]}
    done = {n: 4 for n in pipe.order}
    what = what_if(pipe, Planner(pipe.dataflow(), known=known, monitor=False), ["stats"], done)
    assert what.frontiers["sessions"] == 3 and "sessions" in what.redo
    assert what.suggestion is not None and what.suggestion.startswith("log=True on step 'clean'"), what.table()
    live = boundary_live(pipe, done, ["stats"])
    logged = Planner(pipe.dataflow(also_logging=["clean"]), known=known, monitor=False).plan(["stats"], live)
    assert epoch_of(logged.frontiers["sessions"]) in (TOP, 4)
