"""Loading an SDP project: the graph falkirk makes of it, the regimes each dataset gets, and clear refusals.

Projects other than the example are written here, a spec and one
definition file each; loading one calls every query function once (no
update runs).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from sdp_support import make_project, write_update

from falkirk.spark import PipelineError
from falkirk.spark.sdp import load
from falkirk.spark.sdp.regimes import text

pytestmark = pytest.mark.spark

HEADER = """\
from pyspark import pipelines as dp
from pyspark.sql import functions as F
"""
SOURCE = """
        @dp.table
        def events():
            return spark.readStream.format("json").schema("user BIGINT, n BIGINT, x DOUBLE").load(DATA)
        """


def tiny(where: Path, code: str, *, spec_extra: str = "", files: dict[str, str] | None = None) -> Path:
    """A project in ``where``: a spec and ``transformations/defs.py`` (``HEADER``, ``DATA``, then ``code``)."""
    (where / "transformations").mkdir(parents=True)
    (where / "data").mkdir()
    (where / "spark-pipeline.yml").write_text(
        f"name: tiny\nstorage: file://{where / 'storage'}\n{spec_extra}libraries:\n  - glob:\n"
        "      include: transformations/**\n")
    (where / "transformations" / "defs.py").write_text(HEADER + f"DATA = {str(where / 'data')!r}\n"
                                                      + textwrap.dedent(code))
    for name, body in (files or {}).items():
        (where / "transformations" / name).write_text(body)
    return where


def test_the_example_graph_and_default_regimes(spark: Any, tmp_path: Path) -> None:
    """Each dataset of the example becomes a step with the default regime of its kind: the streaming table an
    appended output with its file stream as an input log, the aggregate kept incrementally by its key, the join
    recomputed in full, the view and the flow ephemeral, the sink an output."""
    where = make_project(tmp_path / "p")
    write_update(where, 0)
    project = load(where, spark)
    g = project.graph
    assert {n: d.kind for n, d in g.datasets.items()} == {
        "orders": "streaming table", "clean_orders": "temporary view", "user_totals": "materialized view",
        "big_orders": "materialized view", "export": "sink"}
    assert {n: text(r) for n, r in project.regimes.items()} == {
        "orders": "output(log=true)", "clean_orders": "ephemeral", "export_large": "ephemeral",
        "user_totals": "eager(log=true, key=user)", "big_orders": "batch", "export": "output"}
    assert g.datasets["clean_orders"].mode == "append"  # row-wise over the streaming table: its new rows
    assert g.datasets["user_totals"].shape.describe() == (
        "aggregate of clean_orders by user: count(orders), sum(spent), max(last_ts)")
    assert "Join" in g.datasets["big_orders"].shape.describe()
    pipe = project.pipeline()
    assert pipe.order == ["orders_files", "orders", "clean_orders", "export_large", "user_totals", "export",
                          "big_orders"]
    assert pipe.steps["big_orders"].inputs == ("user_totals", "clean_orders")
    assert pipe.inputs["orders_files"].log.schema.startswith("`order_id` bigint")


def test_regimes_are_overridden_strongest_first(spark: Any, tmp_path: Path) -> None:
    """regimes= beats the spec's falkirk.regime.NAME, which beats the table property falkirk.regime."""
    where = tiny(tmp_path / "p", SOURCE + """
        @dp.materialized_view(table_properties={"falkirk.regime": "lazy(every=3)"})
        def per_user():
            return spark.read.table("events").groupBy("user").agg(F.sum("n").alias("n"))

        @dp.materialized_view(table_properties={"falkirk.regime": "lazy(every=3)"})
        def per_user_2():
            return spark.read.table("events").groupBy("user").agg(F.count("*").alias("rows"))
        """, spec_extra="configuration:\n  falkirk.regime.per_user_2: eager(incremental=true)\n")
    project = load(where, spark, regimes={"events": "output"})
    assert text(project.regimes["per_user"]) == "lazy(log=true, key=user, every=3)"
    assert text(project.regimes["per_user_2"]) == "eager(log=true, key=user, incremental=true)"
    project = load(where, spark, regimes={"per_user": "batch"})
    assert text(project.regimes["per_user"]) == "batch"


@pytest.mark.parametrize(("code", "files", "message"), [
    (SOURCE, {"extra.sql": "CREATE MATERIALIZED VIEW m AS SELECT * FROM events"},
     r"SQL definition file transformations/extra.sql: falkirk sdp runs Python definition files only"),
    (SOURCE + """
        @dp.materialized_view
        def totals():
            return spark.read.table("events").groupBy("user").agg(F.sum("x").alias("x"))

        @dp.table
        def again():
            return spark.readStream.table("totals")
        """, None, r"streaming table 'again' \(.*defs.py:\d+\) reads materialized view 'totals' .* as a stream"),
    ("""
        @dp.table
        def ticks():
            return spark.readStream.format("rate").load()
        """, None, r"flow 'ticks' .*: a streaming read of format 'rate': falkirk sdp streams from files"),
    (SOURCE + """
        @dp.materialized_view
        def other():
            return spark.read.table("no_such_table_anywhere")
        """, None, r"flow 'other' .* failed when falkirk called its query function: .*no_such_table_anywhere"),
    (SOURCE + """
        @dp.materialized_view
        def by_sql():
            return spark.sql("SELECT * FROM events")
        """, None, r"flow 'by_sql' .*: it calls spark.sql\(...\)"),
    (SOURCE + """
        @dp.temporary_view
        def a():
            return spark.read.table("b")

        @dp.temporary_view
        def b():
            return spark.read.table("a")
        """, None, r"in a cycle.*flow 'a'"),
    (SOURCE + """
        @dp.materialized_view(table_properties={"falkirk.regime": "lazy(every=2)"})
        def joined():
            return spark.read.table("events").join(spark.read.table("events"), "user")
        """, None, r"materialized view 'joined' .*: regime lazy: falkirk keeps a materialized view as state only "
                   r"when its query is a mergeable aggregate"),
    (SOURCE + """
        @dp.materialized_view
        def floats():
            return spark.read.table("events").groupBy("user").agg(F.sum("x").alias("x"))
        assert False, "not reached"
        """, None, r"definition file transformations/defs.py failed to import"),
    (SOURCE + """
        @dp.table
        def counts():
            return spark.readStream.table("events").groupBy("user").count()
        """, None, r"flow 'counts' .* is a streaming query with state across micro-batches \(Aggregate\)"),
], ids=["sql-file", "stream-from-mv", "rate-source", "unknown-table", "spark-sql", "cycle", "stateful-join",
        "import-error", "streaming-aggregate"])
def test_what_falkirk_refuses_is_named(spark: Any, tmp_path: Path, code: str, files: dict | None,
                                       message: str) -> None:
    """A definition falkirk cannot run is a PipelineError naming the file, flow or dataset, and why."""
    where = tiny(tmp_path / "p", code, files=files)
    with pytest.raises(PipelineError, match=message):
        load(where, spark)


def test_a_float_sum_is_recomputed_in_full(spark: Any, tmp_path: Path) -> None:
    """A sum of doubles depends on the order of additions: falkirk recomputes it from whole tables (batch), and
    says why."""
    where = tiny(tmp_path / "p", SOURCE + """
        @dp.materialized_view
        def floats():
            return spark.read.table("events").groupBy("user").agg(F.sum("x").alias("x"), F.max("n").alias("n"))
        """)
    project = load(where, spark)
    assert text(project.regimes["floats"]) == "batch"
    assert "sums floating-point numbers" in project.graph.datasets["floats"].shape.why
