"""Running a job with unaligned checkpoint barriers, failures and rescaling; the oracle.

Each step a seeded scheduler picks one enabled action: a source subtask
reads the next record of one of its splits; ``agg[j]`` takes the head of
one of its input channels (or, while it has restored in-flight data, that
data first); or the coordinator triggers checkpoint ``k`` (one at a time).

**Barriers** (FLIP-76). On a trigger every source subtask snapshots its
split offsets and puts barrier ``k`` on each output channel. ``agg[j]``
snapshots as soon as barrier ``k`` has *arrived* on some input channel — it
overtakes the records queued before it, which become in-flight data — and,
for an aligned (forward) channel, only once the barrier is at its head
(everything before it consumed). Until it has snapshotted, ``agg[j]`` never
takes a record behind barrier ``k``. Checkpoint ``k`` is complete when every
``agg`` subtask has its snapshot.

A :class:`~falkirk.sim.rescale.job.Rescale` fails the whole job and restarts
it at a new parallelism from the cut :func:`~falkirk.sim.rescale.restore.choose_cut`
picks, redistributed by :func:`~falkirk.sim.rescale.restore.redistribute`.
:func:`check_rescale` compares the output with a failure-free run.

>>> from falkirk.sim.rescale.job import Job, Rescale
>>> job = Job(keyed=[[(k % 5, k) for k in range(12)], [(k % 3, -k) for k in range(9)]],
...           ordered=[[1, 2, 3], [4, 5]])
>>> v = check_rescale(job, 2, [Rescale(15, 3)], seed=4)
>>> v.ok, [(r.old, r.new) for r in v.outcome.restores]
(True, [(2, 3)])
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable
from typing import Any

from attrs import define

from falkirk.sim.external import NoProgress
from falkirk.sim.rescale.job import (
    AggTask,
    Barrier,
    Job,
    Output,
    Rec,
    Rescale,
    SourceTask,
    collect_output,
    split_owner,
)
from falkirk.sim.rescale.keygroups import owner
from falkirk.sim.rescale.restore import Channel, Restored, Snap, choose_cut, redistribute

__all__ = ["RestoreInfo", "Outcome", "RescaleVerdict", "JobRun", "run_job", "check_rescale"]


@define
class RestoreInfo:
    """One restore: when, from which parallelism to which, the checkpoint ids used, the data moved."""

    step: int
    old: int
    new: int
    checkpoints: dict[str, int]
    inflight: dict[str, int]
    filtered: int


@define
class Outcome:
    """The output of a run, its restores and counters."""

    output: Output
    restores: list[RestoreInfo]
    steps: int
    completed: int


class JobRun:
    """One deterministic run of ``job`` (see the module docstring)."""

    def __init__(
        self,
        job: Job,
        parallelism: int,
        *,
        seed: int = 0,
        rescales: Iterable[Rescale] = (),
        strategy: str = "key-groups",
        completed_only: bool = True,
        max_steps: int = 100_000,
    ) -> None:
        self.job, self.strategy, self.completed_only, self.max_steps = (
            job,
            strategy,
            completed_only,
            max_steps,
        )
        self.pending = sorted(rescales, key=lambda r: r.step)
        for par in [parallelism, *(r.parallelism for r in self.pending)]:
            job.check(par)
        self.rng = random.Random(seed)
        self.steps = self.completed_count = 0
        self.next_k = 1
        self.restores: list[RestoreInfo] = []
        self._start(parallelism, None)

    def _start(self, par: int, r: Restored | None) -> None:
        job = self.job
        self.par = par
        self.sources: list[SourceTask] = []
        for kind, splits in (("src", job.keyed), ("fwd", job.ordered)):
            for i in range(par if splits else 0):
                name = f"{kind}{i}"
                own = {s: 0 for s in range(len(splits)) if split_owner(s, par, len(splits)) == i}
                self.sources.append(SourceTask(name, i, kind, r.offsets[name] if r else own))
        self.aggs = [AggTask(f"agg{j}", j) for j in range(par)]
        if r is not None:
            for j, a in enumerate(self.aggs):
                a.keyed, a.ordered, a.restored = r.keyed[j], r.ordered[j], deque(r.restored[j])
        self.channels = [
            Channel(f"src{i}->agg{j}", "src->agg", f"src{i}", f"agg{j}", True)
            for i in range(par if job.keyed else 0)
            for j in range(par)
        ]
        self.channels += [
            Channel(f"fwd{i}->agg{i}", "fwd->agg", f"fwd{i}", f"agg{i}", job.forward != "aligned")
            for i in range(par if job.ordered else 0)
        ]
        self.aligned = {c.name for c in self.channels if not c.logged}
        for c in self.channels:
            a = self.aggs[int(c.dst[3:])]
            a.inputs[c.name], a.consumed[c.name] = deque(), 0
        self.sent = {c.name: 0 for c in self.channels}
        self.logs: dict[str, list[tuple[Any, ...]]] = {c.name: [] for c in self.channels}
        self.snaps: dict[str, list[Snap]] = {s.name: [Snap(0, {}, {}, s.snapshot())] for s in self.sources}
        self.snaps.update({a.name: [Snap(0, {}, {}, a.state())] for a in self.aggs})
        self.in_progress: int | None = None
        self.completed: set[int] = set()

    # -- the loop -----------------------------------------------------------------
    def run(self) -> Outcome:
        """Run to the end (every record read and processed) and return the outcome."""
        while True:
            while self.pending and self.pending[0].step <= self.steps:
                self.rescale(self.pending.pop(0).parallelism)
            self._barriers()
            actions = self.actions()
            if not actions:
                if self.pending:
                    self.rescale(self.pending.pop(0).parallelism)
                    continue
                break
            self.execute(actions[self.rng.randrange(len(actions))])
            self.steps += 1
            if self.steps > self.max_steps:
                raise NoProgress(f"no end after {self.max_steps} steps")
        return Outcome(collect_output(self.aggs), self.restores, self.steps, self.completed_count)

    def actions(self) -> list[tuple[Any, ...]]:
        """Every enabled action, in a deterministic order."""
        out: list[tuple[Any, ...]] = []
        splits = {"src": self.job.keyed, "fwd": self.job.ordered}
        busy = False
        for i, s in enumerate(self.sources):
            for sp, off in s.offsets.items():
                if off < len(splits[s.kind][sp]):
                    out.append(("read", i, sp))
                    busy = True
        if busy and self.in_progress is None:
            out.append(("trigger",))
        first = self.strategy != "unordered"
        for j, a in enumerate(self.aggs):
            if a.restored:
                out.append(("restored", j))
                if first:
                    continue  # no new input may overtake restored in-flight data
            for c, q in a.inputs.items():
                if q and (isinstance(q[0], Rec) or q[0].k <= a.snapped):
                    out.append(("take", j, c))
        return out

    def execute(self, action: tuple[Any, ...]) -> None:
        """Run one action."""
        kind = action[0]
        if kind == "read":
            src, sp = self.sources[action[1]], action[2]
            split = (self.job.keyed if src.kind == "src" else self.job.ordered)[sp]
            rec = split[src.offsets[sp]]
            src.offsets[sp] += 1
            src.reads += 1
            if src.kind == "src":
                payload: tuple[Any, ...] = ("h", sp, rec[0], rec[1])
                dst = owner(rec[0], self.par, self.job.max_parallelism)
            else:
                payload, dst = ("f", sp, rec), src.index
            c = f"{src.name}->agg{dst}"
            self.sent[c] += 1
            self.logs[c].append(payload)
            self.aggs[dst].inputs[c].append(Rec(self.sent[c], payload))
        elif kind == "trigger":
            k = self.in_progress = self.next_k
            self.next_k += 1
            for s in self.sources:
                outs = [c.name for c in self.channels if c.src == s.name]
                self.snaps[s.name].append(
                    Snap(k, {"@input": s.reads}, {c: self.sent[c] for c in outs}, s.snapshot())
                )
                for c in outs:
                    self.aggs[int(c.split("agg")[1])].inputs[c].append(Barrier(k))
        elif kind == "restored":
            a = self.aggs[action[1]]
            a.process(a.restored.popleft())
        else:
            a = self.aggs[action[1]]
            item = a.inputs[action[2]].popleft()
            if isinstance(item, Rec):
                a.consumed[action[2]] += 1
                a.process(item.payload)

    def _barriers(self) -> None:
        """Let every ``agg`` subtask snapshot whose barrier rule is met; complete the checkpoint."""
        k = self.in_progress
        if k is None:
            return
        for a in self.aggs:
            if a.snapped >= k:
                continue
            arrived = any(Barrier(k) in q for q in a.inputs.values())
            aligned = all(q and q[0] == Barrier(k) for c, q in a.inputs.items() if c in self.aligned)
            if arrived and aligned:
                a.snapped = k
                self.snaps[a.name].append(Snap(k, dict(a.consumed), {}, a.state()))
        if all(a.snapped >= k for a in self.aggs):
            self.completed.add(k)
            self.completed_count += 1
            self.in_progress = None

    def rescale(self, m: int) -> None:
        """The whole job fails now and restarts at parallelism ``m``."""
        cut = choose_cut(
            self.snaps, self.channels, self.logs, self.completed, completed_only=self.completed_only
        )
        r = redistribute(self.job, cut, self.channels, self.par, m, self.strategy)
        ids = {n: s.k for n, s in cut.chosen.items()}
        self.restores.append(RestoreInfo(self.steps, self.par, m, ids, r.inflight, r.filtered))
        self._start(m, r)


def run_job(job: Job, parallelism: int, rescales: Iterable[Rescale] = (), **options: Any) -> Outcome:
    """Run ``job`` at ``parallelism`` with ``rescales`` (options of :class:`JobRun`)."""
    return JobRun(job, parallelism, rescales=rescales, **options).run()


@define
class RescaleVerdict:
    """``ok`` when the output equals the failure-free run's; ``problem`` says how it differs."""

    ok: bool
    problem: str
    outcome: Outcome
    reference: Outcome


def _diff(got: Output, want: Output) -> list[str]:
    out = []
    for part in ("keyed", "ordered"):
        g, w = getattr(got, part), getattr(want, part)
        extra = [x for x in g if x not in w]
        missing = [x for x in w if x not in g]
        if extra or missing:
            out.append(f"{part}: got {extra} instead of {missing}")
    return out


def check_rescale(
    job: Job, parallelism: int, rescales: Iterable[Rescale], *, seed: int = 0, **options: Any
) -> RescaleVerdict:
    """Run with ``rescales`` and compare with a failure-free run (another seed) at ``parallelism``."""
    outcome = run_job(job, parallelism, rescales, seed=seed, **options)
    reference = run_job(job, parallelism, seed=seed + 1)
    diffs = _diff(outcome.output, reference.output)
    return RescaleVerdict(not diffs, "; ".join(diffs), outcome, reference)
