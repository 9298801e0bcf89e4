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

import json
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import IO, Any

import numpy as np
from attrs import frozen

from falkirk.domains import Frontier
from falkirk.domains.encoding import encode_frontier, frontier_text
from falkirk.solver import dispatch
from falkirk.solver.dispatch import Strategy
from falkirk.solver.fixpoint import Reason
from falkirk.solver.model import Dataflow
from falkirk.solver.model.access import View, normalise_failed
from falkirk.solver.model.views import OnDemand
from falkirk.solver.vectorised.columns import RankFrontiers

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
        """The ``falkirk-plan/1`` document (SPEC §9).

        Cost: ``O(V + replayed edges)``; a plan of the vectorised solver
        encodes from its arrays without making a frontier per processor.
        """
        return {
            "format": "falkirk-plan/1",
            "frontiers": dict(_encoded(self.frontiers)),
            "notification_frontiers": dict(_encoded(self.notification_frontiers)),
            "actions": dict(self.actions),
            "replay": dict(_encoded_replay(self)),
        }

    def iter_json(self, chunk: int = 4096) -> Iterator[str]:
        """The :meth:`to_json` document as JSON text, in pieces of about ``chunk`` entries.

        Joined, the pieces are ``json.dumps(plan.to_json())``; the whole
        document is never held in memory (see :meth:`write_json`).

        >>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
        >>> df = Dataflow([Processor("a", "epoch", checkpoints=[Checkpoint(2)])], [])
        >>> plan = solve_frontiers(df, ["a"])
        >>> "".join(plan.iter_json()) == json.dumps(plan.to_json())
        True
        """
        yield '{"format": "falkirk-plan/1", "frontiers": '
        yield from _json_object(_encoded(self.frontiers), chunk)
        yield ', "notification_frontiers": '
        yield from _json_object(_encoded(self.notification_frontiers), chunk)
        yield ', "actions": '
        yield from _json_object(iter(self.actions.items()), chunk)
        yield ', "replay": '
        yield from _json_object(_encoded_replay(self), chunk)
        yield "}"

    def write_json(self, fp: IO[str], chunk: int = 4096) -> None:
        """Write the :meth:`to_json` document to the text file ``fp``, streamed (:meth:`iter_json`).

        Cost: ``O(V + replayed edges)`` time and ``O(chunk)`` memory beyond the plan.
        """
        for piece in self.iter_json(chunk):
            fp.write(piece)

    def table(self) -> str:
        """A human-readable table of the plan."""
        rows = [("processor", "action", "frontier f(p)", "notifications n(p)")]
        for p, f in self.frontiers.items():
            rows.append((p, self.actions[p], frontier_text(f), frontier_text(self.notification_frontiers[p])))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
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


def _encoded(frontiers: Any) -> Iterator[tuple[str, Any]]:
    """``(processor, JSON encoding)`` of a frontier mapping, in order (arrays: no frontier made)."""
    if isinstance(frontiers, RankFrontiers):
        enc = frontiers.encoded_ranks()
        return zip(frontiers.names, map(enc.__getitem__, frontiers.ranks.tolist()), strict=True)
    return ((p, encode_frontier(f)) for p, f in frontiers.items())


def _encoded_replay(plan: RollbackPlan) -> Iterator[tuple[str, Any]]:
    replay = plan.replay
    if isinstance(replay, _RankReplay):
        f = replay.frontiers
        enc = f.encoded_ranks()
        rs, rd = f.ranks[replay.src].tolist(), f.ranks[replay.dst].tolist()
        return (
            (e, {"log_frontier": enc[a], "exclude": enc[b]})
            for e, a, b in zip(replay.keys_list, rs, rd, strict=True)
        )
    return (
        (e, {"log_frontier": encode_frontier(r.log_frontier), "exclude": encode_frontier(r.exclude)})
        for e, r in replay.items()
    )


def _json_object(items: Iterator[tuple[str, Any]], chunk: int) -> Iterator[str]:
    """``json.dumps(dict(items))``, in pieces."""
    dumps, sep = json.dumps, ""
    yield "{"
    while True:
        part = list(islice(items, chunk))
        if not part:
            break
        yield sep + ", ".join(f"{dumps(k)}: {dumps(v)}" for k, v in part)
        sep = ", "
    yield "}"


class _RankReplay(OnDemand):
    """The replays of a vectorised plan: logged edges ``src → dst`` whose receiver rolled back, made on read.

    The edges are found with array operations; their names, and a
    :class:`Replay` per edge, are made when first asked for.
    """

    def __init__(self, dataflow: Dataflow, f: RankFrontiers) -> None:
        t = dataflow.table
        sel = np.flatnonzero(t.logged & ~f.tops(f.ranks[t.dst]))
        sel = sel[np.lexsort((sel, t.src[sel]))]  # by sender as declared, then by edge
        self.frontiers, self.src, self.dst = f, t.src[sel], t.dst[sel]
        self._sel, self._table = sel, t
        self._keys_list: list[str] | None = None
        super().__init__(self._positions, self._replay)

    @property
    def keys_list(self) -> list[str]:
        """The replayed edges' names, in order."""
        if self._keys_list is None:
            self._keys_list = [self._table.edge_name(k) for k in self._sel.tolist()]
        return self._keys_list

    def _positions(self) -> dict[str, int]:
        return dict(zip(self.keys_list, range(len(self.keys_list)), strict=True))

    def _replay(self, e: str) -> Replay:
        j, f, names = self._names[e], self.frontiers, self._table.names  # type: ignore[index]
        a, b = int(self.src[j]), int(self.dst[j])
        return Replay(e, names[a], names[b], f.frontier(int(f.ranks[a])), f.frontier(int(f.ranks[b])))

    def __len__(self) -> int:
        return int(self._sel.shape[0])

    def __bool__(self) -> bool:
        return bool(self._sel.shape[0])


def _rank_actions(f: RankFrontiers, failed: frozenset[str]) -> dict[str, str]:
    mask = np.zeros(len(f.names), dtype=bool)
    if failed:
        mask[[f.index[p] for p in failed]] = True
    code = np.where(mask, np.where(f.empties(f.ranks), 3, 2), np.where(f.tops(f.ranks), 0, 1))
    return dict(zip(f.names, map(ACTIONS.__getitem__, code.tolist()), strict=True))


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
    the vectorised solver on plain epoch jobs of any size and on other large
    totally ordered dataflows, the worklist otherwise; the measured rule is
    in :mod:`~falkirk.solver.dispatch`), ``"worklist"``, ``"round_robin"`` (the literal
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
    if isinstance(fp.frontiers, RankFrontiers):  # the vectorised solver's arrays: nothing made per processor
        return RollbackPlan(
            dataflow=dataflow,
            failed=failed_set,
            frontiers=fp.frontiers,
            notification_frontiers=fp.notification_frontiers,
            actions=_rank_actions(fp.frontiers, failed_set),
            replay=_RankReplay(dataflow, fp.frontiers),
            reasons=fp.reasons,
            examinations=fp.examinations,
        )
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
