"""The incremental monitor against a full re-solve, on random graphs and report sequences.

A hypothesis ``RuleBasedStateMachine`` builds a random dataflow (epoch and
product(2) processors, stateful and stateless, identity, epoch_to_loop and
recorded projections, logged and unlogged edges, cycles, external outputs)
and interleaves checkpoint reports, rejected reports and rollbacks (500 steps per
example, few examples: each step re-solves from scratch). After
every step the monitor's watermarks and notification frontiers equal
``solve_frontiers`` on the dataflow with every checkpoint reported so far,
and no watermark has fallen. Each rule draws a seed and derives its
checkpoint from it (small draws keep 500-step examples inside hypothesis'
buffer).
"""

from __future__ import annotations

import random
import statistics
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from falkirk.domains import Epoch, Frontier
from falkirk.errors import FalkirkError, MonitorError
from falkirk.solver import Checkpoint, Dataflow, Edge, Meta, Processor, solve_frontiers
from falkirk.solver.model.resolve import coerce
from falkirk.solver.monitor import Monitor
from falkirk.solver.monitor.store import with_checkpoints

SEEDS = st.integers(0, 2**16 - 1)
STEPS: list[int] = []
#: checkpoints each successful discard rule forgot (the property must have exercised it)
DISCARDED: list[int] = []

_PROJECTIONS = {
    ("epoch", "epoch"): ["identity", "identity", "recorded"],
    ("epoch", "product"): ["epoch_to_loop", "recorded"],
    ("product", "product"): ["identity", "recorded"],
    ("product", "epoch"): ["recorded"],
}


def random_graph(rng: random.Random) -> tuple[Dataflow, list[str]]:
    """A random valid dataflow (no checkpoints yet) and its external outputs."""
    names = [f"p{i}" for i in range(rng.randint(2, 6))]
    kind = {p: "product" if rng.random() < 0.25 else "epoch" for p in names}
    stateless = {p: rng.random() < 0.3 for p in names}
    edges = []
    for i in range(rng.randint(1, 2 * len(names))):
        u, v = rng.sample(names, 2)
        edges.append(Edge(f"e{i}", u, v, rng.choice(_PROJECTIONS[kind[u], kind[v]])))
    procs = [
        Processor(
            p,
            kind[p],
            arity=2 if kind[p] == "product" else None,
            stateless=stateless[p],
            logs=[e.name for e in edges if e.src == p and rng.random() < 0.5],
        )
        for p in names
    ]
    df = Dataflow(procs, edges, notifications=rng.random() < 0.7)
    outputs = [p for p in names if not stateless[p] and not df.outputs[p] and rng.random() < 0.6]
    return df, outputs


def grow(rng: random.Random, lo: Frontier, hi: Frontier | None = None, *, strict: bool = False) -> Frontier:
    """A random frontier ``g`` with ``lo ⊆ g ⊆ hi`` (``lo ⊊ g`` when ``strict``); ``lo ⊆ hi`` required.

    Product times keep their first component ``<= 3``, so antichains stay small.
    """
    dom = lo.domain
    g = lo
    for _ in range(rng.randint(1 if strict else 0, 3)):
        if isinstance(dom, Epoch):
            outside = list(g.antichain)
        else:
            outside = [a for a in g.antichain if a[0] <= 3]
        if not outside:
            break
        t = rng.choice(outside)  # a minimal time outside g: adding it (or a later one) grows g
        if isinstance(dom, Epoch):
            t += rng.randint(0, 1)
        else:
            t = (min(t[0] + rng.randint(0, 1), 3), t[1] + rng.randint(0, 1))
        g = g | Frontier.upto(dom, [t])
    return g if hi is None else g & hi


def next_checkpoint(
    rng: random.Random, df: Dataflow, p: str, m: Meta, last_raw: Checkpoint | None
) -> Checkpoint:
    """A random valid checkpoint for ``p`` of ``df``'s graph, after the one resolved as ``m``."""
    f = grow(rng, m.frontier, strict=True)
    proc = df.processors[p]
    projection = {e: grow(rng, m.projection[e]) for e in df.outputs[p] if df.bound[e].recorded}
    if proc.stateless:
        return Checkpoint(f, projection=projection)
    fields: dict[str, Any] = {"projection": projection}
    if df.receives_notifications[p] and rng.random() < 0.5:
        fields["notifications"] = grow(rng, m.notifications, f)
    fields["delivered"] = {e: grow(rng, m.delivered[e], f) for e in df.inputs[p] if rng.random() < 0.5}
    fields["discarded"] = {
        e: grow(rng, m.discarded[e])
        for e in df.outputs[p]
        if e not in proc.logs and (rng.random() < 0.3 or (last_raw is not None and e in last_raw.discarded))
    }
    return Checkpoint(f, **fields)


