"""An epoch with nothing to say costs no job: a step returning ``df.limit(0)`` (its plan says it has no rows) is
neither persisted nor counted, and its output is written from the driver with no collection.

``sparse`` passes its input's even keys on even epochs and says nothing (``src.limit(0)``) on odd ones; ``every3``
(``Lazy(every=3, append=True)``, MIXED's heavy branch in small) counts all the keys it was sent, per key mod 3,
every third epoch, and says nothing in between. Both outputs are compared, as multisets, with a pure-Python
oracle over the seeded input, with and without failures, with falkirk on and off.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Lazy, Pipeline, Storage
from falkirk.spark.pipeline.run.failures import _place
from falkirk.spark.pipeline.run.frames import Frames

pytestmark = [pytest.mark.spark]

EPOCHS = 7
COUNTS = "g BIGINT, n BIGINT"


def keys(epoch: int) -> list[int]:
    return list(range(10 * epoch, 10 * epoch + 7))


def pipeline(root: Path, spark: Any, **options: Any) -> Any:
    pipe = Pipeline(root, spark, **{"fsync": False, **options})
    pipe.input("src", "k BIGINT", partitions=2, source=lambda e: [{"k": k} for k in keys(e)])

    def sparse(src: Any, *, epoch: int) -> Any:
        src = src.select("k")
        return src.where("k % 2 = 0") if epoch % 2 == 0 else src.limit(0)

    def every3(src: Any, *, state: Any, epoch: int, spark: Any) -> Any:
        if (epoch + 1) % 3:
            return spark.createDataFrame([], COUNTS).limit(0), src
        seen = src if state is None else state.unionByName(src)
        return seen.selectExpr("k % 3 AS g").groupBy("g").count().withColumnRenamed("count", "n"), src

    pipe.step(sparse, inputs=["src"], regime=Ephemeral())
    pipe.step(every3, inputs=["src"], regime=Lazy(every=2, append=True))
    pipe.output("out_sparse", inputs=["sparse"])
    pipe.output("out_every3", inputs=["every3"])
    return pipe


def oracle(epochs: int) -> dict[str, dict[int, collections.Counter[tuple[int, ...]]]]:
    out: dict[str, dict[int, collections.Counter[tuple[int, ...]]]] = {"out_sparse": {}, "out_every3": {}}
    seen: list[int] = []
    for e in range(epochs):
        seen += keys(e)
        out["out_sparse"][e] = collections.Counter((k,) for k in keys(e) if e % 2 == 0 and k % 2 == 0)
        counts = collections.Counter(k % 3 for k in seen) if (e + 1) % 3 == 0 else {}
        out["out_every3"][e] = collections.Counter((g, n) for g, n in counts.items())
    return out


def written(spark: Any, root: Path, epochs: int) -> dict[str, dict[int, collections.Counter[tuple[int, ...]]]]:
    out: dict[str, dict[int, collections.Counter[tuple[int, ...]]]] = {}
    for name, columns in (("out_sparse", ["k"]), ("out_every3", ["g", "n"])):
        df = spark.read.parquet(str(root / "output" / name)).select("epoch", *columns)
        got: dict[int, collections.Counter[tuple[int, ...]]] = {e: collections.Counter() for e in range(epochs)}
        for r in df.collect():
            got[r["epoch"]][tuple(r[c] for c in columns)] += 1
        out[name] = got
    return out


def test_a_plan_that_says_empty_is_empty(spark: Any) -> None:
    """The forms ``planned_empty`` is for are told apart, and every frame it calls empty has no rows (counted);
    a frame with rows is never called empty."""
    from pyspark.sql import DataFrame

    df = spark.range(5).selectExpr("id AS k")
    frames = Frames()
    told = {
        "limit(0)": df.limit(0),
        "createDataFrame([]).limit(0)": spark.createDataFrame([], COUNTS).limit(0),
        "limit(0) of an aggregate": df.groupBy("k").count().limit(0),
        "an empty local relation": DataFrame(spark._jsparkSession.emptyDataFrame(), spark),
    }
    for what, frame in told.items():
        assert frames.planned_empty(frame) is True, what
        assert frames.rows_of(frame) == 0 and frame.count() == 0, what
    with_rows = {
        "a frame with rows": df,
        "limit(1)": df.limit(1),
        "a local relation with rows": spark.sql("SELECT * FROM VALUES (1), (2) AS t(k)"),
        "limit(0) of a union with rows": df.limit(0).unionByName(df),
    }
    for what, frame in with_rows.items():
        assert frame.count() > 0, what
        assert frames.planned_empty(frame) is False and frames.rows_of(frame) is None, what


@pytest.mark.parametrize("concurrency", [1, 3])
def test_empty_epochs_run_no_job_and_recover_to_the_oracle(spark: Any, tmp_path: Path, concurrency: int) -> None:
    """With failures in both branches, the outputs equal the oracle's; the empty epochs of ``sparse`` and of its
    output ran no Spark job, and each empty output epoch is one file of no rows with the output's columns."""
    fail = ["sparse@3:mid", "every3@4:before", "out_every3@3:after", "out_sparse@5:before"]
    result = pipeline(tmp_path, spark, concurrency=concurrency).run(EPOCHS, fail=fail)
    assert sorted(map(str, result.fired)) == sorted(fail)
    assert written(spark, tmp_path, EPOCHS) == oracle(EPOCHS)
    last = {(x.step, x.epoch): x for x in result.journal.executions}
    storage = Storage(tmp_path)
    def schema_of(name: str, epoch: int) -> Any:
        return spark.read.parquet(str(tmp_path / storage.get(name, "output", epoch).location)).schema

    for name, step, empty in (
        ("out_sparse", "sparse", [e for e in range(EPOCHS) if e % 2]),
        ("out_every3", "every3", [e for e in range(EPOCHS) if (e + 1) % 3]),
    ):
        full = schema_of(name, 2)  # an epoch with rows, written from the driver too
        for epoch in empty:
            assert last[(step, epoch)].rows == 0, last[(step, epoch)]
            ex = last[(name, epoch)]
            assert ex.jobs == 0 and ex.rows == 0, ex  # no count, no collection, no Spark write
            m = storage.get(name, "output", epoch)
            assert m.rows == 0 and len(m.files) == 1, m
            back = spark.read.parquet(str(tmp_path / m.location))
            assert back.count() == 0 and back.schema == full, (name, epoch)
    for epoch in range(1, EPOCHS, 2):  # the stateless step's empty epochs: no job of its own either
        assert last[("sparse", epoch)].jobs == 0, last[("sparse", epoch)]


