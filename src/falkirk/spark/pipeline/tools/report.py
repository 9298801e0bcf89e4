"""The recovery report: falkirk's plan and its cost next to global rollback and replay from the start.

For a recovery, the three schemes are costed from the per-(step, epoch)
measurements of the same run (:class:`~falkirk.spark.pipeline.run.journal.Journal`):

* **falkirk** — what was actually executed again: every (step, epoch) the
  pipeline had completed before the failure and executed again after it —
  after a driver restart also the epochs the new driver knows only from the
  execution records under the root (a Lazy step's epochs after its last
  checkpoint) — and the rows read again from the input log and replayed
  from logged step outputs;
* **global rollback** — every step back to the last epoch at which *every*
  stateful step had a checkpoint, everything after it recomputed and the
  input re-read;
* **replay from the start** — every step from its initial state, the whole
  input log re-read (input logging, SPEC §8).

"records recomputed" counts the output rows of the steps executed again
(inputs excluded; the work of the epoch in flight that had not completed is
not recomputation, it had never been done); "source rows" the rows read
again from the input log (an input epoch executed again, or replayed to a
consumer: counted per read); "log rows" the rows replayed from the logs of
steps (:class:`~falkirk.spark.pipeline.declare.regimes.Batch`, ``log=True``);
"est. compute" sums the measured time of the first execution of each
recomputed (step, epoch). The recovery's wall time is given by phase
(:meth:`~falkirk.spark.pipeline.run.journal.Recovery.phases`).

>>> print(format_costs([Cost("falkirk (this run)", 196, 1100, 191, 6.4, 6),
...                     Cost("global rollback to epoch 2", 1416, 840, 0, 11.4, 10)]))
scheme                      records recomputed  source rows re-read  log rows replayed  (step, epoch) redone  est. compute
--------------------------  ------------------  -------------------  -----------------  --------------------  ------------
falkirk (this run)                         196                 1100                191                     6         6.4 s
global rollback to epoch 2                1416                  840                  0                    10        11.4 s
>>> print(format_phases({"session start": None, "metadata rebuild": 0.31, "validation": 0.05,
...                      "replay/recompute": 6.2, "catch-up": 2.4}))
  wall time by phase: session start - (not measured) · metadata rebuild 0.31 s · validation 0.05 s · replay/recompute 6.20 s · catch-up 2.40 s
"""

from __future__ import annotations

from attrs import evolve, frozen

from falkirk.spark.pipeline.plan.explain import plan_table, replayed_line, show_epoch, why
from falkirk.spark.pipeline.run.journal import Journal, Recovery

__all__ = [
    "Cost",
    "costs",
    "redone",
    "format_recovery",
    "format_costs",
    "format_phases",
    "last_common_checkpoint",
]


@frozen
class Cost:
    """The cost of one recovery scheme (see the module docstring)."""

    scheme: str
    recomputed: int
    source_rows: int
    log_rows: int
    seconds: float
    pairs: int

    @property
    def reread(self) -> int:
        """Source and log rows together: every row read again instead of recomputed."""
        return self.source_rows + self.log_rows


def last_common_checkpoint(rec: Recovery, stateful: list[str]) -> int:
    """The last epoch at which every stateful step had a persisted checkpoint (``-1``: none)."""
    common: set[int] | None = None
    for n in stateful:
        have = set(rec.available_at_failure.get(n, ())) | {-1}
        common = have if common is None else common & have
    return max(common) if common else -1


def _cost(
    journal: Journal,
    scheme: str,
    pairs: list[tuple[str, int]],
    inputs: set[str],
    *,
    log_rows: int = 0,
    replayed_source: int = 0,
) -> Cost:
    rec = sum(journal.rows(s, e) or 0 for s, e in pairs if s not in inputs)
    source = sum(journal.rows(s, e) or 0 for s, e in pairs if s in inputs) + replayed_source
    secs = sum(journal.seconds(s, e) or 0.0 for s, e in pairs if s not in inputs)
    return Cost(scheme, rec, source, log_rows, secs, sum(1 for s, _ in pairs if s not in inputs))


def redone(journal: Journal, rec: Recovery) -> list[tuple[str, int]]:
    """The (step, epoch) pairs ``rec`` executed again (inputs included), in the order executed; an output's
    committed epochs it kept (what was sent again discarded) are not among them."""
    return [
        (x.step, x.epoch)
        for x in journal.executions
        if x.recovery == rec.index and x.redo and not x.discarded
    ]


def costs(journal: Journal, rec: Recovery, *, inputs: set[str], stateful: list[str]) -> list[Cost]:
    """falkirk's measured cost of ``rec`` and the two alternatives' (from the same run's measurements)."""
    done = rec.done_at_failure
    source = log = 0
    for edge, (lo, hi) in rec.replayed.items():
        src = edge.split("->")[0]
        rows = sum(journal.rows(src, k) or 0 for k in range(lo, hi + 1))
        if src in inputs:
            source += rows
        else:
            log += rows
    mine = _cost(
        journal, "falkirk (this run)", redone(journal, rec), inputs, log_rows=log, replayed_source=source
    )
    g = last_common_checkpoint(rec, stateful)
    glob = [(s, e) for s, d in done.items() for e in range(g + 1, d + 1)]
    start = [(s, e) for s, d in done.items() for e in range(0, d + 1)]
    replay = _totals(journal, rec, "input replay from the start", inputs) if journal.kept_from else None
    if replay is None:
        replay = _cost(journal, "input replay from the start", start, inputs)
    if g >= 0:  # a run that forgot its oldest epochs (Journal.trim) kept those after any checkpoint it had
        return [mine, _cost(journal, f"global rollback to epoch {g}", glob, inputs), replay]
    # no common checkpoint: the global rollback recomputes what the replay from the start does
    return [mine, evolve(replay, scheme="global rollback (no common checkpoint)"), replay]