def live_metadata(rng: random.Random, df: Dataflow, p: str, m: Meta) -> Checkpoint:
    """Random live metadata at ``⊤`` for a stateful ``p``, monotone after its checkpoint ``m``."""
    fields: dict[str, Any] = {
        "delivered": {e: grow(rng, m.delivered[e]) for e in df.inputs[p] if rng.random() < 0.6},
        "discarded": {e: grow(rng, m.discarded[e]) for e in df.outputs[p] if rng.random() < 0.6},
    }
    if df.receives_notifications[p] and rng.random() < 0.6:
        fields["notifications"] = grow(rng, m.notifications)
    return Checkpoint("top", **fields)


class MonitorMachine(RuleBasedStateMachine):
    """Random reports and rollbacks; the monitor must agree with a full re-solve after each."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 1  # the initialize step

    def reference(self, live: dict[str, Checkpoint] | None = None) -> Dataflow:
        return with_checkpoints(self.graph, self.history, live)

    @initialize(seed=SEEDS)
    def build(self, seed: int) -> None:
        """A random graph with a few initial checkpoints."""
        rng = random.Random(seed)
        self.graph, self.outputs = random_graph(rng)
        self.history: dict[str, list[Checkpoint]] = {p: [] for p in self.graph.processors}
        for _ in range(rng.randint(0, 2 * len(self.history))):
            p = rng.choice(list(self.history))
            self.history[p].append(self._draw(rng, p, self.reference().candidates(p, failed=True)[-1]))
        self.monitor = Monitor(self.reference(), outputs=self.outputs)
        self.marks = self.monitor.watermarks

    def last(self, p: str) -> Meta:
        """The resolved latest checkpoint of ``p`` (read from the monitor, to generate input only)."""
        return self.monitor._last[p]

    def _draw(self, rng: random.Random, p: str, m: Meta) -> Checkpoint:
        raw = self.history[p][-1] if self.history[p] else None
        ck = next_checkpoint(rng, self.graph, p, m, raw)
        return Checkpoint(ck.frontier) if p in self.outputs else ck

    def _report(self, rng: random.Random) -> None:
        p = rng.choice(list(self.history))
        ck = self._draw(rng, p, self.last(p))
        before = self.monitor.watermarks
        try:
            if p in self.outputs:
                changes = self.monitor.acknowledge_output(p, ck.frontier)
            else:
                changes = self.monitor.record(p, ck)
        except MonitorError:
            with pytest.raises(FalkirkError):  # the generator made an invalid report: so must the reference
                with_checkpoints(self.graph, {**self.history, p: [*self.history[p], ck]})
            assert self.monitor.watermarks == before
            return
        self.history[p].append(ck)
        after = self.monitor.watermarks
        raised = {q: f for q, f in after.items() if f != before[q]}
        assert dict(changes.watermarks) == raised
        df = self.graph
        logs = {
            e: raised[df.edges[e].dst]
            for e in df.edges
            if df.edges[e].dst in raised and e in df.processors[df.edges[e].src].logs
        }
        assert dict(changes.logs) == logs
        assert dict(changes.outputs) == {q: f for q, f in raised.items() if q in self.outputs}
        assert dict(changes.inputs) == {
            q: f for q, f in raised.items() if not df.inputs[q] and q not in self.outputs
        }

    def _step(self, seed: int) -> random.Random:
        self.steps += 1
        return random.Random(seed)

    @rule(seed=SEEDS)
    def record(self, seed: int) -> None:
        """One checkpoint (or output acknowledgement) from a random processor."""
        self._report(self._step(seed))

    @rule(seed=SEEDS)
    def reject(self, seed: int) -> None:
        """An out-of-order or non-monotone report is refused and changes nothing."""
        rng = self._step(seed)
        df = self.graph
        p = rng.choice(list(self.history))
        m = self.last(p)
        shrunk = [e for e in df.inputs[p] if not m.delivered[e].is_empty]
        if shrunk and not df.processors[p].stateless and p not in self.outputs:
            ck = Checkpoint(grow(rng, m.frontier, strict=True), delivered={rng.choice(shrunk): "empty"})
        else:  # below the latest one (∅ is: the monitor starts there), hence out of order
            ck = Checkpoint("empty")
        before = (self.monitor.watermarks, self.monitor.checkpoints(p))
        with pytest.raises(MonitorError, match=repr(p)):
            if p in self.outputs:
                self.monitor.acknowledge_output(p, ck.frontier)
            else:
                self.monitor.record(p, ck)
        assert (self.monitor.watermarks, self.monitor.checkpoints(p)) == before

    @rule(seed=SEEDS)
    def repeat(self, seed: int) -> None:
        """The latest checkpoint reported again, same metadata (an idle period, SPEC §5): accepted, no change."""
        rng = self._step(seed)
        reported = [p for p, h in self.history.items() if h]
        if not reported:
            return
        p = rng.choice(reported)
        before = (self.monitor.watermarks, self.monitor.checkpoints(p))
        ck = self.history[p][-1]
        changes = (self.monitor.acknowledge_output(p, ck.frontier) if p in self.outputs
                   else self.monitor.record(p, ck))
        assert not changes.watermarks
        assert (self.monitor.watermarks, self.monitor.checkpoints(p)) == before

    @rule(seed=SEEDS)
    def rollback(self, seed: int) -> None:
        """A failure: the plan equals solve_frontiers with live metadata, and respects the watermarks."""
        rng = self._step(seed)
        names = list(self.history)
        failed = rng.sample(names, rng.randint(0, len(names)))
        df = self.graph
        live = {
            p: live_metadata(rng, df, p, self.last(p))
            for p in names
            if p not in failed and not df.processors[p].stateless and rng.random() < 0.7
        }
        plan = self.monitor.plan_rollback(failed, live)
        assert plan.to_json() == solve_frontiers(self.reference(live), failed).to_json()
        assert all(lw <= plan.frontiers[p] for p, lw in self.monitor.watermarks.items())

    def _discardable(self, p: str) -> list[Checkpoint]:
        """What garbage collection may forget of ``p``: strictly inside its watermark; a stateless processor's
        superseded frontiers."""
        cks = list(self.monitor.checkpoints(p))
        if self.graph.processors[p].stateless:
            return cks[:-1]
        dom, lw = self.graph.domains[p], self.monitor.watermarks[p]
        return [c for c in cks if coerce(dom, c.frontier, p) <= lw and coerce(dom, c.frontier, p) != lw]

    @rule(seed=SEEDS)
    def discard(self, seed: int) -> None:
        """Garbage collection forgets checkpoints in place: the watermarks stay those of a full re-solve without
        them (the invariant); what must stay, or a processor with recorded projections, is refused."""
        rng = self._step(seed)
        df = self.graph
        recorded = {p for p in self.history if any(df.bound[e].recorded for e in df.outputs[p])}
        if recorded and rng.random() < 0.2:
            p = rng.choice(sorted(recorded))
            if self.monitor.checkpoints(p):
                with pytest.raises(MonitorError, match="recorded projection"):
                    self.monitor.discard(p, [self.monitor.checkpoints(p)[0].frontier])
            return
        candidates = [p for p in self.history if p not in recorded and self._discardable(p)]
        if not candidates:
            return
        p = rng.choice(candidates)
        dom, marks = df.domains[p], self.monitor.watermarks
        cks, allowed = list(self.monitor.checkpoints(p)), self._discardable(p)
        if rng.random() < 0.3:  # one that must stay (the latest, or one at or above the watermark): refused
            keep = cks[-1]
            with pytest.raises(MonitorError, match="cannot be discarded"):
                self.monitor.discard(p, [allowed[0].frontier, keep.frontier])
            assert list(self.monitor.checkpoints(p)) == cks
        chosen = [c for c in allowed if rng.random() < 0.7] or allowed[:1]
        assert self.monitor.discard(p, [c.frontier for c in chosen]) == len(chosen)
        gone = {coerce(dom, c.frontier, p) for c in chosen}
        self.history[p] = [c for c in self.history[p] if coerce(dom, c.frontier, p) not in gone]
        assert self.monitor.watermarks == marks
        DISCARDED.append(len(chosen))

    @invariant()
    def agrees_with_full_solve(self) -> None:
        """Watermarks equal a full re-solve and never fall."""
        ref = solve_frontiers(self.reference(), "all")
        marks = self.monitor.watermarks
        assert marks == ref.frontiers
        assert self.monitor.notification_watermarks == ref.notification_frontiers
        assert all(self.marks[p] <= f for p, f in marks.items())
        self.marks = marks

    def teardown(self) -> None:
        STEPS.append(self.steps)


def _examples() -> int:
    return max(3, settings.default.max_examples // 50)  # dev 3, ci 6, thorough 40


@pytest.mark.slow
def test_monitor_state_machine() -> None:
    """500-step random runs: incremental watermarks always equal a full re-solve and never fall."""
    STEPS.clear()
    DISCARDED.clear()
    for _ in range(5):  # a few runs may never reach a discardable checkpoint: run again until one did
        run_state_machine_as_test(
            MonitorMachine,
            settings=settings(
                max_examples=_examples(),
                stateful_step_count=500,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
        if sum(DISCARDED) > 0:
            break
    assert sum(DISCARDED) > 0  # garbage collection forgot checkpoints in place, and the invariants held
    # The runs are long: hypothesis ends a run early only when its buffer of choices is full, which
    # happens near the end of some runs (seen: 436-500 steps; a CI run on 2026-11-27 had the median of
    # [500, 437, 445, 500, 441, 436] at 443, which failed the 450 this asserted before), so the median
    # stays well above 400.
    assert statistics.median(STEPS) >= 400, STEPS
