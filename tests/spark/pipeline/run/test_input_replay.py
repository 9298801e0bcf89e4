"""An input epoch replayed by a recovery is read as its first execution read it: a small one on the driver, held
there (made, out of an executor's reach, its Arrow bytes its size)."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Lazy, Pipeline
from falkirk.spark.pipeline.run import runners, session
from falkirk.spark.pipeline.store import inputread

pytestmark = [pytest.mark.spark]

EPOCHS = 6


def _pipe(root: Path, spark: Any) -> Pipeline:
    from pyspark.sql import functions as F

    def total(src: Any, *, state: Any, epoch: int) -> Any:
        upd = src.groupBy("k").agg(F.count(F.lit(1)).alias("n"))
        new = upd if state is None else state.unionByName(upd).groupBy("k").agg(F.sum("n").alias("n"))
        return new, new

    pipe = Pipeline(root, spark, fsync=False)
    pipe.input("src", "k BIGINT", partitions=2, source=lambda e: [{"k": (e * 7 + i) % 5} for i in range(3 + e)])
    pipe.step(total, inputs=["src"], regime=Lazy(every=3, key="k"))
    pipe.output("out", inputs=["total"])
    return pipe


def _out(spark: Any, root: Path) -> collections.Counter[tuple[int, int, int]]:
    rows = spark.read.parquet(str(root / "output" / "out")).collect()
    return collections.Counter((r["epoch"], r["k"], r["n"]) for r in rows)


def test_a_replayed_small_input_epoch_is_held_on_the_driver(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replayed: list[tuple[int, Any]] = []
    real = runners.InputRunner.replay

    def replay(self: Any, epoch: int) -> Any:
        df = real(self, epoch)
        replayed.append((epoch, df))
        return df

    monkeypatch.setattr(runners.InputRunner, "replay", replay)
    result = _pipe(tmp_path / "failed", spark).run(EPOCHS, fail=["total@4"])
    assert [str(i) for i in result.fired] == ["total@4:mid"]
    assert replayed, "the recovery replayed no input epoch"
    for epoch, df in replayed:
        nbytes = inputread.on_driver(df)
        assert nbytes is not None, epoch  # small: read on the driver
        assert session.materialised(df) and session.held_bytes(df) == nbytes and session.missing_blocks(df) == []
    _pipe(tmp_path / "reference", spark).run(EPOCHS)
    assert _out(spark, tmp_path / "failed") == _out(spark, tmp_path / "reference")
