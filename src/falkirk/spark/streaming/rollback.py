"""Structured Streaming queries as falkirk processors, and rolling a stopped query back.

A query is a processor in the **epoch** domain, its epochs being micro-batch
ids. Each source is a stateless processor in a ``sequence`` domain whose count
is the source's offset; its edge into the query projects offsets onto batches
with ``sequence_to_epoch`` (batch ``N`` is complete once the source has read
up to the offset recorded in ``offsets/N``). The sink is an **external
output** keyed by batch id (a ``foreachBatch`` made idempotent per batch id):
it takes no checkpoints, it reports the batches the outside world has
persisted.

:func:`read_checkpoint` reads a checkpoint directory (``offsets/N`` written
before batch ``N`` runs, ``commits/N`` after its sink returned, state store
versions, file-source logs) into :class:`QueryCheckpoint`; the query's
available frontiers are the committed batches it can restart after (state
version ``N + 1`` loadable). :func:`plan_rollback` asks the solver what to do
when the sink lost the batches after ``e``; :func:`rollback_query` rolls a
**stopped** query back to batch ``e``: it removes ``offsets/N`` and
``commits/N`` (with their ``.crc`` files) above ``e`` — and the entries of a
file source's log above the files batch ``e`` had read, or Spark would merge
the re-run batches into one — so that restarting with the same checkpoint
location re-runs those batches with the same offsets and restored state.

>>> import json, os, tempfile
>>> d = tempfile.mkdtemp()
>>> for sub in ("offsets", "commits"):
...     os.makedirs(os.path.join(d, sub))
>>> for n in range(3):
...     with open(os.path.join(d, "offsets", str(n)), "w") as f:
...         _ = f.write('v1\\n{}\\n' + json.dumps({"offset": 5 * (n + 1), "timestamp": 0}) + '\\n')
...     with open(os.path.join(d, "commits", str(n)), "w") as f:
...         _ = f.write('v1\\n{}\\n')
>>> ck = read_checkpoint(d)
>>> ck.committed, ck.counts(0)
([0, 1, 2], {0: 5, 1: 10, 2: 15})
>>> plan = plan_rollback(ck, sink_persisted=0)
>>> plan.to_json()["frontiers"]
{'source-0': {'@input': 5}, 'query': 0, 'sink': 0}
>>> [os.path.relpath(p, d) for p in apply_plan(plan, d)]
['offsets/1', 'offsets/2', 'commits/1', 'commits/2']
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, cast

from attrs import frozen

from falkirk.domains.projections import SequenceToEpoch
from falkirk.errors import ValidationError
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, RollbackPlan, solve_frontiers

__all__ = [
    "QueryCheckpoint",
    "read_checkpoint",
    "offset_count",
    "query_dataflow",
    "plan_rollback",
    "rollback_query",
    "apply_plan",
]

_NUMBERED = re.compile(r"^\.?(\d+)(\.compact)?(\.crc)?$")
_STATE_FILE = re.compile(r"^(\d+)\.(delta|snapshot|changelog|zip)$")


def offset_count(offset: Any, *, where: str = "offset") -> int:
    """A source offset as a count of records (or of file batches) read so far.

    ``int`` → itself; ``{"logOffset": n}`` (file source) → ``n + 1`` file
    batches; ``{"offset": n, ...}`` (``rate-micro-batch``) → ``n`` rows; nested
    ``{topic: {partition: n}}`` (Kafka) → the sum; ``None`` → 0.

    >>> offset_count({"logOffset": 2}), offset_count({"t": {"0": 4, "1": 3}})
    (3, 7)
    """
    if offset is None:
        return 0
    if isinstance(offset, bool) or isinstance(offset, float):
        raise ValidationError(f"{where}: cannot read {offset!r} as a count of records")
    if isinstance(offset, int):
        return offset
    if isinstance(offset, Mapping):
        if "logOffset" in offset:
            return offset_count(offset["logOffset"], where=where) + 1
        if "offset" in offset:
            return offset_count(offset["offset"], where=where)
        return sum(offset_count(v, where=where) for v in offset.values())
    raise ValidationError(
        f"{where}: cannot read {offset!r} as a count of records; falkirk knows "
        "numbers, file sources (logOffset), rate-micro-batch (offset) and Kafka"
    )


def _numbered(directory: str) -> dict[int, list[str]]:
    """``{N: [file names]}`` for ``N``, ``.N.crc``, ``N.compact`` … in ``directory``."""
    out: dict[int, list[str]] = {}
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            m = _NUMBERED.match(name)
            if m:
                out.setdefault(int(m.group(1)), []).append(name)
    return out


def _read_log_entry(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValidationError(f"{path}: not a streaming metadata log entry (no version line)")
    return lines[1:]


def _loadable_versions(directory: str) -> frozenset[int]:
    """State versions that can be loaded: a snapshot (or the empty start) then unbroken deltas."""
    deltas: set[int] = set()
    bases = {0}
    for name in os.listdir(directory):
        m = _STATE_FILE.match(name)
        if m:
            (bases if m.group(2) in ("snapshot", "zip") else deltas).add(int(m.group(1)))
    out = set()
    for b in bases:
        v = b
        out.add(v)
        while v + 1 in deltas:
            v += 1
            out.add(v)
    return frozenset(out)


@frozen
class QueryCheckpoint:
    """What a query's checkpoint directory says (see :func:`read_checkpoint`).

    ``offsets[N]`` holds one parsed offset per source (``None`` where Spark wrote
    ``-``); ``commits`` the committed batches; ``state[op][part]`` the loadable
    state versions; ``file_logs[i]`` the entries of source ``i``'s file log.
    """

    path: str
    query_id: str | None
    offsets: Mapping[int, tuple[Any, ...]]
    commits: frozenset[int]
    state: Mapping[str, Mapping[str, frozenset[int]]]
    file_logs: Mapping[int, frozenset[int]]

    @property
    def batches(self) -> list[int]:
        """Batches with an offsets entry (planned), ascending."""
        return sorted(self.offsets)

    @property
    def committed(self) -> list[int]:
        """Committed batches, ascending."""
        return sorted(self.commits)

    @property
    def sources(self) -> int:
        """How many sources the query reads."""
        return max((len(v) for v in self.offsets.values()), default=0)

    @property
    def stateful(self) -> bool:
        """Whether the query keeps operator state."""
        return bool(self.state)

    def counts(self, source: int) -> dict[int, int]:
        """``{batch: records (or file batches) source ``source`` had read at the end of it}``."""
        return {
            n: offset_count(offs[source] if source < len(offs) else None, where=f"{self.path} offsets/{n}")
            for n, offs in sorted(self.offsets.items())
        }

    def restorable(self) -> list[int]:
        """Committed batches the query can restart after (offsets kept, state version ``N+1`` loadable)."""
        return [
            n
            for n in self.committed
            if n in self.offsets
            and all(n + 1 in parts for op in self.state.values() for parts in op.values())
        ]


def read_checkpoint(path: str) -> QueryCheckpoint:
    """Read a Structured Streaming checkpoint directory (a local path)."""
    if not os.path.isdir(os.path.join(path, "offsets")):
        raise ValidationError(f"{path}: not a streaming checkpoint (no offsets/ directory)")
    query_id = None
    meta = os.path.join(path, "metadata")
    if os.path.exists(meta):
        with open(meta, encoding="utf-8") as f:
            query_id = json.loads(f.readline() or "{}").get("id")
    offsets = {}
    for n, names in _numbered(os.path.join(path, "offsets")).items():
        if str(n) in names:
            lines = _read_log_entry(os.path.join(path, "offsets", str(n)))
            offsets[n] = tuple(None if line.strip() == "-" else json.loads(line) for line in lines[1:])
    commits = frozenset(n for n, names in _numbered(os.path.join(path, "commits")).items() if str(n) in names)
    state: dict[str, dict[str, frozenset[int]]] = {}
    state_dir = os.path.join(path, "state")
    for op in sorted(os.listdir(state_dir)) if os.path.isdir(state_dir) else []:
        op_dir = os.path.join(state_dir, op)
        if op.isdigit() and os.path.isdir(op_dir):
            state[op] = {
                part: _loadable_versions(os.path.join(op_dir, part))
                for part in sorted(os.listdir(op_dir))
                if part.isdigit()
            }
    file_logs = {}
    src_dir = os.path.join(path, "sources")
    for i in sorted(os.listdir(src_dir)) if os.path.isdir(src_dir) else []:
        if i.isdigit():
            file_logs[int(i)] = frozenset(_numbered(os.path.join(src_dir, i)))
    return QueryCheckpoint(os.path.abspath(path), query_id, offsets, commits, state, file_logs)


def query_dataflow(
    ck: QueryCheckpoint, *, sink_persisted: int | None = None, name: str = "query"
) -> Dataflow:
    """The falkirk dataflow of a query: ``source-<i>`` → ``name`` → ``sink``.

    ``sink_persisted`` is the last batch the sink's external store still holds
    (``-1`` or ``None``: none). The sink is idempotent per batch id, so it can
    take back any batch it holds: its available frontiers are every batch up
    to ``sink_persisted``.
    """
    batches = ck.batches
    procs, edges = [], []
    for i in range(ck.sources):
        counts = ck.counts(i)
        first = counts[batches[0]]
        # purged early batches (Spark keeps the last 100) get the oldest known count
        cuts = [counts.get(n, first) for n in range(batches[-1] + 1)]
        procs.append(Processor(f"source-{i}", "sequence", stateless=True))
        edges.append(Edge(f"source-{i}->{name}", f"source-{i}", name, SequenceToEpoch(cast(Any, cuts))))
    procs.append(Processor(name, "epoch", checkpoints=[Checkpoint(n) for n in ck.restorable()]))
    # idempotent per batch id: the store can take any batch it holds again, so every prefix is available
    sink_cks = [Checkpoint(n) for n in range((sink_persisted if sink_persisted is not None else -1) + 1)]
    procs.append(Processor("sink", "epoch", checkpoints=sink_cks))
    edges.append(Edge(f"{name}->sink", name, "sink"))
    return Dataflow(procs, edges)


def plan_rollback(ck: QueryCheckpoint, *, sink_persisted: int, name: str = "query") -> RollbackPlan:
    """The plan when the sink failed and kept only the batches up to ``sink_persisted``."""
    if ck.sources == 0:
        raise ValidationError(f"{ck.path}: the checkpoint has no offsets yet; nothing to roll back")
    return solve_frontiers(query_dataflow(ck, sink_persisted=sink_persisted, name=name), failed=["sink"])


def _check_stopped(ck: QueryCheckpoint, spark: Any) -> None:
    if spark is None or ck.query_id is None:
        return
    for q in spark.streams.active:
        if str(q.id) == ck.query_id:
            raise ValidationError(
                f"query {q.name or q.id} is running on checkpoint {ck.path}: stop it before rolling it back"
            )


def rollback_query(path: str, epoch: int, *, spark: Any = None) -> list[str]:
    """Roll a stopped query back to just after batch ``epoch``; return the files removed.

    The list leaves out the ``.crc`` companions (removed too). ``epoch = -1``
    rolls back to the start. With ``spark``, refuses while a
    query with this checkpoint's id is active. Restart the query with the same
    ``checkpointLocation`` to re-run batches ``epoch + 1`` onwards.
    """
    ck = read_checkpoint(path)
    _check_stopped(ck, spark)
    if epoch >= 0 and epoch not in ck.restorable():
        raise ValidationError(
            f"{ck.path}: cannot roll back to batch {epoch}: the batches it can restart after are "
            f"{ck.restorable()} (committed, offsets kept and state version {epoch + 1} loadable)"
        )
    if epoch < -1:
        raise ValidationError(f"epoch is a batch id >= -1, not {epoch}")
    removed: list[str] = []
    for sub in ("offsets", "commits"):
        for n, names in _numbered(os.path.join(ck.path, sub)).items():
            if n > epoch:
                removed.extend(os.path.join(ck.path, sub, x) for x in names)
    for i in ck.file_logs:
        keep = -1 if epoch < 0 else offset_count(ck.offsets[epoch][i], where=f"offsets/{epoch}") - 1
        for n, names in _numbered(os.path.join(ck.path, "sources", str(i))).items():
            if n > keep:
                removed.extend(os.path.join(ck.path, "sources", str(i), x) for x in names)
    for p in removed:
        os.remove(p)
    return [p for p in removed if not os.path.basename(p).startswith(".")]


def apply_plan(plan: RollbackPlan, path: str, *, name: str = "query", spark: Any = None) -> list[str]:
    """Carry out ``plan`` for the query ``name``: roll its checkpoint back if the plan says so.

    Returns the files removed (none when the query keeps its state).
    """
    f = plan.frontiers[name]
    if f.is_top:
        return []
    last = f.domain.last(f)  # type: ignore[attr-defined]
    return rollback_query(path, -1 if last is None else last, spark=spark)
