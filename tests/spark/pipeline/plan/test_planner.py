"""The planner seam: the flagship's expected plan, watermarks, truncation and forgetting (monitor and solver)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from falkirk.solver import Checkpoint
from falkirk.solver.monitor.store import SQLiteStore
from falkirk.spark.pipeline.plan.planner import TOP, Planner, epoch_of
from falkirk.spark.pipeline.tools.flagship import build


def _planner(tmp: Path, monitor: bool) -> Planner:
    df = build(tmp / "root", None).dataflow()
    return Planner(df, outputs=["responses"], monitor=monitor, path=tmp / "meta.sqlite" if monitor else None)


def _feed(p: Planner, epochs: int, start: int = 0) -> None:
    for e in range(start, epochs):
        for n in ["events", "queries", "parse_batch", "heavy", "parse_graph", "answer", "stats", "responses"]:
            p.record(n, e)
        if (e + 1) % 3 == 0:
            p.record("cc", e)


def _flagship_epoch(p: Planner, e: int) -> None:
    """Epoch ``e`` as the executor records it, then garbage collection (prune to the watermarks, compact)."""
    _feed(p, e + 1, start=e)
    lw = p.watermarks()
    for n in ["cc", "stats", "responses"]:
        p.prune(n, lw[n])
    p.compact()


def _live(done: int) -> dict[str, Checkpoint]:
    return {n: Checkpoint("top", notifications=done, delivered={f"answer->{n}": done}) for n in ("stats", "responses")}


@pytest.mark.parametrize("monitor", [True, False])
def test_cc_failure_plan_matches_the_design(tmp_path: Path, monitor: bool) -> None:
    """cc failing in epoch 7 with a checkpoint at 5: the batch side keeps ⊤, the graph side rolls back to 5."""
    p = _planner(tmp_path, monitor)
    _feed(p, 7)
    plan = p.plan({"cc"}, _live(6))
    got = {n: (plan.actions[n], epoch_of(f)) for n, f in plan.frontiers.items()}
    assert got == {
        "events": ("keep", TOP), "queries": ("keep", TOP), "parse_batch": ("keep", TOP), "heavy": ("keep", TOP),
        "parse_graph": ("rollback", 5), "cc": ("restore", 5), "answer": ("rollback", 5),
        "stats": ("rollback", 5), "responses": ("rollback", 5),
    }
    assert sorted(plan.replay) == ["events->parse_graph", "heavy->answer", "queries->answer"]
    assert p.watermarks()["cc"] == 5 and p.watermarks()["heavy"] == 6


@pytest.mark.parametrize("monitor", [True, False])
def test_truncate_and_forget(tmp_path: Path, monitor: bool) -> None:
    """After a rollback the steps checkpoint again from there; a forgotten checkpoint is never planned."""
    p = _planner(tmp_path, monitor)
    _feed(p, 7)
    for n in ["parse_graph", "cc", "answer", "stats", "responses"]:
        p.truncate(n, 5)
    p.record("stats", 6)  # re-checkpointing after the rollback is accepted
    assert p.available["stats"][-1] == 6 and p.available["parse_graph"] == [5]
    p.forget("cc", 5)
    plan = p.plan({"cc"}, _live(6))
    assert epoch_of(plan.frontiers["cc"]) == 2 and plan.actions["cc"] == "restore"
    assert p.watermarks()["cc"] == 2


def test_monitor_database_is_rebuilt_and_compacted(tmp_path: Path) -> None:
    """The monitor's SQLite file is replaced on rebuild and compaction folds its WAL."""
    p = _planner(tmp_path, True)
    _feed(p, 4)
    p.watermarks()
    p.truncate("stats", 1)
    p.watermarks()
    assert p.rebuilds == 2 and (tmp_path / "meta.sqlite").exists()
    p.WAL_BYTES = 0  # fold whatever the write-ahead log holds (by default only once it exceeds 1 MB)
    p.compact()
    assert not (tmp_path / "meta.sqlite-wal").exists() or (tmp_path / "meta.sqlite-wal").stat().st_size == 0
    p.close()