def _totals(journal: Journal, rec: Recovery, scheme: str, inputs: set[str]) -> Cost | None:
    """Recomputing every step's epochs ``0..done_at_failure``, priced from the sums taken when ``rec`` was
    recorded (epochs before :attr:`~falkirk.spark.pipeline.run.journal.Recovery.base`) and the kept
    measurements after (``None``: no sums were taken)."""
    if rec.totals is None:
        return None
    done = rec.done_at_failure
    kept = _cost(journal, scheme, [(s, e) for s, d in done.items() for e in range(rec.base, d + 1)], inputs)
    steps = [s for s in done if s not in inputs]
    return Cost(
        scheme,
        kept.recomputed + sum(rec.totals[s][0] for s in steps),
        kept.source_rows + sum(rec.totals[s][0] for s in done if s in inputs),
        0,
        kept.seconds + sum(rec.totals[s][1] for s in steps),
        sum(d + 1 for s, d in done.items() if s not in inputs),
    )


def format_costs(cs: list[Cost]) -> str:
    """The comparison table."""
    rows = [
        (
            "scheme",
            "records recomputed",
            "source rows re-read",
            "log rows replayed",
            "(step, epoch) redone",
            "est. compute",
        )
    ]
    rows += [
        (c.scheme, str(c.recomputed), str(c.source_rows), str(c.log_rows), str(c.pairs), f"{c.seconds:.1f} s")
        for c in cs
    ]
    k = len(rows[0])
    w = [max(len(r[i]) for r in rows) for i in range(k)]
    lines = ["  ".join(r[i].ljust(w[i]) if i == 0 else r[i].rjust(w[i]) for i in range(k)) for r in rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def format_phases(phases: dict[str, float | None]) -> str:
    """The line of a recovery's wall time by phase (``-``: not measured, or not reached)."""

    def show(name: str, v: float | None) -> str:
        if v is not None:
            return f"{name} {v:.2f} s"
        return f"{name} - (not measured)" if name == "session start" else f"{name} - (not reached)"

    return "  wall time by phase: " + " · ".join(show(n, v) for n, v in phases.items())


def _redone_line(journal: Journal, rec: Recovery, inputs: set[str]) -> str:
    """``executed again: cc 3 (180 rows), parse_graph 3–4 (252 rows), …`` (steps in run order)."""
    by_step: dict[str, list[int]] = {}
    for s, e in redone(journal, rec):
        by_step.setdefault(s, []).append(e)
    parts = []
    for s, es in by_step.items():
        es = sorted(set(es))
        span = (
            str(es[0])
            if len(es) == 1
            else f"{es[0]}–{es[-1]}"
            if es == list(range(es[0], es[-1] + 1))
            else ",".join(map(str, es))
        )
        rows = sum(journal.rows(s, e) or 0 for e in es)
        parts.append(f"{s} {span} ({rows} {'source rows' if s in inputs else 'rows'})")
    return "  executed again: " + (", ".join(parts) if parts else "nothing")


def format_recovery(journal: Journal, rec: Recovery, *, inputs: set[str], stateful: list[str]) -> str:
    """One recovery: cause, the plan per step with the constraint that forced it, replays, costs."""
    plan = rec.plan
    out = [f"recovery {rec.index}: {rec.cause}"]
    took = "not finished" if rec.seconds is None else f"{rec.seconds:.2f} s"
    who = (
        f"resumed: all {len(rec.failed)} steps (a new driver holds nothing in memory)"
        if rec.restart
        else f"failed: {', '.join(rec.failed)}"
        if rec.in_place is None
        else f"failed: the Spark job of {rec.in_place[0]} at epoch {rec.in_place[1]}, retried in place (no step lost "
        "its state: nothing rolled back)"
    )
    out.append(
        f"  {who}; planned by {rec.planner} in {rec.plan_seconds * 1000:.1f} ms; "
        f"recovery wall time (until every step was back where it had been): {took}"
    )
    out.append(format_phases(rec.phases()))
    for p in rec.problems:
        out.append(f"  unusable data found and skipped: {p}")
    rows = [("step", "action", "frontier", "had done", "why")]
    for n, f in plan.frontiers.items():
        had = rec.done_at_failure.get(n, -1)
        rows.append(
            (
                n,
                plan.actions[n],
                show_epoch(f),
                "-" if had < 0 else str(had),
                why(plan, n) if not f.is_top else "",
            )
        )
    out += plan_table(rows)
    if rec.replayed:
        out.append(replayed_line(rec.replayed))
    for n, kept in rec.discarded.items():
        out.append(
            f"  {n} kept its committed epochs {kept[0]}..{kept[-1]} as they were (final); what was sent again "
            f"for them was discarded"
            if kept == list(range(kept[0], kept[-1] + 1))
            else f"  {n} kept its committed epochs {', '.join(map(str, kept))} as they were (final); what was sent "
            "again for them was discarded"
        )
    out.append(_redone_line(journal, rec, inputs))
    out.append("")
    out.append(format_costs(costs(journal, rec, inputs=inputs, stateful=stateful)))
    return "\n".join(out)
