"""Every private-API and py4j access of falkirk's Spark lineage, listener and streaming code.

Nothing else in :mod:`falkirk.spark.lineage.graph`, :mod:`~falkirk.spark.lineage.listener`,
:mod:`~falkirk.spark.lineage.rerun` or :mod:`~falkirk.spark.streaming.rollback` touches ``_jsc``,
``_jdf``, ``_jrdd`` or a JVM object: they work on the plain Python values this
module returns (:class:`~falkirk.spark.lineage.model.Node`,
:class:`~falkirk.spark.lineage.model.Availability`, event dictionaries). Under Spark Connect, where those
attributes do not exist, every entry point raises :class:`SparkConnectError`.

Measured facts this module relies on (PySpark 4.3, local mode):

* ``SparkEnv`` cannot be called through py4j (reflecting its methods needs a
  protobuf class that is not on the classpath), but its fields can be read with
  Java reflection: the block manager, its master and the map-output tracker.
* A Python ``SparkListener`` is a py4j proxy; ``removeSparkListener`` with the
  Python object makes a *new* proxy and removes nothing. Registering through
  ``java.lang.reflect.Method.invoke`` with a Java array that holds the proxy lets
  the same proxy be removed again (done once, at interpreter exit).

>>> from falkirk.spark.lineage._jvm import SparkConnectError, java_context
>>> try:
...     java_context(object())
... except SparkConnectError as exc:
...     print(str(exc).split(":")[0])
falkirk needs a classic (py4j) Spark session
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from falkirk.spark.lineage.model import Availability, Dep, LineageError, Node, SparkConnectError

__all__ = [
    "java_context",
    "describe",
    "availability",
    "block_manager_dirs",
    "register_listener",
    "flush_listener_bus",
]

log = logging.getLogger(__name__)


# -- handles -------------------------------------------------------------------------
def _connect_error(obj: Any, attr: str) -> SparkConnectError:
    return SparkConnectError(
        f"falkirk needs a classic (py4j) Spark session: {type(obj).__name__} has no {attr!r}. "
        "Spark Connect sessions do not expose the JVM, so lineage, listeners and block files are "
        "out of reach; build the session with SparkSession.builder.master(...) instead of .remote(...)"
    )


def _remote(obj: Any) -> bool:
    """A Spark Connect object: its attribute lookups return Columns, never JVM handles."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def java_context(obj: Any) -> Any:
    """The JVM ``SparkContext`` behind a SparkSession, SparkContext, RDD or DataFrame."""
    sc = _python_context(obj)
    jsc = getattr(sc, "_jsc", None)
    if jsc is None:
        raise _connect_error(sc, "_jsc")
    return jsc.sc()


def _python_context(obj: Any) -> Any:
    if _remote(obj):
        raise _connect_error(obj, "_jsc")
    if hasattr(obj, "_jsc") and hasattr(obj, "_gateway"):  # a SparkContext
        return obj
    for attr in ("sparkContext", "context", "ctx"):
        try:
            inner = getattr(obj, attr, None)
        except Exception:  # Spark Connect raises on .sparkContext
            inner = None
        if inner is not None and hasattr(inner, "_jsc"):
            return inner
    if hasattr(obj, "_jdf"):
        return _python_context(obj.sparkSession)
    raise _connect_error(obj, "_jsc")


def _gateway(obj: Any) -> Any:
    return _python_context(obj)._gateway


def _jvm(obj: Any) -> Any:
    return _python_context(obj)._jvm


def _items(seq: Any) -> list[Any]:
    """A Scala ``Seq``/``Iterable`` (or a Java array) as a Python list."""
    if seq is None:
        return []
    if hasattr(seq, "iterator"):
        it = seq.iterator()
        out = []
        while it.hasNext():
            out.append(it.next())
        return out
    return list(seq)


def _option(opt: Any) -> Any:
    return opt.get() if opt is not None and opt.isDefined() else None


def _field(obj: Any, jvm: Any, class_name: str, name: str) -> Any:
    """Read a (private) field by Java reflection: works where py4j method calls cannot."""
    f = jvm.java.lang.Class.forName(class_name).getDeclaredField(name)
    f.setAccessible(True)
    return f.get(obj)


def _block_manager(obj: Any) -> Any:
    jvm = _jvm(obj)
    env = java_context(obj).env()  # never call a method on env itself (see module docstring)
    return _field(env, jvm, "org.apache.spark.SparkEnv", "blockManager")