def test_a_task_failure_at_an_empty_epoch_does_not_fire(spark: Any, tmp_path: Path, caplog: Any) -> None:
    """A ``job`` or ``task`` failure needs the step output's job: at an epoch whose output is empty by its plan
    (no job) it does not fire — not in ``fired``, and a warning says so — while one at an epoch with rows fires;
    the outputs are the oracle's."""
    fail = ["sparse@3:job", "every3@1:task", "sparse@4:job"]
    with caplog.at_level("WARNING", logger="falkirk.spark"):
        result = pipeline(tmp_path, spark).run(EPOCHS, fail=fail)
    assert [str(i) for i in result.fired] == ["sparse@4:job"]
    assert sorted(str(i) for i in result.unfired) == ["every3@1:task", "sparse@3:job"]
    said = [r.getMessage() for r in caplog.records if "did not fire" in r.getMessage()]
    assert len(said) == 2 and any("sparse@3:job" in m for m in said) and any("every3@1:task" in m for m in said)
    assert written(spark, tmp_path, EPOCHS) == oracle(EPOCHS)
    last = {(x.step, x.epoch): x for x in result.journal.executions}
    assert last[("sparse", 3)].jobs == 0 and last[("out_sparse", 3)].jobs == 0
    assert [r.in_place for r in result.journal.recoveries] == [("sparse", 4)]  # the one that fired: retried


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_failure_at_an_output_empty_by_its_data_is_found_unfired(
    spark: Any, tmp_path: Path, caplog: Any, monkeypatch: pytest.MonkeyPatch, concurrency: int
) -> None:
    """A ``task`` or ``job`` failure at an epoch whose output is empty by its data (a filter no row passes: its
    plan does not say so, so its job runs and no task sees a row) fired nowhere: on a local master the run finds
    no marker of it and reports it in ``unfired`` with a warning, not in ``fired``; the failures with rows fire
    (Spark retries the task; the job is retried in place) and the outputs are the oracle's."""
    pipe = Pipeline(tmp_path / "root", spark, fsync=False, concurrency=concurrency)
    pipe.input("src", "k BIGINT", partitions=2, source=lambda e: [{"k": k} for k in keys(e)])
    pipe.step(lambda src: src.where("k < 0"), name="none", inputs=["src"], regime=Ephemeral())
    pipe.step(lambda src: src.selectExpr("k * 2 AS k"), name="doubled", inputs=["src"], regime=Ephemeral())
    pipe.output("out_none", inputs=["none"])
    pipe.output("out_doubled", inputs=["doubled"])
    fail = ["none@1:task", "none@2:job", "doubled@1:task", "doubled@2:job"]
    mine = tmp_path / "tmp"  # the driver's temporary directory, where a local master's tasks leave their markers
    mine.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(mine))
    # a marker a killed driver left (its process gone), one of the older form (no process id) made just now, and a
    # file that is no marker: the run sweeps the first away and leaves the others
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = [f"falkirk-injection-{uuid.uuid4().hex}", "notes.txt"]
    for name in (f"falkirk-injection-{_place()}-{gone.pid}-{uuid.uuid4().hex}", *left):
        (mine / name).touch()
    with caplog.at_level("WARNING", logger="falkirk.spark"):
        result = pipe.run(4, fail=fail)
    assert sorted(str(i) for i in result.fired) == ["doubled@1:task", "doubled@2:job"]
    assert sorted(str(i) for i in result.unfired) == ["none@1:task", "none@2:job"]
    said = [r.getMessage() for r in caplog.records if "did not fire" in r.getMessage()]
    assert len(said) == 2 and all("saw a row" in m for m in said), said
    assert [r.in_place for r in result.journal.recoveries] == [("doubled", 2)]
    for name, f in (("out_none", lambda k: []), ("out_doubled", lambda k: [2 * k])):
        got = collections.Counter(
            (r["epoch"], r["k"]) for r in spark.read.parquet(str(tmp_path / "root" / "output" / name)).collect()
        )
        assert got == collections.Counter((e, v) for e in range(4) for k in keys(e) for v in f(k)), name
    assert sorted(os.listdir(mine)) == sorted(left)  # the run removed the markers its failures left, and the dead one's


