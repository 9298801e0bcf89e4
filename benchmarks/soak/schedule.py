"""The seeded fault schedule: which fault, at which epoch, in which driver slice.

A soak of ``epochs`` epochs is cut into **slices**, each run by one driver process (restarted as often as its
faults kill it) from where the root stands to the slice's last epoch. Faults are drawn by a
``random.Random(seed)``, about one every :data:`EVERY` epochs, kinds weighted by :data:`WEIGHTS` (per
variant: the cluster adds executor and worker kills, S3 the storage server and its credentials); with
probability :data:`OVERLAP` a second fault is drawn at the same epoch (overlapping faults: a Ctrl-C during a
full disk, a kill during the recovery from a damaged file…). The same seed always gives the same schedule.

=================  ======  =========================================================================
kind               where   what
=================  ======  =========================================================================
exception-mid      driver  ``STEP@E:mid``: the step raises after writing its data, before publishing
exception-before   driver  ``STEP@E:before``
job-failure        driver  ``STEP@E:job``: every attempt of every task with a row fails (a failed Spark job)
task-failure       driver  ``STEP@E:task``: the first task attempt with a row fails, Spark retries it
after              driver  ``STEP@E:after``: between epochs
kill-step          driver  ``STEP@E:kill`` / ``kill-mid``: SIGKILL of the driver before / mid-step
kill-publish       driver  SIGKILL right after ``STEP``'s manifest of ``E`` was published
kill-gc            driver  SIGKILL inside the garbage collection of epoch ``E``, after ``k`` deletions
kill-timed         outside SIGKILL at a random moment after epoch ``E - 1`` ended (timed faults are never on
                           a slice's last epoch, which could end before the moment came)
kill-recovery      outside SIGKILL of the driver restarted after a kill, during its restart recovery
ctrl-c             outside SIGINT at a random moment after epoch ``E - 1`` ended
code-change        outside ``hourly``'s code deployed broken at ``E`` (it raises; ``StepError``) for
                           ``n`` driver starts, then fixed
corrupt            outside one file damaged (as the corruption fuzz does) while no driver runs
disk-full          outside (local, cluster) the root's filesystem filled after epoch ``E - 1``, freed after
                           ``seconds`` or when the driver stopped
read-only          outside (local, cluster) a driver started with the root bind-mounted read-only in a
                           mount namespace of its own (a filesystem with open writers cannot be remounted
                           read-only under them)
executor-kill      driver  (cluster) ``STEP@E:executor``: the executor JVM holding the most blocks
worker-kill        outside (cluster) a Worker JVM SIGKILLed after epoch ``E - 1``, restarted later
server-restart     outside (S3) the storage server stopped after epoch ``E - 1``, started after ``seconds``
read-only-creds    outside (S3) a driver started with read-only credentials (a permission error)
=================  ======  =========================================================================
"""

from __future__ import annotations

import random
from typing import Any

from attrs import field, frozen

__all__ = ["Fault", "Slice", "schedule", "WEIGHTS", "DRIVER_KINDS", "TIMED_KINDS"]

#: One fault every EVERY epochs on average; OVERLAP: chance of a second one at the same epoch.
EVERY, OVERLAP = 7, 0.25
#: Steps the in-driver injections pick from (inputs and outputs included).
STEPS = ("events", "clean", "hourly", "rolling", "totals", "alerts", "report", "ledger")
COMMON = {"exception-mid": 4, "exception-before": 2, "job-failure": 2, "task-failure": 1, "after": 1,
          "kill-step": 3, "kill-publish": 2, "kill-gc": 2, "kill-timed": 3, "kill-recovery": 1, "ctrl-c": 2,
          "code-change": 1, "corrupt": 3}
WEIGHTS: dict[str, dict[str, int]] = {
    "local": {**COMMON, "disk-full": 1, "read-only": 1},
    "cluster": {**COMMON, "disk-full": 1, "read-only": 1, "executor-kill": 2, "worker-kill": 2},
    "s3": {**COMMON, "server-restart": 2, "read-only-creds": 1},
}
#: Faults done from outside at a moment measured from the driver's progress (the supervisor's clock).
TIMED_KINDS = ("kill-timed", "ctrl-c", "disk-full", "worker-kill", "server-restart")
#: Faults the driver fires itself (its injector or hooks); the others are done from outside.
DRIVER_KINDS = ("exception-mid", "exception-before", "job-failure", "task-failure", "after", "kill-step",
                "kill-publish", "kill-gc", "executor-kill")
