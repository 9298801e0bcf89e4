"""Structured Streaming queries as falkirk processors, and rolling a stopped query back.

See :mod:`~falkirk.spark.streaming.rollback` for the user guide.
"""

from falkirk.spark.streaming.rollback import (
    QueryCheckpoint,
    apply_plan,
    plan_rollback,
    query_dataflow,
    read_checkpoint,
    rollback_query,
)

__all__ = [
    "QueryCheckpoint",
    "apply_plan",
    "plan_rollback",
    "query_dataflow",
    "read_checkpoint",
    "rollback_query",
]
