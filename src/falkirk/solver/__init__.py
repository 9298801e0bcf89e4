"""The model and the solver: processors, edges, checkpoints, rollback plans (SPEC §3–§6).

>>> from falkirk.solver import Dataflow, Edge, Processor, Checkpoint, solve_frontiers
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])],
...               [Edge("ab", "a", "b")])
>>> solve_frontiers(df, failed=["a"]).to_json()["frontiers"]
{'a': 3, 'b': 1}

``__all__`` names the concepts a user works with. The parts read in one
direction, each building on the ones before it:

* :mod:`~falkirk.solver.model` (SPEC §2–§3, §9): the value objects,
  checkpoint resolution and validation, :class:`Dataflow`, and the view of
  ``F(p)`` and its metadata that every driver reads;
* :mod:`~falkirk.solver.constraints` (SPEC §4): C1–C4, stated once, and
  :mod:`~falkirk.solver.consistency` (:func:`check_consistent`) on it;
* the drivers of SPEC §5: :mod:`~falkirk.solver.fixpoint` (the reference,
  and why every driver is exact), :mod:`~falkirk.solver.worklist`,
  :mod:`~falkirk.solver.vectorised` (totally ordered domains, stage
  graphs), and :mod:`~falkirk.solver.dispatch`, which picks one
  (``strategy=``);
* :mod:`~falkirk.solver.plan` (SPEC §6, §9): :func:`solve_frontiers` and
  the :class:`RollbackPlan`;
* :mod:`~falkirk.solver.monitor` (SPEC §6): the incremental low-watermarks,
  their tracker, reports and stores.

The other names importable from here (the stage graphs, the stores,
``ResolvedCheckpoint`` and its earlier name ``Meta``, ``Changes``,
``ACTIONS``, ``encode_frontier``) are kept for existing code; they live in
the packages above. ``falkirk.solver.store`` is kept as a path too.
"""

from falkirk.domains.encoding import encode_frontier as encode_frontier
from falkirk.solver.consistency import Violation, check_consistent
from falkirk.solver.fixpoint import Reason
from falkirk.solver.model import Checkpoint, Dataflow, Edge, Processor
from falkirk.solver.model import Meta as Meta
from falkirk.solver.model import ResolvedCheckpoint as ResolvedCheckpoint
from falkirk.solver.monitor import Changes as Changes
from falkirk.solver.monitor import Monitor
from falkirk.solver.monitor.store import MemoryStore as MemoryStore
from falkirk.solver.monitor.store import MetadataStore as MetadataStore
from falkirk.solver.monitor.store import SQLiteStore as SQLiteStore
from falkirk.solver.plan import ACTIONS as ACTIONS
from falkirk.solver.plan import Replay, RollbackPlan, solve_frontiers
from falkirk.solver.vectorised.stages import Stage as Stage
from falkirk.solver.vectorised.stages import StageEdge as StageEdge
from falkirk.solver.vectorised.stages import StageGraph as StageGraph
from falkirk.solver.vectorised.stages import StagePlan as StagePlan

__all__ = [
    "Dataflow",
    "Processor",
    "Edge",
    "Checkpoint",
    "solve_frontiers",
    "RollbackPlan",
    "Replay",
    "Reason",
    "check_consistent",
    "Violation",
    "Monitor",
]
