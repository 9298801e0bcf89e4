"""W6: a code change of the downstream stateful step; its last epochs recomputed with the new code.

``W6`` — **a code change** of the downstream stateful step. After ``N``
epochs (``--w6-epochs``) with ``totals`` v1, its code changes (v2:
``avg_spend`` in cents, ``(spend * 100) div events``; the state's update is
unchanged) and its last 10 epochs must be recomputed with the new code.

* ``falkirk`` — the W4 pipeline with ``gc=False`` (every checkpoint and log
  kept, so the epoch to redo from is restorable); the pipeline is re-declared
  with v2 and ``code_changes={"totals": N - 11}``: falkirk restores
  ``totals`` to epoch ``N - 11`` (its checkpoint at or before it plus
  ``heavy``'s log) and redoes ``totals`` and ``totals_out`` for epochs
  ``N - 10 … N - 1``; ``heavy`` and ``sink`` do not run.
* ``streaming`` — what its guide allows (stateful operators may not change
  between restarts of a checkpoint, and a changed Python function inside
  ``applyInPandasWithState`` cannot recompute batches already committed): a
  **new checkpoint location** and the whole query reprocessed from the
  earliest input the changed step needs — epoch 0, since its state goes
  back to the first epoch. The sink's exactly-once check skips ``heavy``
  and the SQLite insert for the epochs already in the database; the totals
  of every epoch are rewritten (v2).
* ``streaming-split`` — only query 1 (the totals) gets a new checkpoint
  location and reprocesses epochs ``0 … N - 1``; query 2 is untouched.

(Deleting ``offsets/``/``commits/`` above a batch rolls a stopped query
back while the state store still retains that version — undocumented, not
what the guide allows, not measured.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .measure import stamp
from .w4 import compare, outputs_of, recomputed, run_falkirk_w4
from .w4_streaming import StreamingW4

REDO = 10  # W6: the last REDO epochs are recomputed with the new code


def phase_w6(spec: dict[str, Any], spark: Any) -> dict[str, Any]:
    """One configuration of W6: N epochs with v1 (measured), the code change, a fresh v2 run (the reference)."""
    size, n, base = spec["size"], spec["size"]["epochs"], Path(spec["base"])
    redo = spec.get("redo", REDO)
    e = n - redo - 1
    last = range(n - redo, n)
    out: dict[str, Any] = {"redo_from_epoch": e + 1}
    if spec["system"] == "streaming":
        inp = Path(spec["input"])
        v1 = StreamingW4(spark, inp, base / "run", spec["mode"])
        v1.run()
        walls, cpus = v1.per_epoch()
        out.update(bytes=dict(v1.written.bytes), peak_rss=max(m.peak_rss for m in v1.meters.values()))
        # the change: a new checkpoint location for the changed query, reprocessing from epoch 0
        v2 = StreamingW4(spark, inp, base / "run", spec["mode"], version=2, checkpoint="checkpoint-v2")
        t0 = stamp()
        v2.run(only=("single",) if spec["mode"] == "single" else ("totals",))
        t1 = stamp()
        rows_in = sum(p["numInputRows"] for p in v2.progress)
        out.update(recovery_s=t1[0] - t0[0], recovery_cpu_s=t1[1] - t0[1], source_rows=rows_in, log_rows=0,
                   batches_rerun=[p["batchId"] for p in v2.progress],
                   records_recomputed=recomputed(size, range(n), spec["mode"], heavy=False))
        StreamingW4(spark, inp, base / "reference", spec["mode"], version=2).run()
        got_base, ref_base = base / "run", base / "reference"
    else:
        r1 = run_falkirk_w4(spark, base / "run", size, spec, epochs=n, gc=False)
        walls, cpus = r1["meter"].per_epoch()
        out.update(bytes=r1["bytes"], peak_rss=r1["meter"].peak_rss,
                   regimes={k: s.regime.describe() for k, s in r1["pipe"].steps.items()})
        t0 = stamp()
        r2 = run_falkirk_w4(spark, base / "run", size, spec, epochs=n, version=2, gc=False,
                            code_changes={"totals": e}, fill=False)
        t1 = stamp()
        journal = r2["result"].journal
        redone = [(x.step, x.epoch, x.rows) for x in journal.executions]
        out.update(recovery_s=t1[0] - t0[0], recovery_cpu_s=t1[1] - t0[1], redone=redone,
                   records_recomputed=sum(x[2] or 0 for x in redone),
                   source_rows=sum(x[2] or 0 for x in redone if x[0] == "heavy"),  # heavy re-reading the input
                   log_rows=sum(journal.rows("heavy", k) or 0 for k in {k for s, k, _ in redone if s == "totals"}),
                   notes=list(getattr(journal, "notes", []))[:20])
        run_falkirk_w4(spark, base / "reference", size, spec, epochs=n, version=2)
        got_base, ref_base = base / "run", base / "reference"
    out.update(walls=walls, cpus=cpus)
    out.update(compare(outputs_of(spark, got_base, last), outputs_of(spark, ref_base, last), redo))
    return out
