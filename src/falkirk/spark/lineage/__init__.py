"""Spark's own lineage as a falkirk dataflow: which stages must re-run after data is lost.

* :mod:`~falkirk.spark.lineage.model` — plain lineage data (nodes, dependencies, availability)
  and the errors;
* :mod:`~falkirk.spark.lineage.graph` — a job's stages as processors (:func:`lineage`,
  :func:`build_lineage`, :class:`Lineage`);
* :mod:`~falkirk.spark.lineage.rerun` — :func:`what_must_rerun` and :func:`lose_outputs`;
* :mod:`~falkirk.spark.lineage.listener` — a JVM listener recording jobs, stages and executors;
* :mod:`~falkirk.spark.lineage._jvm` — the only code here that reaches into the JVM (py4j), so a
  Spark Connect session gets :class:`SparkConnectError` naming the feature.
"""

from falkirk.spark.lineage.graph import DETERMINISTIC, Lineage, Unit, build_lineage, lineage, static_plans
from falkirk.spark.lineage.listener import JobRecorder, RecordedJob, SparkEvents
from falkirk.spark.lineage.model import LineageError, SparkConnectError
from falkirk.spark.lineage.rerun import Rerun, lose_outputs, what_must_rerun

__all__ = [
    "DETERMINISTIC",
    "Lineage",
    "Unit",
    "build_lineage",
    "lineage",
    "static_plans",
    "JobRecorder",
    "RecordedJob",
    "SparkEvents",
    "LineageError",
    "SparkConnectError",
    "Rerun",
    "lose_outputs",
    "what_must_rerun",
]