def test_monitor_metadata_is_pruned_to_what_storage_keeps(tmp_path: Path) -> None:
    """Before: the monitor kept every checkpoint ever recorded until it held 4x more than available, so
    ``falkirk monitor status`` counted collected checkpoints (``checkpoints 3, deletable 2`` with one on disk) and
    the database grew. Now compaction after GC prunes it in place (no per-epoch rebuild): status agrees with what
    is available, the file stays bounded over a long run, and the reopened monitor's watermarks equal those before
    pruning."""
    import contextlib
    import io

    from falkirk.cli import main
    from falkirk.solver.monitor import Monitor

    p = _planner(tmp_path, True)
    p.REOPEN = 100  # reopen from the pruned file a few times in 60 epochs (default: every 512 recorded frontiers)
    sizes = []
    for e in range(60):
        for n in ["events", "queries", "parse_batch", "heavy", "parse_graph", "answer", "stats", "responses"]:
            p.record(n, e)
        if (e + 1) % 3 == 0:
            p.record("cc", e)
        lw = p.watermarks()
        for n in ["cc", "stats", "responses"]:  # what the executor's GC does for stateful steps and outputs
            p.prune(n, lw[n])
        before = p.watermarks()
        p.compact()
        sizes.append((tmp_path / "meta.sqlite").stat().st_size)
        assert p.watermarks() == before
    assert p.available["cc"] == [59] and p.available["stats"] == [59]
    assert p.rebuilds == 1 and p.reopens >= 1  # pruned in place: built once, reopened from its own pruned file
    with Monitor.open(tmp_path / "meta.sqlite") as m:
        assert {n: len(m.checkpoints(n)) for n in p.available} == {n: len(es) for n, es in p.available.items()}
        assert {n: epoch_of(f) for n, f in m.watermarks.items()} == p.watermarks()
    p.close()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["monitor", "--db", str(tmp_path / "meta.sqlite"), "status"]) == 0
    row = next(line.split() for line in out.getvalue().splitlines() if line.startswith("cc "))
    assert row[-2:] == ["1", "0"], out.getvalue()  # one checkpoint, none deletable: as on disk
    assert max(sizes[30:]) <= max(sizes[5:10]) * 1.5, sizes


def test_truncated_checkpoints_leave_the_monitor(tmp_path: Path) -> None:
    """Checkpoints a rollback abandoned (``truncate``) are gone from the monitor's database after compaction."""
    from falkirk.solver.monitor import Monitor

    p = _planner(tmp_path, True)
    _feed(p, 9)
    p.watermarks()
    p.truncate("cc", 4)
    p.compact()
    p.close()
    with Monitor.open(tmp_path / "meta.sqlite") as m:
        assert len(m.checkpoints("cc")) == 1 and p.available["cc"] == [2]


def test_monitor_database_has_small_pages(tmp_path: Path) -> None:
    """Before: SQLite's default 4 kB pages, and every transaction (a recorded frontier, a discard: ~15 per flagship
    epoch) wrote each page it changed to the write-ahead log in full, ~75 kB per epoch — most of what falkirk wrote
    per epoch. Now the database has 1 kB pages, also after a rebuild, so the log written (bounded by the 64-page
    automatic checkpoint) is a quarter as large."""
    import sqlite3

    def page_size() -> int:
        db = sqlite3.connect(tmp_path / "meta.sqlite")
        try:
            return int(db.execute("PRAGMA page_size").fetchone()[0])
        finally:
            db.close()

    p = _planner(tmp_path, True)
    wal = []
    for e in range(30):
        _flagship_epoch(p, e)
        wal.append((tmp_path / "meta.sqlite-wal").stat().st_size)
    assert page_size() == SQLiteStore.PAGE_SIZE == 1024
    assert max(wal) <= 70 * (1024 + 24) + 32, wal  # 4 kB pages: up to ~270 kB
    p.truncate("cc", 20)
    p.watermarks()
    assert p.rebuilds == 2 and page_size() == 1024
    p.close()


