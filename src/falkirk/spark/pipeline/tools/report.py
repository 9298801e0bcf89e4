"""The recovery report: falkirk's plan and its cost next to global rollback and replay from the start.

For a recovery, the three schemes are costed from the per-(step, epoch)
measurements of the same run (:class:`~falkirk.spark.pipeline.run.journal.Journal`):

* **falkirk** — what was actually re-executed: the step outputs recomputed,
  and the records replayed from logs (input log and logged step outputs);
* **global rollback** — every step back to the last epoch at which *every*
  stateful step had a checkpoint, everything after it recomputed and the
  input re-read;
* **replay from the start** — every step from its initial state, the whole
  input log re-read (input logging, SPEC §8).

"records recomputed" counts output rows of the steps (inputs excluded);
"input re-read / replayed" counts rows read again from the input log or a
step's log; "est. compute" sums the measured time of the first execution of
each recomputed (step, epoch).

>>> print(format_costs([Cost("falkirk (this run)", 196, 1291, 6.4, 6), Cost("global rollback to epoch 2", 1416, 840, 11.4, 10)]))
scheme                      records recomputed  input/log records re-read  (step, epoch) redone  est. compute
--------------------------  ------------------  -------------------------  --------------------  ------------
falkirk (this run)                         196                       1291                     6         6.4 s
global rollback to epoch 2                1416                        840                    10        11.4 s
"""

from __future__ import annotations

from attrs import frozen

from falkirk.spark.pipeline.plan.explain import plan_table, replayed_line, show_epoch, why
from falkirk.spark.pipeline.run.journal import Journal, Recovery

__all__ = ["Cost", "costs", "format_recovery", "format_costs", "last_common_checkpoint"]


@frozen
class Cost:
    """The cost of one recovery scheme (see the module docstring)."""

    scheme: str
    recomputed: int
    reread: int
    seconds: float
    pairs: int


def last_common_checkpoint(rec: Recovery, stateful: list[str]) -> int:
    """The last epoch at which every stateful step had a persisted checkpoint (``-1``: none)."""
    common: set[int] | None = None
    for n in stateful:
        have = set(rec.available_at_failure.get(n, ())) | {-1}
        common = have if common is None else common & have
    return max(common) if common else -1


def _cost(journal: Journal, scheme: str, pairs: list[tuple[str, int]], inputs: set[str]) -> Cost:
    rec = sum(journal.rows(s, e) or 0 for s, e in pairs if s not in inputs)
    reread = sum(journal.rows(s, e) or 0 for s, e in pairs if s in inputs)
    secs = sum(journal.seconds(s, e) or 0.0 for s, e in pairs if s not in inputs)
    return Cost(scheme, rec, reread, secs, sum(1 for s, _ in pairs if s not in inputs))


def costs(journal: Journal, rec: Recovery, *, inputs: set[str], stateful: list[str]) -> list[Cost]:
    """falkirk's measured cost of ``rec`` and the two alternatives' (from the same run's measurements)."""
    done = rec.done_at_failure
    redo = [(x.step, x.epoch) for x in journal.executions if x.recovery == rec.index and x.redo]
    replayed = 0
    for edge, (lo, hi) in rec.replayed.items():
        src = edge.split("->")[0]
        replayed += sum(journal.rows(src, k) or 0 for k in range(lo, hi + 1))
    mine = _cost(journal, "falkirk (this run)", redo, inputs)
    mine = Cost(mine.scheme, mine.recomputed, mine.reread + replayed, mine.seconds, mine.pairs)
    g = last_common_checkpoint(rec, stateful)
    glob = [(s, e) for s, d in done.items() for e in range(g + 1, d + 1)]
    start = [(s, e) for s, d in done.items() for e in range(0, d + 1)]
    return [mine, _cost(journal, f"global rollback to epoch {g}" if g >= 0 else "global rollback (no common checkpoint)", glob, inputs),
            _cost(journal, "input replay from the start", start, inputs)]


def format_costs(cs: list[Cost]) -> str:
    """The comparison table."""
    rows = [("scheme", "records recomputed", "input/log records re-read", "(step, epoch) redone", "est. compute")]
    rows += [(c.scheme, str(c.recomputed), str(c.reread), str(c.pairs), f"{c.seconds:.1f} s") for c in cs]
    w = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(r[i].ljust(w[i]) if i == 0 else r[i].rjust(w[i]) for i in range(5)) for r in rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def format_recovery(journal: Journal, rec: Recovery, *, inputs: set[str], stateful: list[str]) -> str:
    """One recovery: cause, the plan per step with the constraint that forced it, replays, costs."""
    plan = rec.plan
    out = [f"recovery {rec.index}: {rec.cause}"]
    took = "not finished" if rec.seconds is None else f"{rec.seconds:.2f} s"
    who = (f"resumed: all {len(rec.failed)} steps (a new driver holds nothing in memory)" if rec.restart
           else f"failed: {', '.join(rec.failed)}")
    out.append(f"  {who}; planned by {rec.planner} in {rec.plan_seconds * 1000:.1f} ms; "
               f"recovery wall time (until every step was back where it had been): {took}")
    for p in rec.problems:
        out.append(f"  unusable data found and skipped: {p}")
    rows = [("step", "action", "frontier", "had done", "why")]
    for n, f in plan.frontiers.items():
        had = rec.done_at_failure.get(n, -1)
        rows.append((n, plan.actions[n], show_epoch(f), "-" if had < 0 else str(had), why(plan, n) if not f.is_top else ""))
    out += plan_table(rows)
    if rec.replayed:
        out.append(replayed_line(rec.replayed))
    out.append("")
    out.append(format_costs(costs(journal, rec, inputs=inputs, stateful=stateful)))
    return "\n".join(out)
