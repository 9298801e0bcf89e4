"""What a runner may use: the run context, and nothing else of the executor.

A runner (:mod:`~falkirk.spark.pipeline.run.runners`) runs one pipeline
node's epochs, persists what its regime asks for, comes back to a frontier
and collects its garbage. It sees the run only through a :class:`RunContext`
(as a Beam evaluator sees an evaluation context, never the executor):

==============  =================================================================
field           what for
==============  =================================================================
``spark``       the ``SparkSession`` the run uses
``storage``     manifests, Parquet data and the root (:mod:`~falkirk.spark.pipeline.store.storage`)
``durable``     ``False``: falkirk is off, nothing but outputs and input is persisted
``fsync``       local files are flushed before they are published
``retain``      restore points (and complete markers) kept per step by garbage collection
``frames``      DataFrame lifetime: ``materialise``, ``known_rows``, ``release``
``injector``    the failure-injection hooks: ``at(step, epoch, point)``, ``wrap(step, epoch, df, empty=)``
``record``      ``record(step, epoch)``: the step durably has a new frontier (to the planner)
``prune``       ``prune(step, below)``: garbage collection deleted the step's frontiers below ``below``
``note``        ``note(text)``: a remark for the run's journal and report
==============  =================================================================

The executor builds one context per run (:meth:`RunContext.record` and
``prune`` reach the planner only when the run is durable).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attrs import frozen

if TYPE_CHECKING:
    from falkirk.spark.pipeline.run.failures import Injector
    from falkirk.spark.pipeline.run.frames import Frames
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["RunContext"]


@frozen
class RunContext:
    """The run as a runner sees it (see the module docstring)."""

    spark: Any
    storage: Storage
    durable: bool
    fsync: bool
    retain: int
    frames: Frames
    injector: Injector
    record: Callable[[str, int], None]
    prune: Callable[[str, int], None]
    note: Callable[[str], None]
