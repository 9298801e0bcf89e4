"""The run's mutable state, with one owner: where every node is, and the parts that change as it runs.

A :class:`RunState` is what the executor's loop, the recovery
(:mod:`~falkirk.spark.pipeline.run.recovery`), garbage collection
(:mod:`~falkirk.spark.pipeline.run.retention`) and a what-if asked during
a run (:meth:`RunState.what_if`) share — and the only thing they share,
beside the read-only :class:`~falkirk.spark.pipeline.run.context.RunContext`:

==============  =================================================================================
field           what
==============  =================================================================================
``done``        each node's last completed epoch in this driver (``-1``: none); a rollback lowers it
``high``        each node's highest completed epoch ever (any driver): below it an execution is a redo
``runners``     one :class:`~falkirk.spark.pipeline.run.runners.Runner` per node
``queues``      the edges' queues (:mod:`~falkirk.spark.pipeline.run.queues`)
``planner``     the available frontiers and the solver (:mod:`~falkirk.spark.pipeline.plan.planner`)
``journal``     executions, recoveries, notes (:mod:`~falkirk.spark.pipeline.run.journal`)
``running``     the step execution under way (``"cc@7"``) and its Spark job ``group``
==============  =================================================================================

``done`` and ``high`` change only through :meth:`completed` and
:meth:`rolled_back`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from attrs import define, field

from falkirk.spark.pipeline.plan.live import live_checkpoint

if TYPE_CHECKING:
    from falkirk.solver import Checkpoint
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.plan.planner import Planner
    from falkirk.spark.pipeline.plan.whatif import WhatIf
    from falkirk.spark.pipeline.run.journal import Journal
    from falkirk.spark.pipeline.run.queues import Queues
    from falkirk.spark.pipeline.run.runners import Runner
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["RunState", "Task"]


@define
class Task:
    """One step execution in flight: begun on the run's thread, worked (perhaps on a pool thread), completed
    or abandoned on the run's thread (:class:`~falkirk.spark.pipeline.run.steps.Steps`)."""

    name: str
    epoch: int
    #: its Spark job group (a tag through Spark Connect)
    group: str
    t0: float
    #: the process tree's CPU and its JIT compilers' when it began (``None``: not measured)
    cpu0: tuple[float, float] | None
    inputs: dict[str, Any] = field(factory=dict)
    #: what it took off its input queues, by edge (put back if it fails: :meth:`Steps.abandon
    #: <falkirk.spark.pipeline.run.steps.Steps.abandon>`)
    taken: dict[str, Any] = field(factory=dict)
    out: Any = None
    rows: int = -1
    jobs: int = 0
    retried: int = 0
    discarded: bool = False
    fresh: bool | None = None
    #: a fused step's row count, known once its consumer's job ran
    pending: Any = None
    #: other executions ran meanwhile (its CPU cannot be told apart)
    overlapped: bool = False
    #: an input's cut time, an output's commit time (seconds since the Unix epoch), where this execution made
    #: them
    cut_at: float | None = None
    committed_at: float | None = None
    #: the thread that worked it (what it recorded for the planner is handed over when it ends)
    thread: int | None = None


@define
class RunState:
    """The run's progress and its changing parts (see the module docstring)."""

    pipeline: Definition
    runners: dict[str, Runner]
    queues: Queues
    planner: Planner
    journal: Journal
    done: dict[str, int] = field(factory=dict)
    high: dict[str, int] = field(factory=dict)
    running: str | None = None
    group: str | None = None
    #: the Spark job groups of the executions in flight (several in a concurrent run): what an interrupt
    #: cancels
    groups: set[str] = field(factory=set)
    #: when each (input, epoch) was cut, as far as this run saw; each output's response latency per epoch
    #: committed
    cut_at: dict[tuple[str, int], float | None] = field(factory=dict)
    latency: dict[str, dict[int, float]] = field(factory=dict)

    @property
    def order(self) -> list[str]:
        """The pipeline's nodes in definition (topological) order."""
        return self.pipeline.order

    def lowest(self) -> int:
        """The last epoch every node has completed (``-1``: not even epoch 0)."""
        return min(self.done.values(), default=-1)

    def completed(self, name: str, epoch: int) -> bool:
        """``name`` completed ``epoch``; whether that was a redo (it had completed ``epoch`` before)."""
        redo = epoch <= self.high[name]
        self.done[name] = epoch
        self.high[name] = max(self.high[name], epoch)
        return redo

    def rolled_back(self, name: str, frontier: int) -> None:
        """A recovery brought ``name`` back to ``frontier`` (``-1``: its initial state)."""
        self.done[name] = frontier

    # -- what recovery and the what-if need
    # --------------------------------------------------------------------
    def live(self, name: str) -> Checkpoint:
        """Live metadata of ``name`` (not failed):
        :func:`~falkirk.spark.pipeline.plan.live.live_checkpoint`."""
        return live_checkpoint(self.pipeline, name, self.done[name], self.queues.last_queued(name))

    def live_all(self, failed: Iterable[str]) -> dict[str, Checkpoint]:
        """Live metadata of every stateful step not in ``failed``."""
        lost = set(failed)
        return {n: self.live(n) for n in self.order if n not in lost and not self.pipeline.stateless(n)}

    def what_if(self, failed: tuple[str, ...], storage: Storage) -> WhatIf:
        """The plan a failure of ``failed`` would run now (nothing is changed)."""
        from falkirk.spark.pipeline.plan.whatif import what_if

        return what_if(
            self.pipeline,
            self.planner,
            failed,
            dict(self.done),
            live=self.live_all(failed),
            journal=self.journal,
            storage=storage,
        )
