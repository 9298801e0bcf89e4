"""What a running pipeline tells a person: log records, progress lines and a live bar.

The executor reports every event to one :class:`Progress`:

* the ``falkirk.spark`` **logger** (standard :mod:`logging`) gets a record
  when each step starts and finishes (``INFO``, with its rows and seconds),
  for each recovery event and note (``WARNING`` for failures, ``INFO``
  otherwise). ``falkirk`` installs a ``NullHandler``, so a library user sees
  nothing until they configure logging, e.g.
  ``logging.basicConfig(level=logging.INFO)`` or
  ``logging.getLogger("falkirk.spark").setLevel(logging.INFO)`` with a handler;
* the ``progress=`` callback of :meth:`Pipeline.run <falkirk.spark.Pipeline.run>`
  gets the human-readable lines (one per epoch, per redone step, per
  recovery event), as before;
* with ``bar=True``, a live `tqdm <https://tqdm.github.io/>`_ bar counts the
  (step, epoch) executions still to do (its total grows when a recovery
  adds work) and shows the step running now; lines and log records are
  written above it, not through it.

>>> import logging
>>> lines = []
>>> p = Progress(lines.append)
>>> p.step_started("cc", 3, redo=False)
>>> p.step_finished("cc", 3, rows=120, seconds=0.5, redo=False)
>>> p.line("epoch   3  cc 120  (0.5 s)")
>>> lines
['epoch   3  cc 120  (0.5 s)']
>>> logging.getLogger("falkirk").handlers[0].__class__.__name__
'NullHandler'
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Progress", "log"]

#: The logger of :mod:`falkirk.spark` pipelines (a child of ``falkirk``, quiet until configured).
log = logging.getLogger("falkirk.spark")


class Progress:
    """The executor's reporter: log records, the ``progress`` callback's lines, and an optional bar.

    ``bar``: draw a tqdm bar on standard error (needs ``tqdm``, part of the
    ``spark`` extra). Cost: O(1) per event.
    """

    def __init__(self, callback: Callable[[str], None] | None = None, *, bar: bool = False) -> None:
        self.callback = callback
        self.want_bar = bar
        self.bar: Any = None

    @contextlib.contextmanager
    def running(self, total: int) -> Iterator[Progress]:
        """Show the bar (if asked for) for a run with ``total`` step executions to do."""
        if not self.want_bar:
            yield self
            return
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        self.bar = tqdm(total=total, unit="step", desc="falkirk", dynamic_ncols=True, leave=True)
        # log records printed to the console by the application's handlers go above the bar
        redirect = logging_redirect_tqdm() if logging.root.handlers else contextlib.nullcontext()
        try:
            with redirect:
                yield self
        finally:
            self.bar.close()
            self.bar = None

    def more(self, n: int) -> None:
        """A recovery added ``n`` executions to do."""
        if self.bar is not None and n > 0:
            self.bar.total += n
            self.bar.refresh()

    def step_started(self, step: str, epoch: int, *, redo: bool) -> None:
        """``step`` starts working on ``epoch`` (``redo``: again, after a rollback)."""
        log.info("%s@%d started%s", step, epoch, " (redo)" if redo else "")
        if self.bar is not None:
            self.bar.set_postfix_str(f"{step}@{epoch}" + (" redo" if redo else ""), refresh=True)

    def step_finished(self, step: str, epoch: int, *, rows: int | None, seconds: float, redo: bool) -> None:
        """``step`` finished ``epoch``: ``rows`` output rows in ``seconds``."""
        log.info("%s@%d finished: %s rows in %.2f s%s", step, epoch, rows, seconds, " (redo)" if redo else "")
        if self.bar is not None:
            self.bar.update(1)

    def line(self, text: str, *, level: int = logging.INFO) -> None:
        """A line for people: to the callback, and to the log at ``level``."""
        if text.strip():
            log.log(level, "%s", text.strip())
        if self.callback is None:
            return
        if self.bar is None:
            self.callback(text)
            return
        from tqdm.auto import tqdm

        with tqdm.external_write_mode():  # the bar steps aside while the callback prints
            self.callback(text)
