"""Progress tracking: which times are complete at each processor (Naiad's could-result-in).

A **pointstamp** is something that can still cause messages: a message queued
at processor ``p`` (its time, in ``p``'s domain), a notification ``p`` asked
for, or a source's next unread epoch. A pointstamp at ``p`` with time ``t``
could result in a message at ``q`` at any time ``≥ s(t)`` for a summary ``s``
of a path ``p → … → q`` (:meth:`falkirk.sim.graph.SimGraph._summaries`).

* ``t`` is **complete** at ``q`` when no pointstamp could result in a message
  at ``q`` at a time ``≤ t`` (queued messages at ``q`` count directly);
* ``t`` is **settled** at ``q`` when it is complete and ``q`` has no pending
  notification request or other capability (a source's next epoch) at a
  time ``≤ t`` — no further event at ``t`` can happen at ``q``, so a
  checkpoint may include ``t``;
* a requested notification at ``t`` is **deliverable** when ``t`` is complete
  and ``q`` has no other pending request at a time ``< t``.

Both frontiers are the complement of the upward closure of the blocking
times, i.e. ``Frontier.before(blocking)``.

>>> from falkirk.sim.graph import Node, Link, SimGraph
>>> from falkirk.sim.operators import Source, Sum, Output
>>> from falkirk.sim.policies import Ephemeral, Lazy, Commit
>>> g = SimGraph([Node("src", Source(), Ephemeral()), Node("sum", Sum(), Lazy()),
...               Node("out", Output(), Commit())],
...              [Link("a", "src", "sum"), Link("b", "sum", "out")], inputs={"src": [[1]]})
>>> st = {n: Stamps() for n in g.nodes}
>>> st["src"].caps.add(1); st["sum"].queued.add(0)
>>> comp, settled = frontiers(g, st)
>>> comp["out"], comp["sum"]
(Frontier(epoch, empty), Frontier(epoch, empty))
>>> st["sum"].queued.clear(); st["sum"].requests.add(0)
>>> comp, settled = frontiers(g, st)
>>> comp["sum"], settled["sum"], deliverable(g, "sum", st["sum"].requests, comp["sum"])
(Frontier(epoch, 0), Frontier(epoch, empty), [0])
"""

from __future__ import annotations

from typing import Any

from attrs import Factory, define

from falkirk.domains import Frontier
from falkirk.sim.graph import SimGraph
from falkirk.sim.transforms import apply_summary

__all__ = ["Stamps", "frontiers", "deliverable", "inputs_complete"]


@define
class Stamps:
    """The pointstamps at one processor: queued message times, own requests, other capabilities."""

    queued: set[Any] = Factory(set)
    requests: set[Any] = Factory(set)
    caps: set[Any] = Factory(set)


def frontiers(graph: SimGraph, stamps: dict[str, Stamps]) -> tuple[dict[str, Frontier], dict[str, Frontier]]:
    """The complete and the settled frontier of every processor."""
    blocking: dict[str, set[Any]] = {q: set(st.queued) for q, st in stamps.items()}
    for p, st in stamps.items():
        active = st.queued | st.requests | st.caps
        if not active:
            continue
        for q, s in graph.reach[p]:
            blocking[q].update(apply_summary(s, t) for t in active)
    complete: dict[str, Frontier] = {}
    settled: dict[str, Frontier] = {}
    for q, times in blocking.items():
        dom = graph.domain(q)
        complete[q] = _before(dom, times)
        own = stamps[q].requests | stamps[q].caps
        settled[q] = _before(dom, times | own) if own else complete[q]
    return complete, settled


def inputs_complete(graph: SimGraph, stamps: dict[str, Stamps], name: str) -> Frontier:
    """The times at ``name`` that no pointstamp of **another** processor can still lead to.

    ``name``'s own queued messages and requests are left out: they are the
    work ``name`` itself has yet to do (including what it sends round its own
    feedback edge). The pipelined schedule (:mod:`falkirk.sim.schedule`)
    starts an epoch once it is inside this frontier — its input is queued.
    """
    times: set[Any] = set()
    for p, st in stamps.items():
        if p == name:
            continue
        active = st.queued | st.requests | st.caps
        if active:
            for q, s in graph.reach[p]:
                if q == name:
                    times.update(apply_summary(s, t) for t in active)
    return _before(graph.domain(name), times)


def _before(dom: Any, times: set[Any]) -> Frontier:
    """``Frontier.before(dom, times)``, with a fast path for totally ordered domains."""
    if dom.is_total and times:
        return Frontier(dom, (min(times, key=dom.sort_key),))
    return Frontier.before(dom, times)


def deliverable(graph: SimGraph, name: str, requests: set[Any], complete: Frontier) -> list[Any]:
    """The requested notifications of ``name`` that may be delivered now (sorted)."""
    le = graph.domain(name).less_equal
    out = [t for t in requests if t in complete and not any(s != t and le(s, t) for s in requests)]
    return sorted(out, key=graph.domain(name).sort_key)
