"""The model and the solver: processors, edges, checkpoints, rollback plans (SPEC §3–§6).

>>> from falkirk.solver import Dataflow, Edge, Processor, Checkpoint, solve_frontiers
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])],
...               [Edge("ab", "a", "b")])
>>> solve_frontiers(df, failed=["a"]).to_json()["frontiers"]
{'a': 3, 'b': 1}

``__all__`` names the concepts a user works with. The modules read in one
direction, each building on the ones before it:

* the model (SPEC §2–§3, §9): :mod:`~falkirk.solver.elements` (the value
  objects), :mod:`~falkirk.solver.resolve` (defaults and validation of
  checkpoints), :mod:`~falkirk.solver.model` (:class:`Dataflow`),
  :mod:`~falkirk.solver.access` (``F(p)`` and metadata at any frontier);
* the constraints C1–C4, stated once (SPEC §4):
  :mod:`~falkirk.solver.constraints`, and :mod:`~falkirk.solver.consistency`
  (:func:`check_consistent`);
* the drivers of SPEC §5: :mod:`~falkirk.solver.fixpoint` (the reference,
  and why every driver is exact), :mod:`~falkirk.solver.worklist`, the
  vectorised solver (:mod:`~falkirk.solver.fast_build`,
  :mod:`~falkirk.solver.fast_total`, :mod:`~falkirk.solver.fast_engine`,
  :mod:`~falkirk.solver.compressed`), and :mod:`~falkirk.solver.dispatch`
  which picks one (``strategy=``);
* the plan (SPEC §6, §9): :mod:`~falkirk.solver.plan` (:func:`solve_frontiers`);
* the monitor (SPEC §6): :mod:`~falkirk.solver.monitor` with
  :mod:`~falkirk.solver.monitor_solver`, :mod:`~falkirk.solver.monitor_checkpoint`,
  :mod:`~falkirk.solver.monitor_codec` and :mod:`~falkirk.solver.store`.

The other names importable from here (the stage graphs, the stores,
``ResolvedCheckpoint`` and its earlier name ``Meta``, ``Changes``,
``ACTIONS``, ``encode_frontier``) are kept for existing code; they live in
the modules above.
"""

from falkirk.domains.encoding import encode_frontier as encode_frontier
from falkirk.solver.compressed import Stage as Stage
from falkirk.solver.compressed import StageEdge as StageEdge
from falkirk.solver.compressed import StageGraph as StageGraph
from falkirk.solver.compressed import StagePlan as StagePlan
from falkirk.solver.consistency import Violation, check_consistent
from falkirk.solver.fixpoint import Reason
from falkirk.solver.model import Checkpoint, Dataflow, Edge, Processor
from falkirk.solver.model import Meta as Meta
from falkirk.solver.model import ResolvedCheckpoint as ResolvedCheckpoint
from falkirk.solver.monitor import Changes as Changes
from falkirk.solver.monitor import Monitor
from falkirk.solver.plan import ACTIONS as ACTIONS
from falkirk.solver.plan import Replay, RollbackPlan, solve_frontiers
from falkirk.solver.store import MemoryStore as MemoryStore
from falkirk.solver.store import MetadataStore as MetadataStore
from falkirk.solver.store import SQLiteStore as SQLiteStore

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
