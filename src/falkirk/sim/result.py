"""What a simulation is given and what it gives back: a :class:`Failure` schedule and a :class:`Result`.

>>> f = Failure(3, ["sum", "out"])
>>> f.step, sorted(f.processors), str(f)
(3, ['out', 'sum'], 'step 3: fail out, sum')
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from attrs import define, field, frozen

__all__ = ["Failure", "Result"]


def _names(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


@frozen
class Failure:
    """``processors`` fail just before step ``step`` (0-based)."""

    step: int
    processors: frozenset[str] = field(converter=_names)

    def __str__(self) -> str:
        return f"step {self.step}: fail {', '.join(sorted(self.processors))}"


@define
class Result:
    """What a run produced: acknowledged and released output per output processor, and counters.

    Cost counters (for comparing schemes; all but ``events`` and ``replayed``
    need ``Simulation(measure=True)``, sizes are :func:`~falkirk.sim.state.nbytes`):

    * ``events`` — events executed (reads, messages, notifications); minus
      the ``events`` of the failure-free run, plus ``replayed``, it is the
      number of **records recomputed** because of failures;
    * ``replayed`` — events re-run from a history log to restore state;
    * ``checkpoint_bytes`` — bytes of state written (snapshots, deltas);
    * ``log_bytes_peak`` / ``log_bytes_end`` — bytes that must be retained
      for replay (logged messages, history logs, input read but not yet
      acknowledged to its source), at the peak and at the end;
    * ``recovery_steps`` — per failure, the scheduler steps until every
      processor has again settled every time it had settled just before the
      failure, summed over failures.

    Per output processor: ``journal`` — what its service was told, in order
    (``("write", t, records)``, ``("retract", t, records)``); for a final
    output (``Commit(final=True)``), ``discarded`` — records re-sent for a
    committed time and dropped — and ``divergent`` — committed times whose
    re-sent records differed from the kept ones (``(t, kept, re-sent)``).

    ``scheduled``: counters of the pipelined schedule
    (:attr:`falkirk.sim.schedule.Pipelined.stats`; empty for the sequential one).
    """

    output: dict[str, dict[Any, tuple[Any, ...]]]
    released: dict[str, dict[Any, tuple[Any, ...]]]
    choices: dict[tuple[str, Any, str], int]
    steps: int
    rollbacks: int
    checkpoints: int
    solves: int
    trace: list[str]
    events: int = 0
    replayed: int = 0
    checkpoint_bytes: int = 0
    log_bytes_peak: int = 0
    log_bytes_end: int = 0
    recovery_steps: int = 0
    journal: dict[str, list[tuple[str, Any, tuple[Any, ...]]]] = field(factory=dict)
    discarded: dict[str, int] = field(factory=dict)
    divergent: dict[str, list[tuple[Any, tuple[Any, ...], tuple[Any, ...]]]] = field(factory=dict)
    scheduled: dict[str, int] = field(factory=dict)
