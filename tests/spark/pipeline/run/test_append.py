"""A state that only grows (``append=True``): the step returns only the rows to append.

``history`` keeps every event it was sent and outputs, each epoch, per user over **all** of them the sum and
the count. With ``append=True`` it returns the epoch's events as its new state; without, the whole history
(the reference form, run with falkirk off). Every run's output is compared, as multisets, with a pure-Python
count over the seeded input, and the checkpoints with what was appended: each chained checkpoint holds exactly
the epochs' rows since the one before.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
from spark_support import churn, history_pipeline, state_checkpoints
from spark_support import history_oracle as oracle

from falkirk.spark import Eager, Lazy, Pipeline, PipelineError
from falkirk.spark.pipeline.declare.regimes import Keyed
from falkirk.spark.pipeline.plan.planner import epoch_of
from falkirk.spark.pipeline.run import appended

pytestmark = [pytest.mark.spark]

EPOCHS = 8
#: rows of ``churn`` per epoch
PER_EPOCH = len(churn(0))


def reported(spark: Any, root: Path, epochs: int) -> dict[int, collections.Counter[tuple[int, int, int]]]:
    got = spark.read.parquet(str(root / "output" / "report")).collect()
    out: dict[int, collections.Counter[tuple[int, int, int]]] = {e: collections.Counter() for e in range(epochs)}
    for r in got:
        out[r["epoch"]][(r["user"], r["amount"], r["n"])] += 1
    return out


def chained(root: Path, step: str = "history") -> dict[int, dict[str, Any]]:
    """The state checkpoints of ``step`` that are chained (their ``delta`` extra), by epoch."""
    return {e: m["extra"]["delta"] for e, m in state_checkpoints(root, step).items() if "delta" in m["extra"]}


@pytest.mark.parametrize("append", [False, True])
def test_with_falkirk_off_either_form_gives_the_oracles_output(spark: Any, tmp_path: Path, append: bool) -> None:
    """The step returning its whole history or the rows to append, falkirk off: the oracle's output (the test's
    pipeline is right, and an appended state needs no checkpoint to be right)."""
    history_pipeline(tmp_path, spark, append=append, durable=False).run(EPOCHS)
    assert reported(spark, tmp_path, EPOCHS) == oracle(EPOCHS)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_failures_recover_through_the_chain_and_each_link_holds_only_what_was_appended(
    spark: Any, tmp_path: Path, concurrency: int
) -> None:
    """Failures before, in the middle of, in a task of and after ``history``'s epochs (checkpoints after every
    second epoch): the output equals the oracle's; the first checkpoint is the state whole, every later one
    holds exactly the rows appended since the one it is chained to, and its chain names checkpoints that
    exist."""
    fail = ["history@1:mid", "history@3:before", "history@4:task", "history@5:mid", "history@6:after"]
    result = history_pipeline(tmp_path, spark, gc=False, concurrency=concurrency).run(EPOCHS, fail=fail)
    assert len(result.journal.recoveries) == len(fail) - 1  # the failed task is retried by Spark itself
    assert reported(spark, tmp_path, EPOCHS) == oracle(EPOCHS)
    manifests = state_checkpoints(tmp_path, "history")
    links = chained(tmp_path)
    assert sorted(manifests) == [1, 3, 5, 7] and sorted(links) == [3, 5, 7]
    assert manifests[1]["rows"] == 2 * PER_EPOCH  # the first: the state whole
    for e, link in links.items():
        assert link["append"] is True and link["chain"] and link["chain"][0] == 1
        assert all(c in manifests for c in link["chain"])
        assert manifests[e]["rows"] == PER_EPOCH * (e - link["chain"][-1])  # only what was appended since
        assert link["state_rows"] == PER_EPOCH * (e + 1)


def test_a_restarted_driver_reads_the_chain_in_one_scan(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline stopped after epoch 6 (checkpoints at 1, 3, 5: a full one and two chained to it) and started
    again restores epoch 5 by reading the three checkpoints' files together, and goes on to the oracle's
    output."""
    from falkirk.spark.pipeline.store.storage import Storage

    history_pipeline(tmp_path, spark, gc=False).run(6)
    reads: list[list[int]] = []
    read_many = Storage.read_many

    def spy(self: Any, spark: Any, ms: Any, **kw: Any) -> Any:
        reads.append([m.epoch for m in ms])
        return read_many(self, spark, ms, **kw)

    monkeypatch.setattr(Storage, "read_many", spy)
    again = history_pipeline(tmp_path, spark, gc=False).run(EPOCHS)
    assert reads == [[1, 3, 5]]
    assert epoch_of(again.journal.recoveries[0].plan.frontiers["history"]) == 5
    assert reported(spark, tmp_path, EPOCHS) == oracle(EPOCHS)


