"""A deterministic dataflow simulator that checks rollback policies end to end.

Build a :class:`SimGraph` of processors (an :class:`~falkirk.sim.operators.Operator`,
a :mod:`policy <falkirk.sim.policies>` and a time domain each) and edges,
run it with :class:`Simulation` — with a failure schedule or without — and
compare the output with :func:`check_run` (the oracle). Plans come from a
:class:`Planner` (by default the reference solver).

>>> from falkirk.sim import *
>>> g = SimGraph(
...     [Node("src", Source(), Ephemeral()), Node("sum", Sum(), Lazy(every=2)),
...      Node("out", Output(), Commit())],
...     [Link("e1", "src", "sum"), Link("e2", "sum", "out")],
...     inputs={"src": [[1, 2], [3], [4]]})
>>> verdict = check_run(g, [Failure(5, {"sum"}), Failure(6, {"src", "out"})], seed=3)
>>> verdict.ok, verdict.result.output
(True, {'out': {0: (3,), 1: (3,), 2: (4,)}})
"""

from falkirk.sim.engine import Failure, Result, Simulation
from falkirk.sim.external import (
    CollectedStateNeeded,
    NoProgress,
    ProtocolViolation,
    ReleasedOutputChanged,
    SimulationError,
)
from falkirk.sim.graph import Link, Node, SimGraph
from falkirk.sim.operators import (
    Buffer,
    Chooser,
    Context,
    Filter,
    Halve,
    Map,
    Operator,
    Output,
    RunningTotal,
    Salt,
    Scan,
    Sequencer,
    Source,
    Sum,
)
from falkirk.sim.oracle import Verdict, check_run, reference_run
from falkirk.sim.planner import Planner, SolverPlanner
from falkirk.sim.policies import Batch, Commit, Eager, Ephemeral, HistoryLog, Lazy, Never, Policy, WrongLog

__all__ = [
    "SimGraph",
    "Node",
    "Link",
    "Simulation",
    "Failure",
    "Result",
    "Planner",
    "SolverPlanner",
    "Verdict",
    "check_run",
    "reference_run",
    "Operator",
    "Context",
    "Source",
    "Map",
    "Filter",
    "Sum",
    "Buffer",
    "RunningTotal",
    "Halve",
    "Salt",
    "Chooser",
    "Output",
    "Sequencer",
    "Scan",
    "Policy",
    "Ephemeral",
    "Batch",
    "Lazy",
    "Eager",
    "HistoryLog",
    "Never",
    "Commit",
    "WrongLog",
    "SimulationError",
    "CollectedStateNeeded",
    "ProtocolViolation",
    "ReleasedOutputChanged",
    "NoProgress",
]
