"""The lifetime of the DataFrames a run holds in executor memory: persisted once, counted once, unpersisted
once.

A step's output is persisted and counted when it is made
(:meth:`Frames.materialise`) — or, when its first use is a write (a log, an
output), persisted and counted by that write (:meth:`Frames.observing`: the
write's own job fills the cache and counts the rows, so no count job runs
before it); or, for an unlogged step, persisted with no job and computed by
its first consumer's job, which counts its rows while filling the cache
(:meth:`Frames.fused`) —, queued for each consumer
(:mod:`~falkirk.spark.pipeline.run.queues` pins it once per queue entry)
and unpersisted when the last consumer took it and its producer released
it — not while a fused step that read it is still to be computed by its
consumer's job (:meth:`Frames.hold`: that job reads it from memory, not
from its lineage). Row counts the run already knows — a replayed log's
manifest says how many rows it holds — are remembered
(:meth:`Frames.known_rows`) so that no Spark job counts them again.

>>> class Fake:
...     unpersisted = 0
...     def unpersist(self, blocking=False): Fake.unpersisted += 1
>>> frames, df = Frames(), Fake()
>>> frames.pin(df); frames.release(df); frames.flush(); Fake.unpersisted   # still queued
0
>>> frames.unpin(df); frames.flush(); Fake.unpersisted
1
>>> other = Fake()
>>> frames.hold([other]); frames.release(other); frames.flush(); Fake.unpersisted   # a fused reader pending
1
>>> frames.unhold([other]); frames.flush(); Fake.unpersisted
2
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from falkirk.spark.pipeline.run.session import free, is_connect
from falkirk.spark.pipeline.store.jvm import once

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: names of the row-count observations (unique within the process)
_OBSERVATIONS = itertools.count()
#: how long :meth:`Frames.observing`'s count waits for a finished write's observation before counting instead
OBSERVED_WAIT = 2.0

__all__ = ["Frames"]


#: the most tables :meth:`Frames.collected` keeps at once
TABLES_KEPT = 4


class Frames:
    """DataFrames persisted by one run, with their known row counts and who still holds them.

    Costs: O(1) per call; :meth:`flush` is O(released frames).
    """

    def __init__(self) -> None:
        #: step executions on several threads (a concurrent run) pin, release and flush frames: one at a time
        self._lock = threading.RLock()
        self._pins: dict[int, list[Any]] = {}
        self._counts: dict[int, tuple[weakref.ref[Any], int]] = {}
        #: rows a first collection of a frame brought to the driver (Arrow), for a second write of the same
        #: frame to take instead of collecting it again (:meth:`collected`, :meth:`take_collected`)
        self._tables: dict[int, tuple[weakref.ref[Any], Any]] = {}
        self._released: list[Any] = []
        self._holds: dict[int, list[Any]] = {}
        #: frames whose local checkpoint's blocks are freed once released (a state its step let go of): the
        #: frame, its step, and the last epoch whose executions may read it or a frame made from it (freed once
        #: that step and every node downstream of it completed that epoch: :meth:`progress`)
        self._blocks: dict[int, tuple[Any, str, int]] = {}
        #: per node, the last epoch it and every node downstream of it completed (forgotten at a rollback:
        #: :meth:`rolled_back`), and the latest epoch any node completed
        self._completed: dict[str, int] = {}
        self._latest = -1

    def materialise(
        self, df: DataFrame, *, persist: bool = True, rows: int | None = None
    ) -> tuple[DataFrame, int]:
        """Persist ``df`` (if ``persist``: ``False`` for a frame already cached, or cheaper to read again than
        to keep) and count it (one Spark job); ``(df, rows)``.

        A DataFrame whose row count is already known (``rows``, or one this
        run materialised or replayed) is not counted again.
        """
        from pyspark import StorageLevel

        known = self.rows_of(df)
        if known is not None:
            return df, known
        # persisted here (through Spark Connect not known without a round trip: left as before)
        fresh = persist and not is_connect(df.sparkSession) and not df.is_cached
        if persist:
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            n = df.count() if rows is None else rows
        except BaseException:
            if fresh:  # persisted here: not left registered in Spark's cache after a failed job
                df.unpersist(blocking=False)
            raise
        return self.known_rows(df, n), n

    def observing(self, df: DataFrame) -> tuple[DataFrame, DataFrame, Callable[[], int]] | None:
        """Persist ``df`` with no job, for a first use that writes it: ``(persisted, observed, rows)``.

        Write ``observed`` (``persisted`` with a row count attached as a
        Spark observation): that write's job computes ``df`` once, fills
        ``persisted``'s cache and counts the rows; ``rows()``, called after
        it, returns the count (and remembers it). Where the observation did
        not arrive, ``rows()`` counts ``persisted`` (from memory). ``None``
        through Spark Connect, and for a DataFrame this run has counted
        already (use :meth:`materialise`).
        """
        from pyspark import StorageLevel
        from pyspark.sql import Observation

        if not self.observable(df):
            return None
        persisted = df.persist(StorageLevel.MEMORY_AND_DISK)
        observation = Observation(f"falkirk_rows_{next(_OBSERVATIONS)}")
        observed = persisted.observe(observation, _rows_column())

        def rows() -> int:
            n = _observed_rows(observation)
            if n is None:
                n = persisted.count()
            self.known_rows(persisted, n)
            return n

        return persisted, observed, rows

    def counting(self, df: DataFrame) -> tuple[DataFrame, Callable[[], int]] | None:
        """``df`` with a row count attached as a Spark observation, not persisted: ``(observed, rows)``, for a
        write that reads ``df`` once (a state written whole from its layers). ``rows()``, after the write,
        returns the count (where the observation did not arrive it counts ``df`` again). ``None`` through
        Spark Connect."""
        from pyspark.sql import Observation

        if is_connect(df.sparkSession):
            return None
        observation = Observation(f"falkirk_rows_{next(_OBSERVATIONS)}")
        observed = df.observe(observation, _rows_column())

        def rows() -> int:
            n = _observed_rows(observation)
            return df.count() if n is None else n

        return observed, rows

    def fused(self, df: DataFrame) -> tuple[DataFrame, Callable[[bool, bool], int | None]] | None:
        """``df`` persisted with no job, for its consumer's job to compute: ``(persisted, rows)``.

        The consumer's job computes ``df`` inside its own query and fills the
        cache on the way (whole partitions).
        ``rows(count, cache)``, called after that job, returns the rows Spark
        counted while filling the cache (:func:`cached_rows`: exact once every
        partition is cached, whatever the consumer's query did with them;
        not trusted where a task attempt was retried — Spark drops a failed
        attempt's accumulator updates, and its retry may read a partition the
        failed attempt cached: pass ``cache=False`` then); else, with
        ``count``, it counts ``persisted`` (a job, from memory), and without,
        returns ``None``. ``None`` where :meth:`observing` would be ``None``.
        """
        from pyspark import StorageLevel

        if not self.observable(df):
            return None
        persisted = df.persist(StorageLevel.MEMORY_AND_DISK)

        def rows(count: bool, cache: bool = True) -> int | None:
            n = cached_rows(persisted) if cache else None
            # not once unpersisted: that would compute it again
            if n is None and count and persisted.is_cached:
                n = persisted.count()
            if n is not None:
                self.known_rows(persisted, n)
            return n

        return persisted, rows

    def observable(self, df: DataFrame) -> bool:
        """Whether :meth:`observing` can take ``df``: a frame this run has not counted, not through Spark
        Connect (its first use, a write or a count, is the job that computes it)."""
        return self.rows_of(df) is None and not is_connect(df.sparkSession)

    def rows_of(self, df: Any) -> int | None:
        """The rows of ``df`` this run knows (:meth:`known_rows`), else ``None``."""
        known = self._counts.get(id(df))
        return known[1] if known is not None and known[0]() is df else None

    def planned_empty(self, df: DataFrame) -> bool:
        """Whether ``df`` has no rows by its analysed plan alone, with no job, and is then remembered as such
        (:meth:`known_rows`): an empty local relation or a limit of 0 — ``df.limit(0)``, the cheap way for a
        step to say it has nothing this epoch — at the plan's root (``df.limit(0).select(...)`` is not told
        apart, nor is ``spark.createDataFrame([], schema)``: classic Spark reads it from a Python RDD, which only
        a job can look into). Three py4j calls for a plan of another kind, about six for one told apart;
        ``False`` through Spark Connect and where the plan cannot be asked."""
        if self.rows_of(df) == 0:
            return True
        if is_connect(df.sparkSession):
            return False
        try:
            plan = df._jdf.queryExecution().analyzed()
            name = plan.nodeName()
            if name == "LocalRelation":
                empty = bool(plan.data().isEmpty()) and not plan.isStreaming()
            elif name == "GlobalLimit":
                limit = plan.limitExpr()
                empty = bool(limit.foldable()) and limit.eval(None) == 0
            else:
                return False
        except Exception:  # noqa: BLE001 - a plan this Spark does not describe so: counted as before
            return False
        if empty:
            self.known_rows(df, 0)
        return empty

    def known_rows(self, df: DataFrame, rows: int) -> DataFrame:
        """Remember that ``df`` has ``rows`` rows (e.g. a replayed log, whose manifest says so)."""
        with self._lock:
            self._counts[id(df)] = (weakref.ref(df), rows)
            return df

    def collected(self, df: DataFrame, table: Any) -> None:
        """``table`` holds every row of ``df`` (a made frame, collected on the driver as ``df.toArrow()``
        would): one later write of ``df`` from the driver takes it (:meth:`take_collected`) instead of a job.
        At most :data:`TABLES_KEPT` are kept (the oldest forgotten first), each only while ``df`` is alive."""
        with self._lock:
            self._tables = {k: v for k, v in self._tables.items() if v[0]() is not None and k != id(df)}
            self._tables[id(df)] = (weakref.ref(df), table)
            while len(self._tables) > TABLES_KEPT:
                del self._tables[next(iter(self._tables))]

    def take_collected(self, df: Any) -> Any:
        """The table :meth:`collected` left for ``df`` (forgotten now), else ``None``."""
        with self._lock:
            kept = self._tables.pop(id(df), None)
            return kept[1] if kept is not None and kept[0]() is df else None

    def release(self, df: Any, *, state_of: str | None = None, read_until: int | None = None) -> None:
        """``df`` is no longer needed by its producer (unpersisted once nothing queued holds it).

        ``state_of``: ``df`` is a local checkpoint (a state, a part of one)
        that step let go of, whose blocks are freed too
        (:func:`~.session.free`: ``unpersist()`` leaves a local checkpoint's
        blocks cached until the JVM collects its RDD) — not before the step
        and every node downstream of it completed epoch ``read_until``
        (``None``: the latest any node completed so far; ``-1``: nothing
        read it), the state made at that epoch's end included: a frame made
        from it that is cached, not replicated, is computed again from its
        lineage if an executor is lost before its readers ran.
        """
        with self._lock:
            if df is None:
                return
            if state_of is not None:
                self._mark(df, state_of, read_until)
            if id(df) not in self._pins:
                self._released.append(df)

    def free_when_released(self, df: Any, step: str, *, read_until: int | None = None) -> None:
        """Free ``df``'s blocks too once it is released, as :meth:`release` with ``state_of`` would, when its
        producer releases it (a local checkpoint ``step`` no longer holds, handed out as its output)."""
        with self._lock:
            if df is not None:
                self._mark(df, step, read_until)

    def _mark(self, df: Any, step: str, read_until: int | None) -> None:
        until = self._latest if read_until is None else read_until
        had = self._blocks.get(id(df))
        self._blocks[id(df)] = (df, step, until if had is None else max(until, had[2]))

    def rolled_back(self) -> None:
        """A recovery lowered some nodes' progress. Marks it had satisfied stay satisfied (a rollback brings back
        no frame a consumer took: what it queues again is pinned, or read from storage); later ones wait for
        the progress :meth:`progress` reports from now on (a redone epoch's readers have still to run)."""
        with self._lock:
            for key, (df, step, until) in list(self._blocks.items()):
                if until <= self._completed.get(step, -1):
                    self._blocks[key] = (df, step, -1)
            self._completed = {}

    def progress(self, completed: Mapping[str, int], latest: int) -> None:
        """``completed``: per node, the last epoch it and every node downstream of it completed (the states
        made at that epoch's end included); ``latest``: the latest epoch any node completed. Blocks marked
        for epochs up to their step's are freed at the next :meth:`flush`."""
        with self._lock:
            for node, epoch in completed.items():
                if epoch > self._completed.get(node, -1):
                    self._completed[node] = epoch
            self._latest = max(self._latest, latest)

    def pin(self, df: Any) -> None:
        """A queue entry holds ``df``."""
        with self._lock:
            if df is not None:
                self._pins.setdefault(id(df), [df, 0])[1] += 1

    def unpin(self, df: Any) -> None:
        """A queue entry holding ``df`` was taken or dropped."""
        with self._lock:
            if df is None or id(df) not in self._pins:
                return
            entry = self._pins[id(df)]
            entry[1] -= 1
            if entry[1] <= 0:
                del self._pins[id(df)]
                self._released.append(df)

    def hold(self, dfs: Iterable[Any]) -> None:
        """Keep ``dfs`` persisted until :meth:`unhold`, even once released (the inputs of a fused step, which
        its consumer's job computes later: unpersisted, they would be computed again from their lineage)."""
        with self._lock:
            for df in dfs:
                if df is not None:
                    self._holds.setdefault(id(df), [df, 0])[1] += 1

    def unhold(self, dfs: Iterable[Any]) -> None:
        """Lift one :meth:`hold` of each of ``dfs`` (unpersisted at the next :meth:`flush` if released)."""
        with self._lock:
            for df in dfs:
                entry = self._holds.get(id(df)) if df is not None else None
                if entry is not None:
                    entry[1] -= 1
                    if entry[1] <= 0:
                        del self._holds[id(df)]

    def flush(self, *, final: bool = False) -> None:
        """Unpersist the released DataFrames nothing holds any more (and free the blocks of those marked, once
        :meth:`progress` passed their epoch). ``final``: the run ends, every marked frame is freed."""
        with self._lock:
            kept = []
            for df in self._released:
                if id(df) in self._holds:
                    kept.append(df)  # released, but a fused step's consumer has still to read it
                    continue
                if id(df) in self._pins:
                    continue  # released again when its last queue entry goes
                mark = self._blocks.get(id(df))
                if mark is not None and mark[2] > self._completed.get(mark[1], -1) and not final:
                    kept.append(df)  # a frame made from it may still be computed again from its lineage
                    continue
                self._counts.pop(id(df), None)
                self._tables.pop(id(df), None)
                df.unpersist(blocking=False)
                if mark is not None:
                    del self._blocks[id(df)]
                    free(df)
            self._released = kept
            if final:  # what was never released (a task that did not complete)
                for df, _, _ in self._blocks.values():
                    free(df)
                self._blocks.clear()
            if len(self._counts) > 256:
                self._counts = {k: v for k, v in self._counts.items() if v[0]() is not None}


def cached_rows(df: DataFrame) -> int | None:
    """The rows of persisted ``df`` as Spark counted them while caching it, once every partition is cached
    (the cache's own row count, not a plan's estimate); ``None`` before that, or where Spark does not say.

    Looked up in the session's cache manager (about ten py4j calls, no new plan); a new query over ``df``
    with the cache substituted (``df.select("*")``'s ``withCachedData``) gives the same relation for 6-7.6 ms
    of the driver tree's CPU against 0.7 ms (a cached frame of 4,286 rows, 300 calls; YSB makes two an
    epoch), most of it the JVM analysing and planning that query."""
    if not getattr(df, "is_cached", False):  # unpersisted: a cached frame under it would answer for it
        return None
    try:
        jss = df.sparkSession._jsparkSession
        manager = once(("cache-manager",), lambda: jss.sharedState().cacheManager(), owner=jss)
        found = manager.lookupCachedData(df._jdf)  # the entry whose plan is df's (not one under it)
        if found.isEmpty():
            return None
        relation = found.get().cachedRepresentation()
        # until then its statistics are the plan's estimate
        if not relation.cacheBuilder().isCachedColumnBuffersLoaded():
            return None
        count = relation.computeStats().rowCount()
        return int(str(count.get())) if count.isDefined() else None  # a Scala BigInt
    except Exception:  # noqa: BLE001 - a count the cache kept is an optimisation: counting is always correct
        return None


def _rows_column() -> Any:
    """``count(1) AS rows``, what an observation counts (made once per JVM, :func:`~.jvm.once`)."""
    from pyspark.sql import functions as F

    return once(("observed-rows",), lambda: F.count(F.lit(1)).alias("rows"))


def _observed_rows(observation: Any) -> int | None:
    """The row count ``observation`` received from a finished action, waiting up to :data:`OBSERVED_WAIT`
    seconds for it (the metrics travel on Spark's listener bus); ``None`` if it did not arrive (the caller
    counts)."""
    try:
        future = observation._jo.future()
        deadline = time.monotonic() + OBSERVED_WAIT
        while not future.isCompleted():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.002)
        return int(observation.get["rows"])
    except Exception:  # noqa: BLE001 - an observation is an optimisation: counting is always correct
        return None
