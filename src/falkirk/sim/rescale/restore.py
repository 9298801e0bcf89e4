"""Choosing the checkpoint with falkirk's solver, and redistributing it to a new parallelism.

**The cut.** Every subtask is a falkirk processor in a ``sequence`` domain
(sources count the records they read on ``@input``; ``agg[j]`` counts what
it consumed per input channel); each snapshot is a
:class:`~falkirk.solver.Checkpoint` whose projections are the records sent
per output channel. Unaligned channels are **logged** (their in-flight data
is part of the checkpoint, so ``D_e = ∅``); aligned ones are not (``D_e`` =
what was sent, so C2 forces the receiver to have consumed all of it: no
in-flight data). :func:`choose_cut` solves SPEC §5 with every subtask failed
(a rescale restarts the whole job); the in-flight data of channel ``e`` is
then the logged records the sender's snapshot had sent and the receiver's had
not consumed. With ``completed_only`` the solver only sees completed
checkpoints, so it picks the latest one (Flink); otherwise it may combine
snapshots of a checkpoint still in progress.

**Redistribution** (:func:`redistribute`, ``strategy``):

* ``key-groups`` (correct): keyed state by key group; every new subtask
  reads the in-flight data of the old subtasks whose key-group ranges meet
  its own and keeps the records of its key groups (filtering after
  deserialisation); per-split state and forward in-flight data follow their
  split (``by-split``) — or, for an unaligned forward edge with in-flight
  data, :class:`RescaleError` names the edge (the seed's default refusal).
  Restored data is consumed before any new input. Only exchanges that hold
  channel state are redistributed (the FLINK-38267 fix).
* ``modulo`` (naive): in-flight data and per-split state of old subtask
  ``j`` go to new subtask ``j % m``, unfiltered — the mapping the seed uses
  for non-keyed state, applied to keyed in-flight data.
* ``unordered`` (naive): like ``key-groups`` but restored data competes with
  new input instead of going first.
* ``per-task`` (FLINK-38267 as it was): once a task has channel state, all
  its input exchanges go through channel-state rescaling, and a pointwise
  (forward) exchange cannot be rescaled, even when it holds no data.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from attrs import define, frozen

from falkirk.domains import Sequence as SequenceDomain
from falkirk.errors import RescaleError, ValidationError
from falkirk.sim.external import SimulationError
from falkirk.sim.rescale.job import Job, split_owner
from falkirk.sim.rescale.keygroups import overlapping, owner
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers

__all__ = ["STRATEGIES", "RescaleError", "Snap", "Channel", "Cut", "Restored", "choose_cut", "redistribute"]

STRATEGIES = ("key-groups", "modulo", "unordered", "per-task")


@frozen
class Snap:
    """One subtask snapshot: checkpoint id, frontier counts, sent counts per output channel, state."""

    k: int
    frontier: Mapping[str, int]
    sent: Mapping[str, int]
    state: Any


@frozen
class Channel:
    """Channel ``name`` of edge ``edge`` (``src->agg`` or ``fwd->agg``) from subtask ``src`` to ``dst``."""

    name: str
    edge: str
    src: str
    dst: str
    logged: bool


@define
class Cut:
    """The checkpoint to restore: chosen snapshot per subtask and in-flight data per channel."""

    chosen: dict[str, Snap]
    inflight: dict[str, list[tuple[Any, ...]]]


@define
class Restored:
    """Initial state of the new subtasks, and what the restore did."""

    offsets: dict[str, dict[int, int]]  # new source subtask -> split -> next record index
    keyed: list[dict[Hashable, dict[int, list[Any]]]]
    ordered: list[dict[int, list[Any]]]
    restored: list[list[tuple[Any, ...]]]
    inflight: dict[str, int]  # records of in-flight data restored, per edge
    filtered: int  # records deserialised by a new subtask and dropped (not its key groups)


def _counts(f: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((e, c) for e, c in f.items() if c))


def choose_cut(
    snaps: Mapping[str, Sequence[Snap]],
    channels: Sequence[Channel],
    logs: Mapping[str, Sequence[tuple[Any, ...]]],
    completed: set[int],
    *,
    completed_only: bool = True,
) -> Cut:
    """The greatest consistent cut of the snapshots (SPEC §5, every subtask failed)."""
    outs: dict[str, list[Channel]] = {n: [] for n in snaps}
    for ch in channels:
        outs[ch.src].append(ch)
    procs, by_counts = [], {}
    for name, ss in snaps.items():
        latest: dict[tuple[tuple[str, int], ...], Snap] = {}
        for s in ss:
            if s.k == 0 or not completed_only or s.k in completed:
                latest[_counts(s.frontier)] = s  # equal frontiers: the later snapshot (same channels)
        by_counts[name] = latest
        cks = [
            Checkpoint(
                dict(key),
                projection={c.name: s.sent.get(c.name, 0) for c in outs[name]},
                discarded={c.name: s.sent.get(c.name, 0) for c in outs[name] if not c.logged},
            )
            for key, s in latest.items()
            if key
        ]
        logged = [c.name for c in outs[name] if c.logged]
        procs.append(Processor(name, "sequence", logs=logged, checkpoints=cks, notifications=False))
    edges = [Edge(c.name, c.src, c.dst, "sequence") for c in channels]
    plan = solve_frontiers(Dataflow(procs, edges), failed="all")
    chosen = {}
    for name, f in plan.frontiers.items():
        dom = f.domain
        assert isinstance(dom, SequenceDomain)
        counts = {e: c or 0 for e, c in dom.counts(f).items()}
        chosen[name] = by_counts[name][_counts(counts)]
    inflight = {}
    for c in channels:
        got, sent = chosen[c.dst].frontier.get(c.name, 0), chosen[c.src].sent.get(c.name, 0)
        if got > sent or (got < sent and not c.logged):
            raise SimulationError(
                f"channel {c.name}: the plan restores {got} consumed of {sent} sent on an "
                f"{'un' if not c.logged else ''}logged channel (solver bug)"
            )
        inflight[c.name] = list(logs[c.name][got:sent])
    return Cut(chosen, inflight)


def _edge_of(payload: tuple[Any, ...]) -> str:
    return "src->agg" if payload[0] == "h" else "fwd->agg"


def redistribute(job: Job, cut: Cut, channels: Sequence[Channel], n: int, m: int, strategy: str) -> Restored:
    """Restore ``cut`` (taken at parallelism ``n``) at parallelism ``m`` (module docstring)."""
    if strategy not in STRATEGIES:
        raise ValidationError(f"redistribute: strategy={strategy!r}; use one of {list(STRATEGIES)}")
    K = job.max_parallelism
    # in-flight data per old agg subtask: leftovers of an earlier restore first, then its channels
    old: list[list[tuple[Any, ...]]] = [list(cut.chosen[f"agg{j}"].state[2]) for j in range(n)]
    for c in channels:
        old[int(c.dst[3:])].extend(cut.inflight[c.name])
    counts: dict[str, int] = {}
    for recs in old:
        for p in recs:
            counts[_edge_of(p)] = counts.get(_edge_of(p), 0) + 1
    _check_forward(job, cut, channels, old, n, m, strategy)
    offsets: dict[str, dict[int, int]] = {}
    for kind, splits in (("src", job.keyed), ("fwd", job.ordered)):
        have = {
            s: o
            for j in range(n)
            if f"{kind}{j}" in cut.chosen
            for s, o in cut.chosen[f"{kind}{j}"].state.items()
        }
        for i in range(m if splits else 0):
            offsets[f"{kind}{i}"] = {
                s: have.get(s, 0) for s in range(len(splits)) if split_owner(s, m, len(splits)) == i
            }
    keyed: list[dict[Hashable, dict[int, list[Any]]]] = [{} for _ in range(m)]
    ordered: list[dict[int, list[Any]]] = [{} for _ in range(m)]
    restored: list[list[tuple[Any, ...]]] = [[] for _ in range(m)]
    nsplits = len(job.ordered)
    for j in range(n):
        k_state, o_state, _ = cut.chosen[f"agg{j}"].state
        for key, d in k_state.items():
            _merge(keyed[owner(key, m, K)], key, d, strict=strategy != "modulo")
        for s, vals in o_state.items():
            target = j % m if strategy == "modulo" else split_owner(s, m, nsplits)
            ordered[target].setdefault(s, []).extend(vals)
    filtered = 0
    if strategy == "modulo":
        for j in range(n):
            restored[j % m].extend(old[j])
    else:
        for i in range(m):
            readers = set(overlapping(i, m, n, K))  # old subtasks whose buffers may hold i's key groups
            for j in range(n):
                for p in old[j]:
                    if p[0] == "h":
                        if j not in readers:
                            continue
                        keep = owner(p[2], m, K) == i  # filter after deserialisation
                        filtered += not keep
                    else:
                        keep = split_owner(p[1], m, nsplits) == i
                    if keep:
                        restored[i].append(p)
    return Restored(offsets, keyed, ordered, restored, counts, filtered)


def _merge(
    into: dict[Hashable, dict[int, list[Any]]], key: Hashable, d: dict[int, list[Any]], *, strict: bool
) -> None:
    if key in into and strict:
        raise SimulationError(f"key {key!r} is in the state of two old subtasks")
    for s, vals in d.items():
        into.setdefault(key, {}).setdefault(s, []).extend(vals)


def _check_forward(
    job: Job,
    cut: Cut,
    channels: Sequence[Channel],
    old: list[list[tuple[Any, ...]]],
    n: int,
    m: int,
    strategy: str,
) -> None:
    """Refuse what cannot be rescaled, naming the edge (see the module docstring)."""
    if n == m or not job.ordered:
        return
    fwd = [c for c in channels if c.edge == "fwd->agg"]
    if strategy == "per-task" and any(old[j] for j in range(n)):
        raise RescaleError(
            f"edge 'fwd->agg' (forward, channels {', '.join(c.name for c in fwd)}): cannot rescale the pointwise "
            "exchange of a task that has channel state (FLINK-38267: channel-state rescaling decided per task "
            "instead of per exchange)"
        )
    if job.forward == "unaligned" and strategy != "modulo":
        held = [(f"fwd{j}->agg{j}", sum(p[0] == "f" for p in old[j])) for j in range(n)]
        held = [(c, k) for c, k in held if k]
        if held:
            raise RescaleError(
                f"edge 'fwd->agg' (forward, channel {held[0][0]}) holds {held[0][1]} in-flight record(s) in the "
                f"unaligned checkpoint; restoring them at parallelism {m} instead of {n} could let new records "
                "of a moved split overtake them (FLIP-76, Figure 3). Checkpoint forward edges aligned "
                "(Job(forward='aligned'), the default) or let in-flight data follow its split (forward='by-split')"
            )
