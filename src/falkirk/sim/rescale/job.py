"""The job the rescaling model runs, and what its subtasks hold.

Two sources and one task, every vertex at the same parallelism ``n``::

    src[i] --hash(key)--> agg[j]        records (split, key, value)
    fwd[i] --forward----> agg[i]        records (split, value)   (optional)

``src`` reads the **keyed** input splits and sends each record to the
subtask owning its key group; ``fwd`` reads the **ordered** input splits and
forwards each record to the subtask with its own index (a pointwise
exchange). ``agg`` keeps keyed state (per key, per split, the values in
arrival order) and non-keyed per-split state (the ordered values) — the
FLINK-38267 shape: one task with a hash input and a forward input. Input
splits are assigned to source subtasks in contiguous ranges, like key groups.

The **result** of a job is parallelism-independent (:func:`expected_output`):
per key, per split, the values in split order; per ordered split, its
values in order. Losing, duplicating or reordering a record changes it.

>>> job = Job(keyed=(((1, 10), (2, 20)), ((1, 30),)), ordered=((5, 6),))
>>> expected_output(job)
Output(keyed=((1, ((0, (10,)), (1, (30,)))), (2, ((0, (20,)),))), ordered=((0, (5, 6)),))
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from attrs import Factory, define, field, frozen

from falkirk.errors import ValidationError
from falkirk.sim.rescale.keygroups import check_parallelism

__all__ = [
    "FORWARD_MODES",
    "Job",
    "Rescale",
    "Output",
    "Rec",
    "Barrier",
    "SourceTask",
    "AggTask",
    "expected_output",
    "split_owner",
]

#: How the forward edge takes part in checkpoints: ``aligned`` (the seed's
#: default: no unaligned checkpoint on pointwise edges, so no in-flight data),
#: ``unaligned`` (the power-user toggle: in-flight data, rescaling refused),
#: ``by-split`` (in-flight data follows its split to the new owner).
FORWARD_MODES = ("aligned", "unaligned", "by-split")


def _splits(value: Iterable[Iterable[Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(tuple(r) if isinstance(r, list) else r for r in s) for s in value)


def _mode(instance: object, attribute: object, value: str) -> None:
    if value not in FORWARD_MODES:
        raise ValidationError(f"Job: forward={value!r}; use one of {list(FORWARD_MODES)}")


def _max_par(instance: object, attribute: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"Job: max_parallelism={value!r} must be an integer >= 1")


@frozen
class Job:
    """Keyed splits of ``(key, value)``, ordered splits of values, key groups, forward mode."""

    keyed: tuple[tuple[tuple[Hashable, Any], ...], ...] = field(converter=_splits)
    ordered: tuple[tuple[Any, ...], ...] = field(default=(), converter=_splits)
    max_parallelism: int = field(default=8, validator=_max_par)
    forward: str = field(default="aligned", validator=_mode)

    def __attrs_post_init__(self) -> None:
        for s, split in enumerate(self.keyed):
            for r in split:
                if not (isinstance(r, tuple) and len(r) == 2):
                    raise ValidationError(f"Job: keyed split {s}: record {r!r} is not a (key, value) pair")

    def check(self, parallelism: int) -> None:
        """Reject a parallelism the job cannot run at."""
        check_parallelism(parallelism, self.max_parallelism, "agg")


@frozen
class Rescale:
    """The whole job fails just before step ``step`` and restarts at ``parallelism``."""

    step: int
    parallelism: int


@frozen
class Output:
    """Per key ``(split, values)`` pairs, per ordered split its values (a subtask-independent view)."""

    keyed: tuple[Any, ...]
    ordered: tuple[Any, ...]


@frozen
class Rec:
    """A record on a channel: its sequence number on that channel and payload."""

    seq: int
    payload: tuple[Any, ...]


@frozen
class Barrier:
    """Checkpoint barrier ``k``."""

    k: int


def split_owner(split: int, parallelism: int, splits: int) -> int:
    """The source subtask that reads ``split`` (contiguous ranges, like key groups).

    >>> [split_owner(s, 2, 5) for s in range(5)]
    [0, 0, 0, 1, 1]
    """
    return split * parallelism // max(splits, 1)


@define
class SourceTask:
    """A source subtask: the next record index of each split it reads, and its read count."""

    name: str
    index: int
    kind: str  # "src" (hash) or "fwd" (forward)
    offsets: dict[int, int]
    reads: int = 0

    def snapshot(self) -> dict[int, int]:
        return dict(self.offsets)


@define
class AggTask:
    """The mixed task: keyed state, per-split state, input channels, restored in-flight data."""

    name: str
    index: int
    keyed: dict[Hashable, dict[int, list[Any]]] = Factory(dict)
    ordered: dict[int, list[Any]] = Factory(dict)
    inputs: dict[str, deque[Rec | Barrier]] = Factory(dict)
    consumed: dict[str, int] = Factory(dict)
    restored: deque[tuple[Any, ...]] = Factory(deque)
    snapped: int = 0  # latest checkpoint id snapshotted

    def process(self, payload: tuple[Any, ...]) -> None:
        """Apply one record (``("h", split, key, value)`` or ``("f", split, value)``)."""
        if payload[0] == "h":
            _, s, key, value = payload
            self.keyed.setdefault(key, {}).setdefault(s, []).append(value)
        else:
            _, s, value = payload
            self.ordered.setdefault(s, []).append(value)

    def state(self) -> tuple[Any, Any, list[tuple[Any, ...]]]:
        """Snapshot of the operator state and of the restored data not yet consumed."""
        return copy.deepcopy(self.keyed), copy.deepcopy(self.ordered), list(self.restored)


def _freeze_keyed(parts: Iterable[dict[Hashable, dict[int, list[Any]]]]) -> tuple[Any, ...]:
    rows = [(k, tuple(sorted((s, tuple(v)) for s, v in d.items()))) for p in parts for k, d in p.items()]
    return tuple(sorted(rows, key=repr))


def collect_output(aggs: Sequence[AggTask]) -> Output:
    """The job's output from its subtasks (a key held by two subtasks shows up twice)."""
    ordered = [(s, tuple(v)) for a in aggs for s, v in a.ordered.items()]
    return Output(_freeze_keyed(a.keyed for a in aggs), tuple(sorted(ordered, key=repr)))


def expected_output(job: Job) -> Output:
    """What any correct run of ``job`` outputs (no failures, any parallelism)."""
    keyed: dict[Hashable, dict[int, list[Any]]] = {}
    for s, split in enumerate(job.keyed):
        for key, value in split:
            keyed.setdefault(key, {}).setdefault(s, []).append(value)
    ordered = [(s, tuple(split)) for s, split in enumerate(job.ordered) if split]
    return Output(_freeze_keyed([keyed]), tuple(sorted(ordered, key=repr)))
