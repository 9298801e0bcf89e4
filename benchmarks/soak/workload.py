"""The soak's pipeline — every regime — and its failure-free result, computed in pure Python.

Input ``events`` (keyed by ``user``, 2 partitions; :func:`events` is seeded by the epoch, so any process
regenerates any epoch) feeds:

=========  ==============================================================  ================================
step       regime                                                          edge to its consumers
=========  ==============================================================  ================================
clean      ``Ephemeral()``: the positive amounts                           unlogged (recomputed)
hourly     ``Batch()``: per user, the epoch's sum (reads :data:`BROKEN`)   logged
rolling    ``Lazy(every=3, key=user)``: per user, the sum so far           unlogged
totals     ``Lazy(key=user, incremental=True, snapshot_every=4, log=True)`` logged (``log=True``)
           per user amount and visits; a user past :data:`SETTLE` leaves
           the state (a deleted key)
alerts     ``Eager(database=alerts.sqlite)``: the records of 25 or more    —
report     output of ``rolling``                                           —
ledger     output of ``totals``                                            —
=========  ==============================================================  ================================

:class:`Reference` gives what each output epoch and the ``alerts`` table must hold, as multisets, without
Spark: the independent failure-free reference every committed epoch is compared with.

:data:`BROKEN` is the "code change" fault: a driver started with it set raises inside ``hourly`` on every
epoch (an error in the step's own code: one recovery, then :class:`~falkirk.spark.errors.StepError`); the
fix flips it back. Its value is part of ``hourly``'s fingerprint, so every driver starts with
``code_changes={"hourly": "keep"}`` (nothing the broken code computed was ever published).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["BROKEN", "BROKEN_MESSAGE", "SETTLE", "OUTPUTS", "events", "build", "Reference"]

#: Set by a driver deploying the broken code (see the module docstring).
BROKEN = False
#: What the broken code raises (the supervisor looks for it in the driver's error).
BROKEN_MESSAGE = "soak: the deployed code of hourly is broken (BROKEN is set)"
#: A user whose running amount passes this is settled and leaves ``totals``' state.
SETTLE = 150
#: Records per epoch, users, amounts.
RECORDS, USERS, LOW, HIGH = 20, 30, -3, 30
#: Each output's columns, in the order compared.
OUTPUTS = {"report": ("user", "amount"), "ledger": ("user", "amount", "visits")}


def events(epoch: int) -> list[dict[str, int]]:
    """The input of ``epoch``: :data:`RECORDS` seeded records (some amounts not positive)."""
    rnd = random.Random(7919 * epoch + 17)
    return [{"user": rnd.randrange(USERS), "amount": rnd.randrange(LOW, HIGH)} for _ in range(RECORDS)]


def clean(events: Any) -> Any:
    return events.where("amount > 0").select("user", "amount")


def hourly(clean: Any) -> Any:
    from pyspark.sql import functions as F

    if BROKEN:
        raise ValueError(BROKEN_MESSAGE)
    return clean.groupBy("user").agg(F.sum("amount").alias("amount"))


def rolling(hourly: Any, *, state: Any) -> Any:
    from pyspark.sql import functions as F

    both = hourly if state is None else state.unionByName(hourly)
    new = both.groupBy("user").agg(F.sum("amount").alias("amount"))
    return new, new


def totals(clean: Any, *, state: Any) -> Any:
    from pyspark.sql import functions as F

    now = clean.groupBy("user").agg(F.sum("amount").alias("amount"), F.count("*").alias("visits"))
    both = now if state is None else state.unionByName(now)
    new = both.groupBy("user").agg(F.sum("amount").alias("amount"), F.sum("visits").alias("visits"))
    new = new.where(f"amount <= {SETTLE}")
    return new, new


def alerts(clean: Any, *, db: Any, epoch: int) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS alerts (epoch INTEGER, user INTEGER, amount INTEGER)")
    for r in clean.where("amount >= 25").collect():
        db.execute("INSERT INTO alerts VALUES (?, ?, ?)", (epoch, r["user"], r["amount"]))


def build(root: Path | str, spark: Any, *, database: str = "alerts.sqlite", **options: Any) -> Any:
    """The soak pipeline at ``root`` (``options``: :class:`~falkirk.spark.Pipeline`'s; ``database``: the Eager
    step's, relative to a local root, absolute for an object store's)."""
    from falkirk.spark import Batch, Eager, Ephemeral, Lazy, Pipeline

    pipe = Pipeline(root, spark, **options)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=events)
    pipe.step(clean, regime=Ephemeral())
    pipe.step(hourly, regime=Batch())
    pipe.step(rolling, regime=Lazy(every=3, key="user", partitions=2))
    pipe.step(totals, inputs=["clean"],
              regime=Lazy(key="user", partitions=2, incremental=True, snapshot_every=4, log=True))
    pipe.step(alerts, regime=Eager(database=database, tables={"alerts": "epoch"}))
    pipe.output("report", inputs=["rolling"])
    pipe.output("ledger", inputs=["totals"])
    return pipe


class Reference:
    """The failure-free result, epoch by epoch, computed in pure Python (and memoised)."""

    def __init__(self) -> None:
        self._outputs: dict[str, list[Counter[tuple[int, ...]]]] = {name: [] for name in OUTPUTS}
        self._alerts: list[list[tuple[int, int, int]]] = []
        self._rolling: dict[int, int] = {}
        self._totals: dict[int, tuple[int, int]] = {}

    def _advance(self) -> None:
        epoch = len(self._alerts)
        good = [r for r in events(epoch) if r["amount"] > 0]
        now: dict[int, list[int]] = {}
        for r in good:
            s = now.setdefault(r["user"], [0, 0])
            s[0] += r["amount"]
            s[1] += 1
        for user, (amount, _) in now.items():
            self._rolling[user] = self._rolling.get(user, 0) + amount
        totals = dict(self._totals)
        for user, (amount, visits) in now.items():
            a, v = totals.get(user, (0, 0))
            totals[user] = (a + amount, v + visits)
        self._totals = {u: t for u, t in totals.items() if t[0] <= SETTLE}
        self._outputs["report"].append(Counter((u, a) for u, a in self._rolling.items()))
        self._outputs["ledger"].append(Counter((u, a, v) for u, (a, v) in self._totals.items()))
        self._alerts.append([(epoch, r["user"], r["amount"]) for r in good if r["amount"] >= 25])

    def output(self, name: str, epoch: int) -> Counter[tuple[int, ...]]:
        """The rows output ``name`` commits for ``epoch``, as a multiset of tuples of :data:`OUTPUTS` columns."""
        while len(self._alerts) <= epoch:
            self._advance()
        return self._outputs[name][epoch]

    def alerts(self, upto: int) -> Counter[tuple[int, int, int]]:
        """The rows of the ``alerts`` table once epochs ``0..upto`` committed."""
        if upto >= 0:
            self.output("report", upto)
        return Counter(row for rows in self._alerts[: upto + 1] for row in rows)

    def rows(self, upto: int) -> Iterator[int]:
        """Rows per epoch of every output, ``0..upto`` (for the report)."""
        for e in range(upto + 1):
            yield sum(sum(self.output(name, e).values()) for name in OUTPUTS)
