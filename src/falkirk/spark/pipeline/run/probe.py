"""Before the first epoch: prove that the driver and the executors see the same storage under the root.

A pipeline's driver writes the input log and reads the checkpoints its
executors write; both only work if every process reaches the root through
the same filesystem. On one machine they always do. On a cluster, a root
on the driver's own disk (``/tmp/run`` where the workers have their own
``/tmp``) fails in two silent-looking ways: executors cannot find the input
the driver appended (Spark reports ``FILE_NOT_EXIST`` and retries the step)
and the Parquet files executors write stay on *their* disks, so the driver
sees a directory with only ``_SUCCESS`` in it.

:func:`check_shared` runs one tiny Spark job that reads a token file the
driver wrote under ``ROOT/_probe/`` and writes it back from an executor;
the driver then reads the executor's file. Either direction failing is a
:class:`~falkirk.spark.errors.StorageError` that says which one and what to
do. It is skipped on ``local[...]`` masters (one process, one disk), costs
one small job (about a second) elsewhere, and leaves nothing behind.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from falkirk.spark.errors import StorageError
from falkirk.spark.pipeline.run.causes import root_cause

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from falkirk.spark.pipeline.store.rootfs import Root

__all__ = ["check_shared", "is_local_master"]


def is_local_master(spark: SparkSession) -> bool:
    """``True`` when ``spark`` runs driver and executors in one process (``local``, ``local[N]``, …)."""
    try:
        master = spark.conf.get("spark.master", "") or ""
    except Exception:  # a Connect server that does not expose it: assume a cluster
        return False
    return master.startswith("local")


def check_shared(spark: SparkSession, root: Root) -> bool:
    """Check that the executors read what the driver writes under ``root`` and vice versa.

    Returns ``False`` when skipped (a local master), ``True`` when the probe
    passed; raises :class:`~falkirk.spark.errors.StorageError` otherwise.
    """
    if is_local_master(spark):
        return False
    token = uuid.uuid4().hex
    base = f"_probe/{token}"
    root.publish(f"{base}/driver.txt", (token + "\n").encode())
    try:
        try:
            rows = spark.read.text(root.spark_uri(f"{base}/driver.txt"))
            rows.coalesce(1).write.mode("errorifexists").text(root.spark_uri(f"{base}/executor"))
        except Exception as exc:
            raise StorageError(
                f"root {root.uri}: the executors cannot read a file the driver wrote there "
                f"({root_cause(exc)}); on a cluster the root must be storage every node reaches "
                "(s3a://, abfss://, gs:// or a path on a shared mount), not the driver's own disk"
            ) from None
        names = [n for n in root.listdir(f"{base}/executor") if n.startswith("part-")]
        seen = b"".join(root.read_bytes(f"{base}/executor/{n}") for n in names)
        if token.encode() not in seen:
            raise StorageError(
                f"root {root.uri}: files the executors write there do not reach the driver (it sees "
                f"{sorted(root.listdir(f'{base}/executor')) or 'nothing'}); the root is on a disk the workers do "
                "not share with the driver — use storage every node reaches (s3a://, abfss://, gs:// "
                "or a shared mount)"
            )
    finally:
        root.delete("_probe", recursive=True)
    return True
