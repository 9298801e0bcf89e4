"""W4 and W6's input and the steps both systems share (see :mod:`.w4`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .measure import now_cpu_jit

EVENTS_SCHEMA = "epoch BIGINT, user BIGINT, category STRING, amount BIGINT, purchase BIGINT"
SINK_SCHEMA = ("CREATE TABLE IF NOT EXISTS heavy_rows (epoch INTEGER, user INTEGER, spend INTEGER, events INTEGER, "
               "purchases INTEGER, top_category TEXT, share_permille INTEGER, peers INTEGER, leader INTEGER)")
CATEGORIES = ("books", "games", "music", "garden", "tools", "food", "toys", "shoes")


def events_table(epoch: int, size: dict[str, int]) -> Any:
    """The epoch's events as a pyarrow Table (deterministic in ``epoch``)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(1000 + epoch)
    n = size["events"]
    users = rng.integers(0, size["users"], n)
    return pa.table({"epoch": np.full(n, epoch, dtype="int64"), "user": users.astype("int64"),
                     "category": np.array(CATEGORIES)[rng.integers(0, len(CATEGORIES), n)],
                     "amount": rng.integers(1, 500, n).astype("int64"),
                     "purchase": (rng.random(n) < 0.3).astype("int64")})


def write_parquet_input(directory: Path, size: dict[str, int], epochs: int) -> None:
    """One Parquet file per epoch for the streaming file source, in epoch order (by modification time)."""
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    base = time.time() - 10 * epochs
    for e in range(epochs):
        p = directory / f"epoch-{e:05d}.parquet"
        pq.write_table(events_table(e, size), p)
        os.utime(p, (base + e, base + e))


def heavy_of(events: Any) -> Any:
    """The flagship's heavy per-epoch aggregate on the events (one row per user of the epoch)."""
    from falkirk.spark.pipeline.tools.flagship import heavy

    return heavy(events.select("user", "category", "amount", "purchase"))


def avg_expr(version: int) -> str:
    """``totals``' derived column: v1 ``spend div events``; v2 (W6's code change) in cents."""
    return "spend div events" if version == 1 else "(spend * 100) div events"


def avg_py(version: int, spend: int, events: int) -> int:
    return spend // events if version == 1 else (spend * 100) // events


def sink_rows(heavy: Any) -> list[tuple[Any, ...]]:
    rows = heavy.select("user", "spend", "events", "purchases", "top_category", "share_permille", "peers",
                        "category_leader").collect()
    return [(int(r[0]), int(r[1]), int(r[2]), int(r[3]), r[4], int(r[5]), int(r[6]), int(bool(r[7]))) for r in rows]


def insert_sink(db: Any, epoch: int, rows: list[tuple[Any, ...]]) -> None:
    db.execute(SINK_SCHEMA)
    db.executemany("INSERT INTO heavy_rows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [(epoch, *r) for r in rows])


class Failure:
    """One exception in the sink at ``epoch`` (once); the stamp (wall, CPU) taken just before it is raised."""

    def __init__(self, epoch: int | None) -> None:
        self.epoch = epoch
        self.at: tuple[float, float] | None = None
        self.jit_at = 0.0

    def maybe(self, epoch: int) -> None:
        if epoch == self.epoch and self.at is None:
            t = time.perf_counter()
            cpu, self.jit_at = now_cpu_jit()
            self.at = (t, cpu)
            raise ConnectionError(f"sink: the database is unavailable at epoch {epoch} (injected once)")
