"""The queues on the pipeline's edges: what each step has sent and its consumer has not taken yet.

One queue per edge, owned by the receiver (SPEC §3: a receiver that has not
failed keeps what is queued for it). An item an execution of the receiver
has taken and not finished with is still the receiver's: it counts as
delivered (:meth:`Queues.last_queued`, ``M_e(⊤)``) until the execution
completes, or fails and puts it back. An :class:`Item` is an epoch's output:
a materialised DataFrame, or ``df=None`` meaning "read it from the sender's
log" (what a replay queues). A failed step loses its input queues
(:meth:`Queues.drop_inputs`); a rollback plan rebuilds them (SPEC §6 reset,
:meth:`Queues.reset`).

>>> from falkirk.spark.pipeline.declare.definition import Link
>>> from falkirk.spark.pipeline.run.frames import Frames
>>> q = Queues([Link("a", "b"), Link("a", "c")], Frames())
>>> q.put("a", 0, None, 5); q.put("a", 1, None, 7)
>>> q.take("a->b", 0).rows, q.take("a->b", 1).rows, q.last_queued("b"), q.last_queued("c")
(5, 7, {'a->b': 1}, {'a->c': 1})
>>> q.finished("a->b", 0); q.finished("a->b", 1); q.last_queued("b")
{'a->b': -1}
>>> q.reset("a->c", keep_upto=-1, replay=range(0, 2), keep_memory=False); sorted(q.on["a->c"])
[0, 1]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from attrs import define

from falkirk.spark.errors import RecoveryError

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Link
    from falkirk.spark.pipeline.run.frames import Frames

__all__ = ["Item", "Queues"]


@define
class Item:
    """An epoch's output waiting on an edge: a DataFrame, or ``None`` = read it from ``src``'s log."""

    src: str
    epoch: int
    df: Any = None
    rows: int | None = None


class Queues:
    """Every edge's queue, epoch → :class:`Item`; queued DataFrames are pinned in ``frames``."""

    def __init__(self, links: Iterable[Link], frames: Frames) -> None:
        self.links = list(links)
        self.frames = frames
        self.on: dict[str, dict[int, Item]] = {e.name: {} for e in self.links}
        #: epochs taken off each edge by an execution still running (its receiver's until it ends)
        self.taken: dict[str, set[int]] = {e.name: set() for e in self.links}

    def put(self, src: str, epoch: int, df: Any, rows: int | None, *, from_log: Iterable[str] = ()) -> None:
        """``src`` completed ``epoch`` with output ``df``: queue it for every consumer (on the edges
        ``from_log``, a reference to ``src``'s log instead: a consumer lagging far behind reads it from there,
        not from memory)."""
        by_log = set(from_log)
        for link in self.links:
            if link.src == src:
                item = Item(src, epoch, None if link.name in by_log else df, rows)
                self.on[link.name][epoch] = item
                self.frames.pin(item.df)

    def take(self, edge: str, epoch: int) -> Item:
        """Take ``epoch``'s item off ``edge`` (``RecoveryError``: nothing queued, an executor bug)."""
        item = self.on[edge].pop(epoch, None)
        if item is None:
            raise RecoveryError(
                f"edge {edge}: nothing queued for epoch {epoch} (executor bug: the plan should provide it)"
            )
        self.frames.unpin(item.df)
        self.taken[edge].add(epoch)
        return item

    def finished(self, edge: str, epoch: int) -> None:
        """The execution that took ``epoch`` off ``edge`` completed (it is delivered: the receiver's ``done``
        says so from now on)."""
        self.taken[edge].discard(epoch)

    def put_back(self, edge: str, item: Item) -> None:
        """A receiver's execution that took ``item`` off ``edge`` failed: it is queued again (the receiver keeps
        its queues until a recovery says it failed, SPEC §3)."""
        self.on[edge][item.epoch] = item
        self.taken[edge].discard(item.epoch)
        self.frames.pin(item.df)

    def drop_inputs(self, name: str) -> None:
        """``name`` failed: its input queues are lost."""
        for link in self.links:
            if link.dst == name:
                for item in self.on[link.name].values():
                    self.frames.unpin(item.df)
                self.on[link.name].clear()
                self.taken[link.name].clear()

    def last_queued(self, name: str) -> dict[str, int]:
        """The last epoch queued on each input edge of ``name``, or taken by an execution of ``name`` still
        running (``-1``: none)."""
        return {
            link.name: max(self.on[link.name].keys() | self.taken[link.name], default=-1)
            for link in self.links
            if link.dst == name
        }

    def reset(self, edge: str, *, keep_upto: int, replay: range, keep_memory: bool) -> None:
        """SPEC §6 reset of ``edge``: keep the items at epochs ``<= keep_upto``, then queue ``replay`` from
        the log.

        ``keep_memory``: the sender kept everything (``⊤``), so items still
        queued in memory for the replayed epochs are kept as they are.
        ``RecoveryError`` if an execution of the receiver still holds an item
        it took off ``edge`` (a plan applied with work in flight resets no
        edge of a step in flight: an executor bug).
        """
        if self.taken[edge]:
            raise RecoveryError(
                f"edge {edge}: reset while its receiver's execution holds epoch(s) {sorted(self.taken[edge])} "
                "(executor bug: a plan applied with work in flight must not touch that step)"
            )
        old = self.on[edge]
        new = {k: it for k, it in old.items() if k <= keep_upto}
        src = next(link.src for link in self.links if link.name == edge)
        for k in replay:
            new[k] = old[k] if keep_memory and k in old else Item(src, k)
        for k, it in old.items():
            if new.get(k) is not it:
                self.frames.unpin(it.df)
        self.on[edge] = new

    def clear(self) -> None:
        """Drop everything queued (the run ends)."""
        for edge in self.on.values():
            for item in edge.values():
                self.frames.unpin(item.df)
            edge.clear()
        for taken in self.taken.values():
            taken.clear()