# -- lineage ---------------------------------------------------------------------------
def describe(obj: Any) -> tuple[str, dict[str, Node]]:
    """The lineage of an RDD or DataFrame as ``(root key, {key: Node})``; runs no job."""
    if _remote(obj):
        raise _connect_error(obj, "_jdf")
    if hasattr(obj, "_jrdd"):
        return _rdd_nodes(obj)
    if hasattr(obj, "_jdf"):
        return _plan_nodes(obj)
    raise _connect_error(obj, "_jrdd' or '_jdf")


def is_indeterminate(rdd: Any) -> bool:
    """Whether JVM ``rdd``'s output is ``INDETERMINATE`` by Spark's rule (a re-run may give different rows per
    partition); ``False`` on a Spark that does not say."""
    try:
        return str(rdd.outputDeterministicLevel().toString()) == "INDETERMINATE"
    except Exception:  # pragma: no cover - older Spark
        return False


def _rdd_nodes(rdd: Any) -> tuple[str, dict[str, Node]]:
    jvm = _jvm(rdd)
    shuffle_cls = jvm.java.lang.Class.forName("org.apache.spark.ShuffleDependency")
    nodes: dict[str, Node] = {}
    root = rdd._jrdd.rdd()
    stack = [root]
    while stack:
        j = stack.pop()
        key = f"rdd:{j.id()}"
        if key in nodes:
            continue
        deps = []
        for d in _items(j.dependencies()):
            parent = d.rdd()
            if shuffle_cls.isInstance(d):
                deps.append(Dep("shuffle", f"rdd:{parent.id()}", int(d.shuffleId())))
            else:
                deps.append(Dep("narrow", f"rdd:{parent.id()}"))
            stack.append(parent)
        boundary = None
        path = None
        if j.isCheckpointed():
            boundary, path = "checkpoint", _option(j.getCheckpointFile())
        elif j.getStorageLevel().isValid():
            boundary = "cache"
        nodes[key] = Node(
            key,
            str(j.toString()),
            tuple(deps),
            boundary,
            int(j.id()),
            int(j.getNumPartitions()),
            is_indeterminate(j),
            None if path is None else str(path),
        )
    return f"rdd:{root.id()}", nodes


def _marked_for_checkpoint(rdd: Any) -> bool:
    """Whether JVM ``rdd`` is to be checkpointed by its first job (``False`` where Spark does not say)."""
    try:
        return bool(rdd.checkpointData().isDefined())
    except Exception:  # pragma: no cover - a Spark without the field
        return False


def _plan_nodes(df: Any) -> tuple[str, dict[str, Node]]:
    jvm = _jvm(df)
    shuffle_cls = jvm.java.lang.Class.forName("org.apache.spark.sql.execution.exchange.ShuffleExchangeLike")
    nodes: dict[str, Node] = {}
    root = df._jdf.queryExecution().executedPlan()
    stack = [root]
    while stack:
        p = stack.pop()
        key = f"plan:{p.id()}"
        if key in nodes:
            continue
        cls = str(p.getClass().getSimpleName())
        label = f"{p.nodeName()} [{p.id()}]"
        children = _items(p.children())
        deps: list[Dep] = []
        extra: dict[str, Any] = {}
        if cls == "AdaptiveSparkPlanExec":
            if not p.isFinalPlan():
                raise LineageError(
                    "adaptive query execution has not fixed this DataFrame's plan yet (its shuffles get "
                    "new ids when it runs): run the query once first, or build the lineage inside "
                    "falkirk.spark.lineage.static_plans(spark), which turns spark.sql.adaptive.enabled off"
                )
            children = [p.executedPlan()]
        elif cls.endswith("QueryStageExec"):
            children = [p.plan()]
        if shuffle_cls.isInstance(p):
            dep = p.shuffleDependency()
            (child,) = children
            deps.append(Dep("shuffle", f"plan:{child.id()}", int(dep.shuffleId())))
            stack.append(child)
            children = []
            extra["partitions"] = int(dep.rdd().getNumPartitions())
            extra["indeterminate"] = is_indeterminate(dep.rdd())
        elif cls == "InMemoryTableScanExec":
            rel = p.relation()
            cached_plan = rel.cachedPlan()
            if str(cached_plan.getClass().getSimpleName()) == "AdaptiveSparkPlanExec" and not (
                rel.cacheBuilder().isCachedColumnBuffersLoaded() or cached_plan.isFinalPlan()
            ):
                raise LineageError(
                    f"cached DataFrame {label} was persisted under adaptive query execution and is not "
                    "materialized: describing it would run its query stages. Persist it inside "
                    "falkirk.spark.lineage.static_plans(spark), or materialize it first (e.g. count())"
                )
            buffers = rel.cacheBuilder().cachedColumnBuffers()
            extra.update(rdd_id=int(buffers.id()), partitions=int(buffers.getNumPartitions()))
            if buffers.isCheckpointed():
                # its batches are checkpointed (falkirk's detach: locally): the lineage ends there, and the
                # cached plan is not what they were made from (detach leaves an empty one behind)
                path = _option(buffers.getCheckpointFile())
                extra.update(boundary="checkpoint", checkpoint_path=None if path is None else str(path))
                children = []
            elif _marked_for_checkpoint(buffers):
                raise LineageError(
                    f"cached DataFrame {label} is to be checkpointed when first computed (falkirk's detach "
                    "with eager=False) and has not been: its cache no longer holds the plan it is made from. "
                    "Materialize it first (e.g. count())"
                )
            else:
                extra["boundary"] = "cache"
                children = [cached_plan]
        elif cls == "BroadcastExchangeExec":
            extra["boundary"] = "broadcast"
        for c in children:
            deps.append(Dep("narrow", f"plan:{c.id()}"))
            stack.append(c)
        nodes[key] = Node(key, label, tuple(deps), **extra)
    _attach_map_partitions(nodes)
    return f"plan:{root.id()}", nodes


