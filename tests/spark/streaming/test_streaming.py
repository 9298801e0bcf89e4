"""Structured Streaming checkpoints as falkirk metadata, and rolling a stopped query back.

The first tests build checkpoint directories by hand (no JVM); the Spark tests
run real queries (``rate-micro-batch``, then a JSON file source with
``maxFilesPerTrigger=1``) with a ``foreachBatch`` sink that writes one file
per batch id, lose the sink's later batches, roll back as the plan says and
check that the re-run batches are identical to the originals.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from falkirk.errors import ValidationError
from falkirk.spark.streaming.rollback import (
    apply_plan,
    offset_count,
    plan_rollback,
    query_dataflow,
    read_checkpoint,
    rollback_query,
)


def write_entry(path: Path, *lines: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["v1", *lines]) + "\n")
    (path.parent / f".{path.name}.crc").write_bytes(b"crc")


def fake_checkpoint(root: Path, *, batches: int = 4, committed: int = 4, state: tuple[str, ...] = ()) -> Path:
    """A checkpoint of a query reading a file source (one file per batch) and a rate-like source."""
    ck = root / "ck"
    (ck / "metadata").parent.mkdir(parents=True, exist_ok=True)
    (ck / "metadata").write_text('{"id":"q-1"}\n')
    for n in range(batches):
        write_entry(ck / "offsets" / str(n), "{}", json.dumps({"logOffset": n}), json.dumps({"offset": 5 * (n + 1), "timestamp": 0}))
        write_entry(ck / "sources" / "0" / str(n), json.dumps({"path": f"f{n}", "batchId": n}))
    for n in range(committed):
        write_entry(ck / "commits" / str(n), "{}")
    for name in state:
        p = ck / "state" / "0" / "0" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")
    return ck


def names(paths: list[str], root: Path) -> list[str]:
    return sorted(os.path.relpath(p, root) for p in paths)


def test_offsets_read_as_counts() -> None:
    """File, rate-micro-batch, Kafka-like and missing offsets become counts; others are rejected."""
    assert [offset_count(o) for o in (7, {"logOffset": 0}, {"offset": 10, "timestamp": 9}, {"t": {"0": 2, "1": 3}}, None)] == [7, 1, 10, 5, 0]
    with pytest.raises(ValidationError, match="cannot read"):
        offset_count("latest")


def test_checkpoint_is_read_into_metadata(tmp_path: Path) -> None:
    """Offsets, commits, loadable state versions and file-source logs are read from the directory."""
    ck = read_checkpoint(str(fake_checkpoint(tmp_path, committed=3, state=("1.delta", "2.delta", "3.snapshot", "4.delta", "5.delta"))))
    assert ck.query_id == "q-1" and ck.batches == [0, 1, 2, 3] and ck.committed == [0, 1, 2]
    assert ck.sources == 2 and ck.counts(0) == {0: 1, 1: 2, 2: 3, 3: 4} and ck.counts(1)[3] == 20
    assert ck.state == {"0": {"0": frozenset({0, 1, 2, 3, 4, 5})}} and ck.file_logs == {0: frozenset(range(4))}
    assert ck.restorable() == [0, 1, 2]
    broken = read_checkpoint(str(fake_checkpoint(tmp_path / "b", state=("1.delta", "3.delta", "4.delta"))))
    assert broken.restorable() == [0]  # state versions 3 and 4 need version 2, which is gone


def test_plan_rolls_the_query_back_to_the_sinks_last_batch(tmp_path: Path) -> None:
    """The sink lost batches after 1: the query rolls back to 1 and the sources to batch 1's offsets."""
    ck = read_checkpoint(str(fake_checkpoint(tmp_path)))
    plan = plan_rollback(ck, sink_persisted=1)
    assert plan.to_json()["frontiers"] == {"source-0": {"@input": 2}, "source-1": {"@input": 10}, "query": 1, "sink": 1}
    assert plan.actions == {"source-0": "rollback", "source-1": "rollback", "query": "rollback", "sink": "restore"}
    kept = plan_rollback(ck, sink_persisted=3)
    assert kept.actions["query"] == "rollback" and kept.frontiers["query"] == kept.frontiers["sink"]
    assert sorted(query_dataflow(ck).edges) == ["query->sink", "source-0->query", "source-1->query"]


def test_missing_state_rolls_query_and_sink_further_back(tmp_path: Path) -> None:
    """Without state for batch 2 the query returns to batch 1, and the sink must redo batch 2 (C3)."""
    ck = read_checkpoint(str(fake_checkpoint(tmp_path, state=("1.delta", "2.delta", "4.delta"))))
    plan = plan_rollback(ck, sink_persisted=2)
    assert plan.to_json()["frontiers"]["query"] == 1 and plan.to_json()["frontiers"]["sink"] == 1


def test_rollback_removes_offsets_commits_and_file_logs_above_the_epoch(tmp_path: Path) -> None:
    """Files of batches after the epoch go (with their .crc); earlier ones and state stay."""
    root = fake_checkpoint(tmp_path, state=("1.delta", "2.delta", "3.delta", "4.delta"))
    removed = rollback_query(str(root), 1)
    assert names(removed, root) == ["commits/2", "commits/3", "offsets/2", "offsets/3", "sources/0/2", "sources/0/3"]
    assert sorted(os.listdir(root / "offsets")) == [".0.crc", ".1.crc", "0", "1"]
    assert len(os.listdir(root / "state" / "0" / "0")) == 4
    assert read_checkpoint(str(root)).committed == [0, 1]


