"""YSB's input and clocks: the event generator, the ad → campaign table, the paced producer, the CPU sampler
and response latency from release (see :mod:`.ysb`).

**Events** (yahoo/streaming-benchmarks' schema): ``user_id, page_id, ad_id, ad_type ∈ {banner, modal,
sponsored-search, mail, mobile}, event_type ∈ {view, click, purchase}, event_time`` (milliseconds, a string
as in YSB's JSON) ``, ip_address``; 100 users and 100 pages (YSB's generator), ``campaigns × 10`` ads, every
choice uniform. Deterministic in the epoch: epoch ``e``'s events have event times in ``[BASE + e·T, BASE +
(e+1)·T)`` (``T`` the epoch interval), so outputs do not depend on when a run started.

**The paced producer** (``python -m benchmarks.spark_matrix.ysb_input SPEC``, started detached from the
driver by :func:`spawn_producer`: its CPU is in no driver's tree, and it outlives a killed driver) releases
epoch ``e`` at ``R_e = t0 + (e+1)·T``: during ``[R_{e-1}, R_e)`` it generates the epoch and appends it (falkirk:
to the input log, of :data:`EVENTS_PARTITIONS` partition — one Parquet file an epoch; Structured Streaming: a
Parquet file in a staging directory), at ``R_e`` it cuts the log
(falkirk) or renames the file into the source directory (the stream) — the epoch's input is available from
then on — and records the moment (``releases.jsonl``). Event time maps onto the same clock: ``wall(t) = t0 +
(t - BASE) / 1000``, so a window ``[w, w + 10 s)`` closes at the release of the epoch holding its last events.
Release times fall :data:`LEAD` s before a multiple of ``T`` since the Unix epoch: Spark's processing-time
trigger fires at those multiples, so the stream's next batch starts right after each release (the peer at
its strongest); falkirk's input step polls for the cut every :data:`POLL` s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

BASE_MS = 1_700_000_000_000  # event time of epoch 0's start (a multiple of every window length used)
EVENTS_SCHEMA = ("user_id STRING, page_id STRING, ad_id STRING, ad_type STRING, event_type STRING, "
                 "event_time STRING, ip_address STRING")
AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
EVENT_TYPES = ("view", "click", "purchase")
ADS_PER_CAMPAIGN = 10
LEAD = 0.25  # seconds between a release and the processing-time trigger after it
POLL = 0.02  # seconds between two looks for a cut (falkirk's input step)
#: files per epoch in falkirk's input log: one, as the stream's source gets (one Parquet file per epoch)
EVENTS_PARTITIONS = 1


def _ids(kind: str, n: int) -> list[str]:
    import random

    rng = random.Random(kind)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n)]


def ads(size: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(ad_id, campaign_id)``: ``campaigns`` campaigns of :data:`ADS_PER_CAMPAIGN` ads each."""
    camps = _ids("campaign", size["campaigns"])
    return list(zip(_ids("ad", len(camps) * ADS_PER_CAMPAIGN),
                    [c for c in camps for _ in range(ADS_PER_CAMPAIGN)], strict=True))


def interval_ms(size: Mapping[str, Any]) -> int:
    return int(round(size["interval"] * 1000))


def events_table(epoch: int, size: Mapping[str, Any]) -> Any:
    """Epoch ``epoch``'s events (a pyarrow Table), deterministic in the epoch."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(5000 + epoch)
    n, t = size["events"], interval_ms(size)
    pick = lambda values: pa.array(values).take(pa.array(rng.integers(0, len(values), n)))  # noqa: E731
    times = BASE_MS + epoch * t + rng.integers(0, t, n)
    return pa.table({"user_id": pick(_ids("user", 100)), "page_id": pick(_ids("page", 100)),
                     "ad_id": pick([a for a, _ in ads(size)]), "ad_type": pick(AD_TYPES),
                     "event_type": pick(EVENT_TYPES), "event_time": pa.array(times.astype(str)),
                     "ip_address": pa.array(["1.2.3.4"] * n)})


def first_release(interval: float, lead: float = 2.0) -> float:
    """``t0`` of a run starting now: epoch 0 released at least ``lead`` s from now, :data:`LEAD` s before a
    multiple of ``interval`` since the Unix epoch (see the module docstring)."""
    now = time.time() + lead + interval
    k = int(now // interval) + 1
    return k * interval - LEAD - interval


def wall_of(event_ms: int, t0: float) -> float:
    """The wall-clock moment of event time ``event_ms`` in a run whose epochs start at ``t0``."""
    return t0 + (event_ms - BASE_MS) / 1000.0


# -- the producer ---------------------------------------------------------------------------------------------------
def produce(spec: Mapping[str, Any]) -> None:
    """Release every epoch of ``spec`` on schedule (see the module docstring)."""
    import pyarrow.parquet as pq

    size, t0, interval = spec["size"], spec["t0"], spec["size"]["interval"]
    log = None
    if spec["system"] == "falkirk":
        from falkirk.spark.pipeline.store.inputlog import InputLog

        log = InputLog(spec["root"], spec.get("input", "events"), EVENTS_SCHEMA, partitions=EVENTS_PARTITIONS)
    else:
        src, staging = Path(spec["source"]), Path(spec["source"] + ".staging")
        src.mkdir(parents=True, exist_ok=True)
        staging.mkdir(parents=True, exist_ok=True)
    with open(spec["releases"], "a", encoding="utf-8") as out:
        for e in range(spec.get("start", 0), spec["epochs"]):
            table = events_table(e, size)
            if log is not None:
                log.append(table, batch=f"epoch-{e}")
            else:
                pq.write_table(table, staging / f"epoch-{e:05d}.parquet")
            release = t0 + (e + 1) * interval
            time.sleep(max(0.0, release - time.time()))
            if log is not None:
                at = log.cut(e).at
            else:
                os.replace(staging / f"epoch-{e:05d}.parquet", src / f"epoch-{e:05d}.parquet")
                at = time.time()
            out.write(json.dumps({"epoch": e, "at": at, "scheduled": release}) + "\n")
            out.flush()


def spawn_producer(spec: Mapping[str, Any], path: Path) -> None:
    """Start the producer of ``spec`` detached (a grandchild re-parented away: not in this process's tree, alive
    after this process is killed); its pid goes to ``path.with_suffix('.pid')``."""
    path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                       os.environ.get("PYTHONPATH", "")])}
    launcher = ("import subprocess, sys; p = subprocess.Popen(sys.argv[1:], start_new_session=True, "
                "stdout=open(sys.argv[-1] + '.log', 'w'), stderr=subprocess.STDOUT); "
                "open(sys.argv[-1] + '.pid', 'w').write(str(p.pid))")
    subprocess.run([sys.executable, "-c", launcher, sys.executable, "-m", __name__, str(path)], env=env, check=True)


def stop_producer(path: Path) -> None:
    """Kill the producer started for ``path`` if it still runs (an aborted run)."""
    try:
        os.kill(int(Path(str(path) + ".pid").read_text()), 9)
    except (OSError, ValueError):
        pass


def releases(path: Path | str) -> dict[int, float]:
    """``epoch → release time`` recorded by the producer."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    return {d["epoch"]: d["at"] for d in map(json.loads, lines) if d}


