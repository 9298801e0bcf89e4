"""Keyed state a step updates in place (``changes=True``): the step returns only the keys it changed.

The pipeline is ``spark_support.keyed_pipeline(changes=True)``: ``totals``
returns the epoch's users with their new totals and each settled user as a
tombstone (``_deleted`` true), and its output is still the whole state, so
every run is compared, row for row, with a failure-free run with falkirk off
and a step that returns its whole state. The injections run with the changes
never compacted (the step reads the base with every change since on top,
through ``lookup``), the restart with them compacted into the base every
epoch (``COMPACT_AT``).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_support import KEYED_EPOCHS, churn, keyed_pipeline, state_checkpoints

from falkirk.spark import Eager, Lazy, Pipeline, PipelineError, lookup
from falkirk.spark.pipeline.declare.evolution import changes as evolution_changes
from falkirk.spark.pipeline.plan.planner import epoch_of
from falkirk.spark.pipeline.run import layers

pytestmark = [pytest.mark.spark]

EPOCHS = KEYED_EPOCHS


@pytest.fixture
def compaction(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The changes compacted into the base every epoch, or never (the step reads the base with changes on top;
    the view then joins them with the base without a broadcast, which the scale smoke test's W2 does not)."""
    monkeypatch.setattr(layers, "COMPACT_AT", 0.0 if request.param == "compacted" else 1e9)
    if request.param == "layered":
        monkeypatch.setattr(layers, "BROADCAST_MAX", 0)
    return str(request.param)


