"""The vectorised solver (SPEC §5) for dataflows whose domains are all totally ordered.

* :mod:`~falkirk.solver.vectorised.problem` — :class:`TotalProblem`: frontiers
  as integer ranks, constraints as arrays;
* :mod:`~falkirk.solver.vectorised.engine` — :func:`solve_total`, the array
  engine that iterates SPEC §5's update on them;
* :mod:`~falkirk.solver.vectorised.build` — a :class:`~falkirk.solver.Dataflow`
  converted to a problem (:func:`solve_view`), or :class:`NotApplicable`;
* :mod:`~falkirk.solver.vectorised.stages` — stage graphs: all-to-all edges
  between stages of parallel tasks, stored once per stage pair;
* :mod:`~falkirk.solver.vectorised.loops` — loop jobs (epoch and
  ``product(k)``/``lexicographic(k)`` processors whose checkpoints are
  lexicographic prefixes) solved as total orders, from the dataflow's columns.

``solve_frontiers(..., strategy="vectorised")`` (or ``"auto"`` on plain epoch jobs and large totally ordered
dataflows, :mod:`falkirk.solver.dispatch`) runs it; every result equals the reference's
(:mod:`falkirk.solver.fixpoint`).
"""

from falkirk.solver.vectorised.build import NotApplicable, solve_view
from falkirk.solver.vectorised.engine import solve_total
from falkirk.solver.vectorised.problem import TotalProblem, TotalSolution
from falkirk.solver.vectorised.stages import Stage, StageEdge, StageGraph, StagePlan

__all__ = [
    "NotApplicable",
    "solve_view",
    "solve_total",
    "TotalProblem",
    "TotalSolution",
    "Stage",
    "StageEdge",
    "StageGraph",
    "StagePlan",
]
