"""The model and the solver: processors, edges, checkpoints, rollback plans (SPEC §3–§6).

>>> from falkirk.solver import Dataflow, Edge, Processor, Checkpoint, solve_frontiers
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])],
...               [Edge("ab", "a", "b")])
>>> solve_frontiers(df, failed=["a"]).to_json()["frontiers"]
{'a': 3, 'b': 1}
"""

from falkirk.solver.compressed import Stage, StageEdge, StageGraph, StagePlan
from falkirk.solver.consistency import Violation, check_consistent
from falkirk.solver.fixpoint import Reason
from falkirk.solver.model import Checkpoint, Dataflow, Edge, Meta, Processor
from falkirk.solver.monitor import Changes, Monitor
from falkirk.solver.plan import ACTIONS, Replay, RollbackPlan, encode_frontier, solve_frontiers
from falkirk.solver.store import MemoryStore, MetadataStore, SQLiteStore

__all__ = [
    "Stage",
    "StageEdge",
    "StageGraph",
    "StagePlan",
    "Checkpoint",
    "Dataflow",
    "Edge",
    "Meta",
    "Processor",
    "Reason",
    "Replay",
    "RollbackPlan",
    "ACTIONS",
    "Violation",
    "check_consistent",
    "encode_frontier",
    "solve_frontiers",
    "Monitor",
    "Changes",
    "MetadataStore",
    "MemoryStore",
    "SQLiteStore",
]
