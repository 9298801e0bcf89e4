"""A long run's journal keeps a bounded history in memory (``Journal.trim``), and the recovery reports stay exact.

The reference is the same journal never trimmed: every recovery's costs
(falkirk's, the global rollback's, the replay from the start) must be the
same, while the trimmed one holds executions and measurements of at most
``HISTORY`` (plus a tenth) epochs besides what recoveries priced.
"""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from falkirk.spark.pipeline.run.journal import Journal, Recovery
from falkirk.spark.pipeline.tools.report import costs

STEPS = ("src", "a", "b")
INPUTS = {"src"}


class _Short(Journal):
    HISTORY = 10
    NOTES = 4


@st.composite
def _runs(draw: st.DrawFn) -> tuple[int, list[tuple[int, dict[str, int], dict[str, int], dict[str, list[int]],
                                                   tuple[int, int]]]]:
    """A run of ``epochs`` epochs with failures: (at epoch, each step's last completed epoch then, its
    frontier, what was available, the replayed input epochs)."""
    epochs = draw(st.integers(30, 90))
    failures = []
    for at in sorted(set(draw(st.lists(st.integers(2, epochs - 1), max_size=5)))):
        lw = max(0, at - draw(st.integers(1, 6)))
        done = {s: at - draw(st.integers(0, 1)) for s in STEPS}
        avail = {s: sorted(set(draw(st.lists(st.integers(lw, done[s]), max_size=3)))) for s in STEPS}
        # a recovery goes back no further than the history kept (a restart from empty state only early on):
        # beyond it, what an epoch first cost is forgotten and its re-execution prices it
        empty = [-1] if at < _Short.HISTORY else []
        frontier = {s: draw(st.sampled_from([*avail[s], *empty] if avail[s] else [max(lw, at - 3), *empty]))
                    for s in STEPS}
        lo = min(frontier.values()) + 1
        failures.append((at, done, frontier, avail, (lo, at)))
    return epochs, failures


def _play(journal: Journal, epochs: int, failures: list, rows: dict[tuple[str, int], int],
          fused: set[tuple[str, int]]) -> list[Recovery]:
    """Execute every step at every epoch (a ``fused`` one first without its count, known when it is executed
    again); at a failure record a recovery, execute its epochs again, and add a deferred cost to the epoch
    in flight."""
    recs = []
    due = {at: f for at, *f in failures}
    for e in range(epochs):
        for s in STEPS:
            # seconds in 64ths: their sums are exact in any order (the trimmed journal adds them up differently)
            n = -1 if (s, e) in fused else rows[(s, e)]
            journal.executed(s, e, rows=n, seconds=(1 + rows[(s, e)] % 7) / 64, redo=False)
        if e in due:
            done, frontier, avail, replayed = due[e]
            rec = Recovery(len(recs) + 1, f"failure at {e}", ("a",), dict(done), avail)
            rec.replayed["src->a"] = replayed
            first = min([f + 1 for f in frontier.values()] + [min(v) + 1 for v in avail.values() if v]
                        + [replayed[0]])
            journal.recovered(rec, first)
            for s in STEPS:
                for k in range(frontier[s] + 1, done[s] + 1):
                    journal.executed(s, k, rows=rows[(s, k)], seconds=0.5, redo=True, recovery=rec.index)
            journal.add_cost("a", done["a"], 3 / 64, None)  # its state made at the epoch's end
            recs.append(rec)
        journal.note(f"epoch {e}")
        journal.trim(e)
    return recs


def _first_redo(epoch: int, failures: list) -> int | None:
    """The failure whose recovery first executes ``epoch`` of ``b`` again, if one does and no earlier
    recovery was recorded at or after ``epoch`` (else ``-1``)."""
    for at, done, frontier, *_ in failures:
        if at < epoch:
            continue
        if frontier["b"] < epoch <= done["b"]:
            return at
        return -1  # recorded before its count is known: priced without it
    return None


