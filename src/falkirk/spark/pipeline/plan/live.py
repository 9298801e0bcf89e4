"""Live metadata (SPEC §3, ``⊤``) of the steps that did not fail, as the planner needs it.

A step that has not failed keeps its state and its input queues, so its
``⊤`` carries what it has delivered (including what is still queued for it)
and what it discarded (sent and not logged). The executor gives these for a
real failure; the what-if (:mod:`~falkirk.spark.pipeline.plan.whatif`) for
a hypothetical one at an epoch boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from falkirk.solver import Checkpoint
from falkirk.spark.pipeline.declare.regimes import Output

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = ["frontier_kind", "live_checkpoint", "boundary_live"]


def frontier_kind(pipeline: Definition, name: str) -> str:
    """The manifest kind that records ``name``'s available frontiers."""
    step = pipeline.steps[name]
    if step.regime.stateless:
        return "complete"
    return "output" if isinstance(step.regime, Output) else "checkpoint"


def live_checkpoint(
    pipeline: Definition, name: str, done: int, queued: Mapping[str, int] | None = None
) -> Checkpoint:
    """Live metadata (SPEC §3, ``⊤``) of step ``name``, which has not failed and has completed epoch ``done``.

    ``M_e(⊤)``: the epochs delivered plus those still queued on ``e``
    (``queued``: the last queued epoch per input edge); ``D_e(⊤)``: the
    epochs sent and not logged, i.e. up to ``done`` on every edge it does
    not log (left out, the safe default ``⊤`` would force its receivers to
    keep everything and roll it back needlessly).
    """

    def epoch(e: int) -> int | str:
        return "empty" if e < 0 else e

    queued = queued or {}
    delivered = {e.name: epoch(max(done, queued.get(e.name, -1))) for e in pipeline.edges if e.dst == name}
    discarded = {} if pipeline.logs(name) else {e.name: epoch(done) for e in pipeline.edges if e.src == name}
    return Checkpoint("top", notifications=epoch(done), delivered=delivered, discarded=discarded)


def boundary_live(
    pipeline: Definition, done: Mapping[str, int], failed: Iterable[str]
) -> dict[str, Checkpoint]:
    """Live metadata of the stateful steps that did not fail, at a boundary where ``done`` holds (queues
    empty)."""
    lost = set(failed)
    return {
        n: live_checkpoint(pipeline, n, done[n])
        for n in pipeline.order
        if n not in lost and not pipeline.stateless(n)
    }
