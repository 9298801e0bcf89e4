"""Helpers of the Spark tests: the tiny flagship configuration and output comparison."""

from __future__ import annotations

import collections
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The driver process of the cluster and Connect tests.
DRIVER = Path(__file__).with_name("driver_process.py")
_COUNTER = itertools.count()

#: Tiny flagship data: a few hundred events per epoch, a dozen queries, cc checkpoints every 2 epochs.
SMALL: dict[str, Any] = {
    "events_per_epoch": 300, "queries_per_epoch": 12, "users": 40, "nodes": 120, "cc_every": 2, "seed": 11,
}
#: Epochs of the short runs (and of the reference run).
EPOCHS = 4


def flagship(root: Path, spark: Any, **options: Any) -> Any:
    """The tiny flagship pipeline at ``root`` (``options`` override ``SMALL`` and Pipeline options)."""
    from falkirk.spark.pipeline.tools.flagship import build

    return build(root, spark, **{**SMALL, **options})


def assert_identical(spark: Any, root: Path, reference: Path) -> None:
    """The responses and the SQLite database at ``root`` equal the reference's, row for row."""
    from falkirk.spark.pipeline.tools.verify import compare_runs

    cmp = compare_runs(spark, flagship(root, spark), root, reference)
    assert not cmp.differences, [d.describe() for d in cmp.differences]
    assert cmp.identical and cmp.rows_compared >= EPOCHS * SMALL["queries_per_epoch"]


def demo_args(root: Path, *extra: str) -> list[str]:
    """Command-line arguments of ``falkirk.spark.demo`` for the tiny flagship at ``root``."""
    return [
        "--root", str(root), "--epochs", str(EPOCHS), "--events", str(SMALL["events_per_epoch"]),
        "--queries", str(SMALL["queries_per_epoch"]), "--users", str(SMALL["users"]),
        "--nodes", str(SMALL["nodes"]), "--cc-every", str(SMALL["cc_every"]), "--seed", str(SMALL["seed"]),
        "--no-reference", *extra,
    ]


class DriverRun:
    """A finished driver process: its exit status, output and per-scenario results."""

    def __init__(self, returncode: int, stdout: str, results: dict[str, Any], seconds: float) -> None:
        self.returncode, self.stdout, self.results, self.seconds = returncode, stdout, results, seconds
        self.killed_worker: list[int] = []
        self.killed_driver: DriverRun | None = None

    def __getitem__(self, name: str) -> dict[str, Any]:
        assert name in self.results, f"scenario {name} did not finish; driver output:\n{self.stdout[-4000:]}"
        return self.results[name]


def run_driver(
    base: dict[str, Any], scenarios: list[dict[str, Any]], where: Path, *,
    during: Callable[[subprocess.Popen[str], str], None] | None = None, timeout: float = 900,
) -> DriverRun:
    """Run ``driver_process.py`` (session settings ``base``: ``master``+``conf`` or ``remote``) on ``scenarios``.

    ``during(proc, line)`` sees each output line while the driver runs.
    """
    n = next(_COUNTER)
    spec = {**base, "small": SMALL, "scenarios": scenarios, "app": f"falkirk-test-{n}"}
    spec_path, result_path = where / f"spec-{n}.json", where / f"result-{n}.json"
    spec_path.write_text(json.dumps(spec))
    t0 = time.perf_counter()
    # PySpark starts the executors' Python workers with the driver's PYSPARK_PYTHON: this venv's Python.
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(spec_path), str(result_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=where, env=env)
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if during is not None:
                during(proc, line)
            if time.perf_counter() - t0 > timeout:
                proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    results = json.loads(result_path.read_text()) if result_path.exists() else {}
    return DriverRun(proc.returncode, "".join(lines), results, time.perf_counter() - t0)


