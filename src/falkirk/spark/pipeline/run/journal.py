"""What happened during a run: every step execution and every recovery, with measurements.

The executor appends to a :class:`Journal`; :mod:`falkirk.spark.pipeline.tools.report` turns
it into the recovery report. Row counts are measured per (step, epoch) when
a step materialises its output, so the cost of alternative recovery schemes
can be computed from the same run.

With a root (a durable run), every execution is also recorded under it,
``journal/<step>/<epoch>.json`` (the latest execution of that epoch, replaced
atomically; advisory, never needed to recover). A restarted driver reads
them back (:meth:`Journal.load`): it knows each step's highest completed
epoch — also the epochs a Lazy step completed after its last checkpoint — so
what it executes again is counted as recomputation, and the measurements of
the earlier driver's executions price the report's alternatives.

In memory, a long run keeps the last :attr:`Journal.HISTORY` epochs' executions and what its
recoveries' reports price (:meth:`Journal.trim`), not its whole history.

A recovery's wall time is kept by phase (:meth:`Recovery.phases`):

* **session start** — a restart only: the seconds
  :func:`~falkirk.spark.pipeline.run.session.local_session` took to start the
  driver's SparkSession (``None`` when the caller built the session, or it
  was already running);
* **metadata rebuild** — a restart: the executor's construction (``pipeline.json``,
  the monitor rebuilt from the manifests, every step's restore points, the
  execution records); every recovery: planning;
* **validation** — the storage probe (a restart on a cluster) and every
  restore point, logged epoch, input epoch and (a restart) output epoch the
  plan needs, checked against its manifest;
* **replay/recompute** — from the plan's application (state restored,
  queues rebuilt from the logs) until every step is back where it was when
  the failure was detected;
* **catch-up** — then until every step has completed the furthest epoch any
  step had completed (the epoch in flight at the failure, finished).

>>> j = Journal()
>>> j.executed("cc", 0, rows=10, seconds=0.5, redo=False)
>>> j.executed("cc", 0, rows=10, seconds=0.4, redo=True)
>>> j.rows("cc", 0), j.seconds("cc", 0), len(j.executions)
(10, 0.5, 2)
"""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import asdict, define, evolve, field, frozen

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.rootfs import Root

__all__ = ["Execution", "Recovery", "Startup", "Journal", "PHASES"]

#: The phases of a recovery's wall time, in order (:meth:`Recovery.phases`).
PHASES = ("session start", "metadata rebuild", "validation", "replay/recompute", "catch-up")


@define
class Execution:
    """One run of ``step`` on ``epoch``; ``redo``: it had completed that epoch before (recomputation).

    ``seconds`` is wall time; ``cpu`` the CPU seconds of the driver's process
    tree meanwhile where that is the whole job (a ``local`` master,
    :mod:`~falkirk.spark.pipeline.run.cpu`), else ``None``. ``fresh``: the
    step's output was a frame of its own, first computed by the step's own
    job (a log's write is then that job: the regime advisor prices such a
    log as a write less a count); ``None``: not known. ``jit``: how much of
    ``cpu`` the JVM's JIT compilers spent (a warm-up cost,
    :mod:`~falkirk.spark.pipeline.run.cpu`), where ``cpu`` is measured.
    """

    step: str
    epoch: int
    rows: int
    seconds: float
    redo: bool
    recovery: int | None = None
    jobs: int = 0
    cpu: float | None = None
    fresh: bool | None = None
    jit: float | None = None
    #: an output epoch committed before a rollback: kept as it was, what was sent again dropped (nothing
    #: computed)
    discarded: bool = False
    #: when it began (``time.perf_counter``; with ``seconds``, its interval: executions of a concurrent run
    #: overlap)
    started: float | None = None
    #: of ``seconds``, ``cpu`` and ``jit``: what the work it left to the epoch's end cost (its new state made,
    #: and checkpointed, :meth:`Journal.add_cost`), done after the step's execution ended
    later_seconds: float = 0.0
    later_cpu: float | None = None
    later_jit: float | None = None

    @property
    def cpu_less_jit(self) -> float | None:
        """``cpu`` less the JIT compilers' share: what the regime advisor prices (``None`` where not
        measured)."""
        return None if self.cpu is None else max(0.0, self.cpu - (self.jit or 0.0))


