"""The world outside the dataflow: input sources and output services (paper §4.3).

* :class:`ExternalInput` keeps every batch until it is acknowledged (the
  source's low-watermark covers its epoch); reading an acknowledged batch
  again raises :class:`CollectedStateNeeded`.
* :class:`ExternalOutput` receives the records of each settled time when the
  output processor commits (it **acknowledges** them: the processor's
  checkpoint), forgets acknowledged times the processor rolls back past,
  and **releases** them downstream once the output processor's
  low-watermark covers them — from then on they may never change
  (:class:`ReleasedOutputChanged` otherwise).

Also the simulator's own errors, all :class:`~falkirk.errors.FalkirkError`.

>>> from falkirk.domains import Epoch
>>> out = ExternalOutput(Epoch())
>>> out.commit(Epoch().frontier(1), Epoch().frontier(-1), {0: [2, 1], 1: []})
>>> out.acknowledged
{0: (1, 2)}
>>> out.release(Epoch().frontier(0))
>>> out.commit(Epoch().frontier(1), Epoch().frontier(-1), {0: [5]})
Traceback (most recent call last):
...
falkirk.sim.external.ReleasedOutputChanged: released output at time 0 changed from (1, 2) to (5,)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from falkirk.domains import Frontier
from falkirk.domains.base import Domain
from falkirk.errors import FalkirkError

__all__ = [
    "SimulationError",
    "CollectedStateNeeded",
    "ProtocolViolation",
    "ReleasedOutputChanged",
    "NoProgress",
    "ExternalInput",
    "ExternalOutput",
]


class SimulationError(FalkirkError, RuntimeError):
    """Something a correct rollback protocol never lets happen."""


class CollectedStateNeeded(SimulationError):
    """A rollback needed a checkpoint, log entry or input batch that garbage collection deleted."""


class ProtocolViolation(SimulationError):
    """A message arrived at a time the receiver had already been told was complete, or similar."""


class ReleasedOutputChanged(SimulationError):
    """Output already released downstream was produced again with different records."""


class NoProgress(SimulationError):
    """The run did not finish within its step budget."""


class ExternalInput:
    """A source's batches, one per epoch, kept until acknowledged."""

    def __init__(self, name: str, batches: Sequence[Sequence[Any]]) -> None:
        self.name = name
        self.batches = [tuple(b) for b in batches]
        self.acked: set[int] = set()

    def read(self, epoch: int) -> list[Any]:
        """The batch of ``epoch`` (``[]`` past the end); loud if it was acknowledged."""
        if epoch in self.acked:
            raise CollectedStateNeeded(f"source {self.name!r} must re-read epoch {epoch}, which was acknowledged and deleted")
        return list(self.batches[epoch]) if epoch < len(self.batches) else []

    def acknowledge(self, lw: Frontier) -> None:
        """Acknowledge every batch whose epoch is in the low-watermark ``lw``."""
        self.acked.update(e for e in range(len(self.batches)) if e in lw)


class ExternalOutput:
    """An output service: acknowledged records per time, and the released part."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.acknowledged: dict[Any, tuple[Any, ...]] = {}
        self.released = Frontier.empty(domain)
        self.released_records: dict[Any, tuple[Any, ...]] = {}
        self.commits = 0

    def commit(self, frontier: Frontier, previous: Frontier, records: Mapping[Any, Sequence[Any]]) -> None:
        """Acknowledge the records of the times in ``frontier`` but not in ``previous``."""
        self.commits += 1
        times = {t for t in set(self.acknowledged) | set(records) if t in frontier and t not in previous}
        for t in sorted(times, key=self.domain.sort_key):
            new = tuple(sorted(records.get(t, ())))
            if t in self.released and new != self.released_records.get(t, ()):
                raise ReleasedOutputChanged(
                    f"released output at time {t!r} changed from {self.released_records.get(t, ())} to {new}"
                )
            if new:
                self.acknowledged[t] = new
            else:
                self.acknowledged.pop(t, None)

    def rollback(self, f: Frontier) -> None:
        """The output processor rolled back to ``f``: acknowledged times outside it are retracted."""
        gone = [t for t in self.acknowledged if t not in f]
        for t in gone:
            if t in self.released:
                raise ReleasedOutputChanged(f"released output at time {t!r} retracted by a rollback to {f!r}")
            del self.acknowledged[t]

    def release(self, lw: Frontier) -> None:
        """Release every acknowledged time in the low-watermark ``lw`` (never shrinks)."""
        self.released = self.released | lw
        for t, recs in self.acknowledged.items():
            if t in self.released:
                self.released_records.setdefault(t, recs)
