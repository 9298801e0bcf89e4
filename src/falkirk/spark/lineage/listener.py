"""One SparkListener per SparkContext, shared by every falkirk subscriber, and a job recorder.

Spark cannot remove a Python listener (py4j makes a new proxy for every call),
so falkirk registers exactly one listener per SparkContext, for the context's
whole life, and multiplexes it: :meth:`SparkEvents.subscribe` adds a Python
callback, :meth:`Subscription.close` removes it. Events reach Python
asynchronously, after the action that caused them may have returned: wait with
:meth:`SparkEvents.flush` (the listener bus drained) and, for jobs, for their
``job_end`` event — :class:`JobRecorder` does both.

Events are plain dictionaries (see :mod:`falkirk.spark.lineage._jvm`): ``job_start``
(``job_id``, ``stages``, ``tags``, ``group``), ``job_end`` (``job_id``,
``result``), ``stage_submitted`` (a stage plus ``tags``), ``stage_completed``
(a stage with ``failure``) and ``block_updated`` (``block``, ``stored``) for
RDD blocks. A stage is ``stage_id``, ``attempt``, ``shuffle_id`` (``None`` for
a result stage), ``parent_ids``, ``name``, ``num_tasks``, ``failure``.

>>> job = RecordedJob(0, tuple(StageRecord.from_event(s) for s in [
...     {"stage_id": 4, "attempt": 0, "shuffle_id": 1, "parent_ids": ()},
...     {"stage_id": 5, "attempt": 0, "shuffle_id": None, "parent_ids": (4,)}]))
>>> job.dag()
{'shuffle-1': frozenset(), 'result': frozenset({'shuffle-1'})}
"""

from __future__ import annotations

import atexit
import itertools
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from attrs import frozen

from falkirk.errors import MonitorError
from falkirk.spark.lineage import _jvm

__all__ = ["SparkEvents", "Subscription", "JobRecorder", "RecordedJob", "StageRecord", "stage_key"]

Callback = Callable[[str, dict[str, Any]], None]


def stage_key(shuffle_id: int | None) -> str:
    """The falkirk processor name of a stage: ``shuffle-<id>`` for a map stage, else ``result``."""
    return "result" if shuffle_id is None else f"shuffle-{shuffle_id}"


class SparkEvents:
    """The single listener of one SparkContext, fanning its events out to subscribers."""

    _by_context: weakref.WeakKeyDictionary[Any, SparkEvents] = weakref.WeakKeyDictionary()
    _registry_lock = threading.Lock()

    def __init__(self, sc: Any) -> None:
        self._sc = sc
        self._subscribers: dict[int, Callback] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._handle = _jvm.register_listener(sc, self._dispatch)
        atexit.register(self._handle.remove)

    @classmethod
    def of(cls, spark: Any) -> SparkEvents:
        """The listener of ``spark``'s SparkContext (a SparkSession or SparkContext), made on first use."""
        _jvm.java_context(spark)  # SparkConnectError for Spark Connect
        sc = spark if hasattr(spark, "_gateway") else spark.sparkContext
        with cls._registry_lock:
            events = cls._by_context.get(sc)
            if events is None:
                events = cls._by_context[sc] = cls(sc)
            return events

    def subscribe(self, callback: Callback) -> Subscription:
        """Call ``callback(kind, event)`` for every event from now on, until the subscription closes."""
        with self._lock:
            sid = next(self._ids)
            self._subscribers[sid] = callback
        return Subscription(self, sid)

    def _unsubscribe(self, sid: int) -> None:
        with self._lock:
            self._subscribers.pop(sid, None)

    def _dispatch(self, kind: str, event: dict[str, Any]) -> None:
        with self._lock:
            targets = list(self._subscribers.values())
        for callback in targets:
            callback(kind, event)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Return once every event posted so far has been delivered (``MonitorError`` on timeout)."""
        if not _jvm.flush_listener_bus(self._sc, timeout_s):
            raise MonitorError(f"Spark's listener bus did not drain within {timeout_s} s")

    @property
    def subscribers(self) -> int:
        """How many subscriptions are open."""
        with self._lock:
            return len(self._subscribers)


class Subscription:
    """An open subscription; close it (or leave its ``with`` block) to stop receiving events."""

    def __init__(self, events: SparkEvents, sid: int) -> None:
        self._events, self._sid = events, sid

    def close(self) -> None:
        """Stop delivering events to this subscriber (idempotent)."""
        self._events._unsubscribe(self._sid)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@frozen
class StageRecord:
    """One stage (one attempt) as Spark's listener reported it."""

    stage_id: int
    attempt: int
    shuffle_id: int | None
    parent_ids: tuple[int, ...] = ()
    name: str = ""
    num_tasks: int = 0
    failure: str | None = None

    @classmethod
    def from_event(cls, ev: dict[str, Any]) -> StageRecord:
        """Build from a listener event dictionary (extra keys are ignored)."""
        return cls(
            ev["stage_id"],
            ev["attempt"],
            ev["shuffle_id"],
            tuple(ev.get("parent_ids", ())),
            ev.get("name", ""),
            ev.get("num_tasks", 0),
            ev.get("failure"),
        )

    @property
    def key(self) -> str:
        """The falkirk processor this stage is (:func:`stage_key`)."""
        return stage_key(self.shuffle_id)