@frozen
class Startup:
    """What a restarted driver spent before its recovery was planned (see the module docstring).

    ``began``: when the executor's construction began (``time.perf_counter``);
    ``session_seconds``: the SparkSession's start (``None``: not measured);
    ``probe_seconds``: the storage probe (counted as validation). The rest,
    until planning begins, is the metadata rebuild.
    """

    began: float
    session_seconds: float | None
    probe_seconds: float = 0.0


@define
class Recovery:
    """One failure and what falkirk did about it.

    ``done_at_failure`` is each step's last completed epoch when the failure
    was detected; ``available_at_failure`` its persisted frontiers then
    (checkpoints of stateful steps), for the global-rollback comparison.
    ``started`` is when the failure was detected (a restart: when the executor
    began to be built), ``validated`` when the plan was known to be executable,
    ``finished`` when every step was back where it had been and ``caught_up``
    when every step had completed :attr:`in_flight`.
    """

    index: int
    cause: str
    failed: tuple[str, ...]
    done_at_failure: dict[str, int]
    available_at_failure: dict[str, list[int]]
    restart: bool = False
    plan: Any = None
    started: float = field(factory=time.perf_counter)
    plan_seconds: float = 0.0
    finished: float | None = None
    session_seconds: float | None = None
    rebuild_seconds: float = 0.0
    validation_seconds: float = 0.0
    validated: float | None = None
    caught_up: float | None = None
    #: CPU of the process tree when the failure was detected (a restart: when its session was up, the JVM's
    #: start left out), and from then until :attr:`finished` (on a ``local`` master,
    #: :mod:`~falkirk.spark.pipeline.run.cpu`; else ``None``)
    cpu_started: float | None = None
    cpu_seconds: float | None = None
    #: of those, the JVM's JIT compilers' (at the start, and meanwhile)
    jit_started: float | None = None
    jit_seconds: float | None = None
    problems: list[str] = field(factory=list)
    replayed: dict[str, tuple[int, int]] = field(factory=dict)  # edge -> (first, last) epoch replayed
    rescaled: dict[str, tuple[int, int]] = field(factory=dict)  # step -> (old, new) partitions of keyed state
    #: output -> its committed epochs above its frontier, kept (final): what was sent again for them was
    #: discarded
    discarded: dict[str, list[int]] = field(factory=dict)
    planner: str = ""
    #: each step's first measurements (rows, seconds) summed over its epochs before :attr:`base`, taken when
    #: the recovery was recorded (:meth:`Journal.recovered`); with the kept measurements from :attr:`base`
    #: on, the report's replay from the start once the run has forgotten its oldest epochs
    #: (:meth:`Journal.trim`)
    totals: dict[str, tuple[int, float]] | None = None
    base: int = 0
    #: a restart: output -> the epoch below which its committed epochs were only sampled
    #: (:attr:`Rollback.SCRUB <falkirk.spark.pipeline.run.recovery.Rollback.SCRUB>` of them checked)
    sampled: dict[str, int] = field(factory=dict)
    #: a retry in place: the (step, epoch) whose Spark job failed and that ran the epoch again at once, nothing
    #: rolled back (:meth:`Executor._in_place <falkirk.spark.pipeline.run.executor.Executor._in_place>`)
    in_place: tuple[str, int] | None = None

    @property
    def cpu_less_jit(self) -> float | None:
        """:attr:`cpu_seconds` less the JIT compilers' share (``None`` where not measured)."""
        return None if self.cpu_seconds is None else max(0.0, self.cpu_seconds - (self.jit_seconds or 0.0))

    @property
    def seconds(self) -> float | None:
        """Wall time from detection until every step was back where it had been (``None``: not yet)."""
        return None if self.finished is None else self.finished - self.started

    @property
    def in_flight(self) -> int:
        """The furthest epoch any step had completed at the failure (its catch-up ends when every step
        has); a retry in place: at least its epoch."""
        retried = [self.in_place[1]] if self.in_place is not None else []
        return max([*self.done_at_failure.values(), *retried], default=-1)

    def back(self, done: Mapping[str, int]) -> bool:
        """Whether, with each step's last completed epoch ``done``, every step is back where it was at the
        failure (a retry in place: and its step completed the epoch it retried)."""
        if self.in_place is not None and done[self.in_place[0]] < self.in_place[1]:
            return False
        return all(done[n] >= d for n, d in self.done_at_failure.items())

    def phases(self) -> dict[str, float | None]:
        """The recovery's wall time by phase (:data:`PHASES`, see the module docstring); ``None``: not
        measured or not reached.

        >>> r = Recovery(1, "cc failed", ("cc",), {"cc": 3, "answer": 4}, {}, started=10.0, plan_seconds=0.5,
        ...              rebuild_seconds=0.5, validation_seconds=1.0, validated=11.5, finished=14.0, caught_up=15.0)
        >>> r.phases()
        {'session start': None, 'metadata rebuild': 0.5, 'validation': 1.0, 'replay/recompute': 2.5, 'catch-up': 1.0}
        """
        replay = None if self.finished is None or self.validated is None else self.finished - self.validated
        catch = None if self.caught_up is None or self.finished is None else self.caught_up - self.finished
        return dict(
            zip(
                PHASES,
                (self.session_seconds, self.rebuild_seconds, self.validation_seconds, replay, catch),
                strict=True,
            )
        )

    def started_up(self, startup: Startup, planning: float) -> None:
        """A restart: count what the new driver spent from ``startup`` until ``planning`` began (a
        timestamp)."""
        self.started = startup.began
        self.session_seconds = startup.session_seconds
        self.rebuild_seconds += planning - startup.began - startup.probe_seconds
        self.validation_seconds += startup.probe_seconds


