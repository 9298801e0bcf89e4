"""The two Spark lineage/streaming example scripts run (in this process, on the shared session)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"falkirk_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.fetch_failure  # after every other Spark test: see tests/conftest.py
def test_lineage_example_agrees_with_spark(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/spark_lineage.py predicts the stages Spark resubmits after a fetch failure."""
    out = load("spark_lineage").main(spark)
    assert out["predicted"] == out["spark"] and out["precise"] < out["spark"]
    assert "Spark resubmitted (fetch failure: True)" in capsys.readouterr().out


def test_streaming_example_reproduces_the_sink(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/spark_streaming_rollback.py rolls the query back to batch 1 and re-produces batches 2-3."""
    out = load("spark_streaming_rollback").main(spark, str(tmp_path))
    assert out["plan"].actions["query"] == "rollback" and len(out["outputs"]) == 4
    assert "re-produced identically: True" in capsys.readouterr().out
