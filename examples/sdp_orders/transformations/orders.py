"""Orders arrive as JSON files; a cleaning view, an aggregate, a join and a sink of the large ones.

Plain Spark Declarative Pipelines code: nothing here knows about falkirk.
Paths in the spec's configuration are relative to the project directory
(both runners import this file from there).
"""

import os

from pyspark import pipelines as dp
from pyspark.sql import functions as F

ORDERS = os.path.abspath(spark.conf.get("orders.path", "data/orders"))  # noqa: F821 - spark is given
EXPORT = os.path.abspath(spark.conf.get("export.path", "export"))  # noqa: F821
SCHEMA = "order_id BIGINT, user BIGINT, item STRING, amount DECIMAL(12,2), ts BIGINT"


@dp.table(comment="orders as they arrive, a JSON file per batch")
def orders():
    return spark.readStream.format("json").schema(SCHEMA).load(ORDERS)  # noqa: F821


@dp.temporary_view
def clean_orders():
    return (spark.read.table("orders")  # noqa: F821
            .where("amount > 0 AND user IS NOT NULL")
            .withColumn("item", F.lower(F.trim("item"))))


@dp.materialized_view(comment="per user: orders, amount spent, last order time")
def user_totals():
    return (spark.read.table("clean_orders").groupBy("user")  # noqa: F821
            .agg(F.count("*").alias("orders"), F.sum("amount").alias("spent"), F.max("ts").alias("last_ts")))


@dp.materialized_view(comment="orders of at least twice their user's average")
def big_orders():
    totals = spark.read.table("user_totals")  # noqa: F821
    return (spark.read.table("clean_orders").join(totals, "user")  # noqa: F821
            .where(F.col("amount") * F.col("orders") >= 2 * F.col("spent"))
            .select("order_id", "user", "item", "amount"))


dp.create_sink("export", format="json", options={"path": EXPORT})


@dp.append_flow(target="export")
def export_large():
    return spark.readStream.table("orders").where("amount >= 500").select("order_id", "user", "amount")  # noqa: F821
