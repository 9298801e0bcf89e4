"""The flagship (the paper's Figure 1 application) at scale: :mod:`benchmarks.spark_vs_streaming` as a library.

``n`` is the flagship's events per epoch (3 % of them graph links; 60 queries per epoch, 300 users, 1,500
graph nodes, as in the matrix's W1). falkirk runs the flagship as built by
:func:`benchmarks.spark_vs_streaming.falkirk_pipeline`: ``falkirk`` the shipped regimes, ``falkirk-inc`` the same
with ``cc`` keeping incremental keyed state (``Lazy(every=3, key="node", incremental=True)``),
``falkirk-advised`` the advisor's; the stream is that module's ``Streaming`` query (union–find ``cc`` in
``applyInPandasWithState`` on RocksDB, the rest in ``foreachBatch``) — the matrix's ``streaming``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import spark_vs_streaming as svs

INCREMENTAL_CC = {"kind": "lazy", "log": False, "key": "node", "max_parallelism": 16, "incremental": True,
                  "snapshot_every": 10, "every": 3}


def flagship_size(size: dict[str, Any]) -> dict[str, int]:
    return {"events_per_epoch": size["events"], "queries_per_epoch": 60, "users": 300, "nodes": 1500, "seed": 7,
            "cc_every": 3}


class Flagship:
    """The workload adapter (see :mod:`.phases`) for the flagship."""

    workload = "flagship"
    failed_step = "cc"
    outputs = ("responses",)
    tables = (("stats.sqlite", "answer_stats"),)
    batch_attr, meter_attr = "batch", "clock"

    def write_input(self, directory: Path, size: dict[str, Any]) -> None:
        svs.write_stream_input(directory, flagship_size(size), size["epochs"])

    def falkirk(self, root: Path, spark: Any, size: dict[str, Any], regimes: str) -> Any:
        extra = {"cc": INCREMENTAL_CC} if regimes == "incremental" else None
        return svs.falkirk_pipeline("falkirk", root, spark, flagship_size(size), "unionfind", size["crash"],
                                    regimes=extra)

    def stream_form(self, size: dict[str, Any], override: str | None = None) -> str | None:
        return "pandas-state"  # the flagship's union–find in applyInPandasWithState: W1's only formulation

    def stream(self, spark: Any, input_dir: Path, base: Path, size: dict[str, Any], form: str) -> Any:
        return svs.Streaming(spark, input_dir, base, mode="streaming")

    def recomputed_by_stream(self, size: dict[str, Any], batch: int) -> int:
        return 0  # the steps of the failed batch run inside or after the stateful operator, which never returned
