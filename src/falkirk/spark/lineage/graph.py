"""A Spark job's lineage as a falkirk dataflow (paper §2.2: batch processing).

Processors are the job's **stages**: one per shuffle map stage, named
``shuffle-<id>`` after its shuffle id (stable from job to job, unlike stage
ids), and ``result`` for the result stage. Edges are shuffle dependencies;
narrow dependencies stay inside a processor. Data Spark keeps between stages
is a **firewall**: a persisted RDD (``cache-rdd<id>``), a reliable or local
checkpoint (``checkpoint-rdd<id>``; also a DataFrame whose cached batches are
checkpointed, as falkirk's ``detach`` makes a state) or a broadcast
(DataFrames) becomes a processor of its
own whose output edge is **logged** while the data is available, exactly like
the map output of a shuffle stage.

Every processor is a batch-regime processor (SPEC §8) in a single-epoch
domain: epoch 0 is this run of the job, ``F(p) = {∅, ⊤}`` (a stage is re-run
from scratch or kept), no notifications. The result stage has *failed* (its
output went to the driver and is gone), so it restarts; the solver then pulls
in every stage whose output the re-run needs but is not available (C2 on an
unlogged edge). A shuffle edge out of a stage Spark calls *determinate*
projects every frontier to ``⊤`` (a re-run sends nothing different, so a
consumer that already read it need not re-run); out of an *indeterminate*
stage it is the identity, so consumers re-run too — Spark's own rule.
A checkpoint cannot be recomputed (``∅ ∉ F``): needing a lost one (a reliable
checkpoint's files, a local checkpoint's blocks) is a
:class:`~falkirk.errors.SolverError`, as Spark aborts such a job.

Build a :class:`Lineage` with :func:`lineage` (an RDD or DataFrame; no job
runs) or, from plain :class:`~falkirk.spark.lineage.model.Node` data, with
:func:`build_lineage`:

>>> from falkirk.spark.lineage.model import Dep, Node
>>> nodes = {"rdd:2": Node("rdd:2", "reduce", (Dep("shuffle", "rdd:1", 0),), partitions=2),
...          "rdd:1": Node("rdd:1", "map", (Dep("narrow", "rdd:0"),), partitions=2),
...          "rdd:0": Node("rdd:0", "source", partitions=2)}
>>> lin = build_lineage("rdd:2", nodes)
>>> lin.stage_dag()
{'shuffle-0': frozenset(), 'result': frozenset({'shuffle-0'})}
>>> sorted(lin.to_dataflow().edges)
['shuffle-0->result']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from attrs import frozen

from falkirk.domains import Epoch, Frontier
from falkirk.domains.projections import FunctionProjection, Identity
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
from falkirk.spark.lineage.model import Availability, LineageError, Node, SparkConnectError

__all__ = [
    "Unit",
    "Lineage",
    "lineage",
    "build_lineage",
    "static_plans",
    "DETERMINISTIC",
    "LineageError",
    "SparkConnectError",
]

EPOCH = Epoch()


def _all_of_it(f: Frontier) -> Frontier:
    return Frontier.top(EPOCH)


#: Projection of a shuffle edge out of a determinate stage: a re-run re-sends the same data.
DETERMINISTIC = FunctionProjection(_all_of_it, label="deterministic", source=EPOCH, target=EPOCH)

#: Stage processors (the others are firewalls between stages).
STAGE_KINDS = ("result", "shuffle")


@frozen
class Unit:
    """One processor: a stage or a firewall, with the lineage nodes it computes.

    ``kind`` is ``result``, ``shuffle``, ``cache``, ``checkpoint`` or
    ``broadcast``; ``ident`` the shuffle id (``shuffle``) or RDD id (``cache``,
    ``checkpoint``); ``inputs`` the processors it reads; ``partitions`` how many
    outputs it writes (map outputs, cached or checkpointed partitions).
    """

    name: str
    kind: str
    ident: int | None
    members: tuple[str, ...]
    inputs: tuple[str, ...]
    partitions: int
    indeterminate: bool = False
    checkpoint_path: str | None = None

    @property
    def is_stage(self) -> bool:
        """Whether Spark runs this processor as a stage of its own (``result`` or ``shuffle-*``)."""
        return self.kind in STAGE_KINDS


class Lineage:
    """Processors (inputs before their readers, ``result`` last) and what Spark can reuse.

    ``availability`` is the scheduler's view when the lineage was built (``None``:
    nothing is available, as before a first run); :meth:`available` reads it.
    """

    def __init__(self, units: Mapping[str, Unit], availability: Availability | None = None) -> None:
        self.units = dict(units)
        self.availability = availability

    # -- structure ------------------------------------------------------------------------
    def edges(self) -> list[tuple[str, str, str]]:
        """``(edge name, source, destination)`` for every input of every processor."""
        return [(f"{i}->{u.name}", i, u.name) for u in self.units.values() for i in u.inputs]

    def stage_dag(self) -> dict[str, frozenset[str]]:
        """``{stage: parent stages}`` as Spark plans it: firewalls are looked through.

        Spark's stage DAG ignores caches (a stage's parents are the shuffles
        reached through narrow dependencies) and stops at checkpoints and
        broadcasts (computed apart), which is what this returns.
        """
        out = {}
        for u in self.units.values():
            if not u.is_stage:
                continue
            parents: set[str] = set()
            stack, seen = list(u.inputs), set()
            while stack:
                name = stack.pop()
                if name in seen:
                    continue
                seen.add(name)
                v = self.units[name]
                if v.is_stage:
                    parents.add(name)
                elif v.kind == "cache":
                    stack.extend(v.inputs)
            out[u.name] = frozenset(parents)
        return out

    @property
    def shuffles(self) -> dict[int, str]:
        """``{shuffle id: processor}``."""
        return {u.ident: u.name for u in self.units.values() if u.kind == "shuffle" and u.ident is not None}

    # -- availability -------------------------------------------------------------------------
    def available(self, name: str) -> bool:
        """Whether Spark's scheduler can reuse ``name``'s whole output (never for ``result``)."""
        u = self.units[name]
        a = self.availability
        if u.kind == "result" or a is None:
            return False
        if u.kind == "shuffle":
            return u.partitions > 0 and a.shuffles.get(u.ident or 0, 0) >= u.partitions
        if u.kind == "cache":
            return len(a.cached.get(u.ident or 0, frozenset())) >= u.partitions > 0
        if u.kind == "checkpoint" and u.checkpoint_path:
            return a.checkpoints.get(u.ident or 0, False)
        if u.kind == "checkpoint":  # a local checkpoint: its blocks, in the executors' block managers
            return len(a.cached.get(u.ident or 0, frozenset())) >= u.partitions > 0
        return True  # a broadcast stays with the driver for the plan's life

    # -- the dataflow ---------------------------------------------------------------------------
    def to_dataflow(self, available: Mapping[str, bool] | None = None) -> Dataflow:
        """The falkirk dataflow, logging the output of every processor whose output is available.

        ``available`` overrides :meth:`available` per processor (what
        :func:`~falkirk.spark.lineage.rerun.what_must_rerun` does with lost data).
        Solve it with ``failed=["result"]``.
        """
        avail = {n: self.available(n) for n in self.units}
        avail.update(available or {})
        outputs: dict[str, list[str]] = {n: [] for n in self.units}
        edges = []
        for name, src, dst in self.edges():
            outputs[src].append(name)
            projection = Identity() if self.units[src].indeterminate else DETERMINISTIC
            edges.append(Edge(name, src, dst, projection))
        procs = []
        for u in self.units.values():
            logs = outputs[u.name] if avail[u.name] else []
            if u.kind == "checkpoint":
                # Lineage truncated: the checkpoint is all there is (∅ ∉ F); lost data is discarded.
                lost = {} if avail[u.name] else {e: 0 for e in outputs[u.name]}
                procs.append(
                    Processor(
                        u.name,
                        EPOCH,
                        logs=logs,
                        restartable=False,
                        checkpoints=[Checkpoint(0, discarded=lost)],
                    )
                )
            else:
                procs.append(Processor(u.name, EPOCH, logs=logs))
        return Dataflow(procs, edges, notifications=False)

    def table(self) -> str:
        """One line per processor: name, inputs, outputs, availability, members."""
        lines = []
        for u in self.units.values():
            state = "available" if self.available(u.name) else "missing"
            ins = ", ".join(u.inputs) or "-"
            outs = {"result": "to the driver", "broadcast": f"broadcast, {state}"}.get(
                u.kind, f"{u.partitions} outputs, {state}"
            )
            lines.append(f"{u.name:<18} <- {ins:<30} {outs}; {len(u.members)} nodes")
        return "\n".join(lines)

    def __repr__(self) -> str:
        stages = sum(u.is_stage for u in self.units.values())
        return f"<Lineage: {stages} stages, {len(self.units) - stages} firewalls>"


# -- building ---------------------------------------------------------------------------
def _firewall_name(node: Node) -> str:
    if node.rdd_id is not None:
        return f"{node.boundary}-rdd{node.rdd_id}"
    return f"{node.boundary}-{node.key.replace(':', '')}"


def build_lineage(root: str, nodes: Mapping[str, Node], availability: Availability | None = None) -> Lineage:
    """Cut the node graph into processors at shuffles and firewalls (see the module docstring)."""
    if root not in nodes:
        raise LineageError(f"root node {root!r} is not among the {len(nodes)} nodes given")
    units: dict[str, Unit] = {}
    building: set[str] = set()

    def unit(name: str, kind: str, ident: int | None, start: str, *, owns_start: bool) -> None:
        if name in units or name in building:
            if name in building:
                raise LineageError(f"lineage has a cycle through {name!r}")
            return
        building.add(name)
        members: list[str] = []
        inputs: list[str] = []
        stack, seen = [start], set()
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            node = nodes.get(key)
            if node is None:
                raise LineageError(f"node {key!r} is a dependency but was not described")
            if node.boundary and not (owns_start and key == start):
                fw = _firewall_name(node)
                unit(fw, node.boundary, node.rdd_id, key, owns_start=True)
                inputs.append(fw)
                continue
            members.append(key)
            for d in node.deps:
                if d.kind == "shuffle":
                    sname = f"shuffle-{d.shuffle_id}"
                    unit(sname, "shuffle", d.shuffle_id, d.parent, owns_start=False)
                    inputs.append(sname)
                else:
                    stack.append(d.parent)
        first = nodes[start]
        units[name] = Unit(
            name,
            kind,
            ident,
            tuple(members),
            tuple(dict.fromkeys(inputs)),
            first.partitions,
            first.indeterminate if kind == "shuffle" else False,
            first.checkpoint_path,
        )
        building.discard(name)

    unit("result", "result", None, root, owns_start=False)
    return Lineage(units, availability)


def lineage(obj: Any, *, snapshot: bool = True) -> Lineage:
    """The lineage of an RDD or a DataFrame, without running its job.

    ``snapshot`` asks Spark which shuffle outputs, cached blocks and checkpoints
    exist now (``False``: nothing counts as available). DataFrames use the
    executed physical plan; a plan still under adaptive execution raises
    :class:`LineageError` (run the query once, or use :func:`static_plans`).
    Describing a plan builds its RDDs, as Spark does before a job: a broadcast
    exchange in it runs its (small) broadcast job then.
    Spark Connect objects raise :class:`SparkConnectError`.
    """
    from falkirk.spark.lineage import _jvm  # imported here: building from Node data needs no JVM

    root, nodes = _jvm.describe(obj)
    lin = build_lineage(root, nodes)
    if snapshot:
        units = lin.units.values()
        lin.availability = _jvm.availability(
            obj,
            shuffles=[u.ident for u in units if u.kind == "shuffle" and u.ident is not None],
            cached={  # caches, and local checkpoints (kept as blocks like a cache's)
                u.ident: u.partitions
                for u in units
                if u.ident is not None
                and (u.kind == "cache" or (u.kind == "checkpoint" and not u.checkpoint_path))
            },
            checkpoints={
                u.ident: u.checkpoint_path
                for u in units
                if u.kind == "checkpoint" and u.ident is not None and u.checkpoint_path
            },
        )
    return lin


@contextmanager
def static_plans(spark: Any) -> Iterator[None]:
    """Turn adaptive query execution off inside the block (and restore the setting after).

    DataFrames planned inside the block keep the shuffles of their executed plan
    when they run, so :func:`lineage` can name them before the job.
    """
    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