def test_rollback_refuses_epochs_it_cannot_restart_from(tmp_path: Path) -> None:
    """An uncommitted batch, a batch without state, or an epoch below -1 is refused, naming the options."""
    root = fake_checkpoint(tmp_path, committed=2, state=("1.delta", "3.delta"))
    with pytest.raises(ValidationError, match=r"restart after are \[0\]"):
        rollback_query(str(root), 1)
    with pytest.raises(ValidationError, match="batch 3"):
        rollback_query(str(root), 3)
    with pytest.raises(ValidationError, match=">= -1"):
        rollback_query(str(root), -2)
    assert names(rollback_query(str(root), -1), root)[:2] == ["commits/0", "commits/1"]
    with pytest.raises(ValidationError, match="not a streaming checkpoint"):
        read_checkpoint(str(tmp_path / "nowhere"))


# -- real queries -------------------------------------------------------------------------
class BatchFiles:
    """A foreachBatch sink writing ``batch_<id>.json`` atomically: idempotent per batch id."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = sorted(tuple(r) for r in df.collect())
        tmp = self.root / f".batch_{batch_id}.tmp"
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, self.root / f"batch_{batch_id}.json")

    def outputs(self) -> dict[int, str]:
        return {int(p.stem.split("_")[1]): p.read_text() for p in self.root.glob("batch_*.json")}

    def lose_after(self, epoch: int) -> None:
        """The downstream store fails and keeps only the batches up to ``epoch``."""
        for n in self.outputs():
            if n > epoch:
                (self.root / f"batch_{n}.json").unlink()


def roll_back_and_rerun(spark: Any, ckpt: Path, sink: BatchFiles, start: Callable[[], Any], runs: int, epoch: int) -> dict[int, str]:
    """Lose the sink's batches after ``epoch``, roll back as planned, restart; return the original outputs."""
    original = sink.outputs()
    sink.lose_after(epoch)
    plan = plan_rollback(read_checkpoint(str(ckpt)), sink_persisted=epoch)
    assert plan.to_json()["frontiers"]["query"] == epoch
    assert apply_plan(plan, str(ckpt), spark=spark)
    for _ in range(runs):
        start().awaitTermination(120)
    return original


@pytest.mark.spark
def test_rate_micro_batch_query_rolled_back_reproduces_its_sink(spark: Any, tmp_path: Path) -> None:
    """rate-micro-batch + stateful aggregation: batches after the rollback epoch come out identical."""
    from pyspark.sql import functions as F

    ckpt, sink = tmp_path / "ck", BatchFiles(tmp_path / "out")

    def start() -> Any:
        rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).option("numPartitions", 1)
                .option("startTimestamp", 0).option("advanceMillisPerBatch", 1000).load())
        agg = rows.groupBy((F.col("value") % 3).alias("k")).agg(F.count("*").alias("n"), F.sum("value").alias("s"))
        return (agg.writeStream.outputMode("complete").foreachBatch(sink).option("checkpointLocation", str(ckpt))
                .trigger(availableNow=True).start())

    for _ in range(4):  # availableNow takes one rate batch per start
        start().awaitTermination(120)
    ck = read_checkpoint(str(ckpt))
    assert ck.committed == [0, 1, 2, 3] and ck.counts(0) == {0: 5, 1: 10, 2: 15, 3: 20}
    assert ck.stateful and ck.restorable() == [0, 1, 2, 3]
    original = roll_back_and_rerun(spark, ckpt, sink, start, runs=2, epoch=1)
    assert sink.outputs() == original and len(original) == 4


@pytest.mark.spark
def test_file_source_query_rolled_back_reproduces_its_sink(spark: Any, tmp_path: Path) -> None:
    """JSON files, one per trigger, availableNow: the re-run batches read the same files again."""
    from pyspark.sql import functions as F

    inp, ckpt, sink = tmp_path / "in", tmp_path / "ck", BatchFiles(tmp_path / "out")
    inp.mkdir()
    for i in range(4):
        path = inp / f"part-{i}.json"
        path.write_text("".join(json.dumps({"k": (5 * i + j) % 3, "v": 5 * i + j}) + "\n" for j in range(5)))
        os.utime(path, (1_000 + i, 1_000 + i))

    def start(trigger: dict[str, Any] | None = None) -> Any:
        rows = spark.readStream.format("json").schema("k long, v long").option("maxFilesPerTrigger", 1).load(str(inp))
        agg = rows.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s"))
        return (agg.writeStream.outputMode("complete").foreachBatch(sink).option("checkpointLocation", str(ckpt))
                .trigger(**(trigger or {"availableNow": True})).start())

    start().awaitTermination(120)
    ck = read_checkpoint(str(ckpt))
    assert ck.committed == [0, 1, 2, 3] and ck.counts(0) == {0: 1, 1: 2, 2: 3, 3: 4}
    assert ck.file_logs == {0: frozenset(range(4))}

    running = start({"processingTime": "1 hour"})
    try:
        with pytest.raises(ValidationError, match="stop it"):
            rollback_query(str(ckpt), 1, spark=spark)
    finally:
        running.stop()
    original = roll_back_and_rerun(spark, ckpt, sink, start, runs=1, epoch=1)
    assert sink.outputs() == original and len(original) == 4