def test_a_batch_makes_an_epoch_one_monitor_transaction(tmp_path: Path) -> None:
    """Before: every recorded frontier and every discard of garbage collection was its own SQLite transaction (~14 per
    flagship epoch, each writing whole pages to the WAL). Now, inside ``Planner.batch`` (the executor's run loop), an
    epoch's are one: committed at ``commit()`` (the end of the epoch). Watermarks, plans and the stored monitor are
    the same as without a batch, also across a rollback's rebuild inside the batch."""
    from falkirk.solver.monitor import Monitor

    def commits(p: Planner) -> int:
        assert isinstance(p._monitor.store, SQLiteStore)
        return int(p._monitor.store.commits)

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, batched = _planner(tmp_path / "a", True), _planner(tmp_path / "b", True)
    for p in (plain, batched):
        _flagship_epoch(p, 0)
    per_epoch: dict[str, list[int]] = {"plain": [], "batched": []}
    with batched.batch():
        for e in range(1, 12):
            if e == 7:
                for p in (plain, batched):
                    p.truncate("cc", 4)  # a rollback: the monitor is rebuilt (inside the batch for one of them)
                    p.truncate("stats", 4)
                    p.truncate("responses", 4)
            for name, p in (("plain", plain), ("batched", batched)):
                c0 = commits(p)
                _flagship_epoch(p, e)
                if p is batched:
                    with batched.batch():  # nested: joins the outer batch
                        p.watermarks()
                    p.commit()
                if e != 7:
                    per_epoch[name].append(commits(p) - c0)
                assert p.watermarks() == plain.watermarks()
            assert batched.plan({"cc"}, _live(e)).to_json() == plain.plan({"cc"}, _live(e)).to_json()
            assert batched.available == plain.available
    assert set(per_epoch["batched"]) == {1}, per_epoch
    assert min(per_epoch["plain"]) >= 9, per_epoch
    assert batched.rebuilds == plain.rebuilds
    for p in (plain, batched):
        p.close()
    snaps = []
    for sub in ("a", "b"):
        with Monitor.open(tmp_path / sub / "meta.sqlite") as m:
            m._check()
            snaps.append(m.snapshot())
    assert snaps[0] == snaps[1]


class _Markers:
    """A stateless step's complete markers as its runner lists them: the newest ``retain`` epochs it completed."""

    def __init__(self, retain: int) -> None:
        self.retain, self.done = retain, -1

    def available(self) -> list[int]:
        return list(range(max(0, self.done - self.retain + 1), self.done + 1))


_STEPS = ["events", "queries", "parse_batch", "heavy", "parse_graph", "cc", "answer", "stats"]


