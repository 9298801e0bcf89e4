"""W2 and W3 at scale: the matrix's keyed workloads (:mod:`benchmarks.spark_matrix.w2_w3`) as they are.

``W2`` — a per-key running aggregate over ``n`` keys, all loaded at epoch 0, then ``churn`` of them updated
per epoch; the output is each updated key with its new aggregate (rows ∝ churn · n). ``W3`` — every key's
score decays each epoch (``score * 9 div 10``) and the updated keys add their value; the output is the
top 100 keys (the whole state changes every epoch whatever the churn).

falkirk runs the matrix's pipeline (``agg`` keyed state): ``falkirk`` with ``Lazy(every=3, key="key")``,
``falkirk-inc`` with ``Eager(key="key", incremental=True)`` (a delta of the changed keys every epoch, a
snapshot every 10), ``falkirk-advised`` with what the advisor chose; W2 also ``falkirk-bcast``, the shipped
regimes with the step written to broadcast the epoch's updates instead of joining the whole state with them
(``form="broadcast"``: the state scanned, not shuffled), and ``falkirk-changes``, the step returning only the
updated keys' rows under ``Lazy(every=3, key="key", incremental=True, changes=True)`` (the state updated in
place: a delta per epoch is what the step returned, a snapshot every 10). The stream runs the matrix's
``StreamingKeyed`` in the strongest formulation this checkout has for the point (:mod:`.streams`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..spark_matrix import w2_w3
from . import streams

#: falkirk's configurations: (the regime by name in :func:`~benchmarks.spark_matrix.w2_w3.falkirk_keyed`, the form
#: of W2's step)
REGIMES = {"shipped": ("lazy3", "join"), "incremental": ("eager-inc", "join"), "broadcast": ("lazy3", "broadcast"),
           "changes": ("lazy3-inc-changes", "changes"),
           "differential": ("lazy3-inc-differential-changes", "changes")}


class Keyed:
    """The workload adapter (see :mod:`.phases`) for ``W2`` or ``W3``."""

    failed_step = "agg"
    outputs = ("changes",)
    tables: tuple[tuple[str, str], ...] = ()
    batch_attr, meter_attr = "batch", "meter"

    def __init__(self, workload: str) -> None:
        self.workload = workload

    def write_input(self, directory: Path, size: dict[str, Any]) -> None:
        w2_w3.write_keyed_input(directory, size, size["epochs"])

    def falkirk(self, root: Path, spark: Any, size: dict[str, Any], regimes: str) -> Any:
        regime, form = REGIMES[regimes]
        return w2_w3.falkirk_keyed(root, spark, self.workload, size, regime, form)

    def stream_form(self, size: dict[str, Any], override: str | None = None) -> str | None:
        return streams.strongest(self.workload, size["churn"], override)

    def stream(self, spark: Any, input_dir: Path, base: Path, size: dict[str, Any], form: str) -> Any:
        return streams.keyed_stream(spark, input_dir, base, self.workload, form)

    def recomputed_by_stream(self, size: dict[str, Any], batch: int) -> int:
        """Rows of completed work the stream does again when batch ``batch`` re-runs: none (the failed batch's
        stateful operator never committed)."""
        return 0
