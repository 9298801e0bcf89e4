"""Runtime records of a simulated processor: what it did, and what it persisted.

The simulator derives every piece of checkpoint metadata (SPEC §3, paper
Table 1) from these records of what **actually happened**, never from what a
policy promises:

* ``M_e(f)`` = ``↓`` the times of messages really delivered on ``e`` (plus, at
  ``⊤``, those still queued);
* ``N_p(f)`` = ``↓`` the times of notifications really delivered (an output's
  commit counts as a notification of every time it commits: it acts on
  their completeness);
* ``D_e(f)`` = ``↓`` the times of messages really sent on ``e`` and not logged,
  because of events in ``f`` — except on edges the policy *claims* to log,
  where the claim (``∅``) is reported: that is how a wrong claim reaches the
  solver and gets caught by the oracle;
* ``L_e(f)`` = the logged messages whose causing event's time is in ``f``.

>>> from falkirk.domains import Product
>>> down(Product(2), [(0, 2), (1, 0), (0, 1)])
Frontier(product(2), before=[(0, 3), (1, 1), (2, 0)])
"""

from __future__ import annotations

import pickle
from collections import deque
from collections.abc import Iterable
from typing import Any

from attrs import Factory, define, frozen

from falkirk.domains import Frontier
from falkirk.domains.base import Domain
from falkirk.sim.operators import Operator

__all__ = ["Msg", "Sent", "Event", "History", "Record", "Store", "Proc", "down", "nbytes"]


def nbytes(obj: Any) -> int:
    """Bytes ``obj`` takes when written: its pickled size (``0`` for ``None``).

    A state handle that knows what it actually wrote (a delta, a write set)
    says so with a ``written`` attribute, which is measured instead.

    >>> nbytes(None), nbytes({0: 1}) > 0
    (0, True)
    """
    obj = getattr(obj, "written", obj)
    return 0 if obj is None else len(pickle.dumps(obj, protocol=5))


def down(domain: Domain, times: Iterable[Any]) -> Frontier:
    """``↓times``: the smallest frontier containing every one of ``times``."""
    ts = set(times)
    if not ts:
        return Frontier.empty(domain)
    if domain.is_total:
        return Frontier.upto(domain, [max(ts, key=domain.sort_key)])
    le = domain.less_equal
    top = [t for t in ts if not any(u != t and le(t, u) for u in ts)]
    return Frontier.upto(domain, top)


@frozen
class Msg:
    """A message on an edge: its time (in the receiver's domain) and payload."""

    time: Any
    payload: Any


@frozen
class Sent:
    """A message a processor sent on ``edge`` because of an event at time ``cause``."""

    cause: Any
    edge: str
    msg: Msg


@frozen
class Event:
    """One delivered event: ``kind`` is ``"msg"``, ``"note"`` or ``"read"``."""

    kind: str
    time: Any
    edge: str | None = None
    payload: Any = None


@define
class History:
    """What happened at a processor (its live history ``H_p``, as far as metadata needs it)."""

    delivered: dict[str, set[Any]] = Factory(dict)  # edge -> times delivered
    notified: set[Any] = Factory(set)
    discarded: dict[str, set[tuple[Any, Any]]] = Factory(dict)  # edge -> {(cause, time)} not logged
    completed: Frontier | None = None  # times acted on as complete wholesale (an output's commits)
    numbered: dict[str, list[Any]] = Factory(dict)  # sequence edge -> cause of each message, in order

    def restricted(self, f: Frontier) -> History:
        """The part of the history with times in ``f`` (a copy)."""
        return History(
            {e: {t for t in ts if t in f} for e, ts in self.delivered.items()},
            {t for t in self.notified if t in f},
            {e: {(c, t) for c, t in s if c in f} for e, s in self.discarded.items()},
            None if self.completed is None else self.completed & f,
            {e: [c for c in cs if c in f] for e, cs in self.numbered.items()},
        )

    def copy(self) -> History:
        return History(
            {e: set(ts) for e, ts in self.delivered.items()},
            set(self.notified),
            {e: set(s) for e, s in self.discarded.items()},
            self.completed,
            {e: list(cs) for e, cs in self.numbered.items()},
        )

    def notifications(self, domain: Domain) -> Frontier:
        """``N``: the smallest frontier holding every notified time."""
        n = down(domain, self.notified)
        return n if self.completed is None else n | self.completed


@frozen
class Record:
    """A persisted checkpoint: frontier, state handle, and the history it covers."""

    frontier: Frontier
    state: Any
    history: History


@define
class Store:
    """What survives a failure: checkpoints, logs, history log, reported frontier."""

    records: list[Record] = Factory(list)
    reported: Frontier | None = None  # stateless processors: latest settled frontier c
    logs: dict[str, list[Sent]] = Factory(dict)
    ghosts: dict[str, list[Sent]] = Factory(dict)  # logged messages already garbage-collected
    events: list[Event] = Factory(list)  # HistoryLog policy
    floor: Frontier | None = None  # latest low-watermark announced

    def last_frontier(self, domain: Domain) -> Frontier:
        """Frontier of the latest persisted record (``∅`` if none)."""
        if self.records:
            return self.records[-1].frontier
        if self.reported is not None:
            return self.reported
        return Frontier.empty(domain)

    def record_at(self, f: Frontier) -> Record | None:
        for r in self.records:
            if r.frontier == f:
                return r
        return None


@define
class Proc:
    """A processor at run time: operator, input queues, requests, live history, store."""

    name: str
    domain: Domain
    op: Operator
    queues: dict[str, deque[Msg]]
    store: Store
    history: History = Factory(History)
    requests: set[Any] = Factory(set)
    next_read: int | None = None  # sources: next epoch to read
    advances: int = 0  # settled advances since the last persist
    seen: Frontier | None = None  # settled frontier at the last look
    floor_notified: Frontier | None = None  # a restarted stateless processor claims N(f) = f

    def queued_times(self) -> set[Any]:
        return {m.time for q in self.queues.values() for m in q}
