"""Which in-memory states an executor's loss takes, for states left to the end of their epoch.

No Spark here: the executors and the blocks each frame is missing are given. A state the step returned, not
made yet, lives in executor memory only through the state before it; one its consumer's job makes (a fused
stateful step: ``Deferred(by_consumer=True)``) is lost if its own blocks or, while it may not be made yet, the
state before's are.
"""

from __future__ import annotations

from typing import Any

import pytest

from falkirk.spark.pipeline.run import watch
from falkirk.spark.pipeline.run.runners import Deferred


class _Runner:
    def __init__(self, state: Any, deferred: Deferred | None) -> None:
        self.state, self.deferred = state, deferred

    def state_parts(self) -> list[Any]:
        return [self.state]


def _lost(monkeypatch: pytest.MonkeyPatch, runners: dict[str, Any], missing: set[str]) -> list[str]:
    sets = iter([{"1", "2"}, {"2"}])  # executor 1 went away between the two looks
    monkeypatch.setattr(watch, "executors", lambda spark: next(sets))
    monkeypatch.setattr(watch, "missing_blocks", lambda df: [0] if df in missing else [])
    lost, note = watch.ExecutorWatch(None, lambda s: None).lost_state(runners, "out", 3)
    assert "executor(s) 1 lost during out@3" in note, note
    return lost


@pytest.mark.parametrize(
    ("missing", "lost"),
    [
        (set(), []),
        ({"before"}, ["fused"]),  # its lineage reads the state before until its consumer's job made it
        ({"new"}, ["fused"]),  # made, and a block of it gone
    ],
)
def test_a_state_its_consumer_makes_is_lost_with_its_blocks_or_the_state_befores(
    monkeypatch: pytest.MonkeyPatch, missing: set[str], lost: list[str]
) -> None:
    deferred = Deferred(3, "new", False, ("input",), "before", made=True, by_consumer=True)
    assert _lost(monkeypatch, {"fused": _Runner("new", deferred)}, missing) == lost


@pytest.mark.parametrize(("missing", "lost"), [(set(), []), ({"before"}, []), ({"new"}, ["made"])])
def test_a_state_made_in_its_execution_is_lost_with_its_own_blocks_only(
    monkeypatch: pytest.MonkeyPatch, missing: set[str], lost: list[str]
) -> None:
    deferred = Deferred(3, "new", True, (), None, made=True)
    assert _lost(monkeypatch, {"made": _Runner("new", deferred)}, missing) == lost


def test_a_state_not_made_yet_is_lost_with_the_state_before(monkeypatch: pytest.MonkeyPatch) -> None:
    deferred = Deferred(3, "returned", False, ("input",), "before")
    assert _lost(monkeypatch, {"deferred": _Runner("returned", deferred)}, {"before"}) == ["deferred"]
    assert _lost(monkeypatch, {"deferred": _Runner("returned", deferred)}, {"returned"}) == []
