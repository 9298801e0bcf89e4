"""The model (SPEC §2–§3, §9): what a dataflow is, and its checkpoint metadata resolved and validated.

* :mod:`~falkirk.solver.model.elements` — the value objects :class:`Processor`,
  :class:`Edge`, :class:`Checkpoint` and :class:`ResolvedCheckpoint`;
* :mod:`~falkirk.solver.model.resolve` — safe defaults, the chain and
  monotonicity rules, one checkpoint at a time;
* :mod:`~falkirk.solver.model.table` — the columns a :class:`Dataflow`
  keeps: names interned once, edges as index arrays, plain checkpoint chains
  in CSR form;
* :mod:`~falkirk.solver.model.views` — the dictionaries over those columns
  (``processors``, ``edges``, ``inputs``…) whose values are made on first read;
* :mod:`~falkirk.solver.model.dataflow` — :class:`Dataflow`, which validates
  a graph and resolves every processor (those with bare checkpoints on first
  use: :mod:`~falkirk.solver.model.deferred`, :mod:`~falkirk.solver.model.plain`);
* :mod:`~falkirk.solver.model.orders` — ``product(k)``/``lexicographic(k)``
  checkpoint chains as antichain columns, lexicographic prefixes encoded as bounds;
* :mod:`~falkirk.solver.model.binding` — edges' projections bound and checked;
* :mod:`~falkirk.solver.model.bulk` and :mod:`~falkirk.solver.model.arrays` —
  ``Dataflow.from_arrays`` and ``Dataflow.from_networkx`` (loop jobs of
  several domains and projections as columns);
* :mod:`~falkirk.solver.model.access` — ``F(p)`` and ``N``, ``M_e``, ``D_e``,
  ``φ_e`` at any frontier for a given set of failed processors (the
  :class:`~falkirk.solver.model.access.View` every driver reads).

>>> from falkirk.solver.model import Checkpoint, Dataflow, Processor
>>> [str(m.frontier) for m in Dataflow([Processor("a", "epoch", checkpoints=[Checkpoint(2)])], []).candidates("a", failed=True)]
['Frontier(epoch, empty)', 'Frontier(epoch, 2)']
"""

from falkirk.solver.model.dataflow import Dataflow
from falkirk.solver.model.elements import Checkpoint, Edge, Meta, Processor, ResolvedCheckpoint

__all__ = ["Checkpoint", "Processor", "Edge", "Dataflow", "ResolvedCheckpoint", "Meta"]