#: The damage kinds of a ``corrupt`` fault (``faults.damage``).
DAMAGE = ("data-delete", "data-truncate", "data-flip", "manifest-delete", "manifest-garbage", "manifest-size",
          "meta-delete", "segment-delete", "segment-truncate", "cut-delete", "cut-garbage", "pipeline-json",
          "database-delete", "output-delete", "journal-garbage")


@frozen
class Fault:
    """One scheduled fault: ``id`` (its place in the schedule), ``kind``, ``epoch``, kind-specific ``params``."""

    id: int
    kind: str
    epoch: int
    params: dict[str, Any] = field(factory=dict)

    def injection(self) -> str | None:
        """The ``STEP@E:WHERE`` of an injector fault (``None`` for the others)."""
        where = {"exception-mid": "mid", "exception-before": "before", "job-failure": "job", "task-failure": "task",
                 "after": "after", "executor-kill": "executor"}.get(self.kind)
        if self.kind == "kill-step":
            where = self.params["where"]
        return f"{self.params['step']}@{self.epoch}:{where}" if where else None

    def describe(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"#{self.id} {self.kind}@{self.epoch}" + (f" ({extra})" if extra else "")


@frozen
class Slice:
    """Epochs ``start..end`` (inclusive) run by one driver (restarted after each fault that stops it)."""

    index: int
    start: int
    end: int
    faults: tuple[Fault, ...]
    concurrency: int = 1


def _params(kind: str, rnd: random.Random, variant: str) -> dict[str, Any]:
    if kind in ("exception-mid", "exception-before", "job-failure", "after"):
        return {"step": rnd.choice(STEPS[1:])}
    if kind == "task-failure":
        return {"step": rnd.choice(("clean", "hourly", "rolling", "totals", "report", "ledger"))}
    if kind == "executor-kill":
        return {"step": rnd.choice(("hourly", "rolling", "totals", "report"))}
    if kind == "kill-step":
        return {"step": rnd.choice(STEPS), "where": rnd.choice(("kill", "kill-mid"))}
    if kind == "kill-publish":
        return {"step": rnd.choice(("hourly", "rolling", "totals", "alerts", "report", "ledger", "clean"))}
    if kind == "kill-gc":
        return {"deletes": rnd.randint(1, 6)}
    if kind in ("kill-timed", "ctrl-c"):
        return {"delay": round(rnd.uniform(0.0, 1.0), 3)}  # in epoch times after the epoch's end
    if kind == "kill-recovery":
        return {"delay": round(rnd.uniform(0.3, 1.0), 3)}  # fraction of the driver's start-up seen so far
    if kind == "code-change":
        return {"starts": rnd.randint(1, 2)}
    if kind == "corrupt":
        return {"damage": rnd.choice(DAMAGE), "pick": rnd.randrange(1 << 30)}
    if kind in ("disk-full", "server-restart"):
        return {"seconds": rnd.randint(2, 30)}
    if kind == "worker-kill":
        return {"worker": rnd.randrange(2), "seconds": rnd.randint(5, 60)}
    return {}


def schedule(epochs: int, seed: int, variant: str = "local", *, quiet: int = 3, every: float = EVERY,
             slice_epochs: tuple[int, int] = (10, 120), concurrency: tuple[int, ...] = (1, 2)) -> list[Slice]:
    """The slices of a soak of ``epochs`` epochs: faults from epoch ``quiet`` on (a driver's first epochs build
    the state the faults then meet), slice lengths uniform in ``slice_epochs``, each slice's concurrency drawn
    from ``concurrency``."""
    rnd = random.Random(seed)
    weights = WEIGHTS[variant]
    kinds, w = list(weights), list(weights.values())
    faults: list[Fault] = []
    e = quiet
    while True:
        e += max(1, round(rnd.expovariate(1 / every)))
        if e >= epochs - 1:
            break
        for _ in range(2 if rnd.random() < OVERLAP else 1):
            kind = rnd.choices(kinds, w)[0]
            faults.append(Fault(len(faults), kind, e, _params(kind, rnd, variant)))
    slices: list[Slice] = []
    start = 0
    while start < epochs:
        end = min(epochs - 1, start + rnd.randint(*slice_epochs) - 1)
        while end < epochs - 1 and any(f.epoch == end and f.kind in TIMED_KINDS for f in faults):
            end += 1  # a timed fault needs a driver still running after its epoch: never a slice's last epoch
        mine = tuple(f for f in faults if start <= f.epoch <= end)
        slices.append(Slice(len(slices), start, end, mine, rnd.choice(concurrency)))
        start = end + 1
    return slices
