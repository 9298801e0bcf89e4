"""The planner seam: where the simulator gets rollback plans and low-watermarks.

A :class:`Planner` is told about every piece of persisted checkpoint
metadata as it is written (``record``), about checkpoints that stop existing
(``truncate`` after a rollback abandons them, ``collect`` after garbage
collection), and answers two questions: the rollback plan for a set of
failed processors given the live metadata of the others (SPEC §5–§6), and the
low-watermarks (SPEC §6: every processor as if failed).

:class:`SolverPlanner` answers both by building a fresh
:class:`~falkirk.solver.Dataflow` and calling
:func:`~falkirk.solver.solve_frontiers` — the reference.
:class:`MonitorPlanner` uses the incremental :class:`falkirk.solver.monitor.Monitor`.

>>> from falkirk.sim import Node, Link, SimGraph, Source, Sum, Output, Ephemeral, Lazy, Commit
>>> g = SimGraph([Node("src", Source(), Ephemeral()), Node("sum", Sum(), Lazy()),
...               Node("out", Output(), Commit())],
...              [Link("e1", "src", "sum"), Link("e2", "sum", "out")], inputs={"src": [[1]]})
>>> p = SolverPlanner(g)
>>> p.record("src", Checkpoint(0))
>>> {k: str(v) for k, v in p.watermarks().items()}
{'src': 'Frontier(epoch, empty)', 'sum': 'Frontier(epoch, empty)', 'out': 'Frontier(epoch, empty)'}
>>> p.plan_rollback({"sum"}, {"out": Checkpoint("top")}).actions
{'src': 'rollback', 'sum': 'restart', 'out': 'rollback'}
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol

import attrs

from falkirk.domains import Frontier
from falkirk.sim.graph import SimGraph
from falkirk.solver import Checkpoint, Dataflow, Processor, RollbackPlan, solve_frontiers

__all__ = ["Planner", "SolverPlanner", "MonitorPlanner", "PLANNERS", "default_planner", "Checkpoint"]


class Planner(Protocol):
    """What the simulator needs from a planner (see the module docstring)."""

    def record(self, processor: str, checkpoint: Checkpoint) -> None:
        """A new persisted checkpoint (for a stateless processor: its latest complete frontier)."""
        ...

    def truncate(self, processor: str, keep: Frontier) -> None:
        """A rollback to ``keep``: checkpoints not inside ``keep`` no longer exist."""
        ...

    def collect(self, processor: str, below: Frontier) -> None:
        """Garbage collection: checkpoints strictly inside ``below`` were deleted."""
        ...

    def plan_rollback(self, failed: Collection[str], live: Mapping[str, Checkpoint]) -> RollbackPlan:
        """The rollback plan when ``failed`` fail; ``live`` has ``⊤`` metadata for the others."""
        ...

    def watermarks(self) -> dict[str, Frontier]:
        """Low-watermarks from the persisted metadata alone."""
        ...


class SolverPlanner:
    """The reference planner: a full :func:`~falkirk.solver.solve_frontiers` per question."""

    def __init__(self, graph: SimGraph) -> None:
        self.graph = graph
        self.decls = {n: graph.processor_decl(n) for n in graph.nodes}
        self.checkpoints: dict[str, list[Checkpoint]] = {n: [] for n in graph.nodes}
        self.edges = graph.solver_edges()
        self.solves = 0

    def _frontier(self, name: str, ck: Checkpoint) -> Frontier:
        f = ck.frontier
        return f if isinstance(f, Frontier) else self.graph.domain(name).decode(f)  # type: ignore[attr-defined]

    def record(self, processor: str, checkpoint: Checkpoint) -> None:
        if self.decls[processor]["stateless"]:
            self.checkpoints[processor] = (
                [] if self._frontier(processor, checkpoint).is_empty else [checkpoint]
            )
        else:
            self.checkpoints[processor].append(checkpoint)

    def truncate(self, processor: str, keep: Frontier) -> None:
        cks = self.checkpoints[processor]
        if self.decls[processor]["stateless"] and cks:
            c = self._frontier(processor, cks[0]) & keep
            self.checkpoints[processor] = [] if c.is_empty else [attrs.evolve(cks[0], frontier=c)]
            return
        self.checkpoints[processor] = [c for c in cks if self._frontier(processor, c) <= keep]

    def collect(self, processor: str, below: Frontier) -> None:
        if self.decls[processor]["stateless"]:
            return
        self.checkpoints[processor] = [
            c for c in self.checkpoints[processor] if not self._frontier(processor, c) < below
        ]

    def _dataflow(self, live: Mapping[str, Checkpoint]) -> Dataflow:
        procs = [
            Processor(**self.decls[n], checkpoints=self.checkpoints[n], live=live.get(n))
            for n in self.graph.nodes
        ]
        return Dataflow(procs, self.edges)

    def plan_rollback(self, failed: Collection[str], live: Mapping[str, Checkpoint]) -> RollbackPlan:
        self.solves += 1
        return solve_frontiers(self._dataflow(live), failed=sorted(failed))

    def watermarks(self) -> dict[str, Frontier]:
        self.solves += 1
        return dict(solve_frontiers(self._dataflow({}), failed="all").frontiers)


class MonitorPlanner(SolverPlanner):
    """Plans and low-watermarks from the incremental :class:`~falkirk.solver.monitor.Monitor`.

    The monitor only ever grows a processor's checkpoints, so when a rollback
    abandons some (``truncate``) it is rebuilt from the checkpoints that
    remain; that keeps every announced watermark (the abandoned checkpoints
    lie above them). Garbage-collected checkpoints simply stay in the
    monitor, which never chooses them.
    """

    def __init__(self, graph: SimGraph) -> None:
        super().__init__(graph)
        self._rebuild()

    def _rebuild(self) -> None:
        from falkirk.solver.monitor import Monitor

        procs = [Processor(**self.decls[n], checkpoints=self.checkpoints[n]) for n in self.graph.nodes]
        self.monitor = Monitor(Dataflow(procs, self.edges))
        self.solves += 1

    def record(self, processor: str, checkpoint: Checkpoint) -> None:
        before = list(self.checkpoints[processor])
        super().record(processor, checkpoint)
        if self.decls[processor]["stateless"] and before and self.checkpoints[processor]:
            old, new = self._frontier(processor, before[0]), self._frontier(processor, checkpoint)
            if not old < new:  # a stateless report that does not grow: not a monitor report
                self._rebuild()
                return
        self.monitor.record(processor, checkpoint)

    def truncate(self, processor: str, keep: Frontier) -> None:
        before = list(self.checkpoints[processor])
        super().truncate(processor, keep)
        if self.checkpoints[processor] != before:
            self._rebuild()

    def plan_rollback(self, failed: Collection[str], live: Mapping[str, Checkpoint]) -> RollbackPlan:
        self.solves += 1
        return self.monitor.plan_rollback(sorted(failed), dict(live))

    def watermarks(self) -> dict[str, Frontier]:
        return self.monitor.watermarks


#: Planner classes by name (the fuzz command's ``--planner``).
PLANNERS = {"solver": SolverPlanner, "monitor": MonitorPlanner}


def default_planner(graph: SimGraph) -> Planner:
    """The incremental monitor when it is available, else the reference solver."""
    try:
        return MonitorPlanner(graph)
    except ImportError:  # pragma: no cover - the monitor ships with falkirk.solver
        return SolverPlanner(graph)