@frozen
class RecordedJob:
    """A job: every stage Spark planned for it, then what it submitted and how it ended."""

    job_id: int
    stages: tuple[StageRecord, ...]
    submitted: tuple[StageRecord, ...] = ()
    completed: tuple[StageRecord, ...] = ()
    result: str | None = None

    @property
    def succeeded(self) -> bool:
        """Whether the job ended with ``JobSucceeded``."""
        return self.result is not None and "JobSucceeded" in self.result

    def dag(self) -> dict[str, frozenset[str]]:
        """The job's stage DAG keyed by processor name: ``{stage: parent stages}`` (skipped ones too)."""
        by_id = {s.stage_id: s for s in self.stages}
        return {s.key: frozenset(by_id[p].key for p in s.parent_ids if p in by_id) for s in self.stages}

    def ran(self) -> frozenset[str]:
        """The stages (processor names) Spark submitted at least once: what it (re-)ran."""
        return frozenset(s.key for s in self.submitted)

    def fetch_failed(self) -> bool:
        """Whether a stage attempt of this job failed on a lost shuffle file."""
        return any(s.failure and "FetchFailed" in s.failure for s in self.completed)


class JobRecorder:
    """Record the jobs the current thread runs inside a ``with`` block.

    Jobs are tagged with a unique job tag (``SparkContext.addJobTag``), so jobs
    of other threads (e.g. streaming queries) are left out. Cached-block writes
    carry no job, so every RDD block written while the recorder is open is kept.
    Leaving the block waits for the listener bus to drain and for the end of
    every job that started.

    >>> with JobRecorder(spark) as rec:  # doctest: +SKIP
    ...     rdd.collect()
    >>> rec.last.ran(), rec.last.fetch_failed()  # doctest: +SKIP
    (frozenset({'result', 'shuffle-0'}), False)
    """

    _tags = itertools.count()

    def __init__(self, spark: Any, *, timeout_s: float = 60.0) -> None:
        self._events = SparkEvents.of(spark)
        self._sc = spark if hasattr(spark, "_gateway") else spark.sparkContext
        self.tag = f"falkirk-recorder-{id(self)}-{next(self._tags)}"
        self._timeout = timeout_s
        self._cond = threading.Condition()
        self._starts: dict[int, dict[str, Any]] = {}
        self._submitted: dict[int, list[StageRecord]] = {}
        self._completed: dict[int, list[StageRecord]] = {}
        self._stage_job: dict[int, int] = {}
        self._ends: dict[int, str] = {}
        self._blocks: list[str] = []
        self._subscription: Subscription | None = None
        self.jobs: list[RecordedJob] = []

    def __enter__(self) -> JobRecorder:
        self._subscription = self._events.subscribe(self._on_event)
        self._sc.addJobTag(self.tag)
        return self

    def __exit__(self, *exc: object) -> None:
        self._sc.removeJobTag(self.tag)
        try:
            self._events.flush(self._timeout)
            with self._cond:
                if not self._cond.wait_for(lambda: set(self._starts) <= set(self._ends), self._timeout):
                    raise MonitorError(
                        f"jobs {sorted(set(self._starts) - set(self._ends))} never reported their end"
                    )
                self.jobs = [self._job(j) for j in sorted(self._starts)]
        finally:
            assert self._subscription is not None
            self._subscription.close()

    def _on_event(self, kind: str, ev: dict[str, Any]) -> None:
        with self._cond:
            if kind == "job_start" and self.tag in ev["tags"]:
                self._starts[ev["job_id"]] = ev
                for s in ev["stages"]:
                    self._stage_job.setdefault(s["stage_id"], ev["job_id"])
            elif kind == "stage_submitted" and self.tag in ev["tags"]:
                job = self._stage_job.get(ev["stage_id"], -1)
                self._submitted.setdefault(job, []).append(StageRecord.from_event(ev))
            elif kind == "stage_completed" and ev["stage_id"] in self._stage_job:
                self._completed.setdefault(self._stage_job[ev["stage_id"]], []).append(
                    StageRecord.from_event(ev)
                )
            elif kind == "job_end" and ev["job_id"] in self._starts:
                self._ends[ev["job_id"]] = ev["result"]
                self._cond.notify_all()
            elif kind == "block_updated" and ev["stored"]:
                self._blocks.append(ev["block"])

    def _job(self, job_id: int) -> RecordedJob:
        start = self._starts[job_id]
        return RecordedJob(
            job_id,
            tuple(StageRecord.from_event(s) for s in start["stages"]),
            tuple(self._submitted.get(job_id, ())),
            tuple(self._completed.get(job_id, ())),
            self._ends.get(job_id),
        )

    @property
    def last(self) -> RecordedJob:
        """The last job recorded (``MonitorError`` when none ran)."""
        if not self.jobs:
            raise MonitorError("no Spark job ran inside the recorder")
        return self.jobs[-1]

    @property
    def blocks(self) -> frozenset[str]:
        """Cached RDD blocks (``rdd_<id>_<partition>``) stored while the recorder was open.

        Spark reports them only while the driver's block manager is registered
        with its master (in local mode: until the first fetch failure).
        """
        with self._cond:
            return frozenset(self._blocks)

    def ran(self) -> frozenset[str]:
        """Stages submitted by any recorded job."""
        return frozenset(itertools.chain.from_iterable(j.ran() for j in self.jobs))

    def __iter__(self) -> Iterator[RecordedJob]:
        return iter(self.jobs)
