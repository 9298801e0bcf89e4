"""Response latency: from an epoch's input being available to the output epoch committed.

An input epoch is available when its cut is recorded (``cuts/<epoch>.json``
records when: by the run's input step, or ahead of it by a producer that
cuts the log itself); an output epoch is committed when its manifest is
published (the manifest records when). An output's latency at epoch ``e``
is its commit time less the latest cut time of ``e`` among the inputs it
depends on — queueing behind earlier epochs, a recovery, a driver's restart
all count, as a reader waiting for the epoch would see them.
:class:`Latency` holds one output's latencies for the epochs a run
committed; the benchmarks add event-time windows on top.

>>> lat = Latency("windows", {0: 1.0, 1: 2.0, 2: 3.0, 3: 10.0})
>>> lat.p50, lat.p99, lat.worst
(2.5, 9.79, 10.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from attrs import frozen

from falkirk.spark.errors import CorruptDataError

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["Latency", "percentile", "response_latency", "upstream_inputs"]


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values``, linearly interpolated; ``None`` for no values.

    >>> percentile([1, 2, 3, 4], 50), percentile([], 99)
    (2.5, None)
    """
    xs = sorted(values)
    if not xs:
        return None
    k = (len(xs) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return round(xs[lo] + (xs[hi] - xs[lo]) * (k - lo), 9)


@frozen
class Latency:
    """One output's response latency (seconds) per epoch committed."""

    output: str
    epochs: Mapping[int, float]

    @property
    def p50(self) -> float | None:
        """The median latency."""
        return percentile(self.epochs.values(), 50)

    @property
    def p99(self) -> float | None:
        """The 99th percentile."""
        return percentile(self.epochs.values(), 99)

    @property
    def worst(self) -> float | None:
        """The largest latency."""
        return max(self.epochs.values(), default=None)

    def describe(self) -> str:
        """One line: ``windows: p50 1.20 s, p99 3.40 s, worst 3.50 s over 12 epochs``."""
        if not self.epochs:
            return f"{self.output}: no epoch committed with a known input time"
        return (
            f"{self.output}: response latency p50 {self.p50:.2f} s, p99 {self.p99:.2f} s, worst "
            f"{self.worst:.2f} s over {len(self.epochs)} epoch(s)"
        )


def upstream_inputs(pipeline: Definition, name: str) -> set[str]:
    """The inputs ``name`` depends on, directly or through other steps."""
    seen, todo, found = set(), [name], set()
    while todo:
        n = todo.pop()
        if n in pipeline.inputs:
            found.add(n)
            continue
        for u in pipeline.steps[n].inputs:
            if u not in seen:
                seen.add(u)
                todo.append(u)
    return found


def response_latency(
    pipeline: Definition, storage: Storage, epochs: Mapping[str, Iterable[int]]
) -> dict[str, Latency]:
    """Each output's latency at the epochs ``epochs`` names for it, read from the root (a run measures its own
    as it commits: :attr:`RunResult.latency <falkirk.spark.pipeline.run.executor.RunResult.latency>`). An
    epoch whose cut or manifest is gone (garbage collection acknowledges input) or does not record its time is
    left out. Cost: one read per manifest and cut."""
    cut_at: dict[tuple[str, int], float | None] = {}
    out = {}
    for name, es in epochs.items():
        inputs = upstream_inputs(pipeline, name)
        found: dict[int, float] = {}
        for e in sorted(set(es)):
            try:
                committed = storage.get(name, "output", e).extra.get("committed_at")
            except CorruptDataError:
                continue
            times = []
            for i in inputs:
                if (i, e) not in cut_at:
                    c = pipeline.inputs[i].log.get_cut(e)
                    cut_at[(i, e)] = c.at if c is not None else None
                times.append(cut_at[(i, e)])
            if committed is None or not times or any(t is None for t in times):
                continue
            found[e] = max(0.0, float(committed) - max(t for t in times if t is not None))
        out[name] = Latency(name, found)
    return out
