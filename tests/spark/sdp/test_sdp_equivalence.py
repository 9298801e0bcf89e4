"""The example SDP project gives the same tables under ``falkirk sdp run`` as under ``spark-pipelines run``.

``spark-pipelines`` (the PySpark package's launcher) runs the project
through the session's Connect server, one process per update, writing its
tables into the server's warehouse and the sink's JSON files into the
project; falkirk runs a copy of the same project, update by update, on the
shared classic session (``sdp_reference``). Tables are compared as multisets.

Once its tables exist, ``spark-pipelines`` 4.3 starts a materialized view's
flow without waiting for the streaming table's flow of the same update
(apache/spark#57897), so after an update its materialized views may show the
streaming table as it was before it; falkirk runs every update in
dependency order, SDP's documented semantics. ``spark-pipelines`` therefore
runs once more with no new file before the tables are compared: its
materialized views then read the whole streaming table, as falkirk's did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sdp_support import UPDATES, make_project, multiset, write_update

pytestmark = [pytest.mark.spark, pytest.mark.connect, pytest.mark.slow]


def test_same_tables_as_spark_pipelines(spark: Any, spark_pipelines: Any, connect_server: Any, sdp_reference: dict,
                                        tmp_path: Path) -> None:
    """spark-pipelines' updates give falkirk's tables: the streaming table, both materialized views, the sink."""
    project = make_project(tmp_path / "sdp")
    for k in range(UPDATES):
        write_update(project, k)
        spark_pipelines(project)
    spark_pipelines(project)  # no new file: the materialized views catch up with the streaming table
    warehouse = connect_server.warehouse
    theirs = {name: multiset(spark.read.parquet(str(warehouse / name)))
              for name in ("orders", "user_totals", "big_orders")}
    theirs["export"] = multiset(spark.read.schema("order_id BIGINT, user BIGINT, amount DECIMAL(12,2)")
                                .json(str(project / "export")))
    assert set(sdp_reference) == set(theirs)
    for name, rows in theirs.items():
        assert sum(rows.values()) > 0, name
        assert sdp_reference[name] == rows, f"table {name} differs from spark-pipelines'"
