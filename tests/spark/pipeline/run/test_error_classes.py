"""Errors in a step's own code or query end in StepError after one recovery; the cluster's get three.

Every PySpark error class :data:`falkirk.spark.pipeline.run.causes.PYSPARK_CLASSES` treats as deterministic
is raised, one by one, by a step; so are real ones (a missing field of a Row, a missing column, a Python
UDF raising on an executor, ANSI division by zero). Each must end in :class:`StepError` naming the step,
after at most two attempts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Pipeline, RecoveryError, StepError
from falkirk.spark.pipeline.run.causes import PYSPARK_CLASSES, pyspark_class

pytestmark = pytest.mark.spark

DETERMINISTIC = sorted(n for n, t in PYSPARK_CLASSES.items() if t == "deterministic")


def _error_class(name: str) -> type[BaseException]:
    import pyspark.errors
    import pyspark.errors.exceptions.connect as connect

    found = getattr(pyspark.errors, name, None) or getattr(connect, name, None)
    assert found is not None, f"{name} is not a PySpark error class of this PySpark"
    return found  # type: ignore[no-any-return]


def _run(tmp: Path, spark: Any, body: Callable[[Any], Any]) -> tuple[BaseException, int]:
    """Run a one-step pipeline whose step does ``body(input)``; the error it ends with and the attempts made."""
    calls: list[int] = []
    pipe = Pipeline(tmp, spark, fsync=False)
    pipe.input("src", "k BIGINT, v BIGINT", source=lambda e: [{"k": i, "v": i - 1} for i in range(3)])

    def step(src: Any) -> Any:
        calls.append(1)
        return body(src)

    pipe.step(step, name="s", inputs=["src"], regime=Ephemeral())
    with pytest.raises((StepError, RecoveryError)) as info:
        pipe.run(1)
    return info.value, len(calls)


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_each_deterministic_pyspark_class_ends_in_step_error(name: str, spark: Any, tmp_path: Path) -> None:
    """The step raises the class itself: one recovery, then StepError with the cause."""
    klass = _error_class(name)
    assert pyspark_class(klass(message="x")) == (name, "deterministic")

    def body(src: Any) -> Any:
        raise klass(message=f"{name} raised by the step")

    err, attempts = _run(tmp_path, spark, body)
    assert isinstance(err, StepError) and err.step == "s", err
    assert attempts == 2 and f"{name} raised by the step" in err.cause, (attempts, err)


@pytest.mark.parametrize("case", ["row-field", "missing-column", "udf-raises", "ansi-divide"])
def test_real_errors_of_a_steps_own_code_end_in_step_error(case: str, spark: Any, tmp_path: Path) -> None:
    """Errors PySpark raises for the step's own mistakes — on the driver and on executors — are not retried."""
    from pyspark.sql import functions as F

    def udf_body(v):  # type: ignore[no-untyped-def]  # no hints: PySpark would infer a pandas UDF
        raise ValueError(f"bad value {v}")

    bodies: dict[str, Callable[[Any], Any]] = {
        "row-field": lambda src: src.limit(1).collect()[0]["no_such_field"],  # PySparkValueError on the driver
        "missing-column": lambda src: src.select("no_such_column"),  # AnalysisException
        "udf-raises": lambda src: src.select(F.udf(udf_body, "bigint")("v").alias("v")),  # PythonException
        "ansi-divide": lambda src: src.selectExpr("k / (v - v) AS r"),  # SparkArithmeticException
    }
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        err, attempts = _run(tmp_path, spark, bodies[case])
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)
    assert isinstance(err, StepError), err
    assert attempts <= 2, attempts


def test_a_transient_class_gets_three_recoveries(spark: Any, tmp_path: Path) -> None:
    """UnknownException (the cluster, not the code): retried in place once (the step lost nothing), recovered
    three times, then RecoveryError — not StepError."""
    klass = _error_class("UnknownException")

    def body(src: Any) -> Any:
        raise klass(message="the cluster hiccupped")

    err, attempts = _run(tmp_path, spark, body)
    assert type(err) is RecoveryError and "failed 5 times" in str(err), err
    assert attempts == 5


def test_a_failure_inside_a_fused_steps_computation_is_that_steps(spark: Any, tmp_path: Path) -> None:
    """``s`` (unlogged) is computed inside its consumer ``t``'s job; its UDF raising there is ``s``'s failure —
    StepError names ``s``, not the consumer whose job ran it."""
    from pyspark.sql import functions as F

    def udf_body(v):  # type: ignore[no-untyped-def]
        raise ValueError(f"bad value {v}")

    pipe = Pipeline(tmp_path, spark, fsync=False)
    pipe.input("src", "k BIGINT, v BIGINT", source=lambda e: [{"k": i, "v": i - 1} for i in range(3)])
    pipe.step(lambda src: src.select(F.udf(udf_body, "bigint")("v").alias("v")), name="s", inputs=["src"],
              regime=Ephemeral())
    pipe.step(lambda s: s.groupBy("v").count(), name="t", inputs=["s"], regime=Ephemeral())
    from falkirk.spark.pipeline.run.fusion import fusions

    assert fusions(pipe) == ["s"]
    with pytest.raises(StepError) as info:
        pipe.run(1)
    assert info.value.step == "s" and "bad value" in info.value.cause and "inside t's job" in info.value.cause, info.value
