"""The flink-unaligned scheme: snapshots plus logged in-flight data, fuzzed against the oracle."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from falkirk.sim import Failure, Link, Node, Output, Scan, SimGraph, Simulation, Source, Sum
from falkirk.sim.cases import RandomChooser, build_case
from falkirk.sim.operators import Sequencer
from falkirk.sim.oracle import check_run
from falkirk.sim.persistence import persist_all
from falkirk.sim.policies import Batch, Commit, Lazy
from falkirk.sim.recovery import fail_and_recover
from falkirk.sim.schemes import SCHEMES
from falkirk.sim.schemes.flink import FLINK_UNALIGNED
from falkirk.testing.fuzz import fuzz

CASES = int(os.environ.get("FALKIRK_SCHEME_CASES", "2000" if os.environ.get("CI") else "200"))


def test_fuzz_flink_unaligned_has_no_divergence() -> None:
    """The scheme recovers correctly on CASES random graphs and failure schedules (2,000 in CI)."""
    report = fuzz(CASES, seed=8, scheme=FLINK_UNALIGNED, quiet=True)
    assert report.divergent == [], report.problem


def test_registered_by_name() -> None:
    """`--scheme flink-unaligned` selects it."""
    assert SCHEMES["flink-unaligned"] is FLINK_UNALIGNED
    assert FLINK_UNALIGNED.case_options == {"loops": False}


@given(st.integers(0, 10**6))
def test_every_edge_carries_its_inflight_data(seed: int) -> None:
    """No loops; every processor but the sink logs all its output edges; checkpoints are snapshots."""
    case = build_case(RandomChooser(seed), scheme=FLINK_UNALIGNED)
    g = case.graph
    assert not any(e.transform in ("enter", "feedback", "leave") for e in g.links.values())
    for name, node in g.nodes.items():
        if isinstance(node.op, Output):
            assert isinstance(node.policy, Commit)
        else:
            assert node.policy.logged_edges(g.outputs_of[name]) == frozenset(g.outputs_of[name])
            assert isinstance(node.policy, Batch) == isinstance(node.op, Source)


def _pipeline() -> SimGraph:
    """src -> sequencer -> scan (sequence domain) -> sink: sequence-numbered channels, as in FLIP-76."""
    return SimGraph(
        [Node("src", Source(), Batch()), Node("seq", Sequencer(), Lazy(logs="*")),
         Node("scan", Scan(), Lazy(logs="*"), "sequence"), Node("sink", Output(), Commit(), "sequence"),
         Node("sum", Sum(), Lazy(logs="*")), Node("out", Output(), Commit())],
        [Link("a", "src", "seq"), Link("b", "seq", "scan", "sequence"), Link("c", "scan", "sink", "sequence"),
         Link("d", "src", "sum"), Link("e", "sum", "out")],
        inputs={"src": [[3, 1], [4, 1, 5], [9, 2]]},
    )


def test_restored_inflight_data_is_consumed_before_new_input() -> None:
    """After a failure the receiver's queue starts with the logged in-flight messages, in order."""
    sim = Simulation(_pipeline(), seed=5)
    while len(sim.procs["seq"].history.numbered.get("b", [])) < 4:
        sim.progress()
        persist_all(sim, final=False)
        acts = sim.actions()
        sim.execute(acts[sim.rng.randrange(len(acts))])
    plan = fail_and_recover(sim, {"scan"})
    consumed = plan.frontiers["scan"].domain.count(plan.frontiers["scan"], "b")  # type: ignore[attr-defined]
    queue = [m.time for m in sim.procs["scan"].queues["b"]]
    sent = len(sim.procs["seq"].history.numbered["b"])
    assert queue == [("b", s) for s in range(consumed + 1, sent + 1)] and queue
    assert plan.frontiers["seq"].is_top  # the sender did not roll back: its log is the channel state


@given(st.integers(0, 200), st.integers(0, 40), st.sampled_from(["scan", "seq", "sum", "src"]))
def test_pipeline_recovers_from_any_single_failure(seed: int, step: int, who: str) -> None:
    """The hand-built sequence pipeline recovers from a failure of any processor at any step."""
    assert check_run(_pipeline(), [Failure(step, {who})], seed=seed).ok
