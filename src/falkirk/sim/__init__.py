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

Final commit: committed output is final
---------------------------------------
An output processor ``O`` hands the records of each settled time to its
external service when it commits; the service **acknowledges** them.
With :class:`Commit` a rollback of ``O`` below what it committed retracts
the acknowledged times, and they are written again (only **released**
times — inside ``O``'s low-watermark — are promised never to change).
With ``Commit(final=True)`` an acknowledged time is **final**:

* the solver plans as before (``O`` is declared the same way, with a
  checkpoint per commit) and may roll ``O`` back to ``f(O)`` below its
  committed frontier ``c``;
* the reset leaves the external data alone; ``O`` re-executes the times
  outside ``f(O)`` as usual, but it **discards** the records re-sent for
  times in ``c`` (``Result.discarded`` counts them) and writes the times
  after ``c`` normally — each time is written once (``Result.journal``).

Why the plan stays consistent: split ``O`` into a stateless dedup filter
``D`` and the external sink ``X``. ``D`` never sends at a time in ``c``
because of an event outside ``f`` (it drops every time in ``c``), so the
edge ``D → X`` has the projection ``φ(f) = f ∪ c``; ``X`` keeps
``f(X) = f(D) ∪ c`` (``c`` whenever ``O`` is reset: ``F(O)`` holds only
commits, all inside ``c``, and ``⊤``). On ``D → X``: C2
``D(f(D)) = f(D) ∪ c ⊆ f(X)``; C3 ``M(f(X)) ⊆ f(X) = φ(f(D))``; C4 with
``n(X) = φ(n(D)) ∩ f(X) ⊇ c ⊇ N_X``. On ``D``'s input edges
``u → D`` the solver's constraints for ``O`` carry over: C2 is the same,
and C3 for a stateless ``D`` (``M(f) = f``) holds because every commit
counts as a notification (C4 gives ``f(O) ⊆ φ(f(u))``; in a sequence
domain a commit's frontier is the delivered count). So C1–C4 hold
whatever ``f(O)`` the solver picks, and nothing ``X`` committed changes.

Why the output is still the failure-free one needs **deterministic
operators upstream**: then the records re-sent for a committed time are the
ones committed, and dropping them is the same as writing them again. The
simulator compares them when ``O`` commits the time again
(``Result.divergent``; the oracle rejects any difference, a rewrite or a
retraction). Downstream of a non-deterministic operator — stateless ones
included: a ``Salt`` feeding a ``RunningTotal`` — the re-execution may
choose differently, and the kept times then contradict later ones or
other outputs; :class:`SimGraph` rejects a final output there. A final
output also relies on commits being taken only at really complete times:
a rollback no longer repairs a premature commit.

Schedules
---------
``Simulation(schedule="sequential")`` (the default) runs one event per
step, of any processor; ``schedule="pipelined", window=W`` runs epoch
executions concurrently, as the Spark executor does — each processor its
epochs in order, one at a time, an epoch once its input is queued, at most
``W`` epochs between a sender that does not log and its receiver; a
detected failure lets the executions in flight finish (failures meanwhile
join the failed set), then the same planner solves on that quiescent state
and the processors it keeps go on while the others catch up. See
:mod:`falkirk.sim.schedule`.
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
