"""The world outside the dataflow: input sources and output services (paper §4.3).

* :class:`ExternalInput` keeps every batch until it is acknowledged (the
  source's low-watermark covers its epoch); reading an acknowledged batch
  again raises :class:`CollectedStateNeeded`.
* :class:`ExternalOutput` receives the records of each settled time when the
  output processor commits (it **acknowledges** them: the processor's
  checkpoint), forgets acknowledged times the processor rolls back past,
  and **releases** them downstream once the output processor's
  low-watermark covers them — from then on they may never change
  (:class:`ReleasedOutputChanged` otherwise). A **final** output
  (``Commit(final=True)``) never forgets an acknowledged time: it discards
  what is re-sent for it instead.

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
            raise CollectedStateNeeded(
                f"source {self.name!r} must re-read epoch {epoch}, which was acknowledged and deleted"
            )
        return list(self.batches[epoch]) if epoch < len(self.batches) else []

    def acknowledge(self, lw: Frontier) -> None:
        """Acknowledge every batch whose epoch is in the low-watermark ``lw``."""
        self.acked.update(e for e in range(len(self.batches)) if e in lw)


class ExternalOutput:
    """An output service: acknowledged records per time, the released part, and what it was told.

    ``committed`` is the acknowledged frontier (every time some commit
    covered, with records or without). ``journal`` is the service's view in
    order: ``("write", t, records)`` for every committed time,
    ``("retract", t, records)`` for every acknowledged time a rollback took
    back.

    ``final=True`` (the output processor's ``Commit(final=True)``): a
    committed time is **final** — a rollback retracts nothing, and a later
    commit never writes it again. Records re-sent for a final time go to
    :meth:`resend` instead of the operator: they are discarded and counted
    (``discarded``); when the time is committed again, what was re-sent is
    compared with what was kept, and a difference is recorded in
    ``divergent`` (a rewrite would have changed the output; with
    deterministic operators upstream it never happens).

    >>> from falkirk.domains import Epoch
    >>> out = ExternalOutput(Epoch(), final=True)
    >>> out.commit(Epoch().frontier(1), Epoch().frontier(-1), {0: [2], 1: [3]})
    >>> out.rollback(Epoch().frontier(0))    # nothing is retracted
    >>> out.resend(1, 3)                     # re-sent by the re-execution: discarded
    >>> out.commit(Epoch().frontier(2), Epoch().frontier(0), {2: [4]})
    >>> out.acknowledged, out.discarded, out.divergent
    ({0: (2,), 1: (3,), 2: (4,)}, 1, [])
    >>> [(kind, t) for kind, t, _ in out.journal]
    [('write', 0), ('write', 1), ('write', 2)]
    """

    def __init__(self, domain: Domain, *, final: bool = False) -> None:
        self.domain = domain
        self.final = final
        self.acknowledged: dict[Any, tuple[Any, ...]] = {}
        self.committed = Frontier.empty(domain)
        self.released = Frontier.empty(domain)
        self.released_records: dict[Any, tuple[Any, ...]] = {}
        self.commits = 0
        self.journal: list[tuple[str, Any, tuple[Any, ...]]] = []
        self.discarded = 0
        self.resent: dict[Any, list[Any]] = {}
        self.divergent: list[tuple[Any, tuple[Any, ...], tuple[Any, ...]]] = []

    def is_final(self, t: Any) -> bool:
        """Whether time ``t`` is final here: a final output has committed it."""
        return self.final and t in self.committed

    def resend(self, t: Any, record: Any) -> None:
        """A record re-sent for the final time ``t``: discard it (kept aside to compare at the next
        commit)."""
        self.discarded += 1
        self.resent.setdefault(t, []).append(record)

    def commit(self, frontier: Frontier, previous: Frontier, records: Mapping[Any, Sequence[Any]]) -> None:
        """Acknowledge the records of the times in ``frontier`` but not in ``previous``."""
        self.commits += 1
        times = {
            t
            for t in set(self.acknowledged) | set(records) | set(self.resent)
            if t in frontier and t not in previous
        }
        for t in sorted(times, key=self.domain.sort_key):
            new = tuple(sorted(records.get(t, ())))
            if self.is_final(t):
                again = tuple(sorted([*self.resent.pop(t, ()), *new]))
                self.discarded += len(new)
                if again != self.acknowledged.get(t, ()):
                    self.divergent.append((t, self.acknowledged.get(t, ()), again))
                continue
            if t in self.released and new != self.released_records.get(t, ()):
                raise ReleasedOutputChanged(
                    f"released output at time {t!r} changed from {self.released_records.get(t, ())} to {new}"
                )
            self.journal.append(("write", t, new))
            if new:
                self.acknowledged[t] = new
            else:
                self.acknowledged.pop(t, None)
        self.committed = self.committed | frontier

    def rollback(self, f: Frontier) -> None:
        """The output processor rolled back to ``f``: acknowledged times outside it are retracted.

        A final output retracts nothing; it forgets what was re-sent for
        times outside ``f`` (they will be re-sent again).
        """
        if self.final:
            self.resent = {t: rs for t, rs in self.resent.items() if t in f}
            return
        gone = [t for t in self.acknowledged if t not in f]
        for t in gone:
            if t in self.released:
                raise ReleasedOutputChanged(f"released output at time {t!r} retracted by a rollback to {f!r}")
            self.journal.append(("retract", t, self.acknowledged.pop(t)))
        self.committed = self.committed & f

    def release(self, lw: Frontier) -> None:
        """Release every acknowledged time in the low-watermark ``lw`` (never shrinks)."""
        self.released = self.released | lw
        for t, recs in self.acknowledged.items():
            if t in self.released:
                self.released_records.setdefault(t, recs)