def _attach_map_partitions(nodes: dict[str, Node]) -> None:
    """Plan exchanges know their map-output count; give it to the map-side node (as for RDDs)."""
    for node in list(nodes.values()):
        for d in node.deps:
            if d.kind == "shuffle":
                parent = nodes[d.parent]
                nodes[d.parent] = Node(
                    parent.key,
                    parent.label,
                    parent.deps,
                    parent.boundary,
                    parent.rdd_id,
                    node.partitions,
                    node.indeterminate,
                    parent.checkpoint_path,
                )


# -- what Spark's scheduler believes is available ------------------------------------
def availability(
    context: Any,
    shuffles: Iterable[int] = (),
    cached: Mapping[int, int] | None = None,
    checkpoints: Mapping[int, str] | None = None,
) -> Availability:
    """Ask the map-output tracker and block-manager master (``cached``: rdd id → partitions)."""
    jvm = _jvm(context)
    env = java_context(context).env()
    tracker = _field(env, jvm, "org.apache.spark.SparkEnv", "mapOutputTracker")
    out_shuffles = {
        s: int(tracker.getNumAvailableOutputs(s)) if tracker.containsShuffle(s) else 0 for s in shuffles
    }
    bm = _field(env, jvm, "org.apache.spark.SparkEnv", "blockManager")
    master = _field(bm, jvm, "org.apache.spark.storage.BlockManager", "master")
    registered = bool(master.getMemoryStatus().contains(bm.blockManagerId()))
    out_cached = {}
    # one lookup by its whole name, not one per block
    block_id = getattr(jvm, "org.apache.spark.storage.RDDBlockId")
    for rdd_id, n in (cached or {}).items():
        parts = [p for p in range(n) if master.getLocations(block_id(rdd_id, p)).nonEmpty()]
        out_cached[rdd_id] = frozenset(parts)
    out_ck = {}
    conf = _python_context(context)._jsc.hadoopConfiguration()
    hadoop_path = getattr(jvm, "org.apache.hadoop.fs.Path")
    for rdd_id, path in (checkpoints or {}).items():
        jpath = hadoop_path(path)
        out_ck[rdd_id] = bool(jpath.getFileSystem(conf).exists(jpath))
    return Availability(out_shuffles, out_cached, out_ck, registered)


def block_manager_dirs(context: Any) -> list[str]:
    """The local directories where this driver's block manager keeps shuffle files and blocks."""
    jvm = _jvm(context)
    dbm = _field(_block_manager(context), jvm, "org.apache.spark.storage.BlockManager", "diskBlockManager")
    return [posixpath.normpath(str(d)) for d in dbm.localDirs()]


# -- the listener proxy ---------------------------------------------------------------
def _stage(si: Any) -> dict[str, Any]:
    return {
        "stage_id": int(si.stageId()),
        "attempt": int(si.attemptNumber()),
        "shuffle_id": _option(si.shuffleDepId()),
        "parent_ids": tuple(sorted(int(x) for x in _items(si.parentIds()))),
        "name": str(si.name()),
        "num_tasks": int(si.numTasks()),
        "failure": _option(si.failureReason()),
    }


