"""What the executor watches in Spark between step executions: lost executors and recompiled code.

* :class:`ExecutorWatch` — executors that went away since the last look, and
  which steps' in-memory state went with them;
* :class:`CodegenWatch` — a codegen cache too small for one epoch's
  generated classes (noted once).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from falkirk.spark.pipeline.run.session import (
    CODEGEN_CACHE,
    RECOMPILING_EPOCHS,
    codegen_compilations,
    executors,
    missing_blocks,
    recompiling,
)

if TYPE_CHECKING:
    from falkirk.spark.pipeline.run.runners import Runner

__all__ = ["ExecutorWatch", "CodegenWatch"]


class ExecutorWatch:
    """The executors ``spark`` has, as of the last :meth:`lost_state` (``None``: not knowable, e.g.
    Connect)."""

    def __init__(self, spark: Any, note: Callable[[str], None]) -> None:
        self.spark = spark
        self.note = note
        self.executors = executors(spark)

    def lost_state(self, runners: dict[str, Runner], step: str, epoch: int) -> tuple[list[str], str]:
        """Steps whose in-memory state went with executors lost since the last look, and why (noted).

        Between checkpoints a Lazy or Eager DataFrame state lives in executor
        memory (a local checkpoint, its lineage cut). An executor killed, or
        lost with its worker, takes its blocks with it; Spark may even finish
        the running step (it reruns the lost tasks elsewhere), but a state
        missing a block cannot be read again. Each state is checked
        (:func:`~falkirk.spark.pipeline.run.session.missing_blocks`): one whose
        blocks all survive on the remaining executors — replicated,
        ``replicas=2`` by default on a cluster — is kept and its step does
        not roll back; one missing a block (or whose blocks cannot be
        checked, e.g. through Spark Connect) is treated as failed: falkirk
        rolls it back to its last checkpoint.
        """
        if self.executors is None:
            return [], ""
        now = executors(self.spark)
        if now is None:
            return [], ""
        gone, self.executors = self.executors - now, now
        if not gone:
            return [], ""
        lost: list[str] = []
        kept: list[str] = []
        for n, runner in runners.items():
            state = runner.state
            deferred = runner.deferred
            if deferred is not None and deferred.state is state and not deferred.made:
                # not made yet (left to the end of its epoch): its lineage's state before is what lives in
                # executor memory only (its inputs are computed again from theirs)
                parts = [] if deferred.before is None else [deferred.before]
            elif deferred is not None and deferred.state is state and deferred.by_consumer:
                # made by its consumer's job, or not yet: its blocks (none missing while it is not made) and
                # those of the state before, which its lineage reads until then
                parts = [state] if deferred.before is None else [deferred.before, state]
            else:  # a changes=True step's state lives in its layers' parts
                parts = runner.state_parts() if hasattr(runner, "state_parts") else [state]
            parts = [p for p in parts if p is not None]
            if not parts:
                continue
            missing = [missing_blocks(p) for p in parts]
            (lost if any(m is None or m for m in missing) else kept).append(n)
        what = []
        if lost:
            what.append(
                f"the in-memory state of {', '.join(lost)} (kept on executors between checkpoints) went with "
                "it and is rolled back to its last checkpoint"
            )
        if kept:
            what.append(
                f"the in-memory state of {', '.join(kept)} survived (every block is on a remaining executor: "
                "replicated) and is kept"
            )
        note = f"executor(s) {', '.join(sorted(gone))} lost during {step}@{epoch}; " + (
            "; ".join(what) if what else "no step kept state in executor memory"
        )
        self.note(note)
        return lost, note


class CodegenWatch:
    """Notes once when Spark compiles its generated code anew every epoch (a codegen cache too small for one
    epoch's classes: ``docs/spark.md``, "Spark settings")."""

    def __init__(self, spark: Any, note: Callable[[str], None]) -> None:
        self.spark = spark
        self.note = note
        #: generated classes the driver's JVM had compiled at the end of the latest epochs (None once noted or
        #: unknown); as many as :func:`recompiling` looks at
        self.compiled: deque[int] | None = deque(maxlen=RECOMPILING_EPOCHS + 2)

    def end_of_epoch(self) -> None:
        """Read the driver's compilations after an epoch; note once if they show a cache too small."""
        if self.compiled is None:
            return
        n = codegen_compilations(self.spark)
        if n is None:
            self.compiled = None
            return
        self.compiled.append(n)
        classes = recompiling(list(self.compiled), epochs=RECOMPILING_EPOCHS)
        if classes is None:
            return
        self.compiled = None
        ((key, suggested),) = CODEGEN_CACHE.items()
        size = self.spark.sparkContext.getConf().get(key, "100")
        self.note(
            f"Spark compiled {classes} or more generated classes in each of the last epochs: its codegen cache "
            f"({key}={size}) is smaller than one epoch's classes, so every epoch compiles them again (and the "
            f"JVM's JIT after it); build the session with a larger {key} (e.g. {suggested}; it cannot be "
            "changed once the session runs): docs/spark.md, 'Spark settings'"
        )
