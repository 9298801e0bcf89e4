"""Spark's own task retries are counted per pipeline run: job groups are unique to one run's step execution."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Pipeline

pytestmark = [pytest.mark.spark]


def _records(epoch: int) -> list[dict[str, Any]]:
    return [{"user": f"u{i}", "n": i + epoch} for i in range(40)]


def double(clicks: Any) -> Any:
    return clicks.selectExpr("user", "n * 2 AS n")


def _pipe(root: Path, spark: Any) -> Pipeline:
    p = Pipeline(root, spark, fsync=False)
    p.input("clicks", "user STRING, n BIGINT", source=_records)
    p.step(double, regime=Ephemeral())
    p.output("out", inputs=["double"])
    return p


def _retried(notes: list[str]) -> dict[str, int]:
    out = {}
    for note in notes:
        m = re.match(r"(\S+@\d+): Spark retried (\d+) failed task", note)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def test_task_retries_are_not_counted_across_pipelines(spark: Any, tmp_path: Path) -> None:
    """Before: job groups were named after step and epoch only, so in one SparkSession a failure-free pipeline
    reported the retried task of an earlier pipeline's same-named step, and one failed attempt was counted again
    by every later run. Now: exactly the injected attempt, once, in the run that had it, and none elsewhere."""
    first = _pipe(tmp_path / "a", spark).run(2, fail=["double@1:task"])
    assert [str(i) for i in first.fired] == ["double@1:task"] and not first.journal.recoveries
    assert _retried(first.journal.notes) == {"double@1": 1}, first.journal.notes
    for name in ("b", "c"):  # the same pipeline in other roots, same session: nothing retried
        again = _pipe(tmp_path / name, spark).run(2)
        assert _retried(again.journal.notes) == {}, again.journal.notes
