"""Schedules: the order in which a :class:`~falkirk.sim.engine.Simulation` runs work.

``Simulation(graph, schedule=..., window=...)``:

``"sequential"`` (the default)
    One **event** per step — a source's read, one message, one
    notification — of any processor, picked at random. Processors
    interleave at the grain of single events, so pipelined orders (one
    processor at epoch 5 while another is at epoch 2) are common, and
    queues are unbounded. A failure is recovered at once, on the state it
    strikes: the processors that did not fail may be in the middle of an
    epoch.

``"pipelined"``
    The concurrent executor of the Spark runtime. The unit of work is an
    **execution**: a processor running one epoch — every event it has at
    that epoch (its messages, its notifications, and what it sends round
    its own feedback edge), applied at once when the execution finishes.

    * Each processor runs its epochs in increasing order, one execution at
      a time (``("start", p, e)`` … ``("finish", p, e)``); different
      processors have executions in flight at once, at different epochs.
    * ``p`` may start epoch ``e`` once its input for ``e`` is queued (no
      other processor can still send it anything at ``e``:
      :func:`~falkirk.sim.progress.inputs_complete`) — a source at once.
    * **Window**: on an edge ``p → q`` that ``p`` does not log, ``p`` may
      start epoch ``e`` only if ``q`` has settled every epoch up to
      ``e - window``; on a logged edge (queued items are log references)
      ``q`` may lag without bound.
    * A failure is **detected**: nothing new starts; each failed
      processor's execution in flight is lost, the others' finish one by
      one, and failures due meanwhile join the failed set. A failed
      processor persists nothing, and the work it lost still counts as
      to be done (its pointstamps stay): no processor downstream may take a
      time it could lead to as complete. Once nothing is in flight, the plan is
      solved on that quiescent state (the same planner) and applied
      (SPEC §6); then dispatching resumes, and the processors the plan
      keeps (``f = ⊤``) go on with new epochs while the rolled-back ones
      catch up, as far as their windows allow.
    * **Apart**: when the plan, solved at detection, moves no processor in
      flight off ``⊤`` and rebuilds none of their input queues (no processor
      it touches sends to one in flight), it is applied at once and the
      executions in flight finish after it (``stats["apart"]``), as the
      Spark executor does.

    Sequence-domain processors have no epochs: an execution there delivers
    whatever is queued. A cycle through two or more processors cannot run
    an epoch per execution and is rejected (a processor's own feedback edge
    is fine).

Every pipelined run is also a sequential one (an execution is a run of
consecutive events), *except* for the recovery: the sequential schedule
never plans on a state reached after a failure was detected, with failed
processors idle and failures joining a set. The pipelined schedule is the
one that checks that part of the Spark executor.

>>> from falkirk.sim import Node, Link, SimGraph, Simulation, Source, Sum, Output, Ephemeral, Lazy, Commit
>>> g = SimGraph([Node("src", Source(), Ephemeral()), Node("sum", Sum(), Lazy()),
...               Node("out", Output(), Commit())],
...              [Link("e1", "src", "sum"), Link("e2", "sum", "out")],
...              inputs={"src": [[1, 2], [3], [4]]})
>>> r = Simulation(g, seed=1, schedule="pipelined", window=1).run()
>>> r.output, r.scheduled["executions"], r.scheduled["max lag, not logged"]
({'out': {0: (3,), 1: (3,), 2: (4,)}}, 9, 1)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from falkirk.domains import Frontier
from falkirk.errors import MonitorError, ValidationError
from falkirk.sim.external import SimulationError
from falkirk.sim.persistence import live_metadata
from falkirk.sim.progress import inputs_complete
from falkirk.sim.recovery import fail_and_recover, lose_volatile_state

if TYPE_CHECKING:
    from falkirk.sim.engine import Simulation

__all__ = ["SCHEDULES", "Pipelined", "make_schedule", "last_epoch"]

#: The schedules :class:`~falkirk.sim.engine.Simulation` accepts.
SCHEDULES = ("sequential", "pipelined")


def make_schedule(sim: Simulation, schedule: str, window: int) -> Pipelined | None:
    """The scheduler for ``schedule`` (``None``: the sequential loop of the engine itself)."""
    if schedule not in SCHEDULES:
        raise ValidationError(f"schedule={schedule!r}: use one of {list(SCHEDULES)}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValidationError(f"window={window!r} must be an integer >= 1")
    return Pipelined(sim, window) if schedule == "pipelined" else None


def last_epoch(f: Frontier) -> float:
    """The last epoch every time of which is in ``f`` (epoch or loop domain; ``-1``: none, ``inf``: ``⊤``).

    >>> from falkirk.domains import Epoch, Product
    >>> last_epoch(Epoch().frontier(3)), last_epoch(Frontier.before(Product(2), [(2, 1), (4, 0)]))
    (3, 1)
    """
    if f.is_top:
        return math.inf
    return min(_epoch(t) for t in f.antichain) - 1


def _epoch(t: Any) -> int:
    return t if isinstance(t, int) else t[0]


class Pipelined:
    """The pipelined schedule of one simulation (see the module docstring).

    ``stats`` counts what happened: ``executions`` finished, ``drained``
    (finished after a failure was detected), ``joined`` (failures detected
    while a drain was under way), ``overtook`` (executions started by a
    processor the plan kept while a rolled-back one had not caught up),
    ``apart`` (plans applied with executions in flight),
    and the largest lag seen at a start, in epochs, on edges not logged
    (never above ``window``) and logged.
    """

    def __init__(self, sim: Simulation, window: int) -> None:
        self.sim = sim
        self.window = window
        g = sim.graph
        for p in g.nodes:
            for q, _ in g.reach[p]:
                if q != p and any(r == p for r, _ in g.reach[q]):
                    raise ValidationError(
                        f"the pipelined schedule runs a processor's epoch in one execution, so a cycle may "
                        f"only be a processor's own feedback edge; {p!r} and {q!r} are on one cycle"
                    )
        seq = set(sim.sequence_nodes)
        #: per sender, its receivers on edges with a lag: (receiver, logged)
        self.receivers: dict[str, list[tuple[str, bool]]] = {n: [] for n in g.nodes}
        for e, link in g.links.items():
            if link.src != link.dst and link.src not in seq and link.dst not in seq:
                self.receivers[link.src].append((link.dst, e in sim.logged[link.src]))
        self.flight: dict[str, Any] = {}  # processor -> epoch in flight (None: a sequence processor's batch)
        self.behind: dict[str, Frontier] = {}  # rolled back by the last plan: settled frontier to regain
        self.lost: dict[str, Frontier] = {}  # failed, recovery pending: settled frontier when detected
        self.stats = {
            "executions": 0,
            "drained": 0,
            "joined": 0,
            "overtook": 0,
            "apart": 0,
            "max lag, not logged": 0,
            "max lag, logged": 0,
        }

    # -- what may happen next --------------------------------------------------------------
    def actions(self) -> list[tuple[Any, ...]]:
        """Finish an execution in flight, or (unless a failure is being drained) start one."""
        out: list[tuple[Any, ...]] = [("finish", n, e) for n, e in self.flight.items()]
        if self.sim.failing:
            return out
        stamps = self.sim.stamps()
        for n in self.sim.procs:
            if n not in self.flight:
                e = self._next(n, stamps)
                if e is not False:
                    out.append(("start", n, e))
        return out

    def _next(self, n: str, stamps: dict[str, Any]) -> Any:
        """The epoch ``n`` may start now (``None`` for a sequence batch), or ``False``."""
        sim, p = self.sim, self.sim.procs[n]
        if n in sim.sequence_nodes:
            return None if any(p.queues.values()) else False
        if p.next_read is not None:
            if p.next_read >= sim.graph.epochs:
                return False
            e = p.next_read
        else:
            pending = p.queued_times() | p.requests
            if not pending:
                return False
            e = min(_epoch(t) for t in pending)
            if last_epoch(inputs_complete(sim.graph, stamps, n)) < e:
                return False
        if any(e - last_epoch(sim.settled[q]) > self.window for q, logged in self.receivers[n] if not logged):
            return False
        return e

    # -- doing it ----------------------------------------------------------------------------
    def execute(self, action: tuple[Any, ...]) -> None:
        """Start or finish an execution."""
        kind, n, e = action
        if kind == "start":
            self._start(n, e)
            return
        del self.flight[n]
        self._run(n, e)
        self.stats["executions"] += 1
        if self.sim.failing:
            self.stats["drained"] += 1
            self._recover_when_possible()  # asked again as each execution ends, as the Spark executor does
        if self.behind and all(f <= self.sim.settled[q] for q, f in self.behind.items()):
            self.behind = {}

    def _start(self, n: str, e: Any) -> None:
        self.flight[n] = e
        if e is None:
            return
        for q, logged in self.receivers[n]:
            key = "max lag, logged" if logged else "max lag, not logged"
            lag = e - last_epoch(self.sim.settled[q])
            if lag != math.inf:
                self.stats[key] = max(self.stats[key], int(lag))
        if self.behind and n not in self.behind:
            self.stats["overtook"] += 1

    def _run(self, n: str, e: Any) -> None:
        """Every event ``n`` has at epoch ``e`` (a sequence processor: everything queued), one by one."""
        sim = self.sim
        p = sim.procs[n]
        if p.next_read is not None:
            sim.execute(("read", n))
            return
        while True:
            sim.progress()
            events = [a for a in sim.events_of(n) if e is None or _epoch(self._time(n, a)) == e]
            if not events:
                break
            sim.execute(events[sim.rng.randrange(len(events))])
        left = [t for t in p.queued_times() | p.requests if e is not None and _epoch(t) == e]
        if left:
            raise SimulationError(
                f"pipelined: {n} started epoch {e} with its input queued but cannot run {left}"
            )

    def _time(self, n: str, event: tuple[Any, ...]) -> Any:
        if event[0] == "msg":
            return self.sim.procs[n].queues[event[2]][event[3]].time
        return event[2]

    # -- failures ----------------------------------------------------------------------------
    def detect(self, names: frozenset[str]) -> None:
        """A failure of ``names`` is detected: they lose their volatile state and their execution in
        flight."""
        sim = self.sim
        if sim.failing:
            self.stats["joined"] += 1
        stamps = sim.stamps()
        for n in sorted(names):
            if n in sim.procs and n not in sim.failing:
                sim.failing[n] = stamps[n]  # its lost work still blocks what it could lead to
                self.lost[n] = sim.settled.get(n, Frontier.empty(sim.graph.domain(n)))
        lose_volatile_state(sim, names)
        for n in names:
            self.flight.pop(n, None)
        self._recover_when_possible()

    def _recover_when_possible(self) -> None:
        """Recover now if nothing is in flight, or if the plan touches nothing in flight (:meth:`_apart`)."""
        if not self.flight:
            self._recover()
        elif self._apart():
            self.stats["apart"] += 1
            self._recover()

    def _apart(self) -> bool:
        """The plan for the failures detected (solved now, nothing applied) touches no processor in flight:
        rolls none back and rebuilds none of their input queues — no processor it moves off ``⊤`` (or that
        failed) is in flight or sends to one in flight. Then it is applied at once, as the Spark executor
        does; the executions in flight finish after it."""
        sim = self.sim
        failed = set(sim.failing)
        live = {
            n: live_metadata(sim, n)
            for n in sim.procs
            if n not in failed and not sim.graph.nodes[n].policy.stateless
        }
        try:
            plan = sim.planner.plan_rollback(failed, live)
        except MonitorError:  # refused now: drained first, the plan after decides
            return False
        touched = failed | {n for n, f in plan.frontiers.items() if not f.is_top}
        fed = {link.dst for link in sim.graph.links.values() if link.src in touched}
        return not (touched | fed) & set(self.flight)

    def _recover(self) -> None:
        """Nothing is in flight: plan for every failure detected, and apply the plan."""
        sim = self.sim
        names, sim.failing = frozenset(sim.failing), {}
        sim.progress()
        before = {**sim.settled, **self.lost}
        self.lost = {}
        plan = fail_and_recover(sim, names)
        self.behind = {q: before[q] for q, f in plan.frontiers.items() if not f.is_top}
