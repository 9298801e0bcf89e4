"""Unit tests of the incremental monitor: reports, changes, rejections, rollbacks, locality."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from falkirk.domains import Frontier, FunctionProjection
from falkirk.errors import MonitorError, UnknownNameError
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
from falkirk.solver.monitor import Changes, Monitor
from falkirk.solver.monitor.store import MemoryStore


def pipeline(logged: bool = True) -> Dataflow:
    """src (stateless) → a → b, b an external output candidate."""
    return Dataflow(
        [
            Processor("src", "epoch", stateless=True, checkpoints=[Checkpoint(1)]),
            Processor("a", "epoch", logs=["ab"] if logged else [], checkpoints=[Checkpoint(1)]),
            Processor("b", "epoch"),
        ],
        [Edge("sa", "src", "a"), Edge("ab", "a", "b")],
    )


def enc(marks: Mapping[str, Frontier]) -> dict[str, object]:
    return {p: f.domain.encode(f) for p, f in marks.items()}  # type: ignore[attr-defined]


def test_initial_watermarks_are_the_full_solve_with_every_processor_failed() -> None:
    """A new monitor announces solve_frontiers(df, failed='all')."""
    df = pipeline()
    m = Monitor(df)
    assert m.watermarks == solve_frontiers(df, "all").frontiers
    m._check()


def test_record_reports_raised_watermarks_logs_inputs_and_outputs() -> None:
    """Changes name the raised watermarks and their consequences on logs, inputs and outputs."""
    m = Monitor(pipeline(), outputs=["b"])
    assert enc(m.watermarks) == {"src": 1, "a": 1, "b": "empty"}
    changes = m.acknowledge_output("b", 1)
    assert changes == Changes(
        {"b": Frontier(m.watermarks["b"].domain, (2,))},
        {"ab": m.watermarks["b"]},
        {},
        {"b": m.watermarks["b"]},
    )
    assert changes.to_json() == {"watermarks": {"b": 1}, "logs": {"ab": 1}, "inputs": {}, "outputs": {"b": 1}}
    assert not m.record("a", Checkpoint(3))
    assert m.record("src", Checkpoint(5)).to_json() == {
        "watermarks": {"src": 3, "a": 3},
        "logs": {},
        "inputs": {"src": 3},
        "outputs": {},
    }
    assert m.current().to_json()["logs"] == {"ab": 1}
    m._check()


def test_unlogged_edges_are_never_reported_as_deletable() -> None:
    """Only logged edges appear in Changes.logs."""
    m = Monitor(pipeline(logged=False), outputs=["b"])
    changes = m.acknowledge_output("b", 1)
    assert changes.logs == {} and "b" in changes.watermarks


@pytest.mark.parametrize(
    ("processor", "checkpoint", "match"),
    [
        ("a", Checkpoint(1, delivered={"sa": 0}), "'@input'"),  # the latest frontier again, other metadata
        ("a", Checkpoint(0), "out of order"),
        ("a", Checkpoint("top"), "live state"),
        ("a", Checkpoint(4, delivered={"sa": 0}, notifications=5), "monotone"),
        ("a", Checkpoint(4, delivered={"nope": 1}), "nope"),
        ("src", Checkpoint(3, notifications=3), "stateless"),
        ("a", Checkpoint(4, projection={"ab": 2}), "differs from the edge's projection"),
        ("a", Checkpoint("seven"), "epoch"),
    ],
)
def test_bad_reports_are_refused_naming_the_processor_and_change_nothing(
    processor: str, checkpoint: Checkpoint, match: str
) -> None:
    """Out-of-order, non-monotone and malformed reports raise MonitorError; the state is untouched."""
    df = Dataflow(
        [
            Processor("src", "epoch", stateless=True, checkpoints=[Checkpoint(1)]),
            Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(1, delivered={"sa": 1})]),
            Processor("b", "epoch"),
        ],
        [Edge("sa", "src", "a"), Edge("ab", "a", "b")],
    )
    m = Monitor(df)
    before = (m.watermarks, m.checkpoints(processor))
    with pytest.raises(MonitorError, match=match) as info:
        m.record(processor, checkpoint)
    assert repr(processor) in str(info.value)
    assert (m.watermarks, m.checkpoints(processor)) == before
    m.record(processor, Checkpoint(6))  # still usable
    m._check()


def test_reports_must_name_known_processors_of_the_right_kind() -> None:
    """Unknown names, output/non-output mix-ups and stateless outputs are refused."""
    m = Monitor(pipeline(), outputs=["b"])
    with pytest.raises(UnknownNameError, match="'zz'"):
        m.record("zz", Checkpoint(1))
    with pytest.raises(MonitorError, match="external output"):
        m.record("b", Checkpoint(1))
    with pytest.raises(MonitorError, match="not an external output"):
        m.acknowledge_output("a", 2)
    with pytest.raises(MonitorError, match="stateless"):
        Monitor(pipeline(), outputs=["src"])
    with pytest.raises(UnknownNameError, match="'zz'"):
        Monitor(pipeline(), outputs=["zz"])


def test_plan_rollback_equals_solve_frontiers_and_leaves_the_state_alone() -> None:
    """plan_rollback is solve_frontiers with the live metadata; the watermarks stay as they were."""
    m = Monitor(pipeline())
    m.record("a", Checkpoint(3))
    m.record("src", Checkpoint(4))
    live = {"b": Checkpoint("top", delivered={"ab": 5}, notifications=5)}
    plan = m.plan_rollback(["a"], live=live)
    assert plan.to_json() == solve_frontiers(m.dataflow(live), ["a"]).to_json()
    assert plan.actions == {"src": "rollback", "a": "restore", "b": "rollback"}
    before = m.watermarks
    assert m.plan_rollback("all").frontiers == before
    assert m.watermarks == before
    m._check()


def test_plan_rollback_refuses_live_metadata_for_failed_processors() -> None:
    """A failed processor has no ⊤, so live metadata for it is an error."""
    m = Monitor(pipeline())
    with pytest.raises(MonitorError, match="'a', which failed"):
        m.plan_rollback(["a"], live={"a": Checkpoint("top")})


def test_plan_rollback_refuses_a_plan_below_an_announced_watermark() -> None:
    """If a plan went below an announced low-watermark, it is refused (here forced by tampering)."""
    m = Monitor(pipeline())
    m._announced["b"] = Frontier.top(m.watermarks["b"].domain)
    with pytest.raises(MonitorError, match=r"below their announced low-watermarks.*'b'"):
        m.plan_rollback(["a"])


def test_a_failing_store_leaves_the_monitor_as_it_was() -> None:
    """When the store refuses a report, the in-memory state is rolled back and stays consistent."""

    class Flaky(MemoryStore):
        fail = False

        def append(self, processor: str, checkpoint: Checkpoint, watermarks: Mapping[str, Frontier]) -> None:
            if self.fail:
                raise OSError("disk full")
            super().append(processor, checkpoint, watermarks)

    store = Flaky()
    m = Monitor(pipeline(), store=store)
    m.record("a", Checkpoint(2))
    before = (m.watermarks, m.notification_watermarks, m.checkpoints("src"))
    store.fail = True
    with pytest.raises(OSError):
        m.record("src", Checkpoint(3))
    assert (m.watermarks, m.notification_watermarks, m.checkpoints("src")) == before
    m._check()
    store.fail = False
    assert enc(m.record("src", Checkpoint(3)).watermarks) == {"src": 2, "a": 2}
    m._check()
    assert Monitor.open(store).watermarks == m.watermarks


def test_a_closed_monitor_refuses_reports() -> None:
    """After close(), reports raise MonitorError."""
    m = Monitor(pipeline())
    m.close()
    with pytest.raises(MonitorError, match="closed"):
        m.record("a", Checkpoint(2))


def test_work_per_report_is_local_to_what_it_can_affect() -> None:
    """On 200 independent pipelines a report re-examines only its own pipeline."""
    procs, edges = [], []
    for i in range(200):
        procs += [
            Processor(f"s{i}", "epoch", stateless=True),
            Processor(f"a{i}", "epoch", logs=[f"ab{i}"]),
            Processor(f"b{i}", "epoch"),
        ]
        edges += [Edge(f"sa{i}", f"s{i}", f"a{i}"), Edge(f"ab{i}", f"a{i}", f"b{i}")]
    m = Monitor(Dataflow(procs, edges))
    for k in range(3):
        for i in (0, 57, 199):
            for p in ("s", "a", "b"):
                changes = m.record(f"{p}{i}", Checkpoint(k))
                assert changes.examined <= 6
                assert set(changes.watermarks) <= {f"s{i}", f"a{i}", f"b{i}"}
    assert enc({p: m.watermarks[p] for p in ("s57", "a57", "b57", "b1")}) == {
        "s57": 2,
        "a57": 2,
        "b57": 2,
        "b1": "empty",
    }
    m._check()


def test_a_cycle_held_down_by_one_processor_rises_with_it() -> None:
    """Two processors bounding each other in a cycle rise together when the bottleneck checkpoints."""
    df = Dataflow(
        [
            Processor("x", "epoch", logs=["xp"], checkpoints=[Checkpoint(1)]),
            Processor("p", "epoch", checkpoints=[Checkpoint(1), Checkpoint(3)]),
            Processor("q", "epoch", checkpoints=[Checkpoint(1), Checkpoint(3)]),
        ],
        [Edge("xp", "x", "p"), Edge("pq", "p", "q"), Edge("qp", "q", "p")],
    )
    m = Monitor(df)
    assert enc(m.watermarks) == {"x": 1, "p": 1, "q": 1}
    assert enc(m.record("x", Checkpoint(3)).watermarks) == {"x": 3, "p": 3, "q": 3}
    m._check()


def test_function_projections_work_in_memory() -> None:
    """A Python-function projection is fine for an in-memory monitor."""
    shift = FunctionProjection(lambda f: f, lambda y: y, label="same")
    df = Dataflow(
        [Processor("a", "epoch", logs=["ab"]), Processor("b", "epoch")], [Edge("ab", "a", "b", shift)]
    )
    m = Monitor(df)
    m.record("a", Checkpoint(2))
    m.record("b", Checkpoint(1))
    m._check()
    assert enc(m.watermarks) == {"a": 2, "b": 1}


def test_sequence_domains_with_recorded_projections() -> None:
    """Chandy–Lamport style sequence numbers: recorded projections, union rule, incremental = full."""
    df = Dataflow(
        [
            Processor("src", "sequence", stateless=True, checkpoints=[Checkpoint(5, projection={"e": 5})]),
            Processor("mid", "sequence", checkpoints=[Checkpoint(3, projection={"f": 2})]),
            Processor("dst", "sequence"),
        ],
        [Edge("e", "src", "mid", "sequence"), Edge("f", "mid", "dst", "sequence")],
    )
    m = Monitor(df)
    m.record("mid", Checkpoint(4, discarded={"f": 3}))  # no record: discarded must be given
    m.record("dst", Checkpoint(2))
    m.record("src", Checkpoint(9, projection={"e": 9}))
    m.record("mid", Checkpoint(8, projection={"f": 6}))
    m.record("dst", Checkpoint(6))
    m._check()
    assert m.plan_rollback(["mid"]).to_json() == solve_frontiers(m.dataflow(), ["mid"]).to_json()
