"""Helpers of the Spark tests: the tiny flagship configuration and output comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Tiny flagship data: a few hundred events per epoch, a dozen queries, cc checkpoints every 2 epochs.
SMALL: dict[str, Any] = {
    "events_per_epoch": 300, "queries_per_epoch": 12, "users": 40, "nodes": 120, "cc_every": 2, "seed": 11,
}
#: Epochs of the short runs (and of the reference run).
EPOCHS = 4


def flagship(root: Path, spark: Any, **options: Any) -> Any:
    """The tiny flagship pipeline at ``root`` (``options`` override ``SMALL`` and Pipeline options)."""
    from falkirk.spark.pipeline.flagship import build

    return build(root, spark, **{**SMALL, **options})


def assert_identical(spark: Any, root: Path, reference: Path) -> None:
    """The responses and the SQLite database at ``root`` equal the reference's, row for row."""
    from falkirk.spark.pipeline.verify import compare_runs

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
