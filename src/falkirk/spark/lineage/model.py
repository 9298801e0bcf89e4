"""Plain data describing a Spark job's lineage, and the errors of the lineage code.

:mod:`falkirk.spark.lineage._jvm` fills these from the JVM; :mod:`falkirk.spark.lineage.graph`
cuts them into processors. Nothing here needs PySpark.

>>> Node("rdd:1", "map", (Dep("shuffle", "rdd:0", 4),)).deps[0].shuffle_id
4
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from falkirk.errors import FalkirkError

__all__ = ["LineageError", "SparkConnectError", "Dep", "Node", "Availability"]


class LineageError(FalkirkError, ValueError):
    """A Spark job whose lineage falkirk cannot describe (the message says why and what to do)."""


class SparkConnectError(LineageError, TypeError):
    """The object comes from Spark Connect (or is not a Spark object): no py4j handle to the JVM."""


@frozen
class Dep:
    """A dependency of a node on ``parent`` (a node key): ``narrow`` or ``shuffle``."""

    kind: str
    parent: str
    shuffle_id: int | None = None


@frozen
class Node:
    """One RDD or physical-plan node, as plain data.

    ``boundary`` is ``"cache"`` (persisted), ``"checkpoint"`` (reliably
    checkpointed, lineage truncated) or ``"broadcast"``: its output is kept and
    read by later stages (a firewall). ``partitions`` counts the node's output
    partitions; for the map side of a shuffle it is the number of map outputs.
    """

    key: str
    label: str
    deps: tuple[Dep, ...] = ()
    boundary: str | None = None
    rdd_id: int | None = None
    partitions: int = 0
    indeterminate: bool = False
    checkpoint_path: str | None = None


@frozen
class Availability:
    """What the scheduler can reuse right now.

    ``shuffles[id]`` is the number of registered map outputs of shuffle ``id``;
    ``cached[rdd]`` the partitions whose blocks the block-manager master knows;
    ``checkpoints[rdd]`` whether the checkpoint directory exists.
    ``block_manager_registered`` is ``False`` after a fetch failure in local
    mode: Spark then forgets every cached block and cannot re-register.
    """

    shuffles: Mapping[int, int]
    cached: Mapping[int, frozenset[int]]
    checkpoints: Mapping[int, bool]
    block_manager_registered: bool = True
