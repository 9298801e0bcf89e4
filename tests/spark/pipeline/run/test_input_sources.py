"""A pipeline's source may return mappings, Arrow, pandas, Parquet paths or a Spark DataFrame: the same run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Pipeline
from falkirk.spark.pipeline.tools.verify import output_rows

pytestmark = pytest.mark.spark

SCHEMA = "user BIGINT, amount DOUBLE"


def _records(epoch: int) -> list[dict[str, Any]]:
    return [{"user": u, "amount": epoch + u / 4} for u in range(12)]


def _run(root: Path, spark: Any, source: Any) -> None:
    p = Pipeline(root, spark, fsync=False)
    p.input("events", SCHEMA, partitions=2, key="user", source=source)

    @p.step(regime=Ephemeral())
    def big(events: Any) -> Any:
        return events.where("amount > 1").select("user", "amount", "_partition", "_offset")

    p.output("out", inputs=["big"])
    p.run(3, fail="big@1:mid")


def test_every_kind_of_source_gives_the_same_outputs(spark: Any, tmp_path: Path) -> None:
    """Outputs (with partitions and offsets) are equal row for row whatever the source returns; a failure recovers."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    def parquet(epoch: int) -> str:
        path = tmp_path / f"in-{epoch}.parquet"
        pq.write_table(pa.Table.from_pylist(_records(epoch)), path)
        return str(path)

    sources = {
        "arrow": lambda e: pa.Table.from_pylist(_records(e)),
        "pandas": lambda e: pd.DataFrame(_records(e)),
        "parquet": parquet,
        "spark": lambda e: spark.createDataFrame(_records(e), SCHEMA),  # in order: the same offsets
    }
    _run(tmp_path / "dicts", spark, _records)
    want = output_rows(spark, tmp_path / "dicts", "out")
    assert sorted(want) == [0, 1, 2] and sum(len(c) for c in want.values()) > 20
    for name, source in sources.items():
        _run(tmp_path / name, spark, source)
        assert output_rows(spark, tmp_path / name, "out") == want, name
