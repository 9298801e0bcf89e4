"""Fused steps: an unlogged stateless step — or, in a sequential run, a stateful step's output computed from its new
state — computed by its consumer's Spark job instead of a job of its own.

:func:`fusions` says which steps are fused; :class:`FusedRecords` keeps
their journal records until the consumer's job has run (it counts their rows
on the way) and the frames they read in memory until then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from falkirk.spark.pipeline.declare.regimes import Output

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.run.frames import Frames

__all__ = ["fusions", "FusedRecords"]


def fusions(pipeline: Definition, *, logged: bool = False, stateful: bool = False) -> list[str]:
    """The steps computed by their consumer's job instead of a job of their own (``logged``: and the logged
    steps that would be, unlogged; ``stateful``: and the stateful steps that may be, in a sequential run).

    Such a step is unlogged and stateless (``Ephemeral()``), not an output,
    and read by some step; its first consumer (in the pipeline's order) is
    not such a step. Its output is persisted with no job; the job of the
    first consumer to run computes it inside its own query and fills the
    cache, counting the rows on the way (:meth:`Frames.fused
    <falkirk.spark.pipeline.run.frames.Frames.fused>`); any other consumer
    reads the cache. A job of its own would only compute, cache and count
    it first. The frames the step read stay in memory until that job ran
    (:meth:`Frames.hold <falkirk.spark.pipeline.run.frames.Frames.hold>`),
    which reads them there rather than computing them again from their
    lineage. In a chain of such steps every other one keeps its job (from
    the last): a fused step's consumer that is fused too runs no job in
    which to compute it.

    With ``stateful``, so may be a stateful step whose state is made at the
    end of its epoch (``Lazy(every=n)``, n > 1, neither incremental nor
    ``changes=True``, unlogged) and whose first consumer is not fused: where
    an execution returns its output as a function of its new state
    (:meth:`StepRunner.execute
    <falkirk.spark.pipeline.run.runners.StepRunner.execute>`), the
    consumer's job computes that output and makes the state as it reads it;
    the end of the epoch makes the state where no such job ran. The
    unlogged stateless steps it reads are then fused through it: the same
    job computes them, and their records wait for its record (an execution
    that returns its output itself computes them in its own job, as
    above).

    >>> from falkirk.spark.pipeline.tools.flagship import build
    >>> fusions(build("memory://falkirk-doc/fusions"))
    ['parse_batch', 'parse_graph', 'answer']
    """

    def candidate(n: str) -> bool:
        step = pipeline.steps.get(n)
        return (
            step is not None
            and step.regime.stateless
            and not isinstance(step.regime, Output)
            and step.fn is not None
            and bool(pipeline.consumers(n))
        )

    def through(n: str) -> bool:  # a stateful step whose consumer's job may compute its output
        step = pipeline.steps.get(n)
        regime = step.regime if step is not None else None
        return (
            stateful
            and step is not None
            and regime is not None
            and regime.takes_state
            and getattr(regime, "every", 1) > 1
            and not getattr(regime, "incremental", False)
            and not getattr(regime, "changes", False)
            and not getattr(regime, "append", False)
            and not regime.logs
            and step.fn is not None
            and bool(pipeline.consumers(n))
        )

    def first(n: str) -> str:
        return min(pipeline.consumers(n), key=pipeline.order.index)

    fused: set[str] = set()
    chained: set[str] = set()  # stateful fused steps: the stateless steps they read are fused through them
    for n in reversed(list(pipeline.order)):  # consumers first
        if through(n) and first(n) not in fused:
            fused.add(n)
            chained.add(n)
        elif (
            candidate(n)
            and not pipeline.steps[n].regime.logs
            and (first(n) not in fused or first(n) in chained)
        ):
            fused.add(n)
    would = {
        n
        for n in pipeline.steps
        if logged
        and candidate(n)
        and pipeline.steps[n].regime.logs
        and (first(n) not in fused or first(n) in chained)
    }
    return [n for n in pipeline.order if n in fused or n in would]


class FusedRecords:
    """The journal records of fused executions, by step, finished by a consumer's execution.

    Each is ``(epoch, finish, held)``: ``finish(count, cache)`` journals it
    with the rows the consumer's job observed (``cache``: no task attempt of
    that job was retried) or, with ``count``, counted by a job; ``held`` are
    the step's input frames, kept in memory until then (that job reads them).
    """

    def __init__(self, frames: Frames) -> None:
        self.frames = frames
        self.waiting: dict[str, list[tuple[int, Callable[[bool, bool], None], list[DataFrame]]]] = {}
        #: per fused step, the inputs of its latest waiting execution (:meth:`culprit` looks through them)
        self.inputs_of: dict[str, dict[str, DataFrame]] = {}

    def defer(
        self,
        step: str,
        epoch: int,
        finish: Callable[[int], None],
        pending: Callable[[bool, bool], int | None],
        held: list[DataFrame],
        inputs: dict[str, DataFrame] | None = None,
    ) -> None:
        """``step``'s execution of ``epoch`` is journalled (``finish(rows)``) once its consumer's job ran;
        ``inputs``: its inputs, fused steps among them computed by that job too (a chain through a stateful
        step, :func:`fusions`), whose records are finished with it."""

        def done(count: bool, cache: bool) -> None:
            finish(_rows_or_unknown(pending, count, cache))
            if inputs:
                self.finish(inputs, epoch, count=count, cache=cache)

        self.frames.hold(held)
        if inputs:
            self.inputs_of[step] = inputs
        self.waiting.setdefault(step, []).append((epoch, done, held))

    def finish(self, inputs: dict[str, DataFrame], epoch: int, *, count: bool, cache: bool) -> None:
        """Journal the fused executions among ``inputs`` a consumer's job (of ``epoch``) computed: their rows
        are known now — the cache's count (``cache``: no task attempt of that job was retried, see
        :meth:`Frames.fused <falkirk.spark.pipeline.run.frames.Frames.fused>`), else with ``count`` a count
        job; records of earlier epochs, superseded by a recovery, take only what the cache counted; later
        epochs' (a concurrent run's fused step may run ahead of its consumer) wait for their own consumer's
        execution."""
        for src in inputs:
            later = []
            for e, done, held in self.waiting.pop(src, []):
                if e > epoch:
                    later.append((e, done, held))
                    continue
                done(count and e == epoch, cache)
                self.frames.unhold(held)
            if later:
                self.waiting[src] = later

    def culprit(self, inputs: dict[str, DataFrame]) -> str | None:
        """After a consumer's job failed: the fused input whose own computation fails (computed alone), if any
        — the failure is that step's, not the consumer's."""
        for src, df in inputs.items():
            if src not in self.waiting:
                continue
            try:
                # every column computed (a count would prune them)
                df.write.format("noop").mode("overwrite").save()
            except Exception:  # noqa: BLE001 - any failure of the input alone is the input step's
                # or that of a fused step it reads, computed inside its computation
                return self.culprit(self.inputs_of.get(src, {})) or src
        return None

    def clear(self) -> None:
        """A run that ended before a fused step's consumer ran: release what was held."""
        for entries in self.waiting.values():
            for _, _, held in entries:
                self.frames.unhold(held)
        self.waiting.clear()
        self.inputs_of.clear()


def _rows_or_unknown(rows: Callable[[bool, bool], int | None], count: bool, cache: bool) -> int:
    """``rows(count, cache)``, or ``-1`` (unknown) where it is not known or counting fails (e.g. the consumer
    failed on the same rows)."""
    try:
        n = rows(count, cache)
    except Exception:  # noqa: BLE001 - a row count for the journal: the failure itself is handled elsewhere
        return -1
    return -1 if n is None else n
