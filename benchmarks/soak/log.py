"""The soak's append-only event log (JSON lines): what the report is computed from, and how a run resumes.

Every line is one event with its wall time ``t``. A run that is stopped (Ctrl-C of the supervisor, a lost
machine) and started again with the same arguments reads its log back: slices up to the last ``slice-done``
are not run again; what was logged after it (a slice cut short) stays in the file, after a ``resume`` line
that says from where it was abandoned, and is not counted.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["EventLog"]


class EventLog:
    """``path``: the JSON-lines file (created if absent)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)

    def __call__(self, event: dict[str, Any]) -> None:
        line = json.dumps({"t": round(time.time(), 3), **event}, default=str)
        with self.lock, open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()

    def events(self) -> list[dict[str, Any]]:
        """The events that count: up to the last ``slice-done`` before each ``resume``, and everything after
        the last ``resume``."""
        lines = []
        with open(self.path) as f:
            for line in f:
                try:
                    lines.append(json.loads(line))
                except ValueError:  # a line cut short by a crash
                    continue
        kept: list[dict[str, Any]] = []
        for ev in lines:
            if ev.get("event") == "resume":
                last = max((i for i, e in enumerate(kept) if e.get("event") == "slice-done"), default=-1)
                if ev.get("keep_after_slice", False) is False:
                    del kept[last + 1:]
            kept.append(ev)
        return kept

    def header(self) -> dict[str, Any] | None:
        """The ``soak`` event that started this log (its arguments), or ``None``."""
        for ev in self.events():
            if ev.get("event") == "soak":
                return ev
        return None
