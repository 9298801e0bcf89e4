"""Rollback policies of SPEC §8, one per simulated processor.

A policy decides what a processor persists and how it comes back:

==================  ===============================================  =====================
policy              persists                                         ``F(p)`` (SPEC §3)
==================  ===============================================  =====================
:class:`Ephemeral`  the latest settled frontier ``c`` it reached     stateless: ``f ⊆ c``
:class:`Batch`      ditto, and every message it sends (firewall)     stateless: ``f ⊆ c``
:class:`Lazy`       ``get_state(f)`` every ``every`` settled times   a chain of checkpoints
:class:`Eager`      ``get_state(f)`` whenever the settled frontier   a chain of checkpoints
                    grows (after every event that completes a time)
:class:`HistoryLog` every delivered event; restores by replaying     every settled frontier
                    ``H|f`` (paper §4.1)
:class:`Never`      nothing: restarts from the initial state         ``{∅}``
:class:`Commit`     for :class:`~falkirk.sim.operators.Output`:      the acknowledged
                    hands records to the external service            frontiers
                    (``final=True``: acknowledged times are final)
==================  ===============================================  =====================

Checkpoints are taken only at **settled** frontiers: every time in them is
complete at the processor and has had its notification, so no further event
at those times can happen (SPEC §3's rule, strengthened so that ``S_p(f)``
really is the state after *all* of ``H_p|f``). Any policy can also log
chosen output edges (``logs``; ``"*"`` = all of them).

:class:`WrongLog` is deliberately broken — it *claims* to log edges it does
not log — so that tests can check the oracle catches it.

>>> Lazy(every=2, logs=["e"]).logged_edges(["e", "f"])
frozenset({'e'})
>>> Batch().logged_edges(["e", "f"]) == frozenset({"e", "f"})
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from attrs import field, frozen

from falkirk.domains import Frontier
from falkirk.errors import ValidationError
from falkirk.sim.operators import Operator, Output, Source

__all__ = [
    "Policy",
    "Ephemeral",
    "Batch",
    "Lazy",
    "Eager",
    "HistoryLog",
    "Never",
    "Commit",
    "WrongLog",
    "POLICIES",
]


def _logs(value: Any) -> frozenset[str] | str:
    if value == "*":
        return "*"
    return frozenset(value)


def _edges(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _every(instance: object, attribute: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{type(instance).__name__}: every={value!r} must be an integer >= 1")


@frozen
class Policy:
    """Base policy. ``logs``: output edges whose sent messages are logged (``"*"``: all)."""

    logs: Any = field(default=frozenset(), converter=_logs)
    every: int = field(default=1, validator=_every)

    #: the solver treats the processor as stateless (SPEC §3)
    stateless: ClassVar[bool] = False
    #: what is persisted at a settled frontier: "report", "snapshot", "history", "commit" or None
    persists: ClassVar[str | None] = "snapshot"

    def logged_edges(self, outputs: Iterable[str]) -> frozenset[str]:
        """The output edges whose messages are really logged."""
        outs = frozenset(outputs)
        return outs if self.logs == "*" else outs & self.logs

    def claimed_edges(self, outputs: Iterable[str]) -> frozenset[str]:
        """The output edges the processor tells the solver it logs."""
        return self.logged_edges(outputs)

    def check(self, name: str, op: Operator, outputs: Iterable[str]) -> None:
        """Reject a policy that cannot work for ``op`` (naming the processor)."""
        outs = set(outputs)
        if self.logs != "*" and not self.logs <= outs:
            raise ValidationError(
                f"processor {name!r}: policy logs {sorted(self.logs - outs)}, which are not its output edges"
            )
        if isinstance(op, Output) != (self.persists == "commit"):
            raise ValidationError(
                f"processor {name!r}: Output operators (and only they) use the Commit policy"
            )
        if isinstance(op, Source) and not self.stateless:
            raise ValidationError(
                f"processor {name!r}: a source reads external input and must be stateless (Ephemeral or Batch)"
            )
        if self.stateless and not op.stateless:
            raise ValidationError(
                f"processor {name!r}: {type(self).__name__} needs a stateless operator, "
                f"but {type(op).__name__} keeps state between times"
            )

    # -- hooks for schemes (falkirk.sim.schemes); the defaults are the plain behaviour --
    def persist_points(self, sim: Any, proc: Any, settled: Frontier) -> list[Frontier]:
        """Where to persist now that ``proc`` is due at its settled frontier (default: ``[settled]``).

        Each point must lie inside ``settled`` and strictly contain the previous
        one; ``[]`` postpones (the policy is asked again at the next pass).
        """
        return [settled]

    def save_state(self, op: Operator, store: Any, frontier: Frontier) -> Any:
        """The state handle a ``persists = "delta"`` policy writes at ``frontier``."""
        return op.get_state(frontier)

    def load_state(self, op: Operator, record: Any) -> Any:
        """The snapshot to give ``op.set_state`` when restoring ``record`` (``persists = "delta"``)."""
        return record.state

    def describe(self) -> str:
        """Short readable form, e.g. ``Lazy(every=2, logs=['e'])``."""
        parts = []
        if self.every != 1:
            parts.append(f"every={self.every}")
        if self.logs:
            parts.append(f"logs={'*' if self.logs == '*' else sorted(self.logs)}")
        parts.extend(self._describe_more())
        return f"{type(self).__name__}({', '.join(parts)})"

    def _describe_more(self) -> list[str]:
        """Further ``key=value`` items for :meth:`describe` (a subclass's own fields)."""
        return []


@frozen
class Ephemeral(Policy):
    """Stateless: persists only the latest settled frontier (reported every ``every`` advances)."""

    stateless: ClassVar[bool] = True
    persists: ClassVar[str | None] = "report"


@frozen
class Batch(Ephemeral):
    """Stateless and logs every output edge: a firewall (Spark/MapReduce, paper §2.2)."""

    logs: Any = field(default="*", converter=_logs)


@frozen
class Lazy(Policy):
    """Selective checkpoint of the operator state every ``every`` settled advances (Naiad, paper §2.3)."""


@frozen
class Eager(Policy):
    """Checkpoint whenever the settled frontier grows (Storm/MillWheel, paper §2.1)."""


@frozen
class HistoryLog(Policy):
    """Log every delivered event; roll back to any settled frontier by replay (paper §4.1)."""

    persists: ClassVar[str | None] = "history"


@frozen
class Never(Policy):
    """Persist no state: ``F(p) = {∅}``; the processor restarts from its initial state."""

    persists: ClassVar[str | None] = None


def _bool(instance: object, attribute: Any, value: bool) -> None:
    if not isinstance(value, bool):
        raise ValidationError(f"{type(instance).__name__}: {attribute.name}={value!r} must be a bool")


@frozen
class Commit(Policy):
    """External output: hand the records of settled times to the service, which acknowledges them.

    ``final=True``: **committed output is final**. A rollback of the output
    processor below what it committed leaves the acknowledged times alone;
    records re-sent for them are discarded, and only later times are written
    (see "Final commit" in :mod:`falkirk.sim`). It needs deterministic
    operators upstream (:class:`~falkirk.sim.SimGraph` checks).

    >>> Commit(final=True).describe()
    'Commit(final=True)'
    """

    final: bool = field(default=False, validator=_bool)

    persists: ClassVar[str | None] = "commit"

    def _describe_more(self) -> list[str]:
        return ["final=True"] if self.final else []


@frozen
class WrongLog(Ephemeral):
    """BROKEN on purpose: tells the solver it logs ``claims`` but logs nothing."""

    claims: frozenset[str] = field(default=frozenset(), converter=_edges)

    def logged_edges(self, outputs: Iterable[str]) -> frozenset[str]:
        return frozenset()

    def claimed_edges(self, outputs: Iterable[str]) -> frozenset[str]:
        return frozenset(outputs) & self.claims

    def describe(self) -> str:
        return f"WrongLog(claims={sorted(self.claims)})"


#: Policy classes by name (for generators and readable cases).
POLICIES: dict[str, type[Policy]] = {
    c.__name__: c for c in (Ephemeral, Batch, Lazy, Eager, HistoryLog, Never, Commit, WrongLog)
}
