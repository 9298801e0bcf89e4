"""Questions another thread asks a running pipeline, answered on the run's own thread.

The run's state (queues, planner, progress) is touched only by the thread that runs the pipeline
(:mod:`~falkirk.spark.pipeline.run.concurrent`), so a question about it from another thread — a monitoring
thread calling :meth:`Pipeline.plan_failure <falkirk.spark.pipeline.api.Pipeline.plan_failure>` while the
run goes on — is queued, and the run's thread answers it at its next safe point: between two executions of a
sequential run (so after the one in flight: seconds, for a large step), within a fraction of a second in a
concurrent run, and at the latest when the run ends. The asking thread waits for the answer.

>>> import threading
>>> box = RunThread()
>>> answers = []
>>> asker = threading.Thread(target=lambda: answers.append(box.call(lambda: threading.get_ident())))
>>> asker.start()
>>> while not box.pending():
...     pass
>>> box.serve()
>>> asker.join()
>>> answers == [threading.get_ident()]  # computed on this thread, the run's
True
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

__all__ = ["RunThread"]

T = TypeVar("T")


class RunThread:
    """The run's thread (the one that made it) and the questions queued for it."""

    def __init__(self) -> None:
        self.ident = threading.get_ident()
        self._lock = threading.Lock()
        self._queue: deque[tuple[Callable[[], object], Future[object]]] = deque()
        self._closed = False

    def call(self, fn: Callable[[], T]) -> T | None:
        """``fn()`` computed on the run's thread: at once on that thread, else queued for it and waited for
        (its exception raised here). ``None`` once the run has ended: the caller asks the root instead."""
        if threading.get_ident() == self.ident:
            return fn()
        future: Future[object] = Future()
        with self._lock:
            if self._closed:
                return None
            self._queue.append((fn, future))
        return future.result()  # type: ignore[return-value]

    def pending(self) -> bool:
        """Questions wait."""
        return bool(self._queue)

    def serve(self) -> None:
        """Answer the questions queued (the run's thread, at a safe point)."""
        while True:
            with self._lock:
                if not self._queue:
                    return
                fn, future = self._queue.popleft()
            try:
                future.set_result(fn())
            except Exception as exc:  # noqa: BLE001 - the asker's to see
                future.set_exception(exc)
            except BaseException as exc:  # an interrupt: the asker is told, the run stops
                future.set_exception(exc)
                raise

    def close(self) -> None:
        """The run ends: what was asked is answered; what is asked from now on is not queued."""
        with self._lock:
            self._closed = True
        self.serve()
