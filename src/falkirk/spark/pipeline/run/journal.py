"""What happened during a run: every step execution and every recovery, with measurements.

The executor appends to a :class:`Journal`; :mod:`falkirk.spark.pipeline.tools.report` turns
it into the recovery report. Row counts are measured per (step, epoch) when
a step materialises its output, so the cost of alternative recovery schemes
can be computed from the same run.

>>> j = Journal()
>>> j.executed("cc", 0, rows=10, seconds=0.5, redo=False)
>>> j.executed("cc", 0, rows=10, seconds=0.4, redo=True)
>>> j.rows("cc", 0), j.seconds("cc", 0), len(j.executions)
(10, 0.5, 2)
"""

from __future__ import annotations

import time
from typing import Any

from attrs import define, field

__all__ = ["Execution", "Recovery", "Journal"]


@define
class Execution:
    """One run of ``step`` on ``epoch``; ``redo``: it had completed that epoch before (recomputation)."""

    step: str
    epoch: int
    rows: int
    seconds: float
    redo: bool
    recovery: int | None = None
    jobs: int = 0


@define
class Recovery:
    """One failure and what falkirk did about it.

    ``done_at_failure`` is each step's last completed epoch when the failure
    was detected; ``available_at_failure`` its persisted frontiers then
    (checkpoints of stateful steps), for the global-rollback comparison.
    """

    index: int
    cause: str
    failed: tuple[str, ...]
    done_at_failure: dict[str, int]
    available_at_failure: dict[str, list[int]]
    restart: bool = False
    plan: Any = None
    started: float = field(factory=time.perf_counter)
    plan_seconds: float = 0.0
    finished: float | None = None
    problems: list[str] = field(factory=list)
    replayed: dict[str, tuple[int, int]] = field(factory=dict)  # edge -> (first, last) epoch replayed
    rescaled: dict[str, tuple[int, int]] = field(factory=dict)  # step -> (old, new) partitions of keyed state
    planner: str = ""

    @property
    def seconds(self) -> float | None:
        """Wall time from detection until every step was back where it had been (``None``: not yet)."""
        return None if self.finished is None else self.finished - self.started


class Journal:
    """Executions, recoveries and notes of one run (see the module docstring)."""

    def __init__(self) -> None:
        self.executions: list[Execution] = []
        self.recoveries: list[Recovery] = []
        self.notes: list[str] = []
        self._first: dict[tuple[str, int], Execution] = {}

    def executed(
        self, step: str, epoch: int, *, rows: int, seconds: float, redo: bool, recovery: int | None = None, jobs: int = 0
    ) -> None:
        """Record an execution (the first one of each (step, epoch) is the reference measurement)."""
        ex = Execution(step, epoch, rows, seconds, redo, recovery, jobs)
        self.executions.append(ex)
        self._first.setdefault((step, epoch), ex)

    def rows(self, step: str, epoch: int) -> int | None:
        """Output rows of ``step`` at ``epoch`` (first measurement), ``None`` if never run in this run."""
        ex = self._first.get((step, epoch))
        return None if ex is None else ex.rows

    def seconds(self, step: str, epoch: int) -> float | None:
        """Wall time of the first execution of ``step`` at ``epoch``."""
        ex = self._first.get((step, epoch))
        return None if ex is None else ex.seconds

    def open_recoveries(self) -> list[Recovery]:
        """Recoveries whose steps have not all caught up yet."""
        return [r for r in self.recoveries if r.finished is None]

    def note(self, text: str) -> None:
        """Record a remark for the report (e.g. task failures Spark retried on its own)."""
        self.notes.append(text)
