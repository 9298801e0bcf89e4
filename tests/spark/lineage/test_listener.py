"""The shared SparkListener: one per SparkContext, multiplexed, and the job recorder."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from falkirk.spark.lineage import _jvm
from falkirk.spark.lineage.listener import JobRecorder, SparkEvents

pytestmark = pytest.mark.spark


def test_one_listener_per_context_whatever_the_subscribers(spark: Any, sc: Any) -> None:
    """SparkEvents.of returns one object per context; recorders add subscribers, not listeners."""
    events = SparkEvents.of(spark)
    assert SparkEvents.of(sc) is events
    before = _jvm.listener_count(sc)
    for _ in range(3):
        with JobRecorder(spark):
            sc.parallelize(range(4), 2).count()
    assert _jvm.listener_count(sc) == before
    assert events.subscribers == 0


def test_subscription_delivers_until_closed(spark: Any, sc: Any) -> None:
    """A subscriber sees job events (after a flush) and nothing once it closed its subscription."""
    events = SparkEvents.of(spark)
    seen: list[str] = []
    with events.subscribe(lambda kind, ev: seen.append(kind)):
        sc.parallelize(range(4), 2).count()
        events.flush()
    assert {"job_start", "stage_submitted", "stage_completed", "job_end"} <= set(seen)
    count = len(seen)
    sc.parallelize(range(4), 2).count()
    events.flush()
    assert len(seen) == count


def test_recorder_keeps_only_its_own_threads_jobs(spark: Any, sc: Any) -> None:
    """Jobs of another thread, running at the same time, are not recorded (job tags are per thread)."""
    other = threading.Thread(target=lambda: sc.parallelize(range(8), 2).map(lambda x: x * 2).sum())
    with JobRecorder(spark) as rec:
        other.start()
        sc.parallelize(range(4), 2).count()
        other.join()
    assert len(rec.jobs) == 1
    job = rec.last
    assert job.succeeded and job.ran() == {"result"} and job.dag() == {"result": frozenset()}
