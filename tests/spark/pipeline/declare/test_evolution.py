"""Restarting a pipeline whose definition changed (falkirk.spark.pipeline.declare.evolution).

Each accepted change is checked end to end: a pipeline runs 3 epochs, the
changed pipeline restarts on the same root and runs to 5, and its outputs
and SQLite database equal, as multisets, a fresh run of the changed pipeline
over the same input. Refused changes leave ``pipeline.json`` as it was and
name the difference (or, for a new step whose input was collected, the
missing data).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Batch, Eager, Ephemeral, Lazy, Pipeline, PipelineError, RecoveryError, compare_runs

FIRST, THEN = 3, 5


def _records(epoch: int) -> list[dict[str, Any]]:
    """The same input for every pipeline here: a ``tag`` only from epoch 3 on (a column added then)."""
    return [{"user": u, "amount": 3 * epoch + u, **({"tag": f"t{u % 2}"} if epoch >= 3 else {})} for u in range(6)]


def _plain(epoch: int) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "tag"} for r in _records(epoch)]


def _clean(events: Any) -> Any:
    return events.where("amount > 0").select("user", "amount")


def _clean_same_result(events: Any) -> Any:  # different code, same rows (integer amounts)
    return events.where("amount >= 1").select("user", "amount")


def _clean_doubled(events: Any) -> Any:  # different code, different rows
    return events.where("amount > 0").selectExpr("user", "amount * 2 AS amount")


def build(
    root: Path, spark: Any, *, every: int = 2, tagged: bool = False, report2: bool = False,
    clean: Callable[..., Any] = _clean, **options: Any,
) -> Pipeline:
    from pyspark.sql import functions as F

    pipe = Pipeline(root, spark, fsync=False, **options)
    pipe.input("events", "user BIGINT, amount BIGINT" + (", tag STRING" if tagged else ""), partitions=2,
               key="user", source=_records if tagged else _plain)
    pipe.step(clean, name="clean", inputs=["events"], regime=Ephemeral())

    @pipe.step(regime=Batch())
    def per_user(clean: Any) -> Any:
        return clean.groupBy("user").agg(F.sum("amount").alias("amount"))

    @pipe.step(regime=Lazy(every=every, key="user", partitions=2))
    def totals(per_user: Any, *, state: Any) -> Any:
        both = per_user if state is None else state.unionByName(per_user)
        new = both.groupBy("user").agg(F.sum("amount").alias("amount"))
        return new, new

    @pipe.step(regime=Eager(database="stats.sqlite", tables={"stats": "epoch"}))
    def stats(clean: Any, *, db: Any, epoch: int) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS stats (epoch INTEGER PRIMARY KEY, n INTEGER, total INTEGER)")
        row = clean.agg(F.count("*").alias("n"), F.sum("amount").alias("s")).collect()[0]
        db.execute("INSERT INTO stats VALUES (?, ?, ?)", (epoch, row["n"], row["s"]))

    pipe.output("report", inputs=["totals"])
    if report2:
        pipe.output("cleaned", inputs=["clean"])  # a new output reading an ephemeral step
    return pipe


@pytest.fixture(scope="module")
def base(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The original pipeline after 3 epochs, garbage collection off (so a backfill finds its input)."""
    root = tmp_path_factory.mktemp("evolution-base")
    build(root, spark, gc=False).run(FIRST)
    return root


def _copy(base: Path, tmp: Path, name: str) -> Path:
    root = tmp / name
    shutil.copytree(base, root)
    return root


def _same(spark: Any, pipe: Pipeline, root: Path, fresh: Path) -> None:
    cmp = compare_runs(spark, pipe, root, fresh)
    assert cmp.identical, [d.describe() for d in cmp.differences]
    assert cmp.rows_compared >= THEN * 6


