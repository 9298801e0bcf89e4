"""Pipelines of PySpark steps with per-step checkpoint regimes, and their selective recovery.

The modules, in the order a run uses them:

* :mod:`~falkirk.spark.pipeline.definition` — :class:`Pipeline` and :class:`Step` (the API);
* :mod:`~falkirk.spark.pipeline.regimes` — what each step persists (SPEC §8);
* :mod:`~falkirk.spark.pipeline.inputlog` — partitioned, append-only input logs and their cuts;
* :mod:`~falkirk.spark.pipeline.storage` — manifests, checkpoints and logs under the root;
* :mod:`~falkirk.spark.pipeline.planner` — the monitor's metadata and the solver's plans;
* :mod:`~falkirk.spark.pipeline.executor` and :mod:`~falkirk.spark.pipeline.runners` — running
  epochs, restoring, replaying and re-running;
* :mod:`~falkirk.spark.pipeline.failures` — injected failures;
* :mod:`~falkirk.spark.pipeline.journal`, :mod:`~falkirk.spark.pipeline.report` and
  :mod:`~falkirk.spark.pipeline.verify` — what a run did, and whether it matches a reference;
* :mod:`~falkirk.spark.pipeline.keyed` — keyed state by key group;
* :mod:`~falkirk.spark.pipeline.session` — SparkSession helpers;
* :mod:`~falkirk.spark.pipeline.flagship` and :mod:`~falkirk.spark.pipeline.demo` — the paper's
  Figure 1 application and the main job.
"""

from falkirk.spark.pipeline.definition import Pipeline, Step
from falkirk.spark.pipeline.executor import Executor, RunResult
from falkirk.spark.pipeline.failures import Injection
from falkirk.spark.pipeline.inputlog import Cut, InputLog
from falkirk.spark.pipeline.keyed import key_group_range, plan_rescale
from falkirk.spark.pipeline.planner import Planner
from falkirk.spark.pipeline.regimes import Batch, Eager, Ephemeral, Lazy, Output, Regime
from falkirk.spark.pipeline.session import local_session
from falkirk.spark.pipeline.storage import Manifest, Storage
from falkirk.spark.pipeline.verify import Comparison, compare_runs

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
