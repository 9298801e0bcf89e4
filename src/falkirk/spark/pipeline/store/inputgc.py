"""Garbage collection of an input log: epochs acknowledged, and the segments and cuts they free.

When no step can roll back to an epoch any more (the monitor's
low-watermark), :func:`acknowledge` records it (``acknowledged.json``,
first, so a later reader can tell records garbage collection removed from
records lost otherwise) and deletes the segments wholly inside epochs up to
it — a segment's manifest before its data, so a segment half deleted no
longer exists — the cuts before it, and data files no manifest names whose
partition's data starts below the acknowledged cut (a crashed append's; an
append in progress starts at or above it): the driver's every time, Spark's
when a segment Spark wrote was deleted
(:func:`~falkirk.spark.pipeline.store.sparkinput.sweep_spark`). The last
segment of a partition is kept: it gives the end offset. :func:`acknowledged`
reads the record back.
:class:`~falkirk.spark.pipeline.store.inputlog.InputLog` exposes both as
methods (``log.acknowledge(epoch)``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from falkirk.spark.errors import CorruptDataError
from falkirk.spark.pipeline.store import segments as seg
from falkirk.spark.pipeline.store.inputcuts import cut_path

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.inputlog import InputLog

__all__ = ["acknowledged", "acknowledge"]


def acknowledged(log: InputLog) -> int:
    """The last epoch acknowledged (its records may be deleted); ``-1``: none.

    Recorded in ``acknowledged.json`` (written with the first cut, then by
    :func:`acknowledge`). A log written before that record existed says
    nothing; its oldest cut is then taken as acknowledged, as garbage
    collection keeps exactly the cut of the epoch it acknowledged.
    """
    try:
        return int(json.loads(log.fs.read_bytes(f"{log.dir}/acknowledged.json"))["epoch"])
    except FileNotFoundError:
        return min(log.cut_epochs(), default=-1)
    except (ValueError, KeyError, TypeError):
        return -1


def acknowledge(log: InputLog, epoch: int) -> int:
    """Delete segments wholly inside epochs ``≤ epoch`` and cuts before ``epoch``; bytes freed.

    The acknowledged epoch is recorded first (``acknowledged.json``), so
    a later reader can tell records garbage collection removed from
    records lost otherwise.
    """
    c = log.get_cut(epoch)
    if c is None:
        return 0
    if epoch > acknowledged(log):
        log.fs.replace(f"{log.dir}/acknowledged.json", json.dumps({"epoch": epoch}).encode())
    freed = 0
    spark = False  # a segment Spark wrote was deleted: what it leaves under spark/ is swept, once
    for k in range(log.partitions):
        segs = log.segments(k)
        for s, nxt in zip(segs, segs[1:], strict=False):  # never the last segment: it gives the end offset
            if nxt.start <= c.end[k]:
                bytes_freed, by_spark = _delete_segment(log, s)
                freed += bytes_freed
                spark = spark or by_spark
        kept = {
            f.name
            for s in log.segments(k)
            if not s.legacy and s.start < c.end[k]
            for f in seg.read_manifest(log.fs, s, log.name, epoch).files
        }
        freed += seg.sweep(log.fs, log.dir, k, c.end[k], kept)
    if spark:
        from falkirk.spark.pipeline.store.sparkinput import sweep_spark

        freed += sweep_spark(log, c.end)
    for e in log.cut_epochs():
        if e < epoch:
            freed += log.fs.size(cut_path(log, e))
            log.fs.delete(cut_path(log, e))
    return freed


def _delete_segment(log: InputLog, s: seg.Segment) -> tuple[int, bool]:
    """Delete segment ``s``: its manifest first (it stops existing), then its data; bytes freed, and whether
    Spark wrote them."""
    freed = log.fs.size(s.path)
    try:
        files = [] if s.legacy else list(seg.read_manifest(log.fs, s, log.name, -1).files)
    except CorruptDataError:
        files = []
    log.fs.delete(s.path)
    for f in files:
        freed += f.size
        log.fs.delete(f"{log.dir}/{f.name}")
    return freed, any(f.name.startswith("spark/") for f in files)
