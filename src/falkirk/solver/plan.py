"""Rollback plans: ``solve_frontiers`` and what it returns (SPEC §5, §6, §9).

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
>>> df = Dataflow(
...     [Processor("src", "epoch", stateless=True),
...      Processor("sum", "epoch", logs=["e2"],
...                checkpoints=[Checkpoint(2, notifications=2, delivered={"e1": 2})]),
...      Processor("sink", "epoch", checkpoints=[Checkpoint(1, delivered={"e2": 1})],
...                live=Checkpoint("top", delivered={"e2": 4}))],
...     [Edge("e1", "src", "sum"), Edge("e2", "sum", "sink")])
>>> plan = solve_frontiers(df, failed=["sum"])
>>> plan.actions
{'src': 'rollback', 'sum': 'restore', 'sink': 'rollback'}
>>> plan.replay["e2"]
Replay(edge='e2', sender='sum', receiver='sink', log_frontier=Frontier(epoch, 2), exclude=Frontier(epoch, 1))
>>> print(plan.explain("sink")[-1])
sink top → 1 by C3 on e2: it had received messages that sum at 2 will send again
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from attrs import frozen

from falkirk.domains import Frontier
from falkirk.domains.encoding import encode_frontier, frontier_text
from falkirk.solver import dispatch
from falkirk.solver.dispatch import Strategy
from falkirk.solver.fixpoint import Reason
from falkirk.solver.model import Dataflow
from falkirk.solver.model.access import View, normalise_failed

__all__ = ["Replay", "RollbackPlan", "solve_frontiers", "encode_frontier", "ACTIONS"]

#: The actions of SPEC §9.
ACTIONS = ("keep", "rollback", "restore", "restart")


@frozen
class Replay:
    """Replay, in order, the messages of ``L_e(log_frontier)`` whose times are not in ``exclude``."""

    edge: str
    sender: str
    receiver: str
    log_frontier: Frontier
    exclude: Frontier


@frozen
class RollbackPlan:
    """Per processor ``f(p)``, ``n(p)`` and action; per logged edge what to replay.

    ``reasons`` records every step that lowered a frontier; :meth:`explain`
    turns them into the chain of constraints behind one processor's rollback.
    """

    dataflow: Dataflow
    failed: frozenset[str]
    frontiers: dict[str, Frontier]
    notification_frontiers: dict[str, Frontier]
    actions: dict[str, str]
    replay: dict[str, Replay]
    reasons: dict[str, list[Reason]]
    examinations: int

    def explain(self, processor: str) -> list[str]:
        """Why ``processor`` ended where it did: the constraint chain, causes first.

        Follows the neighbours named by each step back to the failures that
        started it. Empty when the processor kept ``⊤``.
        """
        self.dataflow.processor(processor)
        order: list[str] = []
        seen: set[str] = set()

        def visit(p: str) -> None:
            if p in seen:
                return
            seen.add(p)
            for r in self.reasons[p]:
                if r.neighbour is not None and r.neighbour != p:
                    visit(r.neighbour)
            order.append(p)

        visit(processor)
        return [r.describe() for p in order for r in self.reasons[p]]

    def to_json(self) -> dict[str, Any]:
        """The ``falkirk-plan/1`` document (SPEC §9)."""
        return {
            "format": "falkirk-plan/1",
            "frontiers": {p: encode_frontier(f) for p, f in self.frontiers.items()},
            "notification_frontiers": {p: encode_frontier(f) for p, f in self.notification_frontiers.items()},
            "actions": dict(self.actions),
            "replay": {
                e: {"log_frontier": encode_frontier(r.log_frontier), "exclude": encode_frontier(r.exclude)}
                for e, r in self.replay.items()
            },
        }

    def table(self) -> str:
        """A human-readable table of the plan."""
        rows = [("processor", "action", "frontier f(p)", "notifications n(p)")]
        for p, f in self.frontiers.items():
            rows.append((p, self.actions[p], frontier_text(f), frontier_text(self.notification_frontiers[p])))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        if self.replay:
            lines.append("")
            lines.append("replay (logged messages to re-send):")
            for e, r in self.replay.items():
                lines.append(
                    f"  {e} ({r.sender} -> {r.receiver}): L_e({frontier_text(r.log_frontier)}) "
                    f"minus times in {frontier_text(r.exclude)}"
                )
        return "\n".join(lines)


def _action(failed: bool, f: Frontier) -> str:
    if failed:
        return "restart" if f.is_empty else "restore"
    return "keep" if f.is_top else "rollback"


def solve_frontiers(
    dataflow: Dataflow,
    failed: Iterable[str] | str = (),
    *,
    strategy: Strategy = "auto",
    fast: bool | None = None,
) -> RollbackPlan:
    """Choose a consistent rollback frontier for every processor (SPEC §5).

    ``failed`` names the processors that failed (they lose ``⊤``); ``"all"``
    computes low-watermarks for garbage collection (SPEC §6). ``strategy``
    picks the solver (:mod:`falkirk.solver.dispatch`): ``"auto"`` (default:
    the worklist, or the vectorised solver on large dataflows whose domains
    are all totally ordered), ``"worklist"``, ``"round_robin"`` (the literal
    iteration of Figure 6) or ``"vectorised"``. All return the same
    frontiers. ``fast=`` is a deprecated alias: ``fast=True`` is ``"auto"``,
    ``fast=False`` is ``"worklist"`` (:class:`DeprecationWarning`).

    Cost: the worklist examines only the part of the graph that rolls back;
    each examination costs ``O(edges of p)`` frontier comparisons plus a
    binary search over p's checkpoints. The round robin re-examines every
    processor until nothing changes.

    Raises :class:`~falkirk.errors.SolverError` when a processor that is not
    restartable would have to go below its lowest checkpoint, and
    :class:`ValueError` for an unknown strategy.
    """
    strategy = dispatch.strategy_of(strategy, fast, stacklevel=2)
    failed_set = normalise_failed(dataflow, failed)
    fp = dispatch.solve(View(dataflow, failed_set), strategy=strategy)
    actions = {p: _action(p in failed_set, f) for p, f in fp.frontiers.items()}
    replay = {}
    for p, proc in dataflow.processors.items():
        if not proc.logs:
            continue
        for e in dataflow.outputs[p]:
            if e in proc.logs:
                q = dataflow.edges[e].dst
                if not fp.frontiers[q].is_top:
                    replay[e] = Replay(e, p, q, fp.frontiers[p], fp.frontiers[q])
    return RollbackPlan(
        dataflow=dataflow,
        failed=failed_set,
        frontiers=fp.frontiers,
        notification_frontiers=fp.notification_frontiers,
        actions=actions,
        replay=replay,
        reasons=fp.reasons,
        examinations=fp.examinations,
    )
