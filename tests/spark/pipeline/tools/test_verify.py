"""compare_runs: two runs' external outputs compared as multisets — a duplicated or a missing row is a difference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Pipeline, compare_runs

pytestmark = pytest.mark.spark


def _write(spark: Any, root: Path, epoch: int, rows: list[tuple[int, str]]) -> None:
    df = spark.createDataFrame(rows, "k BIGINT, v STRING")
    df.coalesce(1).write.mode("overwrite").parquet(str(root / "output" / "out" / f"epoch={epoch}"))


def _pipe(root: Path) -> Pipeline:
    pipe = Pipeline(root, fsync=False)
    pipe.input("src", "k BIGINT, v STRING")
    pipe.output("out", inputs=["src"])
    return pipe


def test_identical_outputs_compare_equal_row_for_row(spark: Any, tmp_path: Path) -> None:
    """The same rows in another order and another file layout are identical."""
    a, b = tmp_path / "a", tmp_path / "b"
    _write(spark, a, 0, [(1, "x"), (2, "y"), (2, "y")])
    _write(spark, b, 0, [(2, "y"), (1, "x"), (2, "y")])
    cmp = compare_runs(spark, _pipe(a), a, b)
    assert cmp.identical and cmp.rows_compared == 3 and not cmp.differences


def test_a_duplicate_and_a_missing_row_are_each_a_difference(spark: Any, tmp_path: Path) -> None:
    """One epoch has a row twice, another lacks one: both are reported with their counts."""
    run, ref = tmp_path / "run", tmp_path / "ref"
    _write(spark, ref, 0, [(1, "x"), (2, "y")])
    _write(spark, ref, 1, [(3, "z"), (4, "w")])
    _write(spark, run, 0, [(1, "x"), (2, "y"), (2, "y")])
    _write(spark, run, 1, [(3, "z")])
    cmp = compare_runs(spark, _pipe(run), run, ref)
    assert not cmp.identical
    got = {(d.epoch, d.missing, d.extra) for d in cmp.differences}
    assert got == {(0, 0, 1), (1, 1, 0)}


def test_outputs_are_compared_by_spark_not_collected(spark: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """compare_runs brings no output row to the driver: what it collects is one count per differing epoch."""
    from pyspark.sql import DataFrame

    run, ref = tmp_path / "run", tmp_path / "ref"
    for e in range(3):
        _write(spark, ref, e, [(k, "v") for k in range(50)])
        _write(spark, run, e, [(k, "v") for k in range(50 if e != 1 else 49)] + ([(7, "v")] if e == 2 else []))
    collected: list[int] = []
    real = DataFrame.collect

    def counting(self: DataFrame) -> list[Any]:
        rows = real(self)
        collected.append(len(rows))
        return rows

    monkeypatch.setattr(DataFrame, "collect", counting)
    cmp = compare_runs(spark, _pipe(run), run, ref)
    assert {(d.epoch, d.missing, d.extra) for d in cmp.differences} == {(1, 1, 0), (2, 0, 1)}
    assert cmp.rows_compared == 150 and not cmp.identical
    assert sum(collected) <= 2  # one row per differing epoch and side, never the 300 rows of the outputs
