"""Plans for people: frontiers as epochs, aligned tables, and the constraint behind a frontier.

Shared by the what-if (:mod:`~falkirk.spark.pipeline.plan.whatif`) and the
recovery report (:mod:`~falkirk.spark.pipeline.tools.report`), so a plan
reads the same wherever it is printed.

>>> from falkirk.domains import Epoch
>>> show_epoch(Epoch().decode("top")), show_epoch(Epoch().decode("empty")), show_epoch(Epoch().decode(3))
('⊤', '∅', '3')
>>> print("\\n".join(plan_table([("step", "action", "why"), ("cc", "restore", "it failed")])))
  step  action   why
  ----  -------  ---
  cc    restore  it failed
>>> replayed_line({"a->b": (3, 5), "c->d": (4, 4)})
'  replayed from logs: a->b epochs 3–5, c->d epoch 4'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from falkirk.spark.pipeline.plan.planner import epoch_of

__all__ = ["why", "show_epoch", "plan_table", "replayed_line"]


def why(plan: Any, name: str) -> str:
    """The constraint that last lowered ``name``'s frontier in ``plan`` (empty at ``⊤``)."""
    lines = plan.explain(name)
    return lines[-1] if lines else ""


def show_epoch(f: Any) -> str:
    """An epoch frontier for people: ``⊤``, ``∅`` or the last epoch."""
    e = epoch_of(f)
    return "⊤" if f.is_top else "∅" if e < 0 else str(e)


def plan_table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Indented, aligned lines of ``rows`` (the first is the header; the last column is left ragged)."""
    k = len(rows[0]) - 1
    w = [max(len(r[i]) for r in rows) for i in range(k)]
    out = []
    for i, r in enumerate(rows):
        out.append("  " + "  ".join(r[j].ljust(w[j]) for j in range(k)) + "  " + r[k])
        if i == 0:
            out.append("  " + "  ".join("-" * x for x in w) + "  ---")
    return out


def replayed_line(replayed: Any) -> str:
    """``replayed from logs: edge epochs lo–hi, …`` for ``{edge: (lo, hi)}``."""
    return "  replayed from logs: " + ", ".join(
        f"{e} epochs {lo}–{hi}" if hi > lo else f"{e} epoch {lo}" for e, (lo, hi) in replayed.items()
    )
