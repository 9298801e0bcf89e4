"""Cutting an input log into epochs: a cut is the end offset of every partition, recorded write-once.

Epoch ``e`` of an input is the records between cut ``e-1`` and cut ``e``
(:class:`Cut`: ``[start[k], end[k])`` of every partition ``k``), recorded
in ``cuts/<epoch>.json`` beside the log — a sequence→epoch projection.
:func:`cut` records a new cut at the log's current end offsets, after the
previous epoch's (epochs are cut in order); it is published write-once, so
two drivers cutting the same epoch agree on it, and once written a cut
never changes: replaying an epoch re-reads exactly its records.
:class:`~falkirk.spark.pipeline.store.inputlog.InputLog` exposes these
functions as methods (``log.cut(epoch)``, ``log.get_cut(epoch)``…).

>>> Cut(3, start={0: 4, 1: 0}, end={0: 6, 1: 1}).records
3
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from attrs import frozen

from falkirk.spark.errors import CorruptDataError, StorageError

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.inputlog import InputLog

__all__ = ["Cut", "cut", "cut_epochs", "cut_path", "get_cut", "last_cut"]


@frozen
class Cut:
    """Epoch ``epoch`` of an input: offsets ``[start[k], end[k])`` of every partition ``k``."""

    epoch: int
    start: dict[int, int]
    end: dict[int, int]
    #: when the cut was made (seconds since the Unix epoch): from then on the epoch's input is available
    #: (``None``: a cut recorded before falkirk kept the time)
    at: float | None = None

    @property
    def records(self) -> int:
        """How many records the epoch holds."""
        return sum(self.end[k] - self.start[k] for k in self.end)


def cut_path(log: InputLog, epoch: int) -> str:
    """Where epoch ``epoch``'s cut is recorded, relative to the root."""
    return f"{log.dir}/cuts/{epoch:08d}.json"


def cut_epochs(log: InputLog) -> list[int]:
    """Epochs with a recorded cut, ascending."""
    return sorted(
        int(n[:-5]) for n in log.fs.listdir(f"{log.dir}/cuts") if n.endswith(".json") and n[:-5].isdigit()
    )


def get_cut(log: InputLog, epoch: int) -> Cut | None:
    """The recorded cut of ``epoch``, or ``None``."""
    try:
        doc = json.loads(log.fs.read_bytes(cut_path(log, epoch)))
        start = {int(k): int(v) for k, v in doc["start"].items()}
        end = {int(k): int(v) for k, v in doc["end"].items()}
        at = float(doc["at"]) if doc.get("at") is not None else None
    except FileNotFoundError:
        return None
    except StorageError:
        raise  # the store did not answer: not a corrupt cut
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptDataError(
            log.name,
            "input",
            epoch,
            f"is unreadable ({type(exc).__name__}: {exc})",
            path=cut_path(log, epoch),
        ) from None
    if sorted(start) != list(range(log.partitions)) or sorted(end) != list(range(log.partitions)):
        raise CorruptDataError(
            log.name,
            "input",
            epoch,
            f"does not describe the input's {log.partitions} partition(s)",
            path=cut_path(log, epoch),
        )
    return Cut(epoch, start, end, at)


def last_cut(log: InputLog) -> Cut | None:
    """The most recent cut, or ``None``."""
    epochs = cut_epochs(log)
    return get_cut(log, epochs[-1]) if epochs else None


def cut(log: InputLog, epoch: int) -> Cut:
    """Epoch ``epoch``'s cut: the recorded one, or a new one at the current end offsets.

    A new cut must follow the previous epoch's (``CorruptDataError`` if
    that one is missing: epochs are cut in order).
    """
    existing = get_cut(log, epoch)
    if existing is not None:
        return existing
    prev = get_cut(log, epoch - 1) if epoch > 0 else None
    if epoch > 0 and prev is None:
        raise CorruptDataError(
            log.name,
            "input",
            epoch - 1,
            "is missing (epochs are cut in order)",
            path=cut_path(log, epoch - 1),
        )
    start = prev.end if prev else {k: 0 for k in range(log.partitions)}
    if epoch == 0 and not log.fs.exists(f"{log.dir}/acknowledged.json"):
        log.fs.replace(f"{log.dir}/acknowledged.json", json.dumps({"epoch": -1}).encode())
    end = log.end_offsets()
    c = Cut(epoch, dict(start), {k: max(end[k], start[k]) for k in range(log.partitions)}, time.time())
    doc = json.dumps({"epoch": epoch, "start": c.start, "end": c.end, "at": c.at}, sort_keys=True).encode()
    try:
        log.fs.publish(cut_path(log, epoch), doc)
    except FileExistsError:  # another driver cut it first: a cut never changes, so use that one
        return get_cut(log, epoch) or c
    return c
