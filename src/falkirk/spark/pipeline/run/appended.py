"""An ``append=True`` step's state: the parts appended, each made by a job over its rows, and their union.

A step declared ``Lazy(append=True)`` (or ``Eager``) returns, as its new state, only the rows to append
(:class:`~falkirk.spark.pipeline.declare.regimes.Keyed`). Its runner keeps a :class:`Parts`:

* each epoch's rows are detached (:func:`~falkirk.spark.pipeline.run.session.detach`) and made by one job
  over those rows alone, where a state returned whole is copied whole every epoch;
* the state the step is given, and that its checkpoints are written from, is the union of the parts (a view:
  no job of its own);
* a checkpoint writes the parts appended since the one before (:meth:`Parts.pending`), chained to it
  (:class:`~falkirk.spark.pipeline.run.incremental.StateCheckpoints`);
* once more than :data:`PARTS` parts are held, the parts already checkpointed are compacted into one (one job
  over them), so that the view's plan stays small.

Nothing here runs a job but :func:`compacted` (and the count in :func:`made`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import TYPE_CHECKING, Any

import attrs

from falkirk.spark.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["PARTS", "Parts", "union", "made", "compacted"]

#: parts held in memory before those already checkpointed are compacted into one
PARTS = 32


@attrs.frozen
class Parts:
    """An ``append=True`` state in memory (see the module docstring)."""

    #: the parts, oldest first: local checkpoints (a restored chain's scan, detached, is the first)
    frames: tuple[Any, ...] = ()
    #: each part's rows (``None``: not known, a restore whose manifest does not say)
    rows: tuple[int | None, ...] = ()
    #: how many of the newest parts no checkpoint holds yet (the next checkpoint writes them)
    unwritten: int = 0
    #: the union of the parts: the state (``None``: no part yet)
    view: Any = None
    #: the chain of checkpoints that holds the parts before the unwritten ones (``None``: none does), as
    #: :attr:`StateCheckpoints.chain <falkirk.spark.pipeline.run.incremental.StateCheckpoints.chain>` was when
    #: it was written or read: a checkpoint is chained to the chain in memory only while that is this one
    chain: tuple[int, ...] | None = None

    @property
    def total(self) -> int | None:
        """The state's rows, where every part's is known."""
        return None if any(r is None for r in self.rows) else sum(r for r in self.rows if r is not None)

    def pending(self) -> tuple[list[Any], int]:
        """The parts no checkpoint holds yet, oldest first, and their rows (each part's is known: made here)."""
        if not self.unwritten:
            return [], 0
        at = len(self.frames) - self.unwritten
        return list(self.frames[at:]), sum(r or 0 for r in self.rows[at:])

    def written(self, chain: tuple[int, ...] | None) -> Parts:
        """The same parts, every one held by the checkpoint chain ``chain``."""
        return attrs.evolve(self, unwritten=0, chain=chain)


def union(frames: tuple[Any, ...], step: str) -> DataFrame | None:
    """The state the parts make (by column name); a :class:`~falkirk.spark.errors.PipelineError` naming
    ``step`` where the rows appended do not have the state's columns."""
    if not frames:
        return None
    try:
        return reduce(lambda a, b: a.unionByName(b), frames)
    except Exception as exc:  # AnalysisException: columns that differ
        columns = [", ".join(f.columns) for f in (frames[0], frames[-1])]
        raise PipelineError(
            f"step {step!r} (append=True): the rows it returned to append have the columns ({columns[1]}), its "
            f"state ({columns[0]}); return rows with the state's columns ({type(exc).__name__})"
        ) from exc


def made(rows: DataFrame, detach: Callable[[DataFrame], DataFrame]) -> tuple[DataFrame, int]:
    """``rows`` detached and made by one job, which counts them."""
    part = detach(rows)
    return part, part.count()


def compacted(parts: Parts, detach: Callable[[DataFrame], DataFrame], step: str) -> tuple[Parts, list[Any]]:
    """``parts`` with those already checkpointed made into one, where more than :data:`PARTS` are held and at
    least two are (one job over them); and the parts it replaced (to be let go of). Unchanged otherwise."""
    keep = len(parts.frames) - parts.unwritten
    if len(parts.frames) <= PARTS or keep < 2:
        return parts, []
    old = parts.frames[:keep]
    whole = union(old, step)
    assert whole is not None
    one, rows = made(whole, detach)
    frames = (one, *parts.frames[keep:])
    return (
        Parts(frames, (rows, *parts.rows[keep:]), parts.unwritten, union(frames, step), parts.chain),
        list(old),
    )
