"""The simulation loop: a seeded scheduler runs events, policies persist, failures roll back.

Each step the scheduler picks, uniformly at random (``random.Random(seed)``),
one enabled action — under the default, **sequential** schedule one event
(``schedule="pipelined"`` runs whole epoch executions instead, several in
flight at once: :mod:`falkirk.sim.schedule`):

* a source reads its next epoch's batch;
* a processor takes a message from one of its input queues — the head, or,
  for epoch and loop processors that roll back selectively
  (``partitioned``/``stateless`` operators), any message no earlier message
  on that queue has a time ``≤`` to (SPEC §2 re-ordering rule);
* a processor receives a notification it asked for (:mod:`falkirk.sim.progress`).

After every step each policy may persist at its processor's settled
frontier, and garbage collection runs from the planner's low-watermarks.
Failures from the schedule strike before the step they name (and, once
nothing is left to do, one by one at the end), and are recovered at once by
:func:`falkirk.sim.recovery.fail_and_recover` (pipelined: once the
executions in flight have finished). The same graph, seed and schedule
always give the same run.

>>> from falkirk.sim import Node, Link, SimGraph, Source, Sum, Output, Ephemeral, Lazy, Commit
>>> g = SimGraph([Node("src", Source(), Ephemeral()), Node("sum", Sum(), Lazy()),
...               Node("out", Output(), Commit())],
...              [Link("e1", "src", "sum"), Link("e2", "sum", "out")],
...              inputs={"src": [[1, 2], [3]]})
>>> Simulation(g, seed=1).run().output
{'out': {0: (3,), 1: (3,)}}
>>> r = Simulation(g, seed=1, failures=[Failure(4, {"sum"})]).run()
>>> r.output, r.rollbacks
({'out': {0: (3,), 1: (3,)}}, 1)
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from falkirk.domains import Frontier
from falkirk.sim.external import ExternalInput, ExternalOutput, NoProgress, ProtocolViolation
from falkirk.sim.graph import SimGraph
from falkirk.sim.planner import Planner, default_planner
from falkirk.sim.progress import Stamps, deliverable, frontiers
from falkirk.sim.result import Failure, Result
from falkirk.sim.schedule import make_schedule
from falkirk.sim.state import Event, Msg, Proc, Sent, Store, nbytes

__all__ = ["Failure", "Result", "Simulation"]


class _Ctx:
    """The :class:`~falkirk.sim.operators.Context` of one event."""

    __slots__ = ("sim", "proc", "time", "replay")

    def __init__(self, sim: Simulation, proc: Proc, time: Any, replay: bool = False) -> None:
        self.sim, self.proc, self.time, self.replay = sim, proc, time, replay

    def send(self, payload: Any, port: str = "out") -> None:
        if not self.replay:
            for e in self.sim.ports[self.proc.name].get(port, ()):
                self.sim.send(self.proc, e, self.time, payload)

    def notify_at(self) -> None:
        self.proc.requests.add(self.time)

    def le(self, a: Any, b: Any) -> bool:
        return bool(self.proc.domain.less_equal(a, b))

    def choose(self, label: str, n: int) -> int:
        return self.sim.choose(self.proc.name, self.time, label, n, replay=self.replay)


class Simulation:
    """One deterministic run of ``graph`` (see the module docstring).

    ``failures``: :class:`Failure` events. ``planner``: where plans and
    low-watermarks come from (default: the incremental monitor,
    :func:`~falkirk.sim.planner.default_planner`).
    ``gc_every``: run garbage collection after that many persisted records
    (``0``: never). ``choices``: fixed non-deterministic choices (the oracle's
    reference run). ``trace``: keep a readable log of failures and plans.
    ``measure``: keep the cost counters of :class:`Result`.
    ``schedule``: ``"sequential"`` (one event per step, the default) or
    ``"pipelined"`` (epoch executions in flight at several processors at
    once, at most ``window`` epochs between a sender that does not log and
    its receiver); see :mod:`falkirk.sim.schedule`.
    """

    def __init__(
        self,
        graph: SimGraph,
        *,
        seed: int = 0,
        failures: Iterable[Failure] = (),
        planner: Planner | None = None,
        gc_every: int = 1,
        choices: Mapping[tuple[str, Any, str], int] | None = None,
        max_steps: int = 50_000,
        trace: bool = False,
        measure: bool = False,
        schedule: str = "sequential",
        window: int = 1,
    ) -> None:
        self.graph = graph
        self.rng = random.Random(seed)
        self.pending = sorted(failures, key=lambda f: f.step)
        self.planner: Planner = planner if planner is not None else default_planner(graph)
        self.gc_every = gc_every
        self.fixed = dict(choices or {})
        self.choices: dict[tuple[str, Any, str], int] = {}
        self.max_steps = max_steps
        self.tracing = trace
        self.trace: list[str] = []
        self.steps = self.rollbacks = self.checkpoints = self.since_gc = 0
        self.measure = measure
        self.events = self.replayed = self.checkpoint_bytes = self.recovery_steps = 0
        self.log_bytes_peak = self.log_bytes_end = 0
        self._recovering: list[tuple[int, dict[str, Frontier]]] = []  # (step of the failure, settled then)
        self._read: dict[str, int] = {}  # sources: epochs read so far (high-water mark)
        self.ports: dict[str, dict[str, list[str]]] = {n: {} for n in graph.nodes}
        for e in graph.links.values():
            self.ports[e.src].setdefault(e.port, []).append(e.name)
        self.logged = {n: node.policy.logged_edges(graph.outputs_of[n]) for n, node in graph.nodes.items()}
        self.claimed = {n: node.policy.claimed_edges(graph.outputs_of[n]) for n, node in graph.nodes.items()}
        self.inputs = {n: ExternalInput(n, b) for n, b in graph.inputs.items()}
        self.outputs = {
            n: ExternalOutput(graph.domain(n), final=getattr(graph.nodes[n].policy, "final", False))
            for n in graph.outputs
        }
        self.procs: dict[str, Proc] = {}
        for n, node in graph.nodes.items():
            dom = graph.domain(n)
            self.procs[n] = Proc(n, dom, node.op.fresh(), {e: deque() for e in graph.inputs_of[n]}, Store())
            self.procs[n].next_read = 0 if n in self.inputs else None
        self.sequence_nodes = [n for n, node in graph.nodes.items() if node.domain == "sequence"]
        self.complete: dict[str, Frontier] = {}
        self.settled: dict[str, Frontier] = {}
        #: processors whose failure was detected and whose recovery waits for work in flight
        #: (pipelined schedule), with the pointstamps they had when they failed
        self.failing: dict[str, Stamps] = {}
        self.pipeline = make_schedule(self, schedule, window)

    # -- the loop -------------------------------------------------------------------
    def run(self) -> Result:
        """Run to the end (every input read, every time settled) and return the result."""
        from falkirk.sim.persistence import persist_all

        while True:
            while self.pending and self.pending[0].step <= self.steps:
                self.fail(self.pending.pop(0).processors)
            self.progress()
            if self.measure:
                self.measure_step()
            persist_all(self, final=False)
            actions = self.actions()
            if not actions:
                if self.pending:
                    self.fail(self.pending.pop(0).processors)
                    continue
                persist_all(self, final=True)
                if self.measure:
                    self.measure_step(end=True)
                break
            self.execute(actions[self.rng.randrange(len(actions))])
            self.steps += 1
            if self.steps > self.max_steps:
                raise NoProgress(f"no end after {self.max_steps} steps")
        return Result(
            output={n: dict(o.acknowledged) for n, o in self.outputs.items()},
            released={n: dict(o.released_records) for n, o in self.outputs.items()},
            choices=dict(self.choices),
            steps=self.steps,
            rollbacks=self.rollbacks,
            checkpoints=self.checkpoints,
            solves=getattr(self.planner, "solves", 0),
            trace=self.trace,
            events=self.events,
            replayed=self.replayed,
            checkpoint_bytes=self.checkpoint_bytes,
            log_bytes_peak=self.log_bytes_peak,
            log_bytes_end=self.log_bytes_end,
            recovery_steps=self.recovery_steps,
            journal={n: list(o.journal) for n, o in self.outputs.items()},
            discarded={n: o.discarded for n, o in self.outputs.items()},
            divergent={n: list(o.divergent) for n, o in self.outputs.items()},
            scheduled=dict(self.pipeline.stats) if self.pipeline is not None else {},
        )

    def fail(self, names: Iterable[str]) -> None:
        """Fail ``names`` now and recover (:func:`~falkirk.sim.recovery.fail_and_recover`).

        Under the pipelined schedule the failure is *detected*: the recovery
        waits until the executions in flight have finished
        (:meth:`falkirk.sim.schedule.Pipelined.detect`).
        """
        from falkirk.sim.recovery import fail_and_recover

        if self.measure:
            self._recovering.append((self.steps, dict(self.settled)))
        if self.pipeline is not None:
            self.pipeline.detect(frozenset(names))
        else:
            fail_and_recover(self, frozenset(names))

    def measure_step(self, *, end: bool = False) -> None:
        """Update the measured counters of :class:`Result` (after a step, or at the ``end``)."""
        size = self.log_bytes()
        self.log_bytes_peak = max(self.log_bytes_peak, size)
        if end:
            self.log_bytes_end = size
        pending = []
        for start, before in self._recovering:
            if end or all(f <= self.settled[n] for n, f in before.items()):
                self.recovery_steps += self.steps - start
            else:
                pending.append((start, before))
        self._recovering = pending

    def log_bytes(self) -> int:
        """Bytes retained for replay now: logged messages, history logs, read but unacknowledged input."""
        items: list[Any] = []
        for n, p in self.procs.items():
            for log in p.store.logs.values():
                items.extend((s.msg.time, s.msg.payload) for s in log)
            items.extend((ev.kind, ev.time, ev.edge, ev.payload) for ev in p.store.events)
            if n in self.inputs:
                src = self.inputs[n]
                read = self._read[n] = max(self._read.get(n, 0), p.next_read or 0)
                items.extend(src.batches[e] for e in range(min(read, len(src.batches))) if e not in src.acked)
        return nbytes(items) if items else 0

    def stamps(self) -> dict[str, Stamps]:
        """The pointstamps of every processor now (:mod:`falkirk.sim.progress`).

        A failed processor whose recovery is pending keeps, besides what is
        queued for it since, the pointstamps it had when it failed: the work
        it lost is still to be done, so no time it could lead to is complete.
        """
        stamps = {}
        for n, p in self.procs.items():
            caps = {p.next_read} if p.next_read is not None else set()
            stamps[n] = Stamps(p.queued_times(), set(p.requests), caps)
            lost = self.failing.get(n)
            if lost is not None:
                stamps[n].queued |= lost.queued
                stamps[n].requests |= lost.requests
        return stamps

    def progress(self) -> None:
        """Recompute the complete and settled frontiers of every processor."""
        self.complete, self.settled = frontiers(self.graph, self.stamps())
        for n in self.sequence_nodes:
            p = self.procs[n]
            counts = {e: max((s for _, s in p.history.delivered.get(e, ())), default=0) for e in p.queues}
            self.complete[n] = self.settled[n] = p.domain.frontier(counts)  # type: ignore[attr-defined]

    def actions(self) -> list[tuple[Any, ...]]:
        """Every action enabled now, in a deterministic order (events, or the pipelined schedule's)."""
        if self.pipeline is not None:
            return self.pipeline.actions()
        return [a for n in self.procs for a in self.events_of(n)]

    def events_of(self, n: str) -> list[tuple[Any, ...]]:
        """The events processor ``n`` may run now: a read, a message, a notification."""
        out: list[tuple[Any, ...]] = []
        p = self.procs[n]
        if p.next_read is not None and p.next_read < self.graph.epochs:
            out.append(("read", n))
        selective = (p.op.partitioned or p.op.stateless) and n not in self.sequence_nodes
        le = p.domain.less_equal
        for e, q in p.queues.items():
            if not q:
                continue
            if not selective:
                out.append(("msg", n, e, 0))
                continue
            for i, m in enumerate(q):
                if not any(le(q[j].time, m.time) for j in range(i)):
                    out.append(("msg", n, e, i))
        for t in deliverable(self.graph, n, p.requests, self.complete[n]):
            out.append(("note", n, t))
        return out

    def execute(self, action: tuple[Any, ...]) -> None:
        """Run one action."""
        kind, n = action[0], action[1]
        if kind in ("start", "finish"):
            assert self.pipeline is not None
            self.pipeline.execute(action)
            return
        p = self.procs[n]
        if kind == "read":
            t = p.next_read
            assert t is not None
            records = self.inputs[n].read(t)
            p.next_read = t + 1
            self.log_event(p, Event("read", t))
            p.op.on_read(_Ctx(self, p, t), records)
        elif kind == "msg":
            e, i = action[2], action[3]
            q = p.queues[e]
            m = q[i]
            del q[i]
            p.history.delivered.setdefault(e, set()).add(m.time)
            self.log_event(p, Event("msg", m.time, e, m.payload))
            out = self.outputs.get(n)
            if out is not None and out.is_final(m.time):
                out.resend(m.time, m.payload)  # a final output discards what is re-sent for a committed time
            else:
                p.op.on_message(_Ctx(self, p, m.time), e, m.payload)
        else:
            t = action[2]
            p.requests.discard(t)
            p.history.notified.add(t)
            self.log_event(p, Event("note", t))
            p.op.on_notify(_Ctx(self, p, t))

    def log_event(self, p: Proc, ev: Event) -> None:
        self.events += 1
        if self.graph.nodes[p.name].policy.persists == "history":
            p.store.events.append(ev)

    def replay(self, p: Proc, events: Iterable[Event]) -> None:
        """Re-run ``events`` on ``p``'s operator with sends suppressed (HistoryLog restore)."""
        for ev in events:
            self.replayed += 1
            ctx = _Ctx(self, p, ev.time, replay=True)
            if ev.kind == "read":
                p.op.on_read(ctx, self.inputs[p.name].read(ev.time))
            elif ev.kind == "msg":
                p.op.on_message(ctx, ev.edge or "", ev.payload)
            else:
                p.requests.discard(ev.time)
                p.op.on_notify(ctx)

    # -- what operators call ------------------------------------------------------------
    def send(self, p: Proc, edge: str, cause: Any, payload: Any) -> None:
        """``p`` sends ``payload`` on ``edge`` because of an event at ``cause``."""
        link = self.graph.links[edge]
        q = self.procs[link.dst]
        if link.transform == "sequence":
            order = p.history.numbered.setdefault(edge, [])
            order.append(cause)
            msg = Msg((edge, len(order)), payload)
            have = max((s for _, s in q.history.delivered.get(edge, ())), default=0) + len(q.queues[edge])
            if len(order) != have + 1 and q.name not in self.failing:  # a failed receiver lost its count
                raise ProtocolViolation(
                    f"{p.name} sent message {len(order)} on sequence edge {edge!r}, but {q.name} "
                    f"has {have} and expects message {have + 1}"
                )
        else:
            msg = Msg(self.graph.transforms[edge].apply(cause), payload)
        le = q.domain.less_equal
        late = [s for s in q.history.notified if le(msg.time, s)]
        if late or any(f is not None and msg.time in f for f in (q.floor_notified, q.history.completed)):
            raise ProtocolViolation(
                f"{p.name} sent a message at {msg.time!r} on {edge!r} to {q.name}, which was already "
                f"notified that {late[0] if late else msg.time!r} is complete"
            )
        stale = [r.frontier for r in q.store.records if msg.time in r.frontier]
        if stale or (q.store.reported is not None and msg.time in q.store.reported):
            raise ProtocolViolation(
                f"{p.name} sent a message at {msg.time!r} on {edge!r} to {q.name}, which has a checkpoint "
                f"at {stale[0] if stale else q.store.reported!r} claiming that time complete"
            )
        q.queues[edge].append(msg)
        if edge in self.logged[p.name]:
            p.store.logs.setdefault(edge, []).append(Sent(cause, edge, msg))
        else:
            p.history.discarded.setdefault(edge, set()).add((cause, msg.time))

    def choose(self, name: str, time: Any, label: str, n: int, *, replay: bool = False) -> int:
        """A non-deterministic choice, recorded per (processor, time, label)."""
        key = (name, time, label)
        if replay and key in self.choices:
            return self.choices[key]
        v = self.fixed[key] if key in self.fixed else self.rng.randrange(n)
        self.choices[key] = v
        return v

    def note(self, text: str) -> None:
        if self.tracing:
            self.trace.append(f"[step {self.steps}] {text}")
