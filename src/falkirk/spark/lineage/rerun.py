"""What must re-run when a job runs again after shuffle files, cached blocks or checkpoints were lost.

:func:`what_must_rerun` marks the lost outputs as no longer logged, solves the
lineage's dataflow (:meth:`~falkirk.spark.lineage.Lineage.to_dataflow`) with
the result stage failed, and reports every processor whose frontier is not
``⊤``: the stages Spark runs and the firewalls whose data it recomputes.

``fetch_failure`` says how Spark reacts when a running stage cannot fetch a
shuffle file it believed was there:

* ``"executor"`` (Spark's behaviour without an external shuffle service, and
  what local mode does): the fetch failure unregisters **every** map output of
  the executor that served the file, and the block-manager master forgets its
  cached blocks; in local mode that is all of them, so falkirk solves again
  with every shuffle output and cache unavailable;
* ``"map-output"``: only the outputs named as lost are gone (falkirk's precise
  answer; Spark re-runs no fewer stages than this).

After the first fetch failure of a local-mode application the driver's block
manager stays unregistered (re-registering needs a ``CoarseGrainedScheduler``
endpoint that local mode lacks): the lineage's
:attr:`~falkirk.spark.lineage.model.Availability.block_manager_registered`
turns ``False``, the scheduler no longer sees any cached block, and it then
also runs missing stages *behind* caches whose tasks will read the blocks
locally anyway. falkirk answers what must run and does not predict that waste.

>>> from falkirk.spark.lineage.model import Availability, Dep, Node
>>> from falkirk.spark.lineage.graph import build_lineage
>>> nodes = {"r3": Node("r3", "reduce2", (Dep("shuffle", "r2", 1),), partitions=2),
...          "r2": Node("r2", "reduce1", (Dep("shuffle", "r1", 0),), partitions=2),
...          "r1": Node("r1", "source", partitions=2)}
>>> lin = build_lineage("r3", nodes, Availability({0: 2, 1: 2}, {}, {}))
>>> sorted(what_must_rerun(lin).processors)
['result']
>>> sorted(what_must_rerun(lin, lost=["shuffle_1"], fetch_failure="map-output").processors)
['result', 'shuffle-1']
>>> sorted(what_must_rerun(lin, lost=["shuffle_1"]).processors)
['result', 'shuffle-0', 'shuffle-1']
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Iterable
from typing import Any, Literal

from attrs import frozen

from falkirk.errors import SolverError, UnknownNameError, ValidationError
from falkirk.solver import RollbackPlan, solve_frontiers
from falkirk.spark.lineage.graph import Lineage

__all__ = ["Rerun", "what_must_rerun", "resolve_lost", "lose_outputs"]

FetchPolicy = Literal["executor", "map-output"]

_SHUFFLE = re.compile(r"shuffle[_-](\d+)(?:_\d+)*(?:\.data|\.index)?$")
_BLOCK = re.compile(r"rdd_(\d+)(?:_\d+)?$")
_CHECKPOINT = re.compile(r"checkpoint[_-](?:rdd)?(\d+)$")


@frozen
class Rerun:
    """falkirk's answer: the plan, and which processors it runs again.

    ``lost`` are the processors whose output was declared lost; ``fetch_failure``
    whether the ``"executor"`` rule applied (a running stage would read a lost
    shuffle file), after which every shuffle output and cache counted as lost.
    """

    lineage: Lineage
    plan: RollbackPlan
    lost: frozenset[str]
    fetch_failure: bool

    @property
    def processors(self) -> frozenset[str]:
        """Every processor that runs again (its frontier is not ``⊤``)."""
        return frozenset(p for p, f in self.plan.frontiers.items() if not f.is_top)

    @property
    def stages(self) -> frozenset[str]:
        """The stages that run again: compare with the stages Spark submits."""
        return frozenset(p for p in self.processors if self.lineage.units[p].is_stage)

    @property
    def firewalls(self) -> frozenset[str]:
        """Caches and checkpoints whose data is recomputed (inside the stages that read them)."""
        return self.processors - self.stages

    def explain(self, processor: str) -> list[str]:
        """Why ``processor`` runs again (the solver's constraint chain)."""
        return self.plan.explain(processor)

    def __repr__(self) -> str:
        return f"<Rerun: {sorted(self.processors)}{' after a fetch failure' if self.fetch_failure else ''}>"


def resolve_lost(lin: Lineage, lost: Iterable[str]) -> frozenset[str]:
    """Processor names for lost data given as Spark names them or as processor names.

    Accepted: ``shuffle_3`` (or a shuffle file name, ``shuffle_3_12_0.data``),
    ``rdd_5`` / ``rdd_5_0`` (a cached RDD or one of its blocks: the cache
    processor re-runs, recomputing what is missing), ``checkpoint_7``, and
    processor names (``shuffle-3``, ``cache-rdd5``, ``checkpoint-rdd7``).
    """
    out = set()
    for item in lost:
        if not isinstance(item, str):
            raise ValidationError(
                f"lost data is named by a string such as 'shuffle_3' or 'rdd_5_0', not {item!r}"
            )
        if item in lin.units:
            out.add(item)
            continue
        candidates: list[str] = []
        if m := _SHUFFLE.match(item):
            candidates = [f"shuffle-{m.group(1)}"]
        elif m := _BLOCK.match(item):
            candidates = [f"cache-rdd{m.group(1)}", f"checkpoint-rdd{m.group(1)}"]
        elif m := _CHECKPOINT.match(item):
            candidates = [f"checkpoint-rdd{m.group(1)}"]
        found = [c for c in candidates if c in lin.units]
        if not found:
            raise UnknownNameError(
                f"lost {item!r} is not part of this lineage (its processors: {sorted(lin.units)})"
            )
        out.add(found[0])
    return frozenset(out)


def _solve(lin: Lineage, available: dict[str, bool]) -> RollbackPlan:
    try:
        return solve_frontiers(lin.to_dataflow(available), failed=["result"])
    except SolverError as exc:
        raise SolverError(
            f"{exc} — a checkpoint that is lost (a reliable one's files, a local one's blocks) cannot be "
            "recomputed (checkpointing truncated its lineage), so Spark aborts this job too"
        ) from None


def _reads_lost_shuffle(lin: Lineage, plan: RollbackPlan, lost: frozenset[str]) -> bool:
    for name, f in plan.frontiers.items():
        if f.is_top:
            continue
        for i in lin.units[name].inputs:
            if i in lost and lin.units[i].kind == "shuffle" and lin.available(i):
                return True
    return False


def what_must_rerun(
    lin: Lineage, lost: Iterable[str] = (), *, fetch_failure: FetchPolicy = "executor"
) -> Rerun:
    """Which processors run again when the job runs now and ``lost`` data is gone.

    The lineage's availability snapshot says what Spark believes it can reuse;
    ``lost`` names data that is gone behind its back (deleted files, a dead
    disk). See the module docstring for ``fetch_failure``. Raises
    :class:`~falkirk.errors.SolverError` when a lost checkpoint is needed.
    """
    if fetch_failure not in ("executor", "map-output"):
        raise ValidationError(f"fetch_failure is 'executor' or 'map-output', not {fetch_failure!r}")
    lost_units = resolve_lost(lin, lost)
    available = {n: lin.available(n) and n not in lost_units for n in lin.units}
    plan = _solve(lin, available)
    fetch = fetch_failure == "executor" and _reads_lost_shuffle(lin, plan, lost_units)
    if fetch:
        for n, u in lin.units.items():
            if u.kind in ("shuffle", "cache"):
                available[n] = False
        plan = _solve(lin, available)
    return Rerun(lin, plan, lost_units, fetch)


def lose_outputs(spark: Any, lost: Iterable[str], *, lin: Lineage | None = None) -> list[str]:
    """Delete the files behind ``lost`` (failure injection for tests and demos); return their paths.

    ``shuffle_3`` deletes the ``.data`` files of shuffle 3 (the next reader gets a
    ``FetchFailedException``); ``rdd_5_0`` / ``rdd_5`` the on-disk blocks of a
    cached RDD (persist it with a disk level); ``checkpoint_7`` the checkpoint
    directory of RDD 7 (needs ``lin``, which knows the path). Raises
    :class:`~falkirk.errors.UnknownNameError` when nothing matches.
    """
    from falkirk.spark.lineage import _jvm

    dirs = _jvm.block_manager_dirs(spark)
    removed: list[str] = []
    for item in lost:
        if m := _CHECKPOINT.match(item):
            unit = lin.units.get(f"checkpoint-rdd{m.group(1)}") if lin is not None else None
            if unit is None or not unit.checkpoint_path:
                raise UnknownNameError(f"{item!r}: give the lineage that holds this checkpoint (lin=...)")
            path = unit.checkpoint_path.removeprefix("file:")
            shutil.rmtree(path)
            removed.append(path)
            continue
        if m := _SHUFFLE.match(item):
            pattern = f"shuffle_{m.group(1)}_*.data"
        elif _BLOCK.match(item):
            pattern = item if item.count("_") == 2 else f"{item}_*"
        else:
            raise UnknownNameError(
                f"{item!r} names no shuffle ('shuffle_3'), block ('rdd_5_0') or checkpoint"
            )
        found = sorted(p for d in dirs for p in glob.glob(os.path.join(d, "*", pattern)))
        if not found:
            raise UnknownNameError(
                f"{item!r}: no file {pattern!r} under the block manager's directories {dirs}"
            )
        for p in found:
            os.remove(p)
        removed.extend(found)
    return removed