def test_the_chain_and_the_parts_are_bounded_and_collection_keeps_what_restores(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a chain of at most 2 checkpoints and 2 parts held, a checkpoint every epoch: a full checkpoint every
    second one and the parts compacted; then a restart with garbage collection on and failures late in the run
    (restoring after compaction and collection) still gives the oracle's output, and every checkpoint left
    names only checkpoints left."""
    monkeypatch.setattr(Keyed, "APPEND_CHAIN", 2)
    monkeypatch.setattr(appended, "PARTS", 2)
    compactions: list[int] = []
    compacted = appended.compacted

    def spy(parts: Any, detach: Any, step: str) -> Any:
        out, dropped = compacted(parts, detach, step)
        compactions.append(len(dropped))
        return out, dropped

    monkeypatch.setattr(appended, "compacted", spy)
    history_pipeline(tmp_path, spark, every=1, gc=False).run(6)
    assert {e: link["chain"] for e, link in chained(tmp_path).items()} == {1: [0], 3: [2], 5: [4]}
    assert sorted(state_checkpoints(tmp_path, "history")) == list(range(6))
    assert any(n >= 2 for n in compactions)
    result = history_pipeline(tmp_path, spark, every=1).run(EPOCHS, fail=["history@6:mid", "history@7:before"])
    assert len(result.journal.recoveries) == 3  # the restart, then the two failures
    assert reported(spark, tmp_path, EPOCHS) == oracle(EPOCHS)
    manifests = state_checkpoints(tmp_path, "history")
    assert max(manifests) == EPOCHS - 1 and min(manifests) > 0  # collected
    for m in manifests.values():
        link = m["extra"].get("delta")
        if link:
            assert all(c in manifests for c in link["chain"])


def test_a_fallback_to_an_empty_checkpoint_starts_a_new_chain(spark: Any, tmp_path: Path) -> None:
    """``history`` appends nothing at epoch 0 (an empty checkpoint there), then 1 (whole) and 2 (chained to 1).
    At epoch 3 checkpoint 1's file is damaged and the output fails, so ``history`` — not failed itself — rolls
    back past the damaged chain to the empty checkpoint. The chain it had in memory is gone with it: the
    checkpoints written again start a new chain, none chained to itself, and a later restore through them (a
    failure at epoch 5) holds every row once."""
    damaged: list[int] = []

    def damage(epoch: int) -> None:
        if epoch == 3 and not damaged:
            m = state_checkpoints(tmp_path, "history")[1]
            target = tmp_path / m["location"] / m["files"][0][0]  # [name, size, sha256]
            target.write_bytes(target.read_bytes()[:-8])  # truncated: its size no longer the manifest's
            damaged.append(epoch)

    pipe = history_pipeline(tmp_path, spark, every=1, skip=0, damage=damage, gc=False)
    result = pipe.run(7, fail=["report@3:before", "history@5:mid"])
    assert damaged == [3] and len(result.journal.recoveries) == 2
    assert epoch_of(result.journal.recoveries[0].plan.frontiers["history"]) == 0
    assert reported(spark, tmp_path, 7) == oracle(7, skip=0)
    for e, link in chained(tmp_path).items():
        assert e not in link["chain"] and link["chain"] == sorted(link["chain"]), (e, link)


def test_an_epoch_that_appends_nothing_writes_an_empty_link(spark: Any, tmp_path: Path) -> None:
    """A checkpoint every epoch, nothing appended at epoch 2: its link holds no row, the restore at epoch 4
    reads through it, and the output is the oracle's."""
    result = history_pipeline(tmp_path, spark, every=1, skip=2, gc=False).run(6, fail=["history@4:mid"])
    assert len(result.journal.recoveries) == 1
    assert epoch_of(result.journal.recoveries[0].plan.frontiers["history"]) == 3
    manifests = state_checkpoints(tmp_path, "history")
    assert manifests[2]["rows"] == 0 and chained(tmp_path)[2]["chain"] == [0, 1]
    assert reported(spark, tmp_path, 6) == oracle(6, skip=2)


@pytest.mark.parametrize("regime", ["lazy", "eager"])
def test_an_output_that_is_the_rows_appended_is_logged_and_replayed(spark: Any, tmp_path: Path, regime: str) -> None:
    """``echo`` (``Lazy(every=2)`` or ``Eager``, ``append=True, log=True``) outputs the rows it appends; the output
    fails mid-epoch twice and is fed from the log: each epoch's output is that epoch's events, once."""
    pipe = Pipeline(tmp_path, spark, fsync=False, gc=False)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=churn)

    def echo(events: Any, *, state: Any) -> Any:
        rows = events.select("user", "amount")
        return rows, rows

    kind = Lazy(every=2, append=True, log=True) if regime == "lazy" else Eager(append=True, log=True)
    pipe.step(echo, inputs=["events"], regime=kind)
    pipe.output("raw", inputs=["echo"])
    result = pipe.run(6, fail=["raw@2:mid", "raw@4:mid"])
    assert len(result.journal.recoveries) == 2
    got = spark.read.parquet(str(tmp_path / "output" / "raw")).collect()
    by: dict[int, collections.Counter[tuple[int, int]]] = {e: collections.Counter() for e in range(6)}
    for r in got:
        by[r["epoch"]][(r["user"], r["amount"])] += 1
    assert by == {e: collections.Counter((r["user"], r["amount"]) for r in churn(e)) for e in range(6)}
    assert sorted(chained(tmp_path, "echo")) == ([3, 5] if regime == "lazy" else [1, 2, 3, 4, 5])


