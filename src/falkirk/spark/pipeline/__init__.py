"""Pipelines of PySpark steps with per-step checkpoint regimes, and their selective recovery.

How a pipeline lives, in the order a user meets it:

1. **Declare** it (:mod:`~falkirk.spark.pipeline.declare`): inputs with a
   schema, steps with a regime each (:class:`Ephemeral`, :class:`Batch`,
   :class:`Lazy`, :class:`Eager`, :class:`Output`), under one root.
2. **Run** it (:meth:`Pipeline.run`, :mod:`~falkirk.spark.pipeline.run`): each
   epoch runs every step over the next cut of the input logs; each regime
   persists what it promises under the root (:mod:`~falkirk.spark.pipeline.store`).
3. **Fail and recover**: a failed step, a lost executor, unusable data or a
   killed driver; falkirk's solver picks every step's rollback frontier
   (:mod:`~falkirk.spark.pipeline.plan`) and the run restores, replays and
   re-runs only that (:mod:`~falkirk.spark.pipeline.run.recovery`). A
   restarted driver resumes from the root alone.
4. **Ask and check** (:mod:`~falkirk.spark.pipeline.tools`): what-if plans
   (:meth:`Pipeline.plan_failure`, ``falkirk pipeline plan``), the recovery
   report, two runs compared row for row.

The rooms, and what each may import (checked by import-linter's layers
contract in ``pyproject.toml``), from the top down:

==============  ===================================================================
``tools``       report, verify, flagship, demo, cli: everything below
``api``         :class:`Pipeline` — a definition that runs and plans what-ifs
``run``         executor, recovery, runners, queues, injections, Spark session
``plan``        planner (the solver and its monitor), live metadata, what-ifs
``declare``     the definition, regimes, accepted changes
``store``       the root by URI, manifests, Parquet data, input logs, keyed layout
==============  ===================================================================

Where new things go: **a new regime** — its declaration in
``declare/regimes.py``, how it runs and persists in ``run/runners.py``;
**a new storage backend** — ``store/rootfs.py`` (the root's semantics are
stated there once; its scheme in ``store/schemes.py``, its connector's
options and dialect in ``store/connectors.py``); **a new failure kind** — ``run/failures.py`` (injected)
or ``run/causes.py`` (how Spark reports it, transient or not).
"""

from typing import TYPE_CHECKING

from falkirk.spark.lazy import lazy_exports

# Imported on first use (falkirk.spark.lazy): importing one module under this package imports no more.
_EXPORTS = {
    "falkirk.spark.pipeline.api": ("Pipeline",),
    "falkirk.spark.pipeline.declare.definition": ("Step",),
    "falkirk.spark.pipeline.declare.regimes": (
        "Batch",
        "Eager",
        "Ephemeral",
        "Lazy",
        "Output",
        "Regime",
    ),
    "falkirk.spark.pipeline.plan.planner": ("Planner",),
    "falkirk.spark.pipeline.run.executor": (
        "Executor",
        "RunResult",
    ),
    "falkirk.spark.pipeline.run.failures": ("Injection",),
    "falkirk.spark.pipeline.run.session": ("local_session",),
    "falkirk.spark.pipeline.store.inputcuts": ("Cut",),
    "falkirk.spark.pipeline.store.inputlog": ("InputLog",),
    "falkirk.spark.pipeline.store.keyed": (
        "key_group_range",
        "plan_rescale",
    ),
    "falkirk.spark.pipeline.store.manifest": ("Manifest",),
    "falkirk.spark.pipeline.store.storage": ("Storage",),
    "falkirk.spark.pipeline.tools.verify": (
        "Comparison",
        "compare_runs",
    ),
}

if TYPE_CHECKING:
    from falkirk.spark.pipeline.api import Pipeline
    from falkirk.spark.pipeline.declare.definition import Step
    from falkirk.spark.pipeline.declare.regimes import Batch, Eager, Ephemeral, Lazy, Output, Regime
    from falkirk.spark.pipeline.plan.planner import Planner
    from falkirk.spark.pipeline.run.executor import Executor, RunResult
    from falkirk.spark.pipeline.run.failures import Injection
    from falkirk.spark.pipeline.run.session import local_session
    from falkirk.spark.pipeline.store.inputcuts import Cut
    from falkirk.spark.pipeline.store.inputlog import InputLog
    from falkirk.spark.pipeline.store.keyed import key_group_range, plan_rescale
    from falkirk.spark.pipeline.store.manifest import Manifest
    from falkirk.spark.pipeline.store.storage import Storage
    from falkirk.spark.pipeline.tools.verify import Comparison, compare_runs

__all__ = [
    "Pipeline",
    "Step",
    "Executor",
    "RunResult",
    "Injection",
    "Cut",
    "InputLog",
    "key_group_range",
    "plan_rescale",
    "Planner",
    "Regime",
    "Ephemeral",
    "Batch",
    "Lazy",
    "Eager",
    "Output",
    "local_session",
    "Manifest",
    "Storage",
    "Comparison",
    "compare_runs",
]

lazy_exports(__name__, _EXPORTS)
