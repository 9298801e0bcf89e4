"""PySpark pipelines with per-step checkpoint regimes and falkirk's selective rollback recovery.

Importing this package needs the ``spark`` extra (PySpark and a Java 17+ runtime); ``import
falkirk`` alone never imports PySpark.

A :class:`Pipeline` is a chain of PySpark steps over epochs of input logs; each step is a
falkirk processor with a regime (:class:`Ephemeral`, :class:`Batch`, :class:`Lazy`,
:class:`Eager`, :class:`Output`). Running it persists what each regime asks for under one
root directory; when a step fails, falkirk's solver picks the rollback frontier of every step
and the executor restores, replays and re-runs only what is needed.

>>> from falkirk.spark import Lazy
>>> Lazy(every=3).checkpoints_at(2)
True

The pipeline package is laid out in rooms (:mod:`falkirk.spark.pipeline` says
which, and what each may import): ``declare`` (the definition and the
regimes), ``store`` (the root, manifests, input logs), ``plan`` (the solver's
plans and what-ifs), ``run`` (executor, recovery, runners), ``tools``
(report, verify, the flagship application, ``python -m falkirk.spark.demo``).
"""

from typing import TYPE_CHECKING

from falkirk.spark.lazy import lazy_exports

# Imported on first use (falkirk.spark.lazy): importing one module under this package imports no more. The
# pipeline's names resolve through falkirk.spark.pipeline's own table.
_EXPORTS = {
    "falkirk.spark.errors": (
        "AlreadyPublishedError",
        "CorruptDataError",
        "EagerWriteError",
        "PipelineError",
        "RecordError",
        "RecoveryError",
        "SchemaError",
        "SessionError",
        "StepError",
        "StepFailure",
        "StorageError",
    ),
    "falkirk.spark.lineage.graph": (
        "Lineage",
        "Unit",
        "build_lineage",
        "lineage",
        "static_plans",
    ),
    "falkirk.spark.lineage.listener": (
        "JobRecorder",
        "RecordedJob",
        "SparkEvents",
    ),
    "falkirk.spark.lineage.model": (
        "LineageError",
        "SparkConnectError",
    ),
    "falkirk.spark.lineage.rerun": (
        "Rerun",
        "lose_outputs",
        "what_must_rerun",
    ),
    "falkirk.spark.pipeline": (
        "Pipeline",
        "Step",
        "Batch",
        "Eager",
        "Ephemeral",
        "Lazy",
        "Output",
        "Regime",
        "Planner",
        "Executor",
        "RunResult",
        "Injection",
        "local_session",
        "Cut",
        "InputLog",
        "key_group_range",
        "plan_rescale",
        "Manifest",
        "Storage",
        "Comparison",
        "compare_runs",
    ),
    "falkirk.spark.pipeline.plan.advice": ("Advice",),
    "falkirk.spark.pipeline.plan.costs": (
        "Costs",
        "Estimate",
        "NodeCosts",
    ),
    "falkirk.spark.pipeline.plan.prediction": ("Prediction",),
    "falkirk.spark.pipeline.run.layers": ("lookup",),
    "falkirk.spark.streaming.rollback": (
        "QueryCheckpoint",
        "apply_plan",
        "plan_rollback",
        "query_dataflow",
        "read_checkpoint",
        "rollback_query",
    ),
}

if TYPE_CHECKING:
    from falkirk.spark.errors import (
        AlreadyPublishedError,
        CorruptDataError,
        EagerWriteError,
        PipelineError,
        RecordError,
        RecoveryError,
        SchemaError,
        SessionError,
        StepError,
        StepFailure,
        StorageError,
    )
    from falkirk.spark.lineage.graph import Lineage, Unit, build_lineage, lineage, static_plans
    from falkirk.spark.lineage.listener import JobRecorder, RecordedJob, SparkEvents
    from falkirk.spark.lineage.model import LineageError, SparkConnectError
    from falkirk.spark.lineage.rerun import Rerun, lose_outputs, what_must_rerun
    from falkirk.spark.pipeline import (
        Batch,
        Comparison,
        Cut,
        Eager,
        Ephemeral,
        Executor,
        Injection,
        InputLog,
        Lazy,
        Manifest,
        Output,
        Pipeline,
        Planner,
        Regime,
        RunResult,
        Step,
        Storage,
        compare_runs,
        key_group_range,
        local_session,
        plan_rescale,
    )
    from falkirk.spark.pipeline.plan.advice import Advice
    from falkirk.spark.pipeline.plan.costs import Costs, Estimate, NodeCosts
    from falkirk.spark.pipeline.plan.prediction import Prediction
    from falkirk.spark.pipeline.run.layers import lookup
    from falkirk.spark.streaming.rollback import (
        QueryCheckpoint,
        apply_plan,
        plan_rollback,
        query_dataflow,
        read_checkpoint,
        rollback_query,
    )

__all__ = [
    "key_group_range",
    "plan_rescale",
    "Pipeline",
    "Step",
    "Regime",
    "Ephemeral",
    "Batch",
    "Lazy",
    "Eager",
    "Output",
    "InputLog",
    "Cut",
    "Storage",
    "Manifest",
    "Planner",
    "Advice",
    "Prediction",
    "Estimate",
    "Costs",
    "NodeCosts",
    "Executor",
    "RunResult",
    "Injection",
    "Comparison",
    "compare_runs",
    "local_session",
    "PipelineError",
    "StorageError",
    "AlreadyPublishedError",
    "RecordError",
    "EagerWriteError",
    "StepError",
    "SchemaError",
    "SessionError",
    "CorruptDataError",
    "StepFailure",
    "RecoveryError",
    "lineage",
    "build_lineage",
    "Lineage",
    "Unit",
    "static_plans",
    "what_must_rerun",
    "Rerun",
    "lose_outputs",
    "SparkEvents",
    "JobRecorder",
    "RecordedJob",
    "read_checkpoint",
    "QueryCheckpoint",
    "query_dataflow",
    "plan_rollback",
    "rollback_query",
    "apply_plan",
    "LineageError",
    "SparkConnectError",
    "lookup",
]

lazy_exports(__name__, _EXPORTS)