def root_listing(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its SHA-256: two listings are equal iff the root is byte-identical."""
    import hashlib

    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def events(epoch: int) -> list[dict[str, Any]]:
    """The input of :func:`all_regimes`: 24 seeded records per epoch, some with negative amounts."""
    import random

    rnd = random.Random(epoch)
    return [{"user": rnd.randrange(6), "amount": rnd.randrange(-3, 20)} for _ in range(24)]


def all_regimes(root: Path, spark: Any, **options: Any) -> Any:
    """A small pipeline of every regime: input ``events`` (keyed) → Ephemeral ``clean`` → Batch ``hourly`` →
    ``Lazy(every=3, key=user)`` ``rolling`` → output ``report``, and an Eager SQLite step ``alerts`` over ``clean``."""
    from pyspark.sql import functions as F

    from falkirk.spark import Batch, Eager, Ephemeral, Lazy, Pipeline

    pipe = Pipeline(root, spark, fsync=False, **options)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=events)

    @pipe.step(regime=Ephemeral())
    def clean(events: Any) -> Any:
        return events.where("amount > 0").select("user", "amount")

    @pipe.step(regime=Batch())
    def hourly(clean: Any) -> Any:
        return clean.groupBy("user").agg(F.sum("amount").alias("amount"))

    @pipe.step(regime=Lazy(every=3, key="user", partitions=2))
    def rolling(hourly: Any, *, state: Any) -> Any:
        both = hourly if state is None else state.unionByName(hourly)
        new = both.groupBy("user").agg(F.sum("amount").alias("amount"))
        return new, new

    @pipe.step(regime=Eager(database="alerts.sqlite", tables={"alerts": "epoch"}))
    def alerts(clean: Any, *, db: Any, epoch: int) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS alerts (epoch INTEGER, user INTEGER, amount INTEGER)")
        for r in clean.where("amount >= 17").collect():
            db.execute("INSERT INTO alerts VALUES (?, ?, ?)", (epoch, r["user"], r["amount"]))

    pipe.output("report", inputs=["rolling"])
    return pipe


def stop_group(proc: subprocess.Popen[Any], grace: float) -> None:
    """Stop the process group a test started with ``start_new_session=True``: SIGTERM, SIGKILL after ``grace`` s."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def churn(epoch: int) -> list[dict[str, Any]]:
    """The input of :func:`keyed_pipeline`: 12 seeded records per epoch over 40 users (few keys change per epoch)."""
    import random

    rnd = random.Random(1000 + epoch)
    return [{"user": rnd.randrange(40), "amount": rnd.randrange(1, 30)} for _ in range(12)]


#: epochs of :func:`keyed_pipeline`'s reference run (``tests/spark/pipeline/run/conftest.py``)
KEYED_EPOCHS = 8


def state_checkpoints(root: Path, step: str = "totals") -> dict[int, dict[str, Any]]:
    """The state checkpoint manifests of ``step`` under ``root``, by epoch."""
    import json

    where = root / "manifests" / step / "checkpoint"
    return {int(p.stem): json.loads(p.read_text()) for p in sorted(where.glob("*.json"))}


def keyed_pipeline(
    root: Path, spark: Any, *, incremental: bool = False, every: int = 3, partitions: int = 2, snapshot_every: int = 3,
    replicas: int = 2, changes: bool = False, differential: bool = False, fused: bool = False, **options: Any,
) -> Any:
    """Keyed state with churn: input ``events`` → ``Lazy(every=3, key=user)`` ``totals`` (per user: amount, visits;
    a user whose amount passes 60 is settled and leaves the state: a deleted key) → output ``report`` (the state
    each epoch). ``incremental`` writes a delta every epoch and a snapshot every ``snapshot_every`` (3).
    ``changes``: ``totals`` declares ``changes=True``, reads the epoch's users with ``lookup`` and returns, as its
    new state, those users only (a settled one as a tombstone, ``_deleted`` true); its output is still the whole
    state. ``differential`` (with both): each delta holds every change since the snapshot. ``fused``: ``totals``
    returns its output (the same rows) as a function of its new state, so that in a sequential run the output's
    job computes ``totals`` and makes its state as it reads it (the fused stateful path, docs/spark.md)."""
    from pyspark.sql import functions as F

    from falkirk.spark import Lazy, Pipeline, lookup

    if fused and changes:
        raise ValueError("fused: a changes=True step's output is not computed by its consumer's job")
    pipe = Pipeline(root, spark, **{"fsync": False, **options})
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=churn)
    extra: dict[str, Any] = {"incremental": True, "snapshot_every": snapshot_every} if incremental else {}
    if changes:
        extra["changes"] = True
    if differential:
        extra["differential"] = True

    def totals(events: Any, *, state: Any) -> Any:
        now = events.groupBy("user").agg(F.sum("amount").alias("amount"), F.count("*").alias("visits"))
        both = now if state is None else state.unionByName(now)
        new = both.groupBy("user").agg(F.sum("amount").alias("amount"), F.sum("visits").alias("visits"))
        new = new.where("amount <= 60")
        if fused:
            return (lambda made: made.select("user", "amount", "visits")), new
        return new, new

    def totals_changes(events: Any, *, state: Any) -> Any:
        now = events.groupBy("user").agg(F.sum("amount").alias("amount"), F.count("*").alias("visits"))
        users = now.select("user")
        both = now if state is None else lookup(state, users).unionByName(now)
        upd = both.groupBy("user").agg(F.sum("amount").alias("amount"), F.sum("visits").alias("visits"))
        settled = F.col("amount") > 60
        changed = upd.select(
            "user",
            *[F.when(settled, None).otherwise(F.col(c)).alias(c) for c in ("amount", "visits")],
            settled.alias("_deleted"),
        )
        kept = upd.where(~settled)
        whole = kept if state is None else state.join(users, "user", "left_anti").unionByName(kept)
        return whole, changed

    fn = totals_changes if changes else totals
    fn.__name__ = "totals"
    pipe.step(fn, name="totals", inputs=["events"],
              regime=Lazy(every=every, key="user", partitions=partitions, replicas=replicas, **extra))

    pipe.output("report", inputs=["totals"])
    return pipe