# -- declarations, without Spark ---------------------------------------------------------------------------
def test_refused_changes_name_the_difference_and_leave_the_root_as_it_was(tmp_path: Path) -> None:
    """A removed step (not an output), another regime, log False→True, a NOT NULL column, other partitions:
    refused, root unchanged."""
    build(tmp_path, None).check_root()
    recorded = (tmp_path / "pipeline.json").read_bytes()

    def regime(pipe: Pipeline, step: str, new: Any) -> Pipeline:
        pipe.steps[step] = type(pipe.steps[step])(step, pipe.steps[step].fn, pipe.steps[step].inputs, new,
                                                  pipe.steps[step].wants)
        return pipe

    cases: list[tuple[Pipeline, str]] = []
    gone = build(tmp_path, None)
    del gone.steps["stats"]
    gone.order.remove("stats")
    cases.append((gone, "step 'stats' is missing here"))
    cases.append((regime(build(tmp_path, None), "totals", Eager()), "step 'totals': its regime was lazy, now eager"))
    cases.append((regime(build(tmp_path, None), "clean", Ephemeral(log=True)), "log False → True"))
    strict = build(tmp_path, None)
    strict.inputs["events"].log.schema = "user BIGINT, amount BIGINT, tag STRING NOT NULL"
    cases.append((strict, "new column\\(s\\) tag are NOT NULL"))
    other = build(tmp_path, None)
    other.inputs["events"].log.partitions = 3
    cases.append((other, "its partitions and key cannot change"))
    for pipe, message in cases:
        with pytest.raises(PipelineError, match=message):
            pipe.check_root()
        assert (tmp_path / "pipeline.json").read_bytes() == recorded


def test_a_changed_function_is_detected_and_the_user_chooses(tmp_path: Path) -> None:
    """A step's code fingerprint changed: refused with both choices named, unless code_changes says which."""
    build(tmp_path, None).check_root()
    with pytest.raises(PipelineError, match=r"step 'clean': its code changed .*the step's function changed.*code_changes=\{'clean': 'keep'\}"):
        build(tmp_path, None, clean=_clean_doubled).check_root()
    with pytest.raises(PipelineError, match=r"code_changes\['clean'\]='yes': expected 'keep' or an epoch"):
        build(tmp_path, None, clean=_clean_doubled, code_changes={"clean": "yes"}).check_root()
    found = build(tmp_path, None, clean=_clean_doubled, code_changes={"clean": 1}).check_root(write=False)
    assert dict(found.code) == {"clean": 1}
    assert build(tmp_path, None).check_root(write=False).accepted == ()  # nothing was recorded


def test_accepted_changes_are_listed(tmp_path: Path) -> None:
    """every, a new nullable column, a new output and log=True→False are accepted and described."""
    logged = build(tmp_path / "logged", None)
    logged.steps["clean"] = type(logged.steps["clean"])("clean", _clean, ("events",), Ephemeral(log=True), frozenset())
    logged.check_root()
    assert build(tmp_path / "logged", None).check_root().accepted == (
        "step 'clean': log True → False (its consumers recompute instead of replaying, from the next epoch)",)
    build(tmp_path, None).check_root()
    found = build(tmp_path, None, every=3, tagged=True, report2=True).check_root(write=False)
    assert found.accepted == (
        "input 'events': new nullable column(s) tag (earlier records read them as NULL)",
        "step 'totals': every 2 → 3 (from the next epoch)",
        "step 'cleaned' is new: it starts at ∅ and is backfilled from logged or replayable data",
    )


# -- restarts, on Spark --------------------------------------------------------------------------------------
def test_new_output_new_column_and_every_take_effect_on_restart(base: Path, spark: Any, tmp_path: Path) -> None:
    """A new output (backfilled), a new nullable input column and every 2→3, in one restart: output equals a
    fresh run of the changed pipeline over the same input."""
    root = _copy(base, tmp_path, "changed")
    pipe = build(root, spark, every=3, tagged=True, report2=True, gc=False)
    result = pipe.run(THEN)
    notes = [n for n in result.journal.notes if n.startswith("pipeline changed")]
    assert len(notes) == 3, result.journal.notes
    cleaned = [x.epoch for x in result.journal.executions if x.step == "cleaned"]
    assert sorted(cleaned) == list(range(THEN))  # backfilled 0..2, then 3..4
    assert json.loads((root / "pipeline.json").read_text())["steps"]["totals"]["regime"]["every"] == 3
    fresh = tmp_path / "fresh-changed"
    build(fresh, spark, every=3, tagged=True, report2=True, durable=False).run(THEN)
    _same(spark, pipe, root, fresh)


def test_a_new_step_whose_input_was_collected_is_refused_naming_it(spark: Any, tmp_path: Path) -> None:
    """With GC on, the input a new output needs from epoch 0 is gone: a RecoveryError names it, nothing changes."""
    root = tmp_path / "collected"
    build(root, spark).run(FIRST + 1)
    recorded = (root / "pipeline.json").read_bytes()
    with pytest.raises(RecoveryError, match=r"^input/events/cuts/00000000.json was collected by garbage collection.*"
                       r"its new step\(s\) cleaned start at ∅") as info:
        build(root, spark, report2=True).run(THEN)
    print(info.value)
    assert (root / "pipeline.json").read_bytes() == recorded
    assert build(root, spark).run(THEN).done["report"] == THEN - 1  # the old pipeline still resumes