def wait_released(path: Path | str, epoch: int, timeout: float = 600.0) -> float:
    """Block until the producer recorded ``epoch``'s release; its time."""
    end = time.time() + timeout
    while time.time() < end:
        got = releases(path).get(epoch)
        if got is not None:
            return got
        time.sleep(POLL)
    raise TimeoutError(f"epoch {epoch} not released within {timeout} s ({path})")


# -- CPU over time --------------------------------------------------------------------------------------------------
class CpuSampler:
    """A thread appending ``wall-clock CPU`` of this process's tree to ``path`` every ``every`` s (flushed), so
    the CPU between any two moments can be read afterwards — also after this process was SIGKILLed."""

    def __init__(self, path: Path, every: float = 0.2) -> None:
        self.path, self.every = path, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="cpu-sampler")
        self._thread.start()

    def _loop(self) -> None:
        from ..spark_vs_streaming import tree_cpu

        with open(self.path, "a", encoding="utf-8") as f:
            while True:
                f.write(f"{time.time():.4f} {tree_cpu(os.getpid()):.4f}\n")
                f.flush()
                if self._stop.wait(self.every):
                    return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def samples(path: Path | str) -> list[tuple[float, float]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [(float(a), float(b)) for a, b in (line.split() for line in text.splitlines() if line.count(" ") == 1)]


def cpu_at(series: list[tuple[float, float]], t: float) -> float:
    """The process tree's CPU at wall time ``t``, linearly interpolated between samples (clamped at the ends)."""
    if not series:
        return 0.0
    if t <= series[0][0]:
        return series[0][1]
    for (t1, c1), (t2, c2) in zip(series, series[1:], strict=False):
        if t1 <= t <= t2:
            return c1 if t2 == t1 else c1 + (c2 - c1) * (t - t1) / (t2 - t1)
    return series[-1][1]


# -- latency --------------------------------------------------------------------------------------------------------
def percentile(values: Iterable[float], q: float) -> float | None:
    from falkirk.spark.pipeline.run.latency import percentile as p

    return p(values, q)


def window_latency(updates: Mapping[int, Iterable[tuple[Any, ...]]], commits: Mapping[int, float], t0: float,
                   size: Mapping[str, Any]) -> dict[str, float]:
    """Each closed window's latency: from its end (``wall_of``) to the commit of the last epoch that updated its
    count. ``updates``: per epoch, the ``(campaign_id, window_start, count)`` rows it emitted; windows ending after
    the last epoch's end are still open and left out. Keys ``"<campaign> <window_start>"``."""
    last: dict[tuple[str, int], int] = {}
    for e in sorted(updates):
        for row in updates[e]:
            last[(row[0], int(row[1]))] = e
    end_of_run = BASE_MS + (max(updates, default=-1) + 1) * interval_ms(size)
    out = {}
    for (c, w), e in last.items():
        close = w + size["window_ms"]
        if close <= end_of_run and e in commits:
            out[f"{c} {w}"] = commits[e] - wall_of(close, t0)
    return out


def caught_up(latency: Mapping[int, float], since: int, bound: float) -> int | None:
    """Epochs after ``since`` until the latency stays at most ``bound`` for good: the first epoch ``e >= since``
    from which every later epoch's latency is ``<= bound``, less ``since``; ``None`` if the last is above."""
    later = sorted(e for e in latency if e >= since)
    first = None
    for e in later:
        if latency[e] > bound:
            first = None
        elif first is None:
            first = e
    return None if first is None else first - since


if __name__ == "__main__":
    produce(json.loads(Path(sys.argv[1]).read_text()))