def _props(props: Any) -> dict[str, Any]:
    if props is None:
        return {"tags": frozenset(), "group": None}
    tags = props.getProperty("spark.job.tags")
    return {
        "tags": frozenset(t for t in str(tags).split(",") if t) if tags else frozenset(),
        "group": props.getProperty("spark.jobGroup.id"),
    }


class _ListenerProxy:
    """The py4j proxy of ``SparkListenerInterface``: turns events into dicts for ``callback``."""

    class Java:
        implements = ["org.apache.spark.scheduler.SparkListenerInterface"]

    def __init__(self, callback: Callable[[str, dict[str, Any]], None]) -> None:
        self._callback = callback

    def _emit(self, kind: str, make: Callable[[], dict[str, Any]]) -> None:
        try:
            self._callback(kind, make())
        except Exception:  # never let an error travel back into Spark's listener bus
            log.exception("falkirk Spark listener failed on %s", kind)

    def onJobStart(self, ev: Any) -> None:  # noqa: N802 - Java names
        self._emit(
            "job_start",
            lambda: {
                "job_id": int(ev.jobId()),
                "stages": [_stage(s) for s in _items(ev.stageInfos())],
                **_props(ev.properties()),
            },
        )

    def onJobEnd(self, ev: Any) -> None:  # noqa: N802
        self._emit("job_end", lambda: {"job_id": int(ev.jobId()), "result": str(ev.jobResult())})

    def onStageSubmitted(self, ev: Any) -> None:  # noqa: N802
        self._emit("stage_submitted", lambda: {**_stage(ev.stageInfo()), **_props(ev.properties())})

    def onStageCompleted(self, ev: Any) -> None:  # noqa: N802
        self._emit("stage_completed", lambda: _stage(ev.stageInfo()))

    def onBlockUpdated(self, ev: Any) -> None:  # noqa: N802
        info = ev.blockUpdatedInfo()
        name = str(info.blockId().name())
        if name.startswith("rdd_"):
            self._emit(
                "block_updated", lambda: {"block": name, "stored": bool(info.storageLevel().isValid())}
            )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on"):
            return _ignore
        raise AttributeError(name)


def _ignore(*args: Any) -> None:
    return None


class ListenerHandle:
    """A registered proxy; :meth:`remove` takes exactly that proxy off the listener bus."""

    def __init__(self, jsc: Any, method_remove: Any, args: Any) -> None:
        self._jsc, self._remove, self._args = jsc, method_remove, args

    def remove(self) -> None:
        """Remove the proxy (best effort: the JVM may already be gone at interpreter exit)."""
        try:
            self._remove.invoke(self._jsc, self._args)
        except Exception:
            pass


def register_listener(context: Any, callback: Callable[[str, dict[str, Any]], None]) -> ListenerHandle:
    """Register one listener proxy on ``context``'s bus, in a form that can be removed later."""
    from pyspark.java_gateway import ensure_callback_server_started

    gw = _gateway(context)
    jvm = _jvm(context)
    jsc = java_context(context)
    ensure_callback_server_started(gw)
    holder = jvm.java.util.ArrayList()
    holder.add(_ListenerProxy(callback))  # py4j makes the proxy here, once
    args = holder.toArray()  # a Java Object[] holding that proxy: passed by reference from now on
    types = gw.new_array(jvm.java.lang.Class, 1)
    types[0] = jvm.java.lang.Class.forName("org.apache.spark.scheduler.SparkListenerInterface")
    cls = jsc.getClass()
    cls.getMethod("addSparkListener", types).invoke(jsc, args)
    return ListenerHandle(jsc, cls.getMethod("removeSparkListener", types), args)


def flush_listener_bus(context: Any, timeout_s: float = 30.0) -> bool:
    """Wait until every event posted so far reached every listener; ``False`` on timeout."""
    try:
        java_context(context).listenerBus().waitUntilEmpty(int(timeout_s * 1000))
    except Exception as exc:
        if "TimeoutException" in type(exc).__name__ or "Timeout" in str(exc):
            return False
        raise
    return True


def listener_count(context: Any) -> int:
    """How many listeners Spark's listener bus holds (all queues)."""
    return int(java_context(context).listenerBus().listeners().size())