def test_a_job_failure_at_an_input_epoch_of_no_records_does_not_fire(spark: Any, tmp_path: Path) -> None:
    """An input epoch of no records is read with no job: a ``job`` failure injected there does not fire (in
    ``unfired``), one at an epoch with records does; the output is every record once."""
    pipe = Pipeline(tmp_path, spark, fsync=False)
    pipe.input("src", "k BIGINT", partitions=2, source=lambda e: [] if e == 1 else [{"k": k} for k in keys(e)])
    pipe.output("out", inputs=["src"])
    result = pipe.run(3, fail=["src@1:job", "src@2:job"])
    assert [str(i) for i in result.fired] == ["src@2:job"] and [str(i) for i in result.unfired] == ["src@1:job"]
    got = collections.Counter(r["k"] for r in spark.read.parquet(str(tmp_path / "output" / "out")).collect())
    assert got == collections.Counter(keys(0) + keys(2))


def test_with_falkirk_off_the_outputs_are_the_oracles(spark: Any, tmp_path: Path) -> None:
    """The reference form (falkirk off: Spark's own writes) gives the same outputs."""
    pipeline(tmp_path, spark, durable=False).run(EPOCHS)
    assert written(spark, tmp_path, EPOCHS) == oracle(EPOCHS)


@pytest.mark.parametrize("large", [False, True])
def test_an_empty_epoch_has_the_arrow_types_of_a_collected_one(spark: Any, tmp_path: Path, large: bool) -> None:
    """With and without ``spark.sql.execution.arrow.useLargeVarTypes``, an empty output epoch written from the
    driver names in its Parquet footer the Arrow types a collected epoch with rows would (``toArrow``'s)."""
    import pyarrow.parquet as pq

    pipe = Pipeline(tmp_path, spark, fsync=False)
    pipe.input("src", "name STRING, k BIGINT", partitions=1, source=lambda e: [{"name": f"n{e}", "k": e}])
    def p(src: Any, *, epoch: int) -> Any:
        src = src.select("name", "k")
        return src if epoch % 2 == 0 else src.limit(0)

    pipe.step(p, inputs=["src"], regime=Ephemeral())
    pipe.output("out", inputs=["p"])
    key = "spark.sql.execution.arrow.useLargeVarTypes"
    before = spark.conf.get(key)
    spark.conf.set(key, str(large).lower())
    try:
        pipe.run(4)
        # what a collected epoch with rows holds: toArrow's types under the same setting
        collected = spark.sql("SELECT 'n' AS name, 1L AS k").toArrow().schema
    finally:
        spark.conf.set(key, before)
    storage = Storage(tmp_path)

    def footer(epoch: int) -> Any:
        m = storage.get("out", "output", epoch)
        (f,) = m.files
        return pq.read_schema(tmp_path / m.location / f.name).remove_metadata()

    empty = footer(3)
    assert storage.get("out", "output", 3).rows == 0 and storage.get("out", "output", 2).rows == 1
    assert str(empty.field("name").type) == ("large_string" if large else "string")
    assert [(f.name, f.type) for f in empty] == [(f.name, f.type) for f in collected]