class Journal:
    """Executions, recoveries and notes of one run (see the module docstring); ``root``: record executions
    there."""

    #: the newest records kept per step by :meth:`collect` (beyond what the retained epochs need)
    KEEP = 32
    #: epochs of history kept in memory (:meth:`trim`): executions and first measurements of older epochs
    #: are forgotten, except what a recorded recovery's report prices
    HISTORY = 1000
    #: notes kept in memory: the newest
    NOTES = 1000

    def __init__(self, root: Root | None = None) -> None:
        self.root = root
        self.executions: list[Execution] = []
        self.recoveries: list[Recovery] = []
        self.notes: list[str] = []
        self._first: dict[tuple[str, int], Execution] = {}
        self._earlier: dict[tuple[str, int], Execution] = {}  # recorded under the root by earlier drivers
        self._at: dict[int, list[Execution]] = {}  # executions by epoch (kept ones)
        #: epochs below it were forgotten by :meth:`trim` (0: nothing was)
        self.kept_from = 0
        #: notes forgotten by :meth:`trim` (the oldest)
        self.notes_dropped = 0
        self._pins: list[tuple[int, int]] = []  # epochs recoveries' reports price: sorted, disjoint (lo, hi)
        self._steps: set[str] = set()  # the steps measured (trim)
        #: each step's first measurements (rows, seconds) of the epochs :meth:`trim` forgot, summed
        self._folded: dict[str, tuple[int, float]] = {}

    @staticmethod
    def _dir(step: str) -> str:
        return f"journal/{step}"

    def executed(
        self,
        step: str,
        epoch: int,
        *,
        rows: int,
        seconds: float,
        redo: bool,
        recovery: int | None = None,
        jobs: int = 0,
        cpu: float | None = None,
        fresh: bool | None = None,
        jit: float | None = None,
        discarded: bool = False,
        started: float | None = None,
    ) -> None:
        """Record an execution (the first one of each (step, epoch) is the reference measurement)."""
        ex = Execution(step, epoch, rows, seconds, redo, recovery, jobs, cpu, fresh, jit, discarded, started)
        self.executions.append(ex)
        self._at.setdefault(epoch, []).append(ex)
        # nothing was computed: not a measurement of the epoch (the record under the root stays)
        if discarded:
            return
        self._steps.add(step)
        first = self._first.setdefault((step, epoch), ex)
        # the first record did not know its rows (a fused step whose consumer failed)
        if first.rows < 0 <= rows:
            self._first[(step, epoch)] = ex
        self._write(ex)

    def add_cost(
        self, step: str, epoch: int, seconds: float, cpu: float | None, jit: float | None = None
    ) -> None:
        """Add to the newest execution of ``step`` at ``epoch`` the cost of work it left to later (its new
        state made, and checkpointed, at the end of the epoch, :meth:`Steps.write_checkpoints
        <falkirk.spark.pipeline.run.steps.Steps.write_checkpoints>`): its seconds, its CPU where both are
        measured and the JIT's share of it; the same kept apart as ``later_*`` (that work is done after the
        execution, e.g. after a later step failed)."""
        at = self._at.get(epoch, [])
        for i in range(len(at) - 1, -1, -1):
            ex = at[i]
            if ex.step == step:
                break
        else:
            return

        def plus(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        more = evolve(
            ex,
            seconds=ex.seconds + seconds,
            cpu=plus(ex.cpu, cpu),
            jit=ex.jit if ex.jit is None or jit is None else ex.jit + jit,
            later_seconds=ex.later_seconds + seconds,
            # the first work left to later: its measurement; then both or nothing (None: not measured)
            later_cpu=cpu if ex.later_seconds == 0 else plus(ex.later_cpu, cpu),
            later_jit=jit if ex.later_seconds == 0 else plus(ex.later_jit, jit),
        )
        at[i] = more
        for i in range(len(self.executions) - 1, -1, -1):  # it is among the newest
            if self.executions[i] is ex:
                self.executions[i] = more
                break
        if self._first.get((step, epoch)) is ex:
            self._first[(step, epoch)] = more
        if not ex.discarded:
            self._write(more)

    def _write(self, ex: Execution) -> None:
        """Record ``ex`` under the root (the step's epoch's record, with the first execution's measurements)."""
        step, epoch = ex.step, ex.epoch
        if self.root is not None:
            doc = {
                **asdict(ex),
                "first_seconds": self.seconds(step, epoch),
                "first_cpu": self.cpu(step, epoch),
                "first_jit": self.jit(step, epoch),
            }
            # to the microsecond: differences of a long-lived process's CPU and clock counters carry rounding
            # noise that grows with the counters (1.44 became 1.4400000000000048), and so did every record — by
            # ~60 bytes over the S3 soak's 300 epochs
            doc = {k: round(v, 6) if isinstance(v, float) else v for k, v in doc.items()}
            self.root.replace(f"{self._dir(step)}/{epoch:08d}.json", json.dumps(doc, sort_keys=True).encode())

    def load(self, steps: Iterable[str]) -> dict[str, int]:
        """Read the executions recorded under the root; each step's highest recorded epoch (``-1``: none)."""
        high = {}
        for step in steps:
            high[step] = -1
            if self.root is None:
                continue
            for name in self.root.listdir(self._dir(step)):
                if not (name.endswith(".json") and name[:-5].isdigit()):
                    continue
                try:
                    doc = json.loads(self.root.read_bytes(f"{self._dir(step)}/{name}"))
                    first_cpu, first_jit = doc.get("first_cpu"), doc.get("first_jit")
                    ex = Execution(
                        step,
                        int(doc["epoch"]),
                        int(doc["rows"]),
                        float(doc.get("first_seconds") or doc["seconds"]),
                        bool(doc["redo"]),
                        None,
                        int(doc.get("jobs", 0)),
                        None if first_cpu is None else float(first_cpu),
                        None,
                        None if first_jit is None else float(first_jit),
                    )
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # advisory: a damaged record only costs a measurement
                self._earlier[(step, ex.epoch)] = ex
                high[step] = max(high[step], ex.epoch)
        return high

    def collect(self, step: str, below: int) -> None:
        """Delete ``step``'s records of epochs below ``below``, keeping at least the newest :attr:`KEEP`."""
        if self.root is None:
            return
        names = sorted(
            n for n in self.root.listdir(self._dir(step)) if n.endswith(".json") and n[:-5].isdigit()
        )
        for name in names[: -self.KEEP]:
            if int(name[:-5]) < below:
                self.root.delete(f"{self._dir(step)}/{name}")
                self._earlier.pop((step, int(name[:-5])), None)

    def at(self, epoch: int) -> list[Execution]:
        """The executions of ``epoch`` (in the order recorded), while it is kept (:meth:`trim`)."""
        return list(self._at.get(epoch, ()))

    def recovered(self, rec: Recovery, first: int) -> None:
        """Record ``rec``, whose report prices the measurements of epochs from ``first`` (what it executed
        again and replayed, and the global rollback's epochs after the last common checkpoint) up to its
        failure: :meth:`trim` keeps them. The epochs before, which every step had completed and no recovery
        measures again, are summed per step now (:attr:`Recovery.totals`, the replay from the start)."""
        self.recoveries.append(rec)
        done = rec.done_at_failure
        # the epoch a step completed last may still be measured (its state made at the epoch's end, a fused
        # step's count), and one it had not completed is measured later
        first = max(0, min(first, min(done.values(), default=0)))
        last = max([*done.values(), *(hi for _, hi in rec.replayed.values())], default=-1)
        # below kept_from, what was forgotten stays so: a re-execution there prices only what it redid
        rec.base = max(first, self.kept_from)
        # the sums: of what was forgotten, of what earlier recoveries kept below kept_from, of the rest
        kept = [e for lo, hi in self._pins for e in range(lo, min(hi + 1, self.kept_from))]
        totals = {}
        for step, d in done.items():
            rows, seconds = self._folded.get(step, (0, 0.0))
            for e in [*kept, *range(self.kept_from, rec.base)]:
                ex = self._measured(step, e) if e <= d else None
                if ex is not None:
                    rows, seconds = rows + max(ex.rows, 0), seconds + ex.seconds
            totals[step] = (rows, seconds)
        rec.totals = totals
        if rec.base <= last:
            self._pin(rec.base, last)

    def _pin(self, lo: int, hi: int) -> None:
        """Keep epochs ``lo..hi`` (merged into the sorted, disjoint pinned intervals)."""
        pins = self._pins
        i = bisect.bisect_left(pins, (lo, lo))
        if i and pins[i - 1][1] >= lo - 1:
            i -= 1
        j = i
        while j < len(pins) and pins[j][0] <= hi + 1:
            lo, hi = min(lo, pins[j][0]), max(hi, pins[j][1])
            j += 1
        pins[i:j] = [(lo, hi)]

    def _pinned(self, epoch: int) -> bool:
        i = bisect.bisect_right(self._pins, epoch, key=lambda pin: pin[0]) - 1
        return i >= 0 and self._pins[i][1] >= epoch

    def trim(self, newest: int) -> int | None:
        """Forget in memory what belongs to epochs older than the last :attr:`HISTORY` up to ``newest``:
        executions of no recovery, first measurements (summed per step, for the reports' replay from the
        start) except those a recorded recovery's report prices, and notes beyond the newest :attr:`NOTES`.
        Acts every ``HISTORY // 10`` epochs, on the epochs that left the window since: its cost does not
        grow with the run. Returns the first epoch kept when it acted, else ``None``. The records under the
        root are not touched (:meth:`collect` deletes those)."""
        if len(self.notes) > 2 * self.NOTES:
            drop = len(self.notes) - self.NOTES
            self.notes_dropped += drop
            del self.notes[:drop]
        keep = newest - self.HISTORY + 1
        if keep < self.kept_from + max(1, self.HISTORY // 10):
            return None
        if not self.kept_from:  # the first time: also what earlier drivers recorded below the window
            steps = {k[0] for k in self._first} | {k[0] for k in self._earlier}
            span = range(min((k[1] for k in [*self._first, *self._earlier]), default=0), keep)
        else:
            steps, span = self._steps, range(self.kept_from, keep)
        for e in span:
            if self._pinned(e):
                continue
            for step in steps:
                ex = self._measured(step, e)
                if ex is None:
                    continue
                rows, seconds = self._folded.get(step, (0, 0.0))
                self._folded[step] = (rows + max(ex.rows, 0), seconds + ex.seconds)
                self._first.pop((step, e), None)
                self._earlier.pop((step, e), None)
        self._steps |= steps
        self.executions = [x for x in self.executions if x.epoch >= keep or x.recovery is not None]
        for e in [e for e in self._at if e < keep]:
            del self._at[e]
        self.kept_from = keep
        return keep

    def _measured(self, step: str, epoch: int) -> Execution | None:
        return self._first.get((step, epoch)) or self._earlier.get((step, epoch))

    def rows(self, step: str, epoch: int) -> int | None:
        """Output rows of ``step`` at ``epoch`` (first measurement, in this run or an earlier driver's)."""
        ex = self._measured(step, epoch)
        return None if ex is None or ex.rows < 0 else ex.rows

    def seconds(self, step: str, epoch: int) -> float | None:
        """Wall time of the first execution of ``step`` at ``epoch`` (in this run or an earlier driver's)."""
        ex = self._measured(step, epoch)
        return None if ex is None else ex.seconds

    def cpu(self, step: str, epoch: int, *, jit: bool = True) -> float | None:
        """CPU seconds of the first execution of ``step`` at ``epoch``, where measured (see
        :class:`Execution`); ``jit=False``: less the JIT compilers' share."""
        ex = self._measured(step, epoch)
        return None if ex is None else ex.cpu if jit else ex.cpu_less_jit

    def jit(self, step: str, epoch: int) -> float | None:
        """Of :meth:`cpu`, the seconds the JVM's JIT compilers spent, where measured (see
        :class:`Execution`)."""
        ex = self._measured(step, epoch)
        return None if ex is None else ex.jit

    def open_recoveries(self) -> list[Recovery]:
        """Recoveries whose steps have not all caught up yet."""
        return [r for r in self.recoveries if r.finished is None]

    def progressed(self, done: Mapping[str, int], cpu: tuple[float, float] | None) -> list[Recovery]:
        """After a step execution (``done``: each step's last completed epoch; ``cpu``: the process tree's CPU
        and its JIT compilers', where measured): the open recoveries now finished — every step back where it
        was — are stamped and returned; those whose steps all completed their :attr:`Recovery.in_flight` epoch
        are caught up."""
        now = time.perf_counter()
        finished = []
        for r in self.open_recoveries():
            if r.back(done):
                r.finished = now
                if r.cpu_started is not None and cpu is not None:
                    r.cpu_seconds = max(0.0, cpu[0] - r.cpu_started)
                    if r.jit_started is not None:
                        r.jit_seconds = min(r.cpu_seconds, max(0.0, cpu[1] - r.jit_started))
                finished.append(r)
        for r in self.recoveries:
            if (
                r.finished is not None
                and r.caught_up is None
                and all(d >= r.in_flight for d in done.values())
            ):
                r.caught_up = now
        return finished

    def note(self, text: str) -> None:
        """Record a remark for the report (e.g. task failures Spark retried on its own)."""
        self.notes.append(text)
