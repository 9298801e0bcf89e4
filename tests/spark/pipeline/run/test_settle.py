"""A new driver's ``settle`` (retention.py) when branches ran apart: a restart plans as it would with every
output epoch of the run, however far back its recovery goes.

With ``concurrency > 1`` a logging step runs ahead of its slowest consumer, garbage collection runs only at the
epochs every node completed, and a logging step's log is kept for its slowest consumer while the input is
acknowledged for the fast one. A first version of ``settle`` counted only stateful steps' restore points and
inputs' cuts, and dropped the output epochs a consumer of such a log could roll back to: a restart that took out a
damaged output epoch, or held a changed step to an epoch, planned everything back to nothing and stopped (found by
review). Storage is simulated here as garbage collection leaves it (no Spark); plans, the checks against storage
and ``settle`` are the real ones.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from falkirk.solver import RollbackPlan
from falkirk.spark.errors import CorruptDataError
from falkirk.spark.pipeline.api import Pipeline
from falkirk.spark.pipeline.declare.regimes import Batch, Ephemeral
from falkirk.spark.pipeline.plan.feasible import Outcome, executable_plan
from falkirk.spark.pipeline.plan.planner import TOP, Planner, epoch_of
from falkirk.spark.pipeline.run.retention import retained_watermarks, settle

#: the fast branches, and the branches that may lag (each at its own pace)
_FAST, _LAGGING = ["I", "L", "C", "out", "F", "out3"], {"D": ["D", "out2"], "G": ["G", "out4"]}


def _branches(root: Path, retain: int) -> Pipeline:
    """No stateful step; a logging step and the input itself each feed a fast and a slow branch::

        I -> L (Batch, logs) -> C -> out      I -> F -> out3
             L               -> D -> out2     I -> G -> out4
    """
    pipe = Pipeline(str(root), None, retain=retain)
    pipe.input("I", "x long")

    def L(I: Any) -> Any:  # noqa: E741 (the input's name)
        return I

    def C(L: Any) -> Any:
        return L

    def F(I: Any) -> Any:  # noqa: E741
        return I

    pipe.step(L, regime=Batch())
    for name, fn, out in [("C", C, "out"), ("D", C, "out2"), ("F", F, "out3"), ("G", F, "out4")]:
        pipe.step(fn, name=name, regime=Ephemeral())
        pipe.output(out, inputs=[name])
    return pipe


class _Node:
    """What a stateless node's runner lists: its newest ``retain`` complete markers (an input: its cuts from the
    acknowledged epoch on)."""

    def __init__(self, retain: int, cuts: bool = False) -> None:
        self.retain, self.cuts, self.done, self.acked = retain, cuts, -1, -1

    def available(self) -> list[int]:
        if self.cuts:
            return list(range(max(self.acked, 0), self.done + 1))
        return list(range(max(0, self.done - self.retain + 1), self.done + 1))


class _Run:
    """The fast branches (:data:`_FAST`) completed epochs up to ``fast`` while the lagging ones completed those up
    to ``slow[D]`` (``D``, ``out2``: L's log is kept for them) and ``slow[G]`` (``G``, ``out4``: the input is),
    with garbage collection at every epoch all nodes completed (``retention.collect``)."""

    def __init__(self, pipe: Pipeline, fast: int, slow: dict[str, int]) -> None:
        self.pipe = pipe
        self.nodes = {n: _Node(pipe.retain, cuts=n == "I") for n in pipe.order if n not in pipe.external_outputs}
        self.planner = Planner(pipe.dataflow(), outputs=pipe.external_outputs, monitor=False)
        self.done = {n: -1 for n in pipe.order}
        self.log_above = -1  # L's log: epochs above this stay
        collected = -1
        for t in range(fast + 1):
            for n in _FAST:
                self._complete(n, t)
            for head, branch in _LAGGING.items():
                lag = t * slow[head] // max(fast, 1)
                if lag > self.done[head]:
                    for n in branch:
                        self._complete(n, lag)
            while collected < min(self.done.values()):
                collected += 1
                self._collect()

    def _complete(self, n: str, e: int) -> None:
        self.done[n] = e
        self.planner.record(n, e)
        if n in self.nodes:
            self.nodes[n].done = e

    def _collect(self) -> None:
        pipe, lw = self.pipe, retained_watermarks(self.pipe, self.planner, self.nodes)  # type: ignore[arg-type]
        for n in pipe.order:
            below = min((lw[q] for q in pipe.consumers(n)), default=lw[n])
            if n == "I" and min(lw[n], below) >= 0:  # InputRunner.collect
                self.nodes["I"].acked = max(self.nodes["I"].acked, min(lw[n], below))
            if n in pipe.external_outputs and lw[n] >= 0:  # StepRunner.collect: the planner only
                self.planner.prune(n, lw[n])
            if n == "L" and below >= 0:
                self.log_above = max(self.log_above, below)

    def restart(self, settled: bool) -> Planner:
        """A new driver's planner: what it finds in storage (every epoch an output committed), settled or not."""
        found = {n: r.available() for n, r in self.nodes.items()}
        found |= {o: list(range(self.done[o] + 1)) for o in self.pipe.external_outputs}
        p = Planner(self.pipe.dataflow(), outputs=self.pipe.external_outputs, known=found, monitor=False)
        if settled:
            logged = {"L": list(range(self.log_above + 1, self.done["L"] + 1))}
            settle(self.pipe, p, self.nodes, found, logged)  # type: ignore[arg-type]
        return p

    def check(self, plan: RollbackPlan, _: object) -> CorruptDataError | None:
        """check_plan's replay checks against what garbage collection left."""
        for r in plan.replay.values():
            fp = epoch_of(r.log_frontier)
            hi = self.done[r.sender] if fp == TOP else min(fp, self.done[r.sender])
            for k in range(epoch_of(r.exclude) + 1, hi + 1):
                if r.sender == "I" and k <= self.nodes["I"].acked:
                    return CorruptDataError("I", "input", k, "was acknowledged and deleted by garbage collection")
                if r.sender == "L" and k <= self.log_above:
                    return CorruptDataError("L", "log", k, "was deleted by garbage collection")
        return None

    def recover(self, p: Planner, damaged: tuple[str, int] | None, limit: tuple[str, int] | None) -> Outcome:
        """Rollback._outcome at a restart: held to ``limit``, with ``damaged`` output epoch found unusable."""
        trial = p.copy()
        if limit is not None:
            trial.truncate(*limit)
        lost = [CorruptDataError(damaged[0], "output", damaged[1], "differs from its manifest")] if damaged else []
        return executable_plan(self.pipe, trial, set(self.pipe.order), lambda f: {}, self.check, lost=lost)


def _summary(o: Outcome) -> tuple[bool, dict[str, int] | None, list[str]]:
    """Whether the restart recovers, and if it does its frontiers and the unusable items it planned without. (A
    refusal names the plan that needs deleted data: a settled planner's may reach further back, where it has no
    output epoch, and name an earlier deleted epoch.)"""
    if not o.executable:
        return False, None, []
    return True, {n: epoch_of(f) for n, f in o.plan.frontiers.items()}, sorted(map(str, o.problems))


@pytest.mark.parametrize(
    ("slow", "kept", "why"),
    [({"D": 10, "G": 30}, (9, 29), "L's log, kept from 10 for D"), ({"D": 30, "G": 10}, (29, 9), "the input's cuts")],
)
def test_a_slow_consumer_keeps_the_output_epochs_a_restart_needs(
    tmp_path: Path, slow: dict[str, int], kept: tuple[int, int], why: str
) -> None:
    """The review's case: the fast branches at epoch 30, a slow one at 10. It holds back L's log (or the input's
    cuts), not the other; a restart finds ``out``'s (``out3``'s) epoch 20 damaged, or ``C``'s (``F``'s) code
    changed after 19: that output goes to 19 and its producer replays the log (the input) from there. ``settle``
    keeps the output's epochs from 8; the first version kept them from 28, and both restarts planned everything
    back to nothing and stopped."""
    run = _Run(_branches(tmp_path / "root", 2), 30, slow)
    assert (run.log_above, run.nodes["I"].acked) == kept, why
    old, new = run.restart(False), run.restart(True)
    out, step = ("out", "C") if slow["D"] < slow["G"] else ("out3", "F")
    assert new.available[out][0] == 8 and len(old.available[out]) == 31
    for damaged, limit in [((out, 20), None), (None, (step, 19))]:
        a, b = run.recover(old, damaged, limit), run.recover(new, damaged, limit)
        assert a.executable and epoch_of(a.plan.frontiers[out]) == 19
        assert _summary(a) == _summary(b)


@settings(max_examples=int(os.environ.get("FALKIRK_SETTLE_EXAMPLES", "80")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fast=st.integers(1, 40),
    behind=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    retain=st.integers(1, 3),
    damaged=st.none() | st.tuples(st.sampled_from(["out", "out2", "out3", "out4"]), st.floats(0, 1)),
    limit=st.none() | st.tuples(st.sampled_from(["L", "C", "D", "F", "G"]), st.floats(0, 1)),
)
def test_settled_restarts_recover_as_unsettled_ones(
    tmp_path_factory: pytest.TempPathFactory,
    fast: int,
    behind: tuple[float, float],
    retain: int,
    damaged: tuple[str, float] | None,
    limit: tuple[str, float] | None,
) -> None:
    """Property: whichever output epoch a restart finds damaged and whichever step it holds to an epoch, with the
    branches any distance apart, a settled driver recovers exactly when an unsettled one does, with the same
    frontiers and the same unusable items planned without."""
    slow = {"D": int(fast * behind[0]), "G": int(fast * behind[1])}
    run = _Run(_branches(tmp_path_factory.mktemp("settle") / "root", retain), fast, slow)
    old, new = run.restart(False), run.restart(True)
    at = {n: (lambda f, n=n: min(int(f * (run.done[n] + 1)), run.done[n])) for n in run.done}
    d = (damaged[0], at[damaged[0]](damaged[1])) if damaged else None
    lim = (limit[0], at[limit[0]](limit[1]) - 1) if limit else None
    assert _summary(run.recover(old, d, lim)) == _summary(run.recover(new, d, lim))
