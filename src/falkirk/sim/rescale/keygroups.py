"""Key groups: Flink's unit of keyed-state redistribution.

``max_parallelism`` is the number of key groups; a key belongs to the key
group ``murmur(hash(key)) % max_parallelism`` (:func:`key_group`, a fixed
integer mixer so that runs are reproducible), and subtask ``i`` of ``n``
owns the contiguous range :func:`key_group_range` — the assignment of
Flink's ``KeyGroupRangeAssignment``. Rescaling from ``n`` to ``m`` moves
whole key groups; :func:`overlapping` says which old subtasks' state (and
in-flight data) a new subtask must read.

>>> key_group_range(0, 3, 8), key_group_range(1, 3, 8), key_group_range(2, 3, 8)
(range(0, 3), range(3, 6), range(6, 8))
>>> [operator_index(g, 3, 8) for g in range(8)]
[0, 0, 0, 1, 1, 1, 2, 2]
>>> overlapping(1, 2, 3, 8)   # new subtask 1 of 2 owns groups 4..7: old subtasks 1 and 2 had them
[1, 2]
>>> key_group(7, 8) == key_group(7, 8) and 0 <= key_group("k", 8) < 8
True
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable

from falkirk.errors import ValidationError

__all__ = ["key_group", "key_group_range", "operator_index", "owner", "overlapping", "check_parallelism"]


def _fmix32(h: int) -> int:
    """MurmurHash3's finaliser (what Flink applies to ``hashCode()``)."""
    h &= 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def key_group(key: Hashable, max_parallelism: int) -> int:
    """The key group of ``key`` (ints and strings hash reproducibly across runs).

    >>> sorted({key_group(k, 4) for k in range(20)})
    [0, 1, 2, 3]
    """
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise ValidationError(f"key {key!r}: the rescaling model keys records by int or str")
    code = key if isinstance(key, int) else zlib.crc32(key.encode())
    return _fmix32(code) % max_parallelism


def check_parallelism(parallelism: int, max_parallelism: int, what: str = "operator") -> None:
    """Flink's rule: ``1 <= parallelism <= max_parallelism`` (every subtask owns a key group)."""
    if (
        isinstance(parallelism, bool)
        or not isinstance(parallelism, int)
        or not 1 <= parallelism <= max_parallelism
    ):
        raise ValidationError(
            f"{what}: parallelism {parallelism!r} must be an integer in 1..{max_parallelism} "
            "(max parallelism = number of key groups)"
        )


def key_group_range(index: int, parallelism: int, max_parallelism: int) -> range:
    """The key groups subtask ``index`` of ``parallelism`` owns (a contiguous range)."""
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return range(start, end + 1)


def operator_index(group: int, parallelism: int, max_parallelism: int) -> int:
    """The subtask that owns key group ``group`` (inverse of :func:`key_group_range`)."""
    return group * parallelism // max_parallelism


def owner(key: Hashable, parallelism: int, max_parallelism: int) -> int:
    """The subtask that owns ``key``.

    >>> owner(5, 1, 8)
    0
    """
    return operator_index(key_group(key, max_parallelism), parallelism, max_parallelism)


def overlapping(index: int, parallelism: int, old_parallelism: int, max_parallelism: int) -> list[int]:
    """Old subtasks whose key-group ranges meet the new range of subtask ``index``."""
    mine = set(key_group_range(index, parallelism, max_parallelism))
    return [
        j for j in range(old_parallelism) if mine & set(key_group_range(j, old_parallelism, max_parallelism))
    ]
