"""The edges' queues against a brute-force model: what ``last_queued`` reports is every epoch the receiver
holds (queued, or taken by an execution still running), SPEC §3's ``M_e(⊤)`` (no Spark needed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from falkirk.spark.errors import RecoveryError
from falkirk.spark.pipeline.declare.definition import Link
from falkirk.spark.pipeline.run.frames import Frames
from falkirk.spark.pipeline.run.queues import Queues

EDGES = [Link("a", "b"), Link("a", "c"), Link("c", "b")]

#: an operation: (what, edge index, epoch)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "take", "put_back", "finished", "drop_inputs", "reset"]),
        st.integers(0, len(EDGES) - 1),
        st.integers(0, 5),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_last_queued_counts_what_the_receiver_holds(ops: list[tuple[str, int, int]]) -> None:
    q = Queues(EDGES, Frames())
    # the model: per edge, epoch -> "queued" | "taken"
    held: dict[str, dict[int, str]] = {e.name: {} for e in EDGES}
    taken_items: dict[tuple[str, int], object] = {}
    for what, i, epoch in ops:
        link = EDGES[i]
        edge = link.name
        if what == "put":
            outs = [other.name for other in EDGES if other.src == link.src]
            if any(held[o].get(epoch) == "taken" for o in outs):
                continue  # a sender never sends an epoch its receiver is running (it completed it before)
            q.put(link.src, epoch, None, epoch)
            for o in outs:
                held[o][epoch] = "queued"  # a put replaces a queued item
        elif what == "take":
            if held[edge].get(epoch) != "queued":
                continue
            taken_items[(edge, epoch)] = q.take(edge, epoch)
            held[edge][epoch] = "taken"
        elif what == "put_back":
            if (edge, epoch) not in taken_items or held[edge].get(epoch) != "taken":
                continue
            q.put_back(edge, taken_items.pop((edge, epoch)))  # type: ignore[arg-type]
            held[edge][epoch] = "queued"
        elif what == "finished":
            if held[edge].get(epoch) != "taken":
                continue
            q.finished(edge, epoch)
            taken_items.pop((edge, epoch), None)
            del held[edge][epoch]
        elif what == "drop_inputs":
            q.drop_inputs(link.dst)
            for other in EDGES:
                if other.dst == link.dst:
                    held[other.name].clear()
            taken_items = {k: v for k, v in taken_items.items() if held[k[0]].get(k[1]) == "taken"}
        else:  # a reset: refused while the receiver's execution holds an item of the edge (executor bug)
            if any(state == "taken" for state in held[edge].values()):
                with pytest.raises(RecoveryError, match=f"edge {edge}: reset while"):
                    q.reset(edge, keep_upto=epoch - 1, replay=range(epoch, epoch + 2), keep_memory=False)
                continue
            q.reset(edge, keep_upto=epoch - 1, replay=range(epoch, epoch + 2), keep_memory=False)
            held[edge] = {k: s for k, s in held[edge].items() if k < epoch}
            held[edge].update({k: "queued" for k in range(epoch, epoch + 2)})
        for dst in {e.dst for e in EDGES}:
            want = {e.name: max(held[e.name], default=-1) for e in EDGES if e.dst == dst}
            assert q.last_queued(dst) == want, (what, edge, epoch)
        for e in EDGES:
            assert sorted(q.on[e.name]) == sorted(k for k, s in held[e.name].items() if s == "queued")


def test_an_item_taken_by_a_running_execution_counts_as_delivered() -> None:
    q = Queues(EDGES[:1], Frames())
    q.put("a", 0, None, 3)
    item = q.take("a->b", 0)
    assert q.last_queued("b") == {"a->b": 0}  # before this change: -1, as if never sent
    q.put_back("a->b", item)
    assert q.last_queued("b") == {"a->b": 0} and 0 in q.on["a->b"]
    q.take("a->b", 0)
    q.finished("a->b", 0)
    assert q.last_queued("b") == {"a->b": -1}  # the receiver's done covers it now
