"""Pipeline definitions: inputs from parameter names, regimes, validation errors, the falkirk dataflow."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from falkirk.spark import Batch, Eager, Ephemeral, Lazy, Pipeline, PipelineError
from falkirk.spark.pipeline.tools.flagship import build


def _pipe(tmp: Path) -> Pipeline:
    p = Pipeline(tmp, fsync=False)
    p.input("src", "x BIGINT")
    return p


def test_inputs_come_from_parameter_names(tmp_path: Path) -> None:
    """Non-reserved parameters name the inputs; epoch/state/db/spark are supplied by the executor."""
    p = _pipe(tmp_path)

    def a(src: Any, *, epoch: int) -> Any:
        return src

    def b(a: Any, src: Any, *, state: Any, spark: Any) -> Any:
        return a, state

    p.step(a)
    p.step(b, regime=Lazy(every=2))
    assert p.steps["b"].inputs == ("a", "src") and p.steps["b"].wants == {"state", "spark"}
    assert [e.name for e in p.edges] == ["src->a", "a->b", "src->b"]


@pytest.mark.parametrize(
    ("fn_src", "regime", "message"),
    [
        ("def f(nope): pass", Ephemeral(), "input 'nope' is not an input or an earlier step"),
        ("def f(src): pass", Lazy(every=2), r"passes \['state'\]"),
        ("def f(*, epoch): pass", Ephemeral(), "it has no inputs"),
        ("def epoch(src): pass", Ephemeral(), "reserved"),
    ],
)
def test_bad_steps_are_rejected(tmp_path: Path, fn_src: str, regime: Any, message: str) -> None:
    """Unknown inputs, missing regime parameters, no inputs and reserved names are refused, naming the step."""
    p = _pipe(tmp_path)
    ns: dict[str, Any] = {}
    exec(fn_src, ns)
    fn = next(v for k, v in ns.items() if callable(v) and not k.startswith("__"))
    with pytest.raises(PipelineError, match=message):
        p.step(fn, regime=regime)


def test_regime_validation() -> None:
    """Bad regime parameters are refused."""
    with pytest.raises(PipelineError, match="every=0"):
        Lazy(every=0)
    with pytest.raises(PipelineError, match="always logs"):
        Batch(log=False)
    with pytest.raises(PipelineError, match="name the tables"):
        Eager(database="x.sqlite")


def test_flagship_dataflow(tmp_path: Path) -> None:
    """The flagship maps to falkirk processors: stateless readers/ephemeral/batch, logged readers and heavy."""
    df = build(tmp_path, None).dataflow()
    stateless = {n for n, p in df.processors.items() if p.stateless}
    assert stateless == {"events", "queries", "parse_batch", "heavy", "parse_graph", "answer"}
    logs = {n: sorted(p.logs) for n, p in df.processors.items() if p.logs}
    assert logs == {"events": ["events->parse_batch", "events->parse_graph"], "queries": ["queries->answer"],
                    "heavy": ["heavy->answer"]}


def test_root_holds_one_pipeline(tmp_path: Path) -> None:
    """A root written by one pipeline refuses a different one (a removed step); a changed ``every`` is accepted
    (tests/spark/pipeline/declare/test_evolution.py has every case)."""
    build(tmp_path, None).check_root()
    build(tmp_path, None).check_root()
    smaller = build(tmp_path, None)
    del smaller.steps["stats"]
    smaller.order.remove("stats")
    with pytest.raises(PipelineError, match="different pipeline \\(step 'stats' is missing here\\)"):
        smaller.check_root()
    assert build(tmp_path, None, cc_every=5).check_root().accepted == ("step 'cc': every 3 → 5 (from the next epoch)",)


def test_regime_arguments_are_keyword_only_and_checked() -> None:
    """``Lazy(3)`` used to mean log=3, every=1; now it is refused, and log must be a bool."""
    with pytest.raises(TypeError):
        Lazy(3)  # type: ignore[misc]
    with pytest.raises(PipelineError, match=r"Ephemeral: log='yes' must be True or False"):
        Ephemeral(log="yes")  # type: ignore[arg-type]
    assert Lazy(every=3).every == 3 and not Lazy(every=3).log


def test_eager_tables_without_a_database_are_refused() -> None:
    """``Eager(tables=…)`` without ``database=`` used to be accepted and the tables ignored."""
    with pytest.raises(PipelineError, match=r"tables=\{'stats': 'epoch'\} needs database="):
        Eager(tables={"stats": "epoch"})


def test_a_stopped_or_missing_session_is_a_clear_error(tmp_path: Path) -> None:
    """Not a session (here: a string) fails before anything runs, naming what it needs; nothing is written."""
    from falkirk.spark import SessionError

    p = _pipe(tmp_path)
    p.spark = "spark"  # type: ignore[assignment]
    with pytest.raises(SessionError, match="needs a pyspark.sql.SparkSession, got str"):
        p.run(1)
    assert not (tmp_path / "pipeline.json").exists()


def test_a_session_whose_jvm_died_is_a_clear_error(tmp_path: Path) -> None:
    """A classic session whose driver JVM is gone (py4j: connection refused) is a SessionError saying so.

    Before, it looked alive from Python, and the first thing to fail on a
    cluster master was the storage probe, which blamed the root's disk.
    The session here is a real ``SparkSession`` object whose JVM gateway
    refuses connections, as py4j does after the JVM died.
    """
    from pyspark.sql import SparkSession

    from falkirk.spark import SessionError

    class DeadJVM:
        def sc(self) -> Any:
            raise ConnectionRefusedError(111, "Connection refused")

    dead = object.__new__(SparkSession)
    dead._sc = SimpleNamespace(_jsc=DeadJVM())  # type: ignore[attr-defined]
    p = _pipe(tmp_path)
    p.spark = dead
    with pytest.raises(SessionError, match=r"JVM does not answer \(.*Connection refused\).*driver process died"):
        p.run(1)
    assert not (tmp_path / "pipeline.json").exists()


def test_a_missing_state_key_column_stops_at_the_first_epoch(tmp_path: Path, spark: Any) -> None:
    """``key=`` naming a column the state lacks is a PipelineError naming step and argument at epoch 0, not retried."""
    p = Pipeline(tmp_path, spark)
    p.input("events", "user BIGINT, amount BIGINT", source=lambda e: [{"user": 1, "amount": e}])

    @p.step(regime=Lazy(every=2, key="usr", partitions=2))
    def totals(events: Any, *, state: Any) -> Any:
        new = events.groupBy("user").sum("amount")
        return new, new

    progress: list[str] = []
    with pytest.raises(PipelineError, match=r"step 'totals': key='usr' is not a column of the state it returned"):
        p.run(2, progress=progress.append)
    assert not any("recover" in line for line in progress), progress
