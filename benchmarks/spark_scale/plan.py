"""What is measured: the workloads, their sizes, each size's memory, and the configurations of both systems.

A **point** is one workload at one size (``n``: events per epoch, or keys of state) and, for the keyed
workloads, one churn (the fraction of the keys the input updates per epoch). Every point runs every
configuration of its workload (:func:`configurations`) in ``--drivers`` rounds, round-robin.

>>> [p.id for p in points("smoke", ["W2"])]
['W2-n200-c0.2', 'W2-n2000-c0.2']
>>> memory(point("W2", 10**7, 0.01))
{'spark.driver.memory': '12g', 'spark.executor.memory': '12g'}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

#: the workloads, in the order they run: two event streams (n = events per epoch), two keyed shapes (n = keys)
WORKLOADS = ("flagship", "ysb", "W2", "W3")
EVENTS = ("flagship", "ysb")

#: sizes per plan: ``n`` values, churns (keyed), epochs and the epoch the failures strike
PLANS: dict[str, dict[str, dict[str, Any]]] = {
    # the suite's smoke test and a first look: tiny, seconds per driver
    "smoke": {"flagship": {"n": [200, 2000], "epochs": 5, "crash": 3},
              "ysb": {"n": [500, 5000], "epochs": 5, "crash": 3},
              "W2": {"n": [200, 2000], "churn": [0.2], "epochs": 5, "crash": 3},
              "W3": {"n": [200, 2000], "churn": [0.2], "epochs": 5, "crash": 3}},
    # provisional numbers on a busy machine: 100x on every axis, short runs
    "quick": {"flagship": {"n": [10**4, 10**5, 10**6], "epochs": 6, "crash": 4},
              "ysb": {"n": [10**4, 10**5, 10**6], "epochs": 6, "crash": 4},
              "W2": {"n": [10**4, 10**5, 10**6], "churn": [0.01, 0.2], "epochs": 7, "crash": 5},
              "W3": {"n": [10**4, 10**5, 10**6], "churn": [0.01, 0.2], "epochs": 7, "crash": 5}},
    # the grid: 10^4 -> 10^6 events per epoch, 10^4 -> 10^7 keys at 1 % and 20 % churn
    "full": {"flagship": {"n": [10**4, 10**5, 10**6], "epochs": 10, "crash": 7},
             "ysb": {"n": [10**4, 10**5, 10**6], "epochs": 10, "crash": 7},
             "W2": {"n": [10**4, 10**5, 10**6, 10**7], "churn": [0.01, 0.2], "epochs": 10, "crash": 7},
             "W3": {"n": [10**4, 10**5, 10**6, 10**7], "churn": [0.01, 0.2], "epochs": 10, "crash": 7}},
}


@attrs.frozen
class Point:
    """One workload at one size: ``n`` (events per epoch, or keys), ``churn`` (keyed: keys updated per epoch)."""

    workload: str
    n: int
    churn: float | None
    epochs: int
    crash: int

    @property
    def id(self) -> str:
        return f"{self.workload}-n{self.n}" + (f"-c{self.churn:g}" if self.churn is not None else "")

    @property
    def size(self) -> dict[str, Any]:
        """The size in the form the matrix's workload modules take."""
        if self.workload in EVENTS:
            return {"events": self.n, "epochs": self.epochs, "crash": self.crash}
        return {"keys": self.n, "churn": self.churn, "epochs": self.epochs, "crash": self.crash}


def point(workload: str, n: int, churn: float | None = None, epochs: int = 10, crash: int = 7) -> Point:
    return Point(workload, n, churn, epochs, crash)


def points(plan: str, workloads: Iterable[str]) -> list[Point]:
    """Every point of ``plan`` for ``workloads``, smallest first (a size's failure shows before the larger ones run)."""
    out = []
    for w in workloads:
        grid = PLANS[plan][w]
        for churn in grid.get("churn", [None]):
            out += [Point(w, n, churn, grid["epochs"], grid["crash"]) for n in grid["n"]]
    return sorted(out, key=lambda p: (p.n, WORKLOADS.index(p.workload), p.churn or 0))


def memory(p: Point) -> dict[str, str]:
    """The driver's (and, on a cluster, each executor's) memory for point ``p``: on a ``local`` master the executor
    is the driver's JVM, so ``spark.driver.memory`` is what the state, the shuffles and the cached blocks share.

    Keyed state: falkirk holds the state in executor memory twice during an epoch (the previous and the new
    state; as deserialized rows, about 80 bytes per key of W2's three longs, until the state was held in column
    batches, a few bytes per key), and an incremental delta shuffles both (the sizes were set then and kept);
    the stream keeps RocksDB's memory off the JVM heap. Measured peaks are in the results (``peak_rss_*``).
    """
    if p.workload in EVENTS:
        gb = 1 if p.n <= 10**5 else 3
    else:
        gb = 1 if p.n <= 10**5 else 4 if p.n <= 10**6 else 12
    return {"spark.driver.memory": f"{gb}g", "spark.executor.memory": f"{gb}g"}


#: configurations of each workload: name -> options (``stream``: a streaming configuration, ``spacing`` its
#: RocksDB snapshot spacing, ``None`` Spark's default of 10; ``regimes``: falkirk's, by name in the workload's module)
def configurations(workload: str, spacings: Iterable[int] = (2,)) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {"streaming": {"stream": True, "spacing": None}}
    for k in spacings:
        out[f"streaming-snap{k}"] = {"stream": True, "spacing": k}
    out["falkirk"] = {"regimes": "shipped"}
    out["falkirk-inc"] = {"regimes": "incremental"}
    out["falkirk-advised"] = {"regimes": "shipped", "advise": True}
    if workload == "W2":  # the same regimes, the step written to broadcast the updates (keyed.REGIMES)
        out["falkirk-bcast"] = {"regimes": "broadcast"}
        out["falkirk-changes"] = {"regimes": "changes"}
        out["falkirk-differential"] = {"regimes": "differential"}
    if workload == "ysb":  # the counts checkpointed every epoch: less to redo after a restart, more per epoch
        out["falkirk-eager"] = {"regimes": "eager"}
    return out


SNAPSHOT_KEY = "spark.sql.streaming.stateStore.minDeltasForSnapshot"


def spark_conf(p: Point, options: dict[str, Any]) -> dict[str, str]:
    """A driver's Spark settings: the point's memory and, for a streaming configuration, its snapshot spacing."""
    conf = memory(p)
    if options.get("spacing") is not None:
        conf[SNAPSHOT_KEY] = str(options["spacing"])
    return conf


def sql_settings(p: Point) -> dict[str, str]:
    """SQL settings both systems run with at point ``p``: adaptive execution off (static plans, as in the matrix),
    whole-stage code generation off only for small epochs (:data:`~falkirk.spark.pipeline.run.session.SMALL_DATA`,
    which the matrix uses at its sizes, costs more than it saves below 10^5 rows per epoch and far more above)."""
    return {"spark.sql.adaptive.enabled": "false",
            "spark.sql.codegen.wholeStage": "false" if p.n < 10**5 else "true"}
