"""The lifetime of the DataFrames a run holds in executor memory: persisted once, counted once, unpersisted once.

A step's output is persisted and counted when it is made
(:meth:`Frames.materialise`), queued for each consumer
(:mod:`~falkirk.spark.pipeline.run.queues` pins it once per queue entry)
and unpersisted when the last consumer took it and its producer released
it. Row counts the run already knows — a replayed log's manifest says how
many rows it holds — are remembered (:meth:`Frames.known_rows`) so that no
Spark job counts them again.

>>> class Fake:
...     unpersisted = 0
...     def unpersist(self, blocking=False): Fake.unpersisted += 1
>>> frames, df = Frames(), Fake()
>>> frames.pin(df); frames.release(df); frames.flush(); Fake.unpersisted   # still queued
0
>>> frames.unpin(df); frames.flush(); Fake.unpersisted
1
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["Frames"]


class Frames:
    """DataFrames persisted by one run, with their known row counts and who still holds them.

    Costs: O(1) per call; :meth:`flush` is O(released frames).
    """

    def __init__(self) -> None:
        self._pins: dict[int, list[Any]] = {}
        self._counts: dict[int, tuple[weakref.ref[Any], int]] = {}
        self._released: list[Any] = []

    def materialise(self, df: DataFrame, *, cached: bool = False, rows: int | None = None) -> tuple[DataFrame, int]:
        """Persist ``df`` (unless ``cached``) and count it (one Spark job); ``(df, rows)``.

        A DataFrame whose row count is already known (``rows``, or one this
        run materialised or replayed) is not counted again.
        """
        from pyspark import StorageLevel

        known = self._counts.get(id(df))
        if known is not None and known[0]() is df:
            return df, known[1]
        if not cached:
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
        n = df.count() if rows is None else rows
        return self.known_rows(df, n), n

    def known_rows(self, df: DataFrame, rows: int) -> DataFrame:
        """Remember that ``df`` has ``rows`` rows (e.g. a replayed log, whose manifest says so)."""
        self._counts[id(df)] = (weakref.ref(df), rows)
        return df

    def release(self, df: Any) -> None:
        """``df`` is no longer needed by its producer (unpersisted once nothing queued holds it)."""
        if df is not None and id(df) not in self._pins:
            self._released.append(df)

    def pin(self, df: Any) -> None:
        """A queue entry holds ``df``."""
        if df is not None:
            self._pins.setdefault(id(df), [df, 0])[1] += 1

    def unpin(self, df: Any) -> None:
        """A queue entry holding ``df`` was taken or dropped."""
        if df is None or id(df) not in self._pins:
            return
        entry = self._pins[id(df)]
        entry[1] -= 1
        if entry[1] <= 0:
            del self._pins[id(df)]
            self._released.append(df)

    def flush(self) -> None:
        """Unpersist the released DataFrames nothing holds any more."""
        for df in self._released:
            if id(df) not in self._pins:
                self._counts.pop(id(df), None)
                df.unpersist(blocking=False)
        self._released.clear()
        if len(self._counts) > 256:
            self._counts = {k: v for k, v in self._counts.items() if v[0]() is not None}
