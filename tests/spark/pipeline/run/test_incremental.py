"""Incremental keyed state (snapshots + deltas) in a running pipeline: same output, finer restore points.

The pipeline is ``spark_support.keyed_pipeline``: per-user totals over 40
users, a dozen events per epoch (few keys change), settled users leave the
state (deleted keys); ``Lazy(every=3, key="user", incremental=True,
snapshot_every=3)``. Every run is compared, row for row, with a
failure-free run with falkirk off and without ``incremental``.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from spark_support import KEYED_EPOCHS, keyed_pipeline, run_driver, state_checkpoints

from falkirk.spark.pipeline.plan.planner import epoch_of
from falkirk.spark.pipeline.store.keyed import subtask_of

pytestmark = [pytest.mark.spark]

EPOCHS = KEYED_EPOCHS


def _identical(spark: Any, root: Path, reference: Path) -> None:
    from falkirk.spark.pipeline.tools.verify import compare_runs

    cmp = compare_runs(spark, keyed_pipeline(root, spark, incremental=True), root, reference)
    assert not cmp.differences, [d.describe() for d in cmp.differences]
    assert cmp.identical and cmp.rows_compared >= EPOCHS * 20


def test_each_injection_restores_the_epoch_before_it_and_the_output_is_identical(
    spark: Any, plain: Path, tmp_path: Path
) -> None:
    """Before, mid, task, job and after injections in one run of ``Lazy(every=3, incremental=True)``: each recovery
    restores ``totals`` to the epoch before the failure (a delta or a snapshot: every epoch is a restore point),
    Spark absorbs the task failure, the first failed job is retried in place (nothing restored) and the second
    at the same epoch restores, and the output equals the reference."""
    fail = ["totals@2:before", "totals@3:mid", "totals@4:task", "totals@5:job", "totals@5:job", "totals@6:after"]
    result = keyed_pipeline(tmp_path, spark, incremental=True, gc=False).run(EPOCHS, fail=fail)
    assert sorted(map(str, result.fired)) == sorted(f if ":" in f else f"{f}:mid" for f in fail)
    recoveries = result.journal.recoveries
    assert [r.in_place for r in recoveries] == [None, None, ("totals", 5), None, None]
    assert recoveries[2].failed == () and all(f.is_top for f in recoveries[2].plan.frontiers.values())
    rolled = [r for r in recoveries if r.in_place is None]
    restored = [epoch_of(r.plan.frontiers["totals"]) for r in rolled]
    assert restored == [1, 2, 4, 6]  # before@2, mid@3, job@5 (again), after@6; the task failure never reached falkirk
    assert all(r.plan.actions["totals"] == "restore" for r in rolled)
    assert any("totals@4: Spark retried" in n for n in result.journal.notes)
    cks = state_checkpoints(tmp_path)
    assert sorted(cks) == list(range(EPOCHS))
    chains = {e: d["extra"].get("delta", {}).get("chain", []) for e, d in cks.items()}
    assert chains == {0: [], 1: [0], 2: [0, 1], 3: [], 4: [3], 5: [3, 4], 6: [], 7: [6]}
    assert all(cks[e]["rows"] < cks[e]["extra"]["delta"]["state_rows"] for e in (4, 5, 7))  # only changed keys
    from pyspark.sql import functions as F

    for e in (1, 2, 4, 5, 7):  # each delta: the rows its manifest counts, each in its key group's partition
        files = spark.read.parquet(str(tmp_path / cks[e]["location"]))
        assert "_kg" not in files.columns, e
        rows = files.select("user", "_subtask", F.pmod(F.xxhash64("user"), F.lit(16)).alias("g")).collect()
        assert len(rows) == cks[e]["rows"] > 0, e
        assert all(r["_subtask"] == subtask_of(r["g"], 2, 16) for r in rows), e
    _identical(spark, tmp_path, plain)


def test_a_corrupt_delta_falls_back_to_the_restore_point_before_it(spark: Any, plain: Path, tmp_path: Path) -> None:
    """A restarted driver finds the delta at 4 altered: the restore points at 5 and 4 (whose chains need it) are
    unusable, the plan restores the snapshot at 3, names the file, and the output is still identical."""
    keyed_pipeline(tmp_path, spark, incremental=True, gc=False).run(6)
    cks = state_checkpoints(tmp_path)
    assert cks[5]["extra"]["delta"]["chain"] == [3, 4]
    part = tmp_path / cks[4]["location"] / cks[4]["files"][0][0]
    part.write_bytes(b"X" + part.read_bytes()[1:])
    result = keyed_pipeline(tmp_path, spark, incremental=True, gc=False).run(EPOCHS)
    (rec,) = result.journal.recoveries
    assert epoch_of(rec.plan.frontiers["totals"]) == 3 and rec.plan.actions["totals"] == "restore"
    assert rec.problems and all(str(part.relative_to(tmp_path)) in p for p in rec.problems)
    assert "the delta at epoch 4 that epoch 5 is restored through" in rec.problems[0]
    _identical(spark, tmp_path, plain)


def test_garbage_collection_keeps_the_chains_of_the_retained_restore_points(
    spark: Any, plain: Path, tmp_path: Path
) -> None:
    """With ``retain=2`` after 8 epochs only the restore points 6 and 7 are retained: the snapshot at 6 and the
    delta at 7 stay, nothing older; with ``retain=3`` the retained point 5 keeps its snapshot (3) and delta (4).
    Losing the newest (the delta at 7) then falls back to 6, and the output is identical."""
    keyed_pipeline(tmp_path, spark, incremental=True).run(EPOCHS)
    assert sorted(state_checkpoints(tmp_path)) == [6, 7]
    wider = tmp_path / "retain3"
    keyed_pipeline(wider, spark, incremental=True, retain=3).run(EPOCHS)
    assert sorted(state_checkpoints(wider)) == [3, 4, 5, 6, 7]
    for root in (tmp_path, wider):
        cks = state_checkpoints(root)
        assert all(set(d["extra"].get("delta", {}).get("chain", [])) <= set(cks) for d in cks.values())
        assert not [p for p in (root / "data" / "totals" / "checkpoint").iterdir()
                    if f"data/totals/checkpoint/{p.name}" not in {d["location"] for d in cks.values()}]
    (tmp_path / "manifests" / "totals" / "checkpoint" / "00000007.json").unlink()
    result = keyed_pipeline(tmp_path, spark, incremental=True).run(EPOCHS + 1)
    assert epoch_of(result.journal.recoveries[0].plan.frontiers["totals"]) == 6
    reference = tmp_path / "reference9"
    keyed_pipeline(reference, spark, durable=False).run(EPOCHS + 1)
    _identical(spark, tmp_path, reference)


def test_rescaling_and_switching_incremental_on_and_off_on_restarts(spark: Any, plain: Path, tmp_path: Path) -> None:
    """Full checkpoints (2 partitions) → incremental at 3 partitions (the full checkpoint it restores is its first
    snapshot) → a restart at 2 partitions restoring a delta chain written at 2 and 3 → incremental off: each
    change is accepted and noted, rescaling goes through the deltas, and the output equals the reference."""
    keyed_pipeline(tmp_path, spark, every=2, gc=False).run(2)
    on = keyed_pipeline(tmp_path, spark, incremental=True, partitions=3, gc=False).run(4)
    assert any("incremental False → True" in n for n in on.journal.notes)
    assert on.journal.recoveries[0].rescaled == {"totals": (2, 3)}
    assert state_checkpoints(tmp_path)[3]["extra"]["delta"]["chain"] == [1, 2]  # the full checkpoint at 1 is the snapshot
    down = keyed_pipeline(tmp_path, spark, incremental=True, partitions=2, gc=False).run(6, fail="totals@5:mid")
    restart, failure = down.journal.recoveries
    assert epoch_of(restart.plan.frontiers["totals"]) == 3 and restart.rescaled == {"totals": (3, 2)}
    assert epoch_of(failure.plan.frontiers["totals"]) == 4 and failure.rescaled == {}  # a snapshot written at 2
    off = keyed_pipeline(tmp_path, spark, every=2, gc=False).run(EPOCHS)
    assert any("incremental True → False" in n for n in off.journal.notes)
    assert "delta" not in state_checkpoints(tmp_path)[EPOCHS - 1]["extra"]
    _identical(spark, tmp_path, plain)


@pytest.mark.slow
def test_driver_killed_between_and_mid_epoch_with_incremental_state(spark: Any, plain: Path, tmp_path: Path) -> None:
    """Driver processes SIGKILLed before ``totals``' epoch 3, then mid-way through epoch 5 (its delta written, its
    manifest not published); the next driver restores the delta at 4 and the output is identical."""
    base = {"master": "local[2,3]", "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                             "spark.default.parallelism": "2"}}
    root = tmp_path / "run"
    options = {"incremental": True, "gc": False}

    def killed(fail: str) -> Any:
        run = run_driver(base, [{"name": "killed", "kind": "run", "pipeline": "keyed", "options": options,
                                 "root": str(root), "epochs": EPOCHS, "fail": [fail]}], tmp_path)
        assert run.returncode == -signal.SIGKILL, run.stdout[-3000:]
        return run

    killed("totals@3:kill")
    assert sorted(state_checkpoints(root)) == [0, 1, 2]
    killed("totals@5:kill-mid")
    assert sorted(state_checkpoints(root)) == [0, 1, 2, 3, 4]
    result = keyed_pipeline(root, spark, **options).run(EPOCHS)
    (rec,) = result.journal.recoveries
    assert rec.restart and epoch_of(rec.plan.frontiers["totals"]) == 4 and rec.plan.actions["totals"] == "restore"
    _identical(spark, root, plain)


def test_a_chain_is_restored_in_one_scan_and_one_shuffle_and_equals_the_state_it_checkpointed(
    spark: Any, tmp_path: Path
) -> None:
    """The restore of a snapshot and two deltas reads the snapshot in one scan and all the deltas' files in
    another (not a scan per delta; the snapshot's rows tagged by a literal, not by a lookup of their file), and
    shuffles once (into the step's partitions, as a full checkpoint's restore does; the deltas are resolved per
    key inside those partitions), and yields the state of a run without ``incremental`` at the same epoch, row for row. Read as
    layers (a ``changes=True`` step's restore, here into 3 partitions), the snapshot alone is the base, the
    overlay holds one row per key the deltas name (a tombstone for a key they removed), and the view is that
    state again."""
    from types import SimpleNamespace

    from pyspark.sql import functions as F

    from falkirk.spark import Lazy, Storage
    from falkirk.spark.pipeline.run.incremental import StateCheckpoints
    from falkirk.spark.pipeline.store.delta import SEQ

    full = tmp_path / "full"
    keyed_pipeline(full, spark, every=1, gc=False).run(6)
    keyed_pipeline(tmp_path / "inc", spark, incremental=True, gc=False).run(6)
    storage = Storage(tmp_path / "inc", fsync=False)
    m = storage.get("totals", "checkpoint", 5)
    assert m.extra["delta"]["chain"] == [3, 4]
    regime = Lazy(every=3, key="user", partitions=2, incremental=True, snapshot_every=3)
    ctx = SimpleNamespace(storage=storage, spark=spark)
    state = StateCheckpoints(ctx, "totals", regime).read(m)  # type: ignore[arg-type]
    plan = state._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1 and plan.count("Scan parquet") == 2 and plan.count("Union") == 1, plan
    # the snapshot's rows tagged by a literal; the deltas' scan alone looks its rows' files up, by name
    assert f"0 AS {SEQ}#" in plan and "file_name" in plan and "substring_index" not in plan, plan
    assert state.rdd.getNumPartitions() == 2
    reference = Storage(full, fsync=False)
    expected = StateCheckpoints(SimpleNamespace(storage=reference, spark=spark), "totals",  # type: ignore[arg-type]
                                Lazy(every=1, key="user", partitions=2)).read(reference.get("totals", "checkpoint", 5))
    assert sorted(map(tuple, state.collect())) == sorted(map(tuple, expected.collect()))
    assert state.agg(F.count("*")).first()[0] > 0

    from falkirk.spark.pipeline.run import layers
    from falkirk.spark.pipeline.store.delta import DELETED

    three = Lazy(every=3, key="user", partitions=3, incremental=True, snapshot_every=3, changes=True)
    states = StateCheckpoints(ctx, "totals", three)  # type: ignore[arg-type]
    base, overlay, base_rows, bound = states.read_layers(m)
    assert base_rows == storage.get("totals", "checkpoint", 3).rows == base.count()
    assert states.chain == (3, 4, 5) and states.rescaled is not None and states.rescaled[:2] == (2, 3)
    assert base.rdd.getNumPartitions() == 3
    at_3 = StateCheckpoints(SimpleNamespace(storage=reference, spark=spark), "totals",  # type: ignore[arg-type]
                            Lazy(every=1, key="user", partitions=2)).read(reference.get("totals", "checkpoint", 3))
    assert sorted(map(tuple, base.collect())) == sorted(map(tuple, at_3.collect()))
    named = {r["user"] for e in (4, 5) for r in spark.read.parquet(str(tmp_path / "inc" / storage.get(
        "totals", "checkpoint", e).location)).collect()}
    rows = overlay.collect()
    assert sorted(r["user"] for r in rows) == sorted(named) and len(rows) <= bound
    now = {tuple(r) for r in expected.collect()}
    gone = named - {r["user"] for r in expected.collect()}  # settled in epoch 4 or 5: a tombstone each
    assert {r["user"] for r in rows if r[DELETED]} == gone != set()
    assert all(tuple(r)[:-1] in now for r in rows if not r[DELETED])  # the key's row now
    view = layers.view(base, overlay, "user", len(rows))
    assert sorted(map(tuple, view.collect())) == sorted(map(tuple, expected.collect()))
