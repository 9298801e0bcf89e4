"""Garbage collection keeps falkirk's own storage bounded over a longer run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import flagship

from falkirk.spark import Storage
from falkirk.spark.pipeline.store.rootfs import Root

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LONG = 8


def falkirk_bytes(root: Path) -> int:
    """Bytes under ``root`` that falkirk keeps for recovery (not the external outputs: responses, stats DB)."""
    fs = Root(root)
    outputs = fs.size("output") + sum(p.stat().st_size for p in root.glob("stats.sqlite*"))
    return fs.size() - outputs


def test_gc_keeps_the_root_bounded(spark: Any, tmp_path: Path) -> None:
    """Over 8 epochs the recovery data (checkpoints, logs, input, manifests) stops growing after a few epochs,
    keeping what the default retention (two checkpoints per step) needs."""
    sizes: dict[int, int] = {}

    def measure(line: str) -> None:
        if line.startswith("epoch"):
            sizes[int(line.split()[1])] = falkirk_bytes(tmp_path)

    result = flagship(tmp_path, spark).run(LONG, progress=measure)
    print("falkirk bytes per epoch:", sizes)
    assert sorted(sizes) == list(range(LONG))
    early, late = max(sizes[e] for e in range(3, 5)), max(sizes[e] for e in range(5, LONG))
    assert late <= 1.25 * early, sizes
    storage = Storage(tmp_path)
    # cc_every=2, retain=2 (the default): the checkpoint at the watermark and the one before it
    assert storage.epochs("cc", "checkpoint") == [LONG - 3, LONG - 1]
    assert len(storage.epochs("heavy", "log")) <= 4
    part = tmp_path / "input" / "events" / "part-0"
    assert len(list(part.glob("*.json"))) <= 5 and len(list(part.glob("*.parquet"))) <= 5  # segments: manifest + data
    assert result.done == {n: LONG - 1 for n in result.done}


def test_a_long_run_keeps_a_bounded_history_in_memory(spark: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """A run longer than the journal's history (4 epochs here, 1,000 by default) forgets its oldest executions
    and latencies, and still recovers exactly and reports the recovery's costs as a journal that forgot
    nothing does."""
    from spark_support import all_regimes

    from falkirk.spark.pipeline.run.journal import Journal
    from falkirk.spark.pipeline.tools.report import costs
    from falkirk.spark.pipeline.tools.verify import compare_runs

    epochs, history = 14, 4
    reference = tmp_path / "reference"
    whole = all_regimes(reference, spark).run(epochs, fail="rolling@10:before")
    monkeypatch.setattr(Journal, "HISTORY", history)
    root = tmp_path / "root"
    result = all_regimes(root, spark).run(epochs, fail="rolling@10:before")
    cmp = compare_runs(spark, all_regimes(root, spark), root, reference)
    assert cmp.identical and cmp.rows_compared > 0, [d.describe() for d in cmp.differences]
    assert result.done == {n: epochs - 1 for n in result.done}
    journal = result.journal
    assert journal.kept_from == epochs - history and whole.journal.kept_from == 0
    kept = {x.epoch for x in journal.executions if x.recovery is None}
    assert min(kept) >= journal.kept_from and max(kept) == epochs - 1
    assert {x.epoch for x in journal.executions if x.recovery is not None}  # the recovery's stay
    assert min(result.latency["report"].epochs) >= journal.kept_from
    pipe = all_regimes(root, spark)
    stateful = [n for n in pipe.steps if not pipe.stateless(n)]
    [rec], [ref] = journal.recoveries, whole.journal.recoveries
    mine, glob, start = costs(journal, rec, inputs=set(pipe.inputs), stateful=stateful)
    theirs = costs(whole.journal, ref, inputs=set(pipe.inputs), stateful=stateful)
    # the same epochs redone and re-read (seconds are measured, so they differ between the two runs)
    assert [(c.scheme, c.recomputed, c.reread, c.pairs) for c in (mine, glob, start)] == [
        (c.scheme, c.recomputed, c.reread, c.pairs) for c in theirs
    ]
