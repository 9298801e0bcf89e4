"""benchmarks/collected_write.py writes one state, and one output epoch, both ways through falkirk's storage, and they
hold the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_both_writes_of_the_state_are_measured_and_read_back_alike(spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    from benchmarks.collected_write import measure

    from falkirk.spark.pipeline.store.storage import Storage

    storage = Storage(str(tmp_path / "root"))
    got = measure(spark, storage, 40, 2, 1)
    assert got["rows"] == 40 and got["identical"] is True
    for case in ("spark", "collected"):
        assert got[case]["n"] == 2 and got[case]["wall_median_s"] > 0
    # the last of each case is published nowhere, but its files are there: pyarrow's only for the collected one
    writers = {
        "parquet-cpp" in pq.read_metadata(f).created_by for f in (tmp_path / "root" / "data").rglob("part-*.parquet")
    }
    assert writers == {True, False}


def test_both_writes_of_an_output_are_measured_and_read_back_alike(spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    from benchmarks.collected_write import measure_output

    from falkirk.spark.pipeline.store.storage import Storage

    storage = Storage(str(tmp_path / "root"))
    got = measure_output(spark, storage, 30, 2, 1)
    # 30 campaigns, their events' times all in one window: one row each, counted alike by both
    assert got["output_rows"] == got["rows_as_counted"] == 30 and got["identical"] is True
    for case in ("spark", "collected"):
        assert got[case]["n"] == 2 and got[case]["wall_median_s"] > 0
    for case, pyarrow in (("spark", False), ("collected", True)):
        files = list((tmp_path / "root" / "output" / case).rglob("part-*.parquet"))
        assert files and {"parquet-cpp" in pq.read_metadata(f).created_by for f in files} == {pyarrow}