def _restart(
    tmp: Path, epochs: int, every: int, chain: int = 1
) -> tuple[Planner, Planner, Planner, dict[str, int], Callable[[Planner], dict[str, int]]]:
    """A driver that ran ``epochs`` epochs (``cc`` checkpointing every ``every``, a snapshot every ``chain``-th
    checkpoint and deltas between) with ``retain=2`` garbage collection as
    :func:`~falkirk.spark.pipeline.run.retention.collect` does it, then what a new driver finds in storage given to
    two planners: ``old`` as found (every epoch the output committed), ``new`` after
    :func:`~falkirk.spark.pipeline.run.retention.settle`. Returns ``(run, old, new, settled, retained)``, the last
    computing the low-watermarks with retention that garbage collection deletes below."""
    from falkirk.spark.pipeline.run.retention import retained_watermarks, settle

    pipe = build(tmp / "root", None)
    assert pipe.retain == 2 and pipe.gc and pipe.durable
    markers = {n: _Markers(pipe.retain) for n in pipe.order if pipe.stateless(n)}
    run = _planner(tmp / "run", False)
    acked = {n: -1 for n in pipe.inputs}
    log_above = -1  # heavy's log: its epochs above its consumer's watermark stay
    for e in range(epochs):
        for n in ["events", "queries", "parse_batch", "heavy", "parse_graph", "answer", "stats", "responses"]:
            run.record(n, e)
        if (e + 1) % every == 0:
            run.record("cc", e)
        for m in markers.values():
            m.done = e
        lw = retained_watermarks(pipe, run, markers)  # type: ignore[arg-type]
        for n in pipe.order:
            below = min((lw[q] for q in pipe.consumers(n)), default=lw[n])
            if n in pipe.inputs:  # InputRunner.collect: acknowledged up to its and its consumers' watermark
                acked[n] = max(acked[n], min(lw[n], below))
            elif not pipe.stateless(n) and lw[n] >= 0:  # StepRunner.collect: stateful steps and the output
                run.prune(n, lw[n])
            if pipe.steps.get(n) and pipe.steps[n].regime.logs:  # heavy: its log above its consumers' watermark
                log_above = max(log_above, below)
    # storage: each stateful step's kept restore points, an input's cuts from its acknowledged epoch on, every
    # epoch the output committed (its manifests are never collected)
    found = {n: list(range(max(acked[n], 0), epochs)) for n in pipe.inputs}
    found |= {n: m.available() for n, m in markers.items() if n not in pipe.inputs}
    found |= {n: list(run.available[n]) for n in ["cc", "stats"]} | {"responses": list(range(epochs))}
    # cc's checkpoints from the snapshot its oldest kept one needs (IncrementalCheckpoints.floor): restorable too
    written = [e for e in range(epochs) if (e + 1) % every == 0]
    if found["cc"]:
        floor = max(e for i, e in enumerate(written) if i % chain == 0 and e <= found["cc"][0])
        found["cc"] = [e for e in written if e >= floor]
    old = _planner(tmp / "old", False)
    old.know(found)
    (tmp / "new").mkdir()
    new = _planner(tmp / "new", True)
    new.know(found)
    settled = settle(pipe, new, markers, found, {"heavy": list(range(log_above + 1, epochs))})  # type: ignore[arg-type]
    return run, old, new, settled, lambda p: retained_watermarks(pipe, p, markers)  # type: ignore[arg-type]


def _truncating(step: str, keep: int) -> Callable[[Planner], None]:
    return lambda p: p.truncate(step, keep)


def _same_plans(
    a: Planner, b: Planner, done: int, what: object, retained: Callable[[Planner], dict[str, int]]
) -> None:
    assert a.watermarks() == b.watermarks() and retained(a) == retained(b), what
    live = _live(done)
    for failed in [*({n} for n in [*_STEPS, "responses"]), "all"]:
        alive = {} if failed == "all" else {n: c for n, c in live.items() if n not in failed}
        x, y = a.plan(failed, alive), b.plan(failed, alive)
        assert (x.frontiers, x.actions, sorted(x.replay)) == (y.frontiers, y.actions, sorted(y.replay)), (what, failed)


