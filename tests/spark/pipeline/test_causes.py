"""Failure attribution: a failed step reports its root cause; an unreadable input is the input's problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Pipeline, RecoveryError
from falkirk.spark.pipeline.causes import root_cause, unreadable_input

pytestmark = [pytest.mark.spark]


def _records(epoch: int) -> list[dict[str, Any]]:
    return [{"user": f"u{i}", "n": i + epoch} for i in range(20)]


def _pipe(root: Path, spark: Any, step: Any) -> Pipeline:
    p = Pipeline(root, spark, fsync=False)
    p.input("clicks", "user STRING, n BIGINT", source=_records)
    p.step(step, regime=Ephemeral())
    p.output("out", inputs=[step.__name__])
    return p


def test_user_error_in_a_udf_is_reported_with_its_traceback_line(spark: Any, tmp_path: Path) -> None:
    """A KeyError raised in the user's UDF on an executor: the report names it, not ``Py4JJavaError … o123.count``."""
    from pyspark.sql import functions as F

    def lookup(clicks: Any) -> Any:
        @F.udf("string")
        def region(user: str) -> str:
            return {"u1": "eu"}[user]  # KeyError for every other user

        return clicks.select(region("user").alias("region"))

    with pytest.raises(RecoveryError) as err:
        _pipe(tmp_path, spark, lookup).run(1)
    text = str(err.value)
    assert "KeyError: 'u0'" in text or "KeyError: 'u" in text, text
    assert "o1" not in text.split("giving up:")[1][:40]  # not the py4j call id
    assert "in region" in text


def test_input_file_gone_is_an_input_problem_not_retried(spark: Any, tmp_path: Path) -> None:
    """An input file that vanished before the step read it: one clear error naming the input, no step retries."""
    calls: list[int] = []

    def count(clicks: Any, *, epoch: int) -> Any:
        calls.append(epoch)
        for f in (tmp_path / "input" / "clicks").rglob("*.jsonl"):
            f.unlink()  # the data behind the (lazy) DataFrame disappears before Spark reads it
        return clicks

    with pytest.raises(RecoveryError, match=r"input clicks|step clicks") as err:
        _pipe(tmp_path, spark, count).run(1)
    assert "input at epoch 0 is unusable: unreadable while" in str(err.value)
    assert "FILE_NOT_EXIST" in str(err.value) or "does not exist" in str(err.value)
    assert calls == [0]  # not retried as if the step were at fault


def test_root_cause_of_plain_errors() -> None:
    """Errors without a Spark wrapper keep their own first line; error classes and Caused-by chains are found."""
    assert root_cause(ValueError("bad value\nmore")) == "bad value"
    assert root_cause(RuntimeError("An error occurred while calling o5.count.\nCaused by: java.io.IOException: disk gone")) \
        == "disk gone"
    assert unreadable_input("[PATH_NOT_FOUND] Path does not exist: file:/r/input/a/x", "file:///r", ["a", "b"]) == "a"
    assert unreadable_input("KeyError: 'a'", "file:///r", ["a"]) is None
