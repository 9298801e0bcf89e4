"""The incremental monitor (SPEC §6): low-watermarks kept up to date as checkpoints arrive.

* :mod:`~falkirk.solver.monitor.incremental` — :class:`Monitor`, its reports
  and rollbacks;
* :mod:`~falkirk.solver.monitor.tracker` — the fixed point re-run on the
  region a report touches (built on :class:`~falkirk.solver.fixpoint.Iteration`'s
  hooks);
* :mod:`~falkirk.solver.monitor.reports` — accepting one new checkpoint, and
  :class:`Changes`, what a report allows;
* :mod:`~falkirk.solver.monitor.store`, :mod:`~falkirk.solver.monitor.codec` —
  where acknowledged reports are kept (memory, SQLite) and their JSON form.

>>> from falkirk.solver import Checkpoint, Dataflow, Processor
>>> Monitor(Dataflow([Processor("a", "epoch")], [])).record("a", Checkpoint(2)).to_json()["watermarks"]
{'a': 2}
"""

from falkirk.solver.monitor.incremental import Monitor
from falkirk.solver.monitor.reports import Changes

__all__ = ["Monitor", "Changes"]