@pytest.fixture
def restores(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """Each restore read as layers, in order: (its epoch, whether it has an overlay — deltas after its
    snapshot)."""
    from falkirk.spark.pipeline.run.incremental import StateCheckpoints

    seen: list[tuple[int, bool]] = []
    read_layers = StateCheckpoints.read_layers

    def spy(self: Any, m: Any) -> Any:
        parts = read_layers(self, m)
        seen.append((m.epoch, parts[1] is not None))
        return parts

    monkeypatch.setattr(StateCheckpoints, "read_layers", spy)
    return seen


def _identical(spark: Any, root: Path, reference: Path) -> None:
    from falkirk.spark.pipeline.tools.verify import compare_runs

    cmp = compare_runs(spark, keyed_pipeline(root, spark), root, reference)
    assert not cmp.differences, [d.describe() for d in cmp.differences]
    assert cmp.identical and cmp.rows_compared >= EPOCHS * 20


@pytest.mark.parametrize("differential", [False, True])
@pytest.mark.parametrize("compaction", ["layered"], indirect=True)
def test_injections_restore_and_each_delta_is_the_epochs_changes(
    spark: Any, plain: Path, tmp_path: Path, compaction: str, restores: list[tuple[int, bool]], differential: bool
) -> None:
    """``Lazy(every=3, incremental=True, changes=True)`` with before, mid, task, job and after injections: every
    recovery restores the epoch before the failure, and each delta holds exactly one row per user of its epoch
    (what the step returned, tombstones included: no comparison of two states) — with ``differential=True`` per
    user changed since its snapshot, chained to the snapshot alone; the output equals the reference."""
    # totals@6:mid restores epoch 5: a snapshot (3) and two deltas, the second with a tombstone (user 26 settled)
    fail = ["totals@2:before", "totals@3:mid", "totals@4:task", "totals@5:job", "totals@5:job", "totals@6:mid",
            "totals@6:after"]
    pipe = keyed_pipeline(tmp_path, spark, incremental=True, changes=True, differential=differential, gc=False)
    result = pipe.run(EPOCHS, fail=fail)
    assert sorted(map(str, result.fired)) == sorted(fail)
    rolled = [r for r in result.journal.recoveries if r.in_place is None]
    assert [epoch_of(r.plan.frontiers["totals"]) for r in rolled] == [1, 2, 4, 5, 6]
    # each restored as layers: the snapshot (0, 3, 6) as the base, the deltas after it as the overlay
    assert restores == [(1, True), (2, True), (4, True), (5, True), (6, False)]
    cks = state_checkpoints(tmp_path)
    assert sorted(cks) == list(range(EPOCHS))
    for e, m in cks.items():
        chain = m["extra"].get("delta", {}).get("chain")
        assert (chain is None) == (e % 3 == 0), e  # snapshots at 0, 3, 6
        if chain is not None:
            snapshot = e - e % 3
            assert chain == ([snapshot] if differential else list(range(snapshot, e))), e
            users = {r["user"] for since in range(chain[-1] + 1, e + 1) for r in churn(since)}
            rows = spark.read.parquet(str(tmp_path / m["location"])).select("user", "_deleted").collect()
            assert sorted(r["user"] for r in rows) == sorted(users) == sorted({r["user"] for r in rows}), e
            assert m["rows"] == len(users), e
    _identical(spark, tmp_path, plain)


@pytest.mark.parametrize("differential", [False, True])
@pytest.mark.parametrize("compaction", ["layered"], indirect=True)
def test_a_concurrent_run_recovers_identically(
    spark: Any, plain: Path, tmp_path: Path, compaction: str, restores: list[tuple[int, bool]], differential: bool
) -> None:
    """The same injections with three executions at a time (``concurrency=3, window=3``: the input runs ahead
    of ``totals``): the rollbacks restore through layers, among them epoch 5 (a tombstone in its chain), and
    the output equals the reference — with ``differential=True`` too, each delta then chained to its snapshot
    alone."""
    fail = ["totals@2:before", "totals@3:mid", "totals@4:task", "totals@5:job", "totals@5:job", "totals@6:mid",
            "totals@6:after"]
    pipe = keyed_pipeline(tmp_path, spark, incremental=True, changes=True, differential=differential, gc=False,
                          concurrency=3, window=3)
    result = pipe.run(EPOCHS, fail=fail)
    assert sorted(map(str, result.fired)) == sorted(fail)
    rolled = [r for r in result.journal.recoveries if r.in_place is None]
    assert {epoch_of(r.plan.frontiers["totals"]) for r in rolled} >= {1, 2, 5}
    assert {(1, True), (2, True), (5, True)} <= set(restores)
    chains = {e: m["extra"]["delta"]["chain"] for e, m in state_checkpoints(tmp_path).items() if e % 3}
    assert chains == {e: [e - e % 3] if differential else list(range(e - e % 3, e)) for e in chains}
    assert sorted(chains) == [e for e in range(EPOCHS) if e % 3]
    _identical(spark, tmp_path, plain)


@pytest.mark.parametrize("compaction", ["layered"], indirect=True)
def test_a_differential_step_compacts_its_changes_at_every_snapshot(
    spark: Any, plain: Path, tmp_path: Path, compaction: str
) -> None:
    """Without failures (no restore to make a snapshot the base) and with changes never compacted for their size:
    each snapshot of a ``differential=True`` step is written from its changes compacted into the base, so every
    delta of every cycle, not only the first, holds the changes since its snapshot, chained to it alone."""
    keyed_pipeline(tmp_path, spark, incremental=True, changes=True, differential=True, gc=False).run(EPOCHS)
    chains = {e: (m["extra"].get("delta") or {}).get("chain") for e, m in state_checkpoints(tmp_path).items()}
    assert chains == {e: None if e % 3 == 0 else [e - e % 3] for e in range(EPOCHS)}
    _identical(spark, tmp_path, plain)


@pytest.mark.slow
@pytest.mark.connect
def test_differential_deltas_through_spark_connect(
    connect_server: Any, spark: Any, plain: Path, tmp_path: Path
) -> None:
    """``differential=True`` in a Connect client process (no JVM on the client: the one-delta restore is read
    without the classic session's partition-preserving path): injected failures roll ``totals`` back through
    a snapshot and one differential delta, and the output equals the reference. The changes are never
    compacted between snapshots (``COMPACT_AT``, as the ``layered`` runs above): compacted, the deltas would fall
    back to each epoch's own."""
    from spark_support import run_driver

    root = tmp_path / "run"
    options = {"incremental": True, "changes": True, "differential": True, "gc": False}
    fail = ["totals@2:task", "totals@5:job", "totals@6:mid"]
    run = run_driver({"remote": connect_server.url}, [{"name": "connect", "kind": "run", "pipeline": "keyed",
                                                       "options": options, "root": str(root), "epochs": EPOCHS,
                                                       "fail": fail, "layers": {"COMPACT_AT": 1e9}}], tmp_path)
    out = run["connect"]
    assert out["ok"], (out, run.stdout[-3000:])
    assert sorted(out["fired"]) == sorted(fail)
    assert any(r["actions"].get("totals") == "restore" for r in out["recoveries"]), out["recoveries"]
    chains = {e: m["extra"]["delta"]["chain"] for e, m in state_checkpoints(root).items() if e % 3}
    assert sorted(chains) == [e for e in range(EPOCHS) if e % 3]
    assert all(chain == [e - e % 3] for e, chain in chains.items()), chains
    _identical(spark, root, plain)


def test_a_restore_as_layers_is_the_chain_resolved(spark: Any, tmp_path: Path) -> None:
    """Checkpoints written from a ``changes=True`` step's changes (keys with several rows, a key removed then
    added again, one added then removed, a tombstone for a key never there, rows changed in place), read back
    at each epoch of the chain into 3 partitions (written in 2): the layers' view is the chain resolved whole
    (``read``), and both are the state computed here."""
    from types import SimpleNamespace

    from falkirk.spark import Storage
    from falkirk.spark.pipeline.run.frames import Frames
    from falkirk.spark.pipeline.run.incremental import StateCheckpoints

    schema = "k BIGINT, item STRING, n BIGINT"
    snapshot = {1: [("a", 1), ("b", 2)], 2: [("c", 3)], 3: [("d", 4)], 4: [("e", 5), ("f", 6)]}
    steps: list[dict[int, list[tuple[str, int]]]] = [  # per epoch: a key's rows now ([]: removed)
        {2: [], 5: [("g", 7), ("h", 8)], 1: [("a", 9)]},
        {2: [("c", 10)], 5: [], 6: [], 3: [("d", 4), ("d", 11)]},
        {1: [("x", 1), ("y", 2), ("z", 3)], 4: [], 7: [("q", 1)]},
    ]

    def frame(table: dict[int, list[tuple[str, int]]]) -> Any:
        return spark.createDataFrame([(k, i, n) for k, rows in table.items() for i, n in rows], schema)

    storage = Storage(tmp_path, fsync=False)
    ctx = SimpleNamespace(storage=storage, spark=spark, frames=Frames())
    regime = Lazy(every=1, key="k", partitions=2, incremental=True, snapshot_every=10, changes=True)
    writer = StateCheckpoints(ctx, "t", regime)  # type: ignore[arg-type]
    tables = [snapshot]
    storage.put(writer.write(frame(snapshot), None, 0, sum(map(len, snapshot.values()))))
    for epoch, step in enumerate(steps, start=1):
        tables.append({k: v for k, v in {**tables[-1], **step}.items() if v})
        changes = spark.createDataFrame(
            [(k, i, n, False) for k, rows in step.items() for i, n in rows]
            + [(k, None, None, True) for k, rows in step.items() if not rows],
            f"{schema}, _deleted BOOLEAN",
        )
        storage.put(writer.write(frame(tables[-1]), frame(tables[-2]), epoch, None, changes=changes))
    rescaled = Lazy(every=1, key="k", partitions=3, incremental=True, snapshot_every=10, changes=True)
    for epoch, table in enumerate(tables):
        m = storage.get("t", "checkpoint", epoch)
        assert m.extra.get("delta", {}).get("chain", []) == list(range(epoch)), epoch
        want = sorted((k, i, n) for k, rows in table.items() for i, n in rows)
        whole = StateCheckpoints(ctx, "t", rescaled).read(m)  # type: ignore[arg-type]
        base, overlay, base_rows, bound = StateCheckpoints(ctx, "t", rescaled).read_layers(m)  # type: ignore[arg-type]
        assert base_rows == sum(map(len, snapshot.values())) == 6 and base.rdd.getNumPartitions() == 3
        assert sorted(map(tuple, base.collect())) == sorted((k, i, n) for k, r in snapshot.items() for i, n in r)
        if epoch == 0:
            assert overlay is None
            view = base
        else:
            named = {k for step in steps[:epoch] for k in step}
            got = overlay.collect()
            assert {r["k"] for r in got} == named and len(got) <= bound, epoch
            assert {r["k"] for r in got if r["_deleted"]} == named - set(table), epoch
            view = layers.view(base, overlay, "k", bound)
        assert sorted(map(tuple, view.collect())) == want == sorted(map(tuple, whole.collect())), epoch


def test_a_differential_delta_holds_every_change_since_its_snapshot_and_is_restored_with_it_alone(
    spark: Any, tmp_path: Path
) -> None:
    """``differential=True``: a ``changes=True`` step whose base is its chain's snapshot writes, as each delta, its
    changes since that snapshot (its layers' overlay: per key the newest rows, a tombstone for a removed key),
    chained to the snapshot alone; without it, the epoch's changes, chained to the epoch before. Each checkpoint
    read back — at 2 partitions as written and rescaled to 3, whole and as layers — gives the state. A snapshot
    written from the view (changes on top of the base) is not the base: the delta after it is the epoch's changes.
    ``differential`` needs ``incremental`` and ``changes``."""
    from types import SimpleNamespace

    from pyspark.sql import functions as F

    from falkirk.spark import Storage
    from falkirk.spark.pipeline.run.frames import Frames
    from falkirk.spark.pipeline.run.incremental import StateCheckpoints

    for bad in ({"incremental": True}, {"changes": True}):
        with pytest.raises(PipelineError, match="differential=True needs incremental=True and changes=True"):
            Lazy(key="k", differential=True, **bad)
    schema = "k BIGINT, item STRING, n BIGINT"
    table = {1: [("a", 1), ("b", 2)], 2: [("c", 3)], 3: [("d", 4)]}
    steps: list[dict[int, list[tuple[str, int]]]] = [  # per epoch: a key's rows now ([]: removed)
        {2: [], 5: [("g", 7), ("h", 8)], 1: [("a", 9)]},
        {2: [("c", 10)], 5: [], 3: [("d", 4), ("d", 11)], 6: [("z", 1)]},
        {1: [], 7: [("q", 1)]},
    ]

    def frame(t: dict[int, list[tuple[str, int]]], deleted: bool = False) -> Any:
        rows = spark.createDataFrame([(k, i, n) for k, r in t.items() for i, n in r], schema)
        if not deleted:
            return rows
        gone = [(k, None, None, True) for k, r in t.items() if not r]
        return rows.withColumn("_deleted", F.lit(False)).unionByName(
            spark.createDataFrame(gone, f"{schema}, _deleted BOOLEAN")
        )

    def rows(t: dict[int, list[tuple[str, int]]]) -> int:
        return sum(max(len(r), 1) for r in t.values())  # a removed key: its tombstone

    ctx = SimpleNamespace(storage=None, spark=spark, frames=Frames())
    for differential in (True, False):
        ctx.storage = storage = Storage(tmp_path / str(differential), fsync=False)
        regime = Lazy(
            every=1, key="k", partitions=2, incremental=True, snapshot_every=4, changes=True, differential=differential
        )
        writer = StateCheckpoints(ctx, "t", regime)  # type: ignore[arg-type]
        base = frame(table)
        storage.put(writer.write(base, None, 0, 4, layers=(base, None)))
        since: dict[int, list[tuple[str, int]]] = {}
        tables = [table]
        for epoch, step in enumerate(steps, start=1):
            since.update(step)
            tables.append({k: v for k, v in {**tables[-1], **step}.items() if v})
            changes, overlay = frame(step, deleted=True), frame(since, deleted=True)
            m = writer.write(frame(tables[-1]), frame(tables[-2]), epoch, None, changes=changes, layers=(base, overlay))
            storage.put(m)
            chain = [0] if differential else list(range(epoch))
            assert m.extra["delta"]["chain"] == chain and m.rows == rows(since if differential else step), epoch
            want = sorted((k, i, n) for k, r in tables[-1].items() for i, n in r)
            for partitions in (2, 3):
                reader = Lazy(every=1, key="k", partitions=partitions, incremental=True, changes=True)
                whole = StateCheckpoints(ctx, "t", reader).read(m)  # type: ignore[arg-type]
                got_base, got, _, bound = StateCheckpoints(ctx, "t", reader).read_layers(m)  # type: ignore[arg-type]
                named = sorted(k for k, r in since.items() for _ in range(max(len(r), 1)))
                assert sorted(r["k"] for r in got.collect()) == named, (epoch, partitions)
                view = layers.view(got_base, got, "k", bound)
                assert sorted(map(tuple, view.collect())) == want == sorted(map(tuple, whole.collect())), epoch
        # a snapshot (epoch 4) of the view, changes on top of the base: the next delta is its epoch's changes
        view = frame(tables[-1])
        m = writer.write(view, frame(tables[-2]), 4, None, changes=frame({}, deleted=True), layers=(base, overlay))
        assert "delta" not in m.extra and writer.base is None
        step = {8: [("r", 1)]}
        m = writer.write(
            frame({**tables[-1], **step}), view, 5, None, changes=frame(step, deleted=True), layers=(view, overlay)
        )
        assert m.extra["delta"]["chain"] == [4] and m.rows == 1


@pytest.mark.parametrize("compaction", ["compacted"], indirect=True)
def test_full_checkpoints_a_restart_and_a_failure(spark: Any, plain: Path, tmp_path: Path, compaction: str) -> None:
    """``Lazy(every=3, changes=True)`` (whole checkpoints every third epoch, written from the layers): a run of 5
    epochs, a restarted driver (restores 2, recomputes 3 and 4), a failure mid-epoch 6; the output equals the
    reference and each checkpoint's rows are the state's (the reference's report at that epoch)."""
    keyed_pipeline(tmp_path, spark, changes=True, gc=False).run(5)
    result = keyed_pipeline(tmp_path, spark, changes=True, gc=False).run(EPOCHS, fail="totals@6:mid")
    restart, failure = result.journal.recoveries
    assert epoch_of(restart.plan.frontiers["totals"]) == 2 and epoch_of(failure.plan.frontiers["totals"]) == 5
    reference = spark.read.parquet(str(plain / "output" / "report"))
    for e, m in state_checkpoints(tmp_path).items():
        assert m["rows"] == reference.where(f"epoch = {e}").count() > 0, e
    _identical(spark, tmp_path, plain)


def test_a_snapshot_epoch_compacts_changes_that_would_pass_the_bound_before_the_next_snapshot(
    spark: Any, plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Lazy(incremental=True, snapshot_every=3, changes=True)``, compacted once the changes since the base pass
    1.5× its rows: at epoch 6, a snapshot, the changes (about ten keys an epoch) are short of the bound but would
    pass it before the next snapshot, so they are compacted there and the snapshot is written from the new base;
    without the snapshot's horizon (the bound alone) they are not. Both runs' outputs equal the reference, and
    each snapshot holds the state's rows. The compacted base is counted by the snapshot's write: the next epoch
    starts from layers whose base has the snapshot's rows."""
    from falkirk.spark.pipeline.run.runners import StepRunner

    monkeypatch.setattr(layers, "COMPACT_AT", 1.5)
    apply = StepRunner._apply
    seen: dict[str, list[tuple[int | None, bool]]] = {"horizon": [], "bound alone": []}
    # each epoch's layers' base rows, before it
    base_rows: dict[str, list[int | None]] = {"horizon": [], "bound alone": []}
    mode = "horizon"

    def spy(self: Any, changes: Any, snapshot: int | None) -> Any:
        base_rows[mode].append(None if self.layers is None else self.layers.base_rows)
        out = apply(self, changes, snapshot if mode == "horizon" else None)
        seen[mode].append((snapshot, out[1].overlay is None))  # one call per epoch: no failure
        return out

    monkeypatch.setattr(StepRunner, "_apply", spy)
    reference = spark.read.parquet(str(plain / "output" / "report"))
    for mode in seen:
        root = tmp_path / mode.replace(" ", "-")
        keyed_pipeline(root, spark, incremental=True, changes=True, snapshot_every=3, gc=False).run(EPOCHS)
        cks = state_checkpoints(root)
        assert [e for e in cks if "delta" not in cks[e]["extra"]] == [0, 3, 6]
        for e in (0, 3, 6):
            assert cks[e]["rows"] == reference.where(f"epoch = {e}").count() > 0, (mode, e)
        if mode == "horizon":  # compacted at epoch 6, counted by its snapshot
            assert base_rows[mode][7] == cks[6]["rows"]
        _identical(spark, root, plain)
    horizon, alone = seen["horizon"], seen["bound alone"]
    assert [s for s, _ in horizon] == [s for s, _ in alone] == [3, None, None, 3, None, None, 3, None]
    assert horizon[6] == (3, True) and alone[6] == (3, False)
    assert horizon[:6] == alone[:6]  # the same until then (epoch 3's changes would not pass it by epoch 6)


@pytest.mark.parametrize("differential", [False, True])
@pytest.mark.parametrize("compaction", ["layered"], indirect=True)
def test_a_small_delta_of_changes_is_written_from_the_driver(
    spark: Any, plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compaction: str, differential: bool
) -> None:
    """A ``changes=True`` step's deltas, its changes made and a few rows in Spark's cache, are collected and written
    from the driver (``store/collected.py``; one job over the cache, no file committer): each delta's files are
    pyarrow's and hold the rows, tombstones included, that Spark's own write of them holds (collection off), in
    the same partitions' directories; with ``differential=True`` too (each delta all the changes since the
    snapshot, chained to it alone). The changes are never compacted into the base (``layered``). The run with
    collection on fails mid-epoch 6 and restores through such a delta (epoch 5's); both outputs equal the
    reference."""
    import pyarrow.parquet as pq

    from falkirk.spark.pipeline.run import incremental

    on, off = tmp_path / "on", tmp_path / "off"
    result = keyed_pipeline(on, spark, incremental=True, changes=True, differential=differential,
                            gc=False).run(EPOCHS, fail="totals@6:mid")
    [recovery] = result.journal.recoveries
    assert epoch_of(recovery.plan.frontiers["totals"]) == 5  # the snapshot at 3 and a delta written from the driver
    with monkeypatch.context() as m:
        m.setattr(incremental, "COLLECT_MAX_BYTES", -1)
        keyed_pipeline(off, spark, incremental=True, changes=True, differential=differential, gc=False).run(EPOCHS)

    def written(root: Path, e: int) -> tuple[Any, set[bool], Counter[tuple[Any, ...]]]:
        doc = state_checkpoints(root)[e]
        files = [root / doc["location"] / name for name, _, _ in doc["files"]]
        by_arrow = {"parquet-cpp" in pq.read_metadata(f).created_by for f in files}
        parts = sorted({str(Path(name).parent) for name, _, _ in doc["files"]})
        data = spark.read.parquet(str(root / doc["location"]))
        cols = sorted(data.columns)
        got = Counter(tuple(r[c] for c in cols) for r in data.collect())
        return (doc["rows"], doc["extra"]["delta"]["chain"], parts, cols), by_arrow, got

    deltas = [e for e, m in state_checkpoints(on).items() if "delta" in m["extra"]]
    assert deltas == [e for e in range(EPOCHS) if e % 3], deltas
    tombstones = 0
    for e in deltas:
        shape_on, arrow_on, data_on = written(on, e)
        shape_off, arrow_off, data_off = written(off, e)
        assert (arrow_on, arrow_off) == ({True}, {False}), e
        assert shape_on == shape_off and data_on == data_off, e
        assert shape_on[0] == sum(data_on.values()) > 0, e
        snapshot = e - e % 3
        assert shape_on[1] == ([snapshot] if differential else list(range(snapshot, e))), e
        tombstones += sum(n for row, n in data_on.items() if row[shape_on[3].index("_deleted")])
    assert tombstones > 0  # a settled user's tombstone went through the collection
    _identical(spark, on, plain)
    _identical(spark, off, plain)


def test_changes_are_checked_when_the_step_returns_them(spark: Any, tmp_path: Path) -> None:
    """Changes whose columns are not the state's, whose ``_deleted`` is not boolean or whose key is null, and
    ``None`` for changes, stop the run naming the step (and the columns); ``changes=True`` without ``key=`` is
    refused at declaration."""
    from pyspark.sql import functions as F

    with pytest.raises(PipelineError, match="changes=True needs key="):
        Lazy(changes=True)
    with pytest.raises(PipelineError, match="changes=True needs key="):
        Eager(changes=True)

    def make(bad: str) -> Any:
        pipe = Pipeline(tmp_path / bad, spark, fsync=False)
        pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=churn)

        @pipe.step(regime=Lazy(key="user", changes=True))
        def totals(events: Any, *, state: Any) -> Any:
            now = events.groupBy("user").agg(F.sum("amount").alias("amount"))
            if state is not None and bad == "columns":
                now = now.withColumn("extra", F.lit(1))
            if state is not None and bad == "deleted":
                now = now.withColumn("_deleted", F.lit(1))
            if state is not None and bad == "null":
                now = now.withColumn("user", F.when(F.col("user") % 2 == 0, None).otherwise(F.col("user")))
            return now, (None if state is not None and bad == "none" else now)

        pipe.output("report", inputs=["totals"])
        return pipe

    with pytest.raises(PipelineError, match=r"step 'totals' \(changes=True\): the changes it returned have columns "
                       r"user bigint, amount bigint, extra int; its state has user bigint, amount bigint"):
        make("columns").run(3)
    with pytest.raises(PipelineError, match=r"step 'totals' \(changes=True\): its column '_deleted' is int"):
        make("deleted").run(3)
    with pytest.raises(PipelineError, match=r"step 'totals' \(changes=True\): \d+ row\(s\) of its state have a null "
                       r"key 'user'"):
        make("null").run(3)
    with pytest.raises(PipelineError, match=r"step 'totals' \(changes=True\) returned None as its changes"):
        make("none").run(3)


def test_turning_changes_on_or_off_on_a_restart_is_refused() -> None:
    """What a ``changes=True`` step returns is not a state: a restart may not reinterpret it either way. Turning
    ``differential`` on or off is accepted (every delta written either way stays restorable)."""
    regime = {"kind": "lazy", "log": False, "every": 3, "key": "user", "max_parallelism": 16}
    old = {"inputs": {"ev": {"schema": "user BIGINT", "partitions": 1, "key": None}},
           "steps": {"s": {"inputs": ["ev"], "regime": regime}}}
    new = json.loads(json.dumps(old))
    new["steps"]["s"]["regime"]["changes"] = True
    for a, b, reads in ((old, new, "only the keys it changed"), (new, old, "the whole state")):
        with pytest.raises(PipelineError, match=f"step 's': changes .* would read what its function returns as {reads}"):
            evolution_changes(a, b)
    both = json.loads(json.dumps(new))
    both["steps"]["s"]["regime"].update(incremental=True, snapshot_every=10)
    differential = json.loads(json.dumps(both))
    differential["steps"]["s"]["regime"]["differential"] = True
    for a, b, now in ((both, differential, True), (differential, both, False)):
        assert evolution_changes(a, b).accepted == (f"step 's': differential {not now} → {now} (from its next delta; "
                                                    "the deltas already written stay restorable)",)


def test_lookup_refuses_keys_that_are_not_one_column_of_the_state(spark: Any) -> None:
    """``lookup``'s keys are one column named as a state column; anything else is refused naming both."""
    state = spark.createDataFrame([(1, 10)], "user BIGINT, amount BIGINT")
    assert lookup(state, spark.createDataFrame([(1,), (3,)], "user BIGINT")).collect() == [(1, 10)]
    for keys in (spark.createDataFrame([(1, 2)], "user BIGINT, x BIGINT"), spark.createDataFrame([(1,)], "u BIGINT")):
        with pytest.raises(PipelineError, match=r"lookup: keys must have one column.*the state \['user', 'amount'\]"):
            lookup(state, keys)


@pytest.mark.parametrize("key_type", ["BIGINT", "STRING"])
def test_lookup_view_and_merge_agree_with_the_rows_whether_keys_are_named_in_the_plan_or_joined(
    spark: Any, key_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lookup`` on a ``changes=True`` state's layers, the layers' ``view`` and a ``merge`` of changes into them
    give the rows computed in Python from the same base, overlay (tombstones among its rows) and keys, whether
    the keys are few integers named in the plan as literals (the wanted keys collected, the overlay's and the
    changes' known on the driver: ``layers.among``) or joined (string keys, more keys than ``AMONG_MAX``, the
    overlay's keys unknown) — on random layers, every way each is taken."""
    import random

    rng = random.Random(5)
    cast = int if key_type == "BIGINT" else str
    base = {k: rng.randrange(100) for k in range(60)}
    overlay = {k: (None, True) if rng.random() < 0.3 else (rng.randrange(100), False) for k in rng.sample(range(80), 25)}
    wanted = rng.sample(range(90), 30)
    schema = f"k {key_type}, v BIGINT"
    base_df = spark.createDataFrame([(cast(k), v) for k, v in base.items()], schema).localCheckpoint()
    overlay_df = spark.createDataFrame(
        [(cast(k), v, d) for k, (v, d) in overlay.items()], schema + ", _deleted BOOLEAN"
    ).localCheckpoint()
    keys_df = spark.createDataFrame([(cast(k),) for k in wanted], f"k {key_type}")
    current = {k: v for k, v in base.items() if k not in overlay} | {k: v for k, (v, d) in overlay.items() if not d}
    ways = set()
    for known, bound in ((True, 4096), (False, 4096), (True, 10), (False, 10)):
        monkeypatch.setattr(layers, "AMONG_MAX", bound)
        layers._FEW.clear()
        keys = frozenset(cast(k) for k in overlay) if known and key_type == "BIGINT" else None
        view = layers.view(base_df, overlay_df, "k", len(overlay), layers.among(keys, "k"))
        built = layers.Layers(view, base_df, overlay_df, None, len(overlay), len(base), "k", keys)
        layers.register(built)
        got = sorted(tuple(r) for r in layers.lookup(view, keys_df).collect())
        assert got == sorted((cast(k), current[k]) for k in wanted if k in current), (known, bound)
        assert sorted(tuple(r) for r in view.collect()) == sorted((cast(k), v) for k, v in current.items())
        ways.add((layers._FEW.get(id(base_df)), keys is not None and len(keys) <= bound))
        # a merge of changes named on the driver (their collected keys) or broadcast gives the same rows
        changes = {k: (rng.randrange(100), False) for k in rng.sample(range(90), 12)}
        changes_df = spark.createDataFrame(
            [(cast(k), v, d) for k, (v, d) in changes.items()], schema + ", _deleted BOOLEAN"
        )
        table = changes_df.toArrow()
        merged = layers.merge(overlay_df, changes_df, "k", len(changes), layers.among(layers.keys_of(table, "k"), "k"))
        want = {k: x for k, x in overlay.items() if k not in changes} | changes
        assert sorted(tuple(r) for r in merged.collect()) == sorted((cast(k), v, d) for k, (v, d) in want.items())
    if key_type == "BIGINT":
        assert ways == {(True, True), (True, False), (False, False)}
    else:
        assert ways == {(None, False)}


def _changes_by_epoch(epochs: int) -> dict[int, list[tuple[Any, ...]]]:
    """What a step returning its changes returns each epoch, computed in Python from ``churn``: per user of the
    epoch its new totals, or a tombstone once its amount passes 60 (it leaves the state)."""
    state: dict[int, tuple[int, int]] = {}
    out: dict[int, list[tuple[Any, ...]]] = {}
    for e in range(epochs):
        now: dict[int, tuple[int, int]] = {}
        for r in churn(e):
            a, v = now.get(r["user"], (0, 0))
            now[r["user"]] = (a + r["amount"], v + 1)
        rows = []
        for user, (a, v) in now.items():
            old = state.get(user, (0, 0))
            amount, visits = old[0] + a, old[1] + v
            if amount > 60:
                state.pop(user, None)
                rows.append((user, None, None, True))
            else:
                state[user] = (amount, visits)
                rows.append((user, amount, visits, False))
        out[e] = sorted(rows, key=lambda r: r[0])
    return out


def _changes_output_pipeline(root: Path, spark: Any, seen: Any = None) -> Any:
    """``churn`` → ``totals`` (``Lazy(every=3, key="user", incremental=True, changes=True)``, its output its
    changes: per user of the epoch its new totals, or a tombstone once its amount passes 60) → output ``report``.
    ``seen``: a function of a column giving it unchanged, applied to each user's new amount (a Python UDF that
    counts the rows it sees)."""
    from pyspark.sql import functions as F

    pipe = Pipeline(root, spark, fsync=False, gc=False)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=churn)

    def totals(events: Any, *, state: Any) -> Any:
        now = events.groupBy("user").agg(F.sum("amount").alias("amount"), F.count("*").alias("visits"))
        both = now if state is None else lookup(state, now.select("user")).unionByName(now)
        upd = both.groupBy("user").agg(F.sum("amount").alias("amount"), F.sum("visits").alias("visits"))
        if seen is not None:
            upd = upd.select("user", seen(F.col("amount")).alias("amount"), "visits")
        settled = F.col("amount") > 60
        changed = upd.select(
            "user", *[F.when(settled, None).otherwise(F.col(c)).alias(c) for c in ("amount", "visits")],
            settled.alias("_deleted"),
        )
        return changed, changed

    pipe.step(totals, inputs=["events"], regime=Lazy(every=3, key="user", incremental=True, changes=True))
    pipe.output("report", inputs=["totals"])
    return pipe


def _outputs_are_the_changes(spark: Any, root: Path, epochs: int) -> dict[int, list[tuple[Any, ...]]]:
    """Check that each output epoch of :func:`_changes_output_pipeline` under ``root`` holds exactly the changes
    computed in Python (:func:`_changes_by_epoch`) and its manifest their number; those changes."""
    expected = _changes_by_epoch(epochs)
    for e in range(epochs):
        m = json.loads((root / "manifests" / "report" / "output" / f"{e:08d}.json").read_text())
        got = spark.read.parquet(str(root / m["location"])).select("user", "amount", "visits", "_deleted")
        assert sorted((tuple(r) for r in got.collect()), key=lambda r: r[0]) == expected[e], e
        assert m["rows"] == len(expected[e]), e
    return expected


def test_an_output_that_is_the_changes_is_counted_by_the_job_making_them(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``changes=True`` step whose output is its changes (tombstones included): the changes' rows are counted
    by the job that applies them (``layers.counted_with``) or, small the epoch before, by the job that collects
    them (``StepRunner._changes_collected``), not by a count job of the output's; each output epoch holds
    exactly the rows computed in Python, its manifest their number (a wrong count is refused when the output is
    published), across a failure in the middle of the step."""
    from falkirk.spark.pipeline.run.runners import StepRunner

    counted: list[tuple[str, int]] = []  # per execution, how its changes were counted, and their rows
    real = layers.counted_with
    real_collected = StepRunner._changes_collected

    def spy(frame: Any, also: Any, key: str, step: str) -> tuple[int, int]:
        got = real(frame, also, key, step)
        counted.append(("applied", got[1]))
        return got

    def collected(self: Any, changes: Any, marked: Any, key: str) -> Any:
        got = real_collected(self, changes, marked, key)
        if got is not None:
            counted.append(("collected", got.num_rows))
        return got

    monkeypatch.setattr(layers, "counted_with", spy)
    monkeypatch.setattr(StepRunner, "_changes_collected", collected)
    from falkirk.spark.pipeline.run.frames import Frames

    counts: list[bool] = []  # per materialise: whether it ran a count job
    real_materialise = Frames.materialise

    def materialise(self: Any, df: Any, *, persist: bool = True, rows: int | None = None) -> Any:
        known = self._counts.get(id(df))
        counts.append(rows is None and not (known is not None and known[0]() is df))
        return real_materialise(self, df, persist=persist, rows=rows)

    monkeypatch.setattr(Frames, "materialise", materialise)
    taken: list[bool] = []  # per output write from the driver: whether it took the rows the changes' collection brought
    real_take = Frames.take_collected

    def take(self: Any, df: Any) -> Any:
        got = real_take(self, df)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(Frames, "take_collected", take)
    pipe = _changes_output_pipeline(tmp_path, spark)
    result = pipe.run(EPOCHS, fail=["totals@4:mid"])
    assert [str(f) for f in result.fired] == ["totals@4:mid"]
    expected = _outputs_are_the_changes(spark, tmp_path, EPOCHS)
    assert any(r[3] for rows in expected.values() for r in rows)  # tombstones among them
    # every epoch counted its changes with the job applying them (the first state, its changes having
    # tombstones, too) or collecting them (every later one: the changes the epoch before were small), but the
    # redo of epoch 4: restored after the failure, its changes were counted first (the first merge after a
    # recovery, layers.merge_blind)
    assert [rows for _, rows in counted] == [len(expected[e]) for e in (0, 1, 2, 3, 4, 5, 6, 7)]
    assert [how for how, _ in counted] == ["applied"] + ["collected"] * 7
    # every output epoch is written from the driver (its rows known); each one after the first took the rows the
    # changes' collection brought (epoch 4's redo: its delta's), no job of its own; epoch 0's first state is not
    # collected (the epoch before it is none to go by), so its output collects its rows itself
    assert taken == [False] + [True] * 7
    # the output, the changes themselves, was never counted by a job of its own
    assert counts and not any(counts)


def test_collected_changes_are_computed_once_an_epoch(spark: Any, tmp_path: Path) -> None:
    """Where an epoch's changes are collected (the changes the epoch before were small), the step's query runs
    once: the collection's job computes the changes and caches them (``detach``), the merge reads the cache, the
    delta and the output the collected rows, none of them the step's query again. Counted by a Python UDF in the
    step, which adds each row it sees to an accumulator: per epoch after the first, as many rows as that epoch's
    changes (computed in Python); the outputs are those changes."""
    from pyspark.sql import functions as F

    rows_seen = spark.sparkContext.accumulator(0)

    def seen_one(value: Any) -> Any:
        rows_seen.add(1)
        return value

    seen = F.udf(seen_one, "bigint")
    at_end: list[int] = []  # the accumulator's value at each epoch's end

    def progress(line: str) -> None:
        if line.startswith("epoch"):
            at_end.append(rows_seen.value)

    pipe = _changes_output_pipeline(tmp_path, spark, seen)
    pipe.run(EPOCHS, progress=progress)
    expected = _outputs_are_the_changes(spark, tmp_path, EPOCHS)
    assert len(at_end) == EPOCHS
    per_epoch = [b - a for a, b in itertools.pairwise(at_end)]
    assert per_epoch == [len(expected[e]) for e in range(1, EPOCHS)]


def test_an_epochs_changes_are_counted_first_where_their_keys_might_be_too_many_to_broadcast(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An epoch's changes are merged into the changes since the base by broadcasting their keys, which collects
    them on the driver: uncounted (no job of their own) only while the step's changes the epoch before had at
    most ``BLIND_FRACTION`` of ``BROADCAST_MAX`` rows; else — and on the first merge after a recovery — counted
    first, and broadcast only up to ``BROADCAST_MAX`` (beyond, the join shuffles both sides). With a bound of 10
    keys and the churn's 9-12 changed users per epoch all three ways are taken, the blind broadcast that turned
    out too many is noted in the journal, a failure in the middle of that epoch makes its redo count first, and
    each output epoch is still the changes computed in Python."""
    from falkirk.spark.pipeline.run import runners

    monkeypatch.setattr(layers, "BROADCAST_MAX", 10)
    monkeypatch.setattr(layers, "BLIND_FRACTION", 1.0)
    monkeypatch.setattr(layers, "COMPACT_AT", 1e9)  # never compacted: every epoch after the second merges
    # never collected first (small changes are: their collection counts them, and names their keys in the plan)
    monkeypatch.setattr(runners, "COLLECT_MAX_ROWS", -1)
    seen: list[tuple[int | None, bool]] = []  # per merge: the rows it was given, whether it broadcast the keys
    real = layers.merge

    def spy(overlay: Any, changes: Any, key: str, rows: int | None, named: Any = None) -> Any:
        assert named is None
        got = real(overlay, changes, key, rows)
        seen.append((rows, "strategy=broadcast" in got._jdf.queryExecution().optimizedPlan().toString()))
        return got

    monkeypatch.setattr(layers, "merge", spy)
    epochs = 10
    rows = [len(r) for r in _changes_by_epoch(epochs).values()]
    # epoch 0 makes the first state and epoch 1 the first changes since it: the merges are epochs 2-9's, each
    # decided by the rows of the epoch before; a blind one whose changes pass the bound is noted
    want = [(None, True) if before <= 10 else (now, now <= 10) for before, now in zip(rows[1:], rows[2:], strict=False)]
    spikes = [e for e in range(2, epochs) if rows[e - 1] <= 10 < rows[e]]
    assert spikes and {"blind" if r is None else "broadcast" if b else "shuffled" for r, b in want} == {
        "blind", "broadcast", "shuffled"
    }
    # the first spike fails in the middle of its epoch (after its merge): restored, its redo counts first
    failed = spikes[0]
    want.insert(failed - 1, (rows[failed], False))
    result = _changes_output_pipeline(tmp_path, spark).run(epochs, fail=[f"totals@{failed}:mid"])
    assert [str(f) for f in result.fired] == [f"totals@{failed}:mid"]
    _outputs_are_the_changes(spark, tmp_path, epochs)
    assert seen == want
    noted = [n for n in result.journal.notes if "were collected on the driver to merge them" in n]
    assert len(noted) == len(spikes), (spikes, noted)
    assert f"had {rows[failed]} rows, {rows[failed - 1]} the epoch before" in noted[0]


@pytest.mark.parametrize("collected", [False, True], ids=["applied", "collected"])
def test_a_job_failing_inside_the_merge_releases_what_it_was_caching(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collected: bool
) -> None:
    """A Spark job failing while a step's changes are merged into its layers (the job counting the new changes
    since the base and — not collected first — the epoch's changes, which caches both): both frames are released
    (no longer referenced while the epoch runs again), the epoch is retried in place, and each output epoch is
    still the changes computed in Python. ``collected``: the changes collected on the driver first (small the
    epoch before), the merge's job counting the new changes since the base alone (those held on the executors:
    not on the driver, where the merge runs no job); else never collected."""
    from pyspark.sql import functions as F

    from falkirk.spark.pipeline.run import runners
    from falkirk.spark.pipeline.run.frames import Frames

    monkeypatch.setattr(layers, "DRIVER_MAX_ROWS", -1)
    if not collected:
        monkeypatch.setattr(runners, "COLLECT_MAX_ROWS", -1)
    calls: list[Any] = []  # the frame each call of the merge's count was given
    also_seen: list[Any] = []  # and the changes counted beside it (collected: the changes collected)
    real, real_counted = layers.counted_with, layers.counted
    real_collected = runners.StepRunner._changes_collected

    def fail_on_fourth(frame: Any) -> None:
        if len(calls) == 4:  # epoch 3's merge (one call per epoch: epoch 0 makes the first state)
            real_counted(frame, "user", "totals")  # its blocks cached, then a job fails (a lost executor, say)
            boom = F.raise_error(F.lit("falkirk injected: a job lost while merging the changes"))
            frame.sparkSession.range(1).select(boom).collect()

    how: list[str] = []  # per execution, how its changes were counted

    def failing(frame: Any, also: Any, key: str, step: str) -> tuple[int, int]:
        calls.append(frame)
        also_seen.append(also)
        how.append("applied")
        fail_on_fourth(frame)
        return real(frame, also, key, step)

    def merged_count(frame: Any, key: str, step: str) -> int:
        if collected and len(also_seen) > len(calls):  # the new changes since the base, after a collection
            calls.append(frame)
            fail_on_fourth(frame)
        return real_counted(frame, key, step)

    def collecting(self: Any, changes: Any, marked: Any, key: str) -> Any:
        got = real_collected(self, changes, marked, key)
        if got is not None:
            also_seen.append(changes)
            how.append("collected")
        return got

    released: list[Any] = []
    real_release = Frames.release

    def release(self: Any, df: Any, **kw: Any) -> None:
        released.append(df)
        real_release(self, df, **kw)

    monkeypatch.setattr(layers, "counted_with", failing)
    monkeypatch.setattr(layers, "counted", merged_count)
    monkeypatch.setattr(runners.StepRunner, "_changes_collected", collecting)
    monkeypatch.setattr(Frames, "release", release)
    result = _changes_output_pipeline(tmp_path, spark).run(EPOCHS)
    assert len(calls) >= 4 and any(df is calls[3] for df in released)
    assert calls[3] is not also_seen[3]
    assert how[:4] == ["applied"] + ["collected" if collected else "applied"] * 3
    assert any(df is also_seen[3] for df in released)  # the epoch's changes too
    assert [r.in_place for r in result.journal.recoveries] == [("totals", 3)]
    _outputs_are_the_changes(spark, tmp_path, EPOCHS)


def test_few_changes_since_the_base_are_merged_and_held_on_the_driver(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where every change since the base was collected (the changes the epoch before were small) and they are
    few, an epoch's changes are merged into them on the driver, in Arrow, and held there: no Spark job counts or
    caches the changes since the base. Never compacted, the changes since the base held at each epoch after the
    first are the latest row of every user changed since epoch 1 (computed in Python from the churn: the
    epoch's changes, and the earlier ones of other users); each output epoch (the step's changes, computed from
    its ``lookup`` of them) is the changes computed in Python. Beyond ``DRIVER_MAX_ROWS`` they are a local
    checkpoint again, merged by a Spark job, with the same outputs."""
    from falkirk.spark.pipeline.run import session

    monkeypatch.setattr(layers, "COMPACT_AT", 1e9)
    held: list[list[tuple[Any, ...]]] = []  # per merge on the driver: the changes since the base, by user
    real_on_driver = layers.on_driver

    def on_driver(table: Any, like: Any) -> Any:
        cols = ["user", "amount", "visits", "_deleted"]
        held.append(sorted(tuple(r[c] for c in cols) for r in table.to_pylist()))
        df = real_on_driver(table, like)
        assert session.materialised(df) and session.missing_blocks(df) == []  # made, out of executors' reach
        return df

    counted: list[Any] = []  # each count of a frame by a job of its own
    real_counted = layers.counted

    def counting(frame: Any, key: str, step: str) -> int:
        counted.append(frame)
        return real_counted(frame, key, step)

    monkeypatch.setattr(layers, "on_driver", on_driver)
    monkeypatch.setattr(layers, "counted", counting)
    _changes_output_pipeline(tmp_path / "driver", spark).run(EPOCHS)
    expected = _outputs_are_the_changes(spark, tmp_path / "driver", EPOCHS)
    latest: dict[int, tuple[Any, ...]] = {}
    want = []
    for e in range(1, EPOCHS):
        latest.update({r[0]: r for r in expected[e]})
        want.append(sorted(latest.values()))
    assert held == want
    assert counted == []
    held.clear()
    bound = len(want[-1]) - 1
    monkeypatch.setattr(layers, "DRIVER_MAX_ROWS", bound)
    _changes_output_pipeline(tmp_path / "executors", spark).run(EPOCHS)
    assert _outputs_are_the_changes(spark, tmp_path / "executors", EPOCHS) == expected
    # held on the driver while those held and the epoch's changes fit the bound; merged by Spark's jobs after
    fits = [e for e in range(1, EPOCHS) if (len(want[e - 2]) if e > 1 else 0) + len(expected[e]) <= bound]
    first_out = next(e for e in range(1, EPOCHS) if e not in fits)
    assert 1 < first_out and held == want[: first_out - 1]
    assert counted


def test_changes_held_on_the_driver_take_a_null_where_an_earlier_epochs_plan_promised_none(spark: Any) -> None:
    """The merge on the driver with real frames: changes since the base whose plan promised no null (non-nullable
    columns, as collected), then an epoch's changes with a null in such a column (a tombstone): merged and made a
    DataFrame holding both epochs' rows (a cast to the first plan's nullability would refuse the null), every
    column nullable; the state's key an integer (held on the driver), not a float or a string."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StringType

    first = spark.range(3).select(F.col("id").alias("k"), (F.col("id") * 10).alias("v"), F.lit(False).alias("_deleted"))
    before = first.toArrow()
    assert not first.schema["v"].nullable and not before.schema.field("v").nullable
    later = spark.createDataFrame([(1, None, True), (5, 50, False)], "k BIGINT, v BIGINT, _deleted BOOLEAN")
    table = layers.merged_table(layers.merged_table(None, before, "k", "s"), later.toArrow(), "k", "s")
    df = layers.on_driver(table, first)
    assert sorted(tuple(r) for r in df.collect()) == [(0, 0, False), (1, None, True), (2, 20, False), (5, 50, False)]
    assert all(f.nullable for f in df.schema.fields)
    assert layers.driver_keyed(first.schema["k"].dataType)
    assert not layers.driver_keyed(DoubleType()) and not layers.driver_keyed(StringType())


def test_a_start_holds_the_restored_changes_on_the_driver_and_collects_its_first_merge(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver started over a checkpoint that is a delta: the changes since the snapshot its restore resolves
    from the deltas are collected by one job and held on the driver (the rows Spark's resolution gives, as a
    multiset), its first merge is collected (the delta's rows stand for the changes the epoch before) and merged
    on the driver, and each output epoch is the changes computed in Python. After a failure in the middle of an
    epoch in that driver, the first merge is not collected (counted first, as before)."""
    from falkirk.spark.pipeline.run import runners
    from falkirk.spark.pipeline.run.incremental import StateCheckpoints

    monkeypatch.setattr(layers, "COMPACT_AT", 1e9)
    _changes_output_pipeline(tmp_path, spark).run(6)
    resolved: list[Counter[tuple[Any, ...]]] = []  # per restore with deltas: the overlay Spark resolves
    read_layers = StateCheckpoints.read_layers

    def spy(self: Any, m: Any) -> Any:
        parts = read_layers(self, m)
        if parts[1] is not None:
            resolved.append(Counter(tuple(r) for r in parts[1].select("user", "amount", "visits", "_deleted").collect()))
        return parts

    held: list[Counter[tuple[Any, ...]]] = []  # each frame held on the driver, as rows
    real_on_driver = layers.on_driver

    def on_driver(table: Any, like: Any) -> Any:
        held.append(Counter(tuple(r[c] for c in ("user", "amount", "visits", "_deleted")) for r in table.to_pylist()))
        return real_on_driver(table, like)

    collected: list[bool] = []  # per execution of the step: whether its changes were collected
    real_collected = runners.StepRunner._changes_collected

    def collecting(self: Any, changes: Any, marked: Any, key: str) -> Any:
        got = real_collected(self, changes, marked, key)
        collected.append(got is not None)
        return got

    monkeypatch.setattr(StateCheckpoints, "read_layers", spy)
    monkeypatch.setattr(layers, "on_driver", on_driver)
    monkeypatch.setattr(runners.StepRunner, "_changes_collected", collecting)
    result = _changes_output_pipeline(tmp_path, spark).run(EPOCHS, fail=["totals@7:mid"])
    assert [str(f) for f in result.fired] == ["totals@7:mid"]
    start, failure = (epoch_of(r.plan.frontiers["totals"]) for r in result.journal.recoveries)
    manifest = state_checkpoints(tmp_path)[start]
    assert "delta" in manifest["extra"] and start < 6  # restored from a delta, epochs after it run again
    _outputs_are_the_changes(spark, tmp_path, EPOCHS)
    assert resolved and held[0] == resolved[0]  # the start's restore: the resolved changes, on the driver
    # executions: epochs start+1 .. 7 (the last one failed), then failure+1 .. the last again; the start's first
    # merge collected, the first after the failure's restore not
    assert len(collected) == (7 - start) + (EPOCHS - 1 - failure), collected
    assert collected[0] and not collected[7 - start], collected


def _jobs(spark: Any, group: str, action: Any) -> tuple[Any, int]:
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        out = action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    return out, len(sc.statusTracker().getJobIdsForGroup(group))


def test_the_keys_of_a_small_input_epoch_are_collected_without_a_job(spark: Any, tmp_path: Path) -> None:
    """``layers.collected`` of a plan over an input epoch read on the driver (a local relation: projections,
    filters and a limit folded into it) takes its rows without a Spark job, as a ``lookup``'s few keys are; any
    other plan by ``toArrow``'s job. Both give ``toArrow``'s table."""
    from pyspark.sql import functions as F

    from falkirk.spark import InputLog

    log = InputLog(tmp_path, "events", "user BIGINT, v BIGINT", partitions=2, key="user", fsync=False)
    log.append([{"user": u, "v": u % 3} for u in range(40)], batch="a")
    log.cut(0)
    keys = log.read(spark, 0).where(F.col("v") == 1).select("user").limit(10)
    got, jobs = _jobs(spark, "collected-local", lambda: layers.collected(keys))
    assert jobs == 0
    want = keys.toArrow()
    assert got.schema == want.schema and got.num_rows == 10
    assert sorted(got.column("user").to_pylist()) == sorted(want.column("user").to_pylist())
    assert set(got.column("user").to_pylist()) <= {u for u in range(40) if u % 3 == 1}
    other = spark.range(0, 40, numPartitions=2).where(F.col("id") % 3 == 1).withColumnRenamed("id", "user")
    got, jobs = _jobs(spark, "collected-scan", lambda: layers.collected(other))
    assert jobs >= 1 and sorted(got.column("user").to_pylist()) == [u for u in range(40) if u % 3 == 1]


def test_the_state_keeps_the_column_order_the_step_returned(
    spark: Any, tmp_path: Path, restores: list[tuple[int, bool]]
) -> None:
    """A state whose key is not its first column: ``state`` and ``lookup(state, keys)`` give its columns in the
    order the step returned them, every epoch and after a restore from a snapshot and a delta (a join on the key
    column alone would put the key first), so a step that unions rows by position adds the right columns up;
    each output epoch is the running totals computed in Python."""
    from pyspark.sql import functions as F

    seen: list[tuple[list[str], list[str]]] = []
    pipe = Pipeline(tmp_path, spark, fsync=False, gc=False)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=churn)

    def totals(events: Any, *, state: Any) -> Any:
        now = events.groupBy("user").agg(F.sum("amount").alias("amount")).select("amount", "user")
        if state is None:
            return now, now
        old = lookup(state, now.select("user"))
        seen.append((state.columns, old.columns))
        new = old.union(now).groupBy("user").agg(F.sum("amount").alias("amount")).select("amount", "user")
        return new, new

    regime = Lazy(every=1, key="user", incremental=True, snapshot_every=3, changes=True)
    pipe.step(totals, inputs=["events"], regime=regime)
    pipe.output("report", inputs=["totals"])
    result = pipe.run(EPOCHS, fail=["totals@5:mid"])  # restored from epoch 4: the snapshot at 3 and one delta
    assert [str(f) for f in result.fired] == ["totals@5:mid"] and restores == [(4, True)]
    assert len(seen) >= EPOCHS - 1 and {(tuple(a), tuple(b)) for a, b in seen} == {(("amount", "user"),) * 2}
    running: dict[int, int] = {}
    for e in range(EPOCHS):
        for r in churn(e):
            running[r["user"]] = running.get(r["user"], 0) + r["amount"]
        want = sorted((running[u], u) for u in {r["user"] for r in churn(e)})
        m = json.loads((tmp_path / "manifests" / "report" / "output" / f"{e:08d}.json").read_text())
        got = spark.read.parquet(str(tmp_path / m["location"])).select("amount", "user").collect()
        assert sorted(tuple(r) for r in got) == want, e
