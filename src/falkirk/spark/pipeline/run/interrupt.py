"""Ctrl-C during a run: stop at once, leave the session usable, and say that the root is consistent.

PySpark's own ``SIGINT`` handler cancels every job *from inside the signal
handler*, on the py4j connection the interrupted call is still reading: py4j
logs a traceback ("reentrant call") and the connection is left holding an
answer nobody read, which the next call on it would take for its own. While
a pipeline runs, :func:`interruptible` replaces that handler with one that
first closes this thread's py4j connection — so no later call can read the
interrupted call's answer; py4j opens a new one on the next call — and then
raises :class:`Interrupt`. That is not a ``KeyboardInterrupt``, which py4j
would catch to log a traceback on the root logger (configuring it as a
side effect); :meth:`Pipeline.run <falkirk.spark.Pipeline.run>` turns it into
:class:`~falkirk.spark.errors.RunInterrupted`, which is one.
:func:`after_interrupt` cancels the run's Spark jobs from a separate thread,
on a connection of its own.

Nothing under the root needs undoing: a run can stop between any two of its
writes (manifests are write-once, data no manifest names is swept at the next
start), exactly as when its driver is killed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Interrupt", "interruptible", "after_interrupt"]


class Interrupt(BaseException):
    """Ctrl-C inside :func:`interruptible` (a ``BaseException``: no ``except Exception`` of a step takes
    it)."""


def _drop_connection(spark: SparkSession) -> None:
    """Close the calling thread's py4j connection to ``spark``'s JVM (py4j opens another on the next call)."""
    with contextlib.suppress(Exception):
        client = spark.sparkContext._gateway._gateway_client  # type: ignore[union-attr]
        connection = client.get_thread_connection() if hasattr(client, "get_thread_connection") else None
        if connection is not None:
            connection.close(reset=True)


@contextlib.contextmanager
def interruptible(spark: SparkSession) -> Iterator[None]:
    """Within the block, ``SIGINT`` drops the main thread's py4j connection and raises :class:`Interrupt`,
    making no py4j call (main thread, classic sessions only: a Connect client has its own handling)."""
    from falkirk.spark.pipeline.run.session import is_connect

    if threading.current_thread() is not threading.main_thread() or is_connect(spark):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        _drop_connection(spark)
        raise Interrupt

    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def after_interrupt(spark: SparkSession, tag: str | None = None, *, wait: float = 10.0) -> None:
    """After a ``KeyboardInterrupt`` in a run on ``spark``: cancel the jobs of job group / tag ``tag`` (every
    job when ``None``) from another thread, on a connection of its own. Best effort, never raises."""
    from falkirk.spark.pipeline.run.session import is_connect

    def cancel() -> None:
        with contextlib.suppress(Exception):
            if is_connect(spark):
                if tag is None:
                    spark.interruptAll()
                else:
                    spark.interruptTag(tag)
            elif tag is None:
                spark.sparkContext.cancelAllJobs()
            else:
                spark.sparkContext.cancelJobGroup(tag)

    worker = threading.Thread(target=cancel, name="falkirk-cancel", daemon=True)
    worker.start()
    worker.join(wait)