def history_pipeline(root: Path, spark: Any, *, append: bool = True, every: int = 2, columns: bool = False,
                     skip: int | None = None, damage: Any = None, **options: Any) -> Any:
    """A state that only grows (``tests/spark/pipeline/run/test_append.py``): input ``events`` → ``Lazy(every, append)``
    ``history`` (per user over all events so far: the sum and the count) → output ``report``. ``columns``: at epoch 2 the step
    appends rows with a column the state does not have; ``skip``: at that epoch it appends nothing (``None``);
    ``damage``: called with the epoch at each execution."""
    from pyspark.sql import functions as F

    from falkirk.spark import Lazy, Pipeline

    pipe = Pipeline(root, spark, **{"fsync": False, **options})
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, key="user", source=churn)

    def history(events: Any, *, state: Any, epoch: int) -> Any:
        if damage is not None:
            damage(epoch)
        rows = events.select("user", "amount")
        seen = rows if state is None else state.unionByName(rows)
        out = seen.groupBy("user").agg(F.sum("amount").alias("amount"), F.count("*").alias("n"))
        if columns and epoch == 2:
            rows = rows.withColumn("extra", F.lit(1))
        return out, (None if epoch == skip else rows if append else seen)

    pipe.step(history, inputs=["events"], regime=Lazy(every=every, append=append))
    pipe.output("report", inputs=["history"])
    return pipe


def history_oracle(epochs: int, skip: int | None = None) -> dict[int, collections.Counter[tuple[int, int, int]]]:
    """Per epoch, the report's rows as a multiset, counted in Python over the seeded input (the events of epoch
    ``skip`` counted at that epoch only: not appended)."""
    out: dict[int, collections.Counter[tuple[int, int, int]]] = {}
    kept: list[dict[str, int]] = []
    for e in range(epochs):
        sums: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0])
        for r in kept + churn(e):
            sums[r["user"]][0] += r["amount"]
            sums[r["user"]][1] += 1
        out[e] = collections.Counter((u, a, n) for u, (a, n) in sums.items())
        if e != skip:
            kept += churn(e)
    return out