def test_a_new_driver_does_not_rebuild_every_output_epoch_of_the_run(tmp_path: Path) -> None:
    """Found by the 2,000-epoch local soak: an output's manifests are never collected, so a new driver's planner
    was given every epoch the output ever committed and rebuilt ``meta.sqlite`` with a row per epoch of the whole
    run (then discarded them): the file, its write-ahead log and the restart's plan grew with the run's length.
    ``settle`` drops the output epochs below its oldest restore point (and below the output's watermark with
    retention): the planner holds no more than a few epochs beyond what the running driver held, its plans equal
    those of a planner given every epoch, also when recovery forgets a corrupt checkpoint, takes out a damaged
    output epoch or limits a changed step, and the database's size does not depend on the run's length."""
    from falkirk.solver.monitor import Monitor

    rows = {}
    for epochs in (40, 400):
        run, old, new, settled, retained = _restart(tmp_path / str(epochs), epochs, 3)
        assert set(run.available["responses"]) <= set(new.available["responses"])
        assert len(new.available["responses"]) <= 8 < len(old.available["responses"]) == epochs  # cc: every 3
        assert settled == {"responses": new.available["responses"][0]}
        def every_cc_corrupt(p: Planner) -> None:
            for e in list(p.available["cc"]):
                p.forget("cc", e)

        recoveries: dict[str, Callable[[Planner], None]] = {  # what recovery does to a trial copy first
            "as found": lambda p: None,
            "cc's newest checkpoint corrupt": lambda p: p.forget("cc", p.available["cc"][-1]),
            "cc's every checkpoint corrupt": every_cc_corrupt,
            "an output epoch damaged": _truncating("responses", epochs - 6),
            "answer's code changed": _truncating("answer", epochs - 5),
        }
        for what, change in recoveries.items():
            a, b = old.copy(), new.copy()
            change(a)
            change(b)
            _same_plans(a, b, epochs - 1, what, retained)
        assert new.watermarks() == old.watermarks()  # builds the database, from what settle kept
        new.close()
        with Monitor.open(tmp_path / str(epochs) / "new" / "meta.sqlite") as m:
            rows[epochs] = len(m.checkpoints("responses"))
        assert rows[epochs] == len(new.available["responses"])
    assert rows[400] == rows[40]


def test_without_garbage_collection_a_new_driver_keeps_every_output_epoch(tmp_path: Path) -> None:
    """``gc=False``: a running driver keeps every frontier and storage every restore point, so ``settle`` drops
    nothing (what that allows, a corrupt incremental delta falling back to the oldest snapshot with its output
    epoch, is tests/spark/pipeline/run/test_incremental.py's)."""
    from falkirk.spark.pipeline.run.retention import settle

    pipe = build(tmp_path / "root", None, gc=False)
    p = _planner(tmp_path, False)
    _feed(p, 30)
    found = {**p.available, "responses": list(range(30))}
    p.know(found)
    assert settle(pipe, p, {}, found, {}) == {} and p.available["responses"] == list(range(30))


@settings(  # FALKIRK_SETTLE_EXAMPLES=1500: a deeper search (about 4 minutes)
    max_examples=int(os.environ.get("FALKIRK_SETTLE_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    epochs=st.integers(2, 60),
    every=st.integers(1, 7),
    chain=st.integers(1, 4),
    changes=st.lists(
        st.tuples(
            st.sampled_from(["forget", "truncate"]), st.sampled_from([*_STEPS, "responses"]), st.floats(0, 1)
        ),
        max_size=3,
    ),
)
def test_settled_plans_equal_those_given_every_output_epoch(
    tmp_path_factory: pytest.TempPathFactory,
    epochs: int,
    every: int,
    chain: int,
    changes: list[tuple[str, str, float]],
) -> None:
    """Property: after ``settle``, whatever recovery then forgets (a corrupt restore point, a damaged output epoch)
    or truncates (a rollback, a changed step's limit), at any epoch, with full or incremental checkpoints (the
    deltas' snapshot below the watermark stays in storage, a restore point a running driver no longer plans with),
    a new driver plans and garbage-collects exactly as one given every output epoch of the run would, for every
    failed step and for a restart."""
    _, old, new, _, retained = _restart(tmp_path_factory.mktemp("settle"), epochs, every, chain)
    a, b = old.copy(), new.copy()
    new.close()
    for what, step, where in changes:
        if what == "forget":
            have = a.available[step]
            if have:
                e = have[min(int(where * len(have)), len(have) - 1)]
                a.forget(step, e)
                b.forget(step, e)
        else:
            e = int(where * epochs) - 1
            a.truncate(step, e)
            b.truncate(step, e)
    _same_plans(a, b, epochs - 1, changes, retained)
