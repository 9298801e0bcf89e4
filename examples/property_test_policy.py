"""Property-test your own operator and rollback policy with hypothesis (run with pytest)."""
from hypothesis import settings

from falkirk.sim import (
    Commit,
    Eager,
    Ephemeral,
    HistoryLog,
    Lazy,
    Link,
    Node,
    Operator,
    Output,
    SimGraph,
    Source,
)
from falkirk.testing.sim_strategies import assert_recovers


class DistinctCount(Operator):
    """Counts the distinct values of each epoch; its state is partitioned by time."""
    notifications = True

    def on_message(self, ctx, edge, x):
        if ctx.time not in self.parts:
            self.parts[ctx.time] = set()
            ctx.notify_at()
        self.parts[ctx.time].add(x)

    def on_notify(self, ctx):
        ctx.send(len(self.parts.pop(ctx.time)))


def pipeline(policy):
    nodes = [Node("src", Source(), Ephemeral()), Node("count", DistinctCount(), policy), Node("out", Output(), Commit())]
    links = [Link("a", "src", "count"), Link("b", "count", "out")]
    return SimGraph(nodes, links, inputs={"src": [[1, 2, 2], [3], [1, 1, 4]]})


def test_distinct_count_recovers():  # any failures, any schedule, each policy: same output
    assert_recovers(pipeline, [Lazy(every=2), Eager(logs=["b"]), HistoryLog()], settings=settings(max_examples=50))