@settings(max_examples=60, deadline=None)
@given(_runs(), st.randoms(use_true_random=False))
def test_a_trimmed_journal_prices_every_recovery_as_the_whole_history_does(run, rnd) -> None:  # type: ignore[no-untyped-def]
    epochs, failures = run
    rows = {(s, e): rnd.randrange(0, 50) for s in STEPS for e in range(epochs)}
    # a fused step's first record without its count, learned when a recovery executes it again: exact while
    # that recovery's own (a later recovery learning it leaves an earlier one's replay-from-the-start sum
    # without it, Journal.recovered); here each is re-executed by the first recovery after it, if any
    later = [at for at, *_ in failures]
    fused = {("b", e) for e in range(epochs) if rnd.random() < 0.2 and _first_redo(e, failures) in (None, *later)}
    whole, short = Journal(), _Short()
    whole.HISTORY = 10**9  # the reference: nothing forgotten
    ref = _play(whole, epochs, failures, rows, fused)
    got = _play(short, epochs, failures, rows, fused)
    assert whole.kept_from == 0 and short.kept_from > epochs - 2 * _Short.HISTORY
    for a, b in zip(ref, got, strict=True):
        for stateful in (["a"], ["a", "b"]):
            assert costs(short, b, inputs=INPUTS, stateful=stateful) == costs(whole, a, inputs=INPUTS,
                                                                                stateful=stateful)
    # bounded: of the epochs no recovery priced, at most HISTORY + HISTORY // 10 are kept
    pinned = set()
    for at, done, frontier, avail, replayed in failures:
        lo = min([f + 1 for f in frontier.values()] + [min(v) + 1 for v in avail.values() if v] + [replayed[0]]
                 + [min(done.values())])
        pinned |= set(range(lo, at + 1))
    kept = {x.epoch for x in short.executions if x.recovery is None}
    assert len(kept - pinned) <= _Short.HISTORY + _Short.HISTORY // 10
    assert len(short.notes) <= 2 * _Short.NOTES and short.notes[-1] == f"epoch {epochs - 1}"
    assert short.notes_dropped + len(short.notes) == epochs
    # the epoch line's executions: the last epoch's, all of them
    assert [x.step for x in short.at(epochs - 1) if not x.redo] == list(STEPS)


def test_memory_stays_flat_over_a_long_run() -> None:
    """Ten thousand epochs of three steps: the journal's memory after 10,000 is what it was after 5,000."""
    journal = Journal()

    def run(lo: int, hi: int) -> None:
        for e in range(lo, hi):
            for s in STEPS:
                journal.executed(s, e, rows=e % 97, seconds=0.25, redo=False, cpu=0.5, jit=0.01, started=1.0 * e)
            journal.trim(e)

    tracemalloc.start()
    try:
        run(0, 5_000)
        half = tracemalloc.get_traced_memory()[0]
        run(5_000, 10_000)
        full = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # the same window of epochs kept at both points (up to a trim step's tenth): no growth beyond it
    assert full < half * 1.15, (half, full)
    assert journal.kept_from >= 10_000 - Journal.HISTORY - Journal.HISTORY // 10
    assert len(journal.executions) <= (Journal.HISTORY + Journal.HISTORY // 10) * len(STEPS)
    # and what it forgot still prices a replay from the start: every epoch's rows
    rec = Recovery(1, "end", ("a",), dict.fromkeys(STEPS, 9_999), {})
    journal.recovered(rec, 9_999)
    *_, start = costs(journal, rec, inputs=INPUTS, stateful=["a"])
    every = sum(e % 97 for e in range(10_000))  # one step's rows over the whole run
    assert (start.recomputed, start.source_rows) == (2 * every, every)  # a and b; src is the input
    assert start.seconds == 0.25 * 10_000 * 2 and start.pairs == 2 * 10_000


def test_work_left_to_the_epochs_end_is_added_and_kept_apart() -> None:
    """A step's state made at the epoch's end (``add_cost``) counts in its execution's cost, JIT share
    included, and is kept apart as ``later_*`` (a benchmark's window after a later step's failure holds it)."""
    journal = Journal(None)
    journal.executed("a", 3, rows=10, seconds=0.5, redo=False, cpu=1.0, jit=0.125)
    journal.add_cost("a", 3, 0.25, 0.5, 0.0625)
    journal.add_cost("a", 3, 0.125, 0.25, 0.0)
    ex = journal.executions[-1]
    assert (ex.seconds, ex.cpu, ex.jit) == (0.875, 1.75, 0.1875)
    assert (ex.later_seconds, ex.later_cpu, ex.later_jit) == (0.375, 0.75, 0.0625)
    assert journal.cpu("a", 3) == 1.75
    journal.executed("b", 3, rows=1, seconds=0.5, redo=False)  # CPU not measured: none is made up
    journal.add_cost("b", 3, 0.25, None, None)
    ex = journal.executions[-1]
    assert (ex.seconds, ex.cpu, ex.jit, ex.later_seconds, ex.later_cpu) == (0.75, None, None, 0.25, None)