def test_rows_appended_with_other_columns_are_refused_naming_the_step(spark: Any, tmp_path: Path) -> None:
    """Rows returned to append with a column the state lacks: the run stops naming the step, ``append=True`` and
    both sets of columns."""
    with pytest.raises(Exception) as info:
        history_pipeline(tmp_path, spark, columns=True, gc=False).run(4)
    text = str(info.value) + str(getattr(info.value, "__cause__", ""))
    assert "history" in text and "append=True" in text and "extra" in text


def test_a_restart_that_turns_append_off_is_refused_and_leaves_the_root_as_it_was(spark: Any, tmp_path: Path) -> None:
    """A pipeline restarted on a root its ``append=True`` step wrote, now declared without it: refused, naming
    the step and ``append``, and every file under the root is byte-identical to before."""
    from spark_support import root_listing

    history_pipeline(tmp_path, spark, gc=False).run(4)
    before = root_listing(tmp_path)
    with pytest.raises(PipelineError, match="append") as info:
        history_pipeline(tmp_path, spark, append=False, gc=False).run(6)
    assert "history" in str(info.value)
    assert root_listing(tmp_path) == before


def test_append_declarations_that_cannot_hold_are_refused() -> None:
    for bad in ({"key": "user"}, {"incremental": True, "key": "user"}, {"changes": True, "key": "user"}):
        with pytest.raises(PipelineError, match="append=True"):
            Lazy(append=True, **bad)
    with pytest.raises(PipelineError, match="append="):
        Eager(database="s.sqlite", tables={"t": "epoch"}, append=True)
    assert Lazy(every=3, append=True).describe()["append"] is True
    assert "append" not in Lazy(every=3).describe()


@pytest.mark.slow
@pytest.mark.connect
def test_an_appended_state_through_spark_connect(connect_server: Any, spark: Any, tmp_path: Path) -> None:
    """``append=True`` in a Connect client process (no JVM on the client: the parts are the server's local
    checkpoints, every link is written by Spark's writer): failures roll ``history`` back through its chain and
    the output equals the oracle's."""
    from spark_support import run_driver

    root = tmp_path / "run"
    fail = ["history@2:mid", "history@5:before", "history@6:mid"]
    run = run_driver({"remote": connect_server.url}, [{"name": "connect", "kind": "run", "pipeline": "history",
                                                       "options": {"gc": False}, "root": str(root),
                                                       "epochs": EPOCHS, "fail": fail}], tmp_path)
    out = run["connect"]
    assert out["ok"], (out, run.stdout[-3000:])
    assert sorted(out["fired"]) == sorted(fail)
    assert sum(r["actions"].get("history") == "restore" for r in out["recoveries"]) >= 2, out["recoveries"]
    assert sorted(chained(root)) == [3, 5, 7]
    assert reported(spark, root, EPOCHS) == oracle(EPOCHS)