def test_changed_code_kept_or_rolled_back(base: Path, spark: Any, tmp_path: Path) -> None:
    """``code_changes={'clean': 'keep'}``: nothing is recomputed; ``{'clean': -1}``: clean and everything
    downstream are recomputed with the new code. Each equals a fresh run of its new pipeline."""
    kept = _copy(base, tmp_path, "kept")
    pipe = build(kept, spark, clean=_clean_same_result, code_changes={"clean": "keep"}, gc=False)
    result = pipe.run(THEN)
    assert not [x for x in result.journal.executions if x.step == "clean" and x.epoch < FIRST], \
        "keep must not recompute what clean already did"
    fresh = tmp_path / "fresh-kept"
    build(fresh, spark, clean=_clean_same_result, durable=False).run(THEN)
    _same(spark, pipe, kept, fresh)

    rolled = _copy(base, tmp_path, "rolled")
    pipe = build(rolled, spark, clean=_clean_doubled, code_changes={"clean": -1}, gc=False)
    result = pipe.run(THEN)
    assert any("rolled back to epoch -1 (code_changes)" in n for n in result.journal.notes), result.journal.notes
    assert sorted(x.epoch for x in result.journal.executions if x.step == "clean") == list(range(THEN))
    fresh = tmp_path / "fresh-rolled"
    build(fresh, spark, clean=_clean_doubled, durable=False).run(THEN)
    _same(spark, pipe, rolled, fresh)


def test_fingerprints_are_the_same_in_every_process(tmp_path: Path) -> None:
    """A set constant's order follows string hashing, which differs per process: the fingerprint must not."""
    import os
    import subprocess
    import sys

    script = tmp_path / "fp.py"
    script.write_text(
        "from falkirk.spark.pipeline.declare.evolution import fingerprint\n"
        "def step(events):\n"
        "    return events.where(events.kind.isin(*{'view', 'buy', 'link', 'search', 'cart', 'wish'}))\n"
        "print(fingerprint(step))\n")
    seen = {subprocess.run([sys.executable, str(script)], env={**os.environ, "PYTHONHASHSEED": str(seed)},
                           capture_output=True, text=True, check=True).stdout.strip() for seed in (1, 2, 3, 4)}
    assert len(seen) == 1 and len(next(iter(seen))) == 16, seen


def test_fingerprints_see_plain_values_from_the_closure_and_the_module() -> None:
    """A threshold read from a closure or a module global is part of what the step computes."""
    from falkirk.spark.pipeline.declare.evolution import fingerprint

    def make(limit: int) -> Callable[..., Any]:
        def step(events: Any) -> Any:
            return events.where(events.amount > limit)
        return step

    assert fingerprint(make(3)) == fingerprint(make(3)) != fingerprint(make(4))
    namespace: dict[str, Any] = {"LIMIT": 3}
    exec("def step(events):\n    return events.where(events.amount > LIMIT)\n", namespace)
    before = fingerprint(namespace["step"])
    namespace["LIMIT"] = 4
    assert fingerprint(namespace["step"]) != before


def test_a_removed_output_is_accepted_and_its_files_kept_or_deleted(base: Path, spark: Any, tmp_path: Path) -> None:
    """Without the output ``report`` the pipeline resumes; its files stay, or go with removed_outputs='delete'."""
    for choice in ("keep", "delete"):
        root = _copy(base, tmp_path, choice)
        pipe = build(root, spark, gc=False, removed_outputs={"report": choice})
        del pipe.steps["report"]
        pipe.order.remove("report")
        result = pipe.run(THEN)
        assert any("output 'report' was removed" in n for n in result.journal.notes), result.journal.notes
        assert "report" not in result.done and result.done["totals"] == THEN - 1
        kept = sorted(p.name for p in (root / "output" / "report").glob("epoch=*")) if choice == "keep" else []
        assert kept == ([f"epoch={e}" for e in range(FIRST)] if choice == "keep" else [])
        assert (root / "manifests" / "report").exists() == (choice == "keep")
        assert "report" not in json.loads((root / "pipeline.json").read_text())["steps"]
