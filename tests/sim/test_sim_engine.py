"""The simulator without failures: determinism, scheduling, progress, checkpoints."""

from __future__ import annotations

from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from falkirk.domains import Epoch, Frontier, Product
from falkirk.sim import (
    Commit,
    Eager,
    Ephemeral,
    Failure,
    Lazy,
    Link,
    Map,
    Node,
    Output,
    RunningTotal,
    Scan,
    Sequencer,
    SimGraph,
    Simulation,
    Source,
    Sum,
    reference_run,
)
from falkirk.sim.progress import Stamps, deliverable, frontiers
from falkirk.sim.state import Msg
from falkirk.testing.sim_strategies import sim_graphs


def _pipeline(op: Any = None, policy: Any = None) -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("a", Map(mul=2), Ephemeral()),
         Node("sum", op or Sum(), policy or Lazy()), Node("out", Output(), Commit())],
        [Link("e1", "src", "a"), Link("e2", "a", "sum"), Link("e3", "src", "sum"), Link("e4", "sum", "out")],
        inputs={"src": [[1, 2, 3], [4], [5, 6]]},
    )


def test_same_seed_same_run() -> None:
    """A seed fixes everything: steps, output and checkpoints are reproduced exactly."""
    g = _pipeline()
    fs = [Failure(7, {"sum"}), Failure(9, {"a", "src"})]
    r1 = Simulation(g, seed=5, failures=fs, trace=True).run()
    r2 = Simulation(g, seed=5, failures=fs, trace=True).run()
    assert (r1.steps, r1.output, r1.checkpoints, r1.trace) == (r2.steps, r2.output, r2.checkpoints, r2.trace)


def test_pipeline_output() -> None:
    """Sum adds each epoch's values from both inputs (the doubled and the raw)."""
    assert reference_run(_pipeline()).output == {"out": {0: (18,), 1: (12,), 2: (33,)}}


def test_running_total_folds_in_epoch_order() -> None:
    """RunningTotal sends the total so far at each completed epoch."""
    assert reference_run(_pipeline(RunningTotal())).output == {"out": {0: (18,), 1: (30,), 2: (63,)}}


@settings(max_examples=30)
@given(sim_graphs(nondeterministic=False), st.integers(0, 1000), st.integers(0, 1000))
def test_output_does_not_depend_on_the_schedule(graph: SimGraph, s1: int, s2: int) -> None:
    """Deterministic operators: every interleaving gives the same output."""
    assert reference_run(graph, seed=s1).output == reference_run(graph, seed=s2).output


def test_reordering_rule() -> None:
    """A selective processor may take any message no earlier one has a time ≤ to; others the head."""
    sim = Simulation(_pipeline(), seed=0)
    sim.procs["sum"].queues["e2"] = deque(Msg(t, 0) for t in (2, 1, 1, 3, 0))
    sim.progress()
    picks = [a[3] for a in sim.actions() if a[:3] == ("msg", "sum", "e2")]
    assert picks == [0, 1, 4]
    sim2 = Simulation(_pipeline(RunningTotal()), seed=0)
    sim2.procs["sum"].queues["e2"] = deque(Msg(t, 0) for t in (2, 1, 0))
    sim2.progress()
    assert [a[3] for a in sim2.actions() if a[:3] == ("msg", "sum", "e2")] == [0]


def test_selective_checkpoints_are_not_prefixes_of_the_history() -> None:
    """Some checkpoint of Sum leaves out an event that happened before an event it keeps."""
    found = False
    for seed in range(30):
        sim = Simulation(_pipeline(policy=Lazy()), seed=seed, gc_every=0)
        order: list[Any] = []
        orig = sim.execute

        def spy(action: tuple[Any, ...], orig: Any = orig, sim: Simulation = sim, order: list[Any] = order) -> None:
            if action[:2] == ("msg", "sum"):
                order.append(sim.procs["sum"].queues[action[2]][action[3]].time)
            orig(action)

        sim.execute = spy  # type: ignore[method-assign]
        sim.run()
        for rec in sim.procs["sum"].store.records:
            seen_outside = [i for i, t in enumerate(order) if t not in rec.frontier]
            seen_inside = [i for i, t in enumerate(order) if t in rec.frontier]
            if seen_outside and seen_inside and min(seen_outside) < max(seen_inside):
                found = True
    assert found


def test_progress_inside_a_loop() -> None:
    """A message queued at the loop head blocks every later iteration of that epoch downstream."""
    g = SimGraph(
        [Node("src", Source(), Ephemeral()), Node("body", Map(), Eager(), "loop"),
         Node("inner", Sum(), Lazy(), "loop"), Node("out", Output(), Commit())],
        [Link("e0", "src", "body", "enter"), Link("e1", "body", "inner"), Link("e2", "inner", "out", "leave")],
        inputs={"src": [[1]]},
    )
    st_ = {n: Stamps() for n in g.nodes}
    st_["src"].caps.add(1)
    st_["body"].queued.add((0, 2))
    st_["inner"].requests.update({(0, 1), (0, 2)})
    complete, settled = frontiers(g, st_)
    assert complete["inner"] == Frontier.before(Product(2), [(0, 2), (1, 0)])
    assert settled["inner"] == Frontier.before(Product(2), [(0, 1), (1, 0)])
    assert deliverable(g, "inner", st_["inner"].requests, complete["inner"]) == [(0, 1)]
    assert complete["out"] == Epoch().frontier(-1)  # epoch 0 is still running round the loop


def _sequence_graph(policy: Any) -> SimGraph:
    return SimGraph(
        [Node("src", Source(), Ephemeral()), Node("seq", Sequencer(), Lazy()),
         Node("scan", Scan(), policy, "sequence"), Node("out", Output(), Commit(), "sequence")],
        [Link("e1", "src", "seq"), Link("e2", "seq", "scan", "sequence"), Link("e3", "scan", "out", "sequence")],
        inputs={"src": [[3, 1], [2]]},
    )


def test_sequence_domain_numbers_messages() -> None:
    """Epochs become per-edge sequence numbers; a Scan's running sums land at (edge, n)."""
    r = reference_run(_sequence_graph(Eager()))
    assert r.output == {"out": {("e3", 1): (1,), ("e3", 2): (4,), ("e3", 3): (6,)}}


def test_eager_sequence_checkpoints_after_every_message() -> None:
    """In the sequence domain, Eager checkpoints once per delivered message."""
    sim = Simulation(_sequence_graph(Eager()), seed=1, gc_every=0)
    sim.run()
    counts = [r.frontier.domain.counts(r.frontier)["e2"] for r in sim.procs["scan"].store.records]  # type: ignore[attr-defined]
    assert counts == [1, 2, 3]


def test_failures_after_the_end_strike_at_the_end() -> None:
    """A failure scheduled past the last step still happens, and the run recovers."""
    g = _pipeline()
    r = Simulation(g, seed=2, failures=[Failure(10_000, {"sum", "out"})]).run()
    assert r.rollbacks == 1 and r.output == reference_run(g).output
