"""Reading valid scenario documents: field mapping, defaults, shorthands, files (SPEC §9)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from scenario_docs import SPEC_ANSWER, example_docs, spec_doc

from falkirk.domains import (
    REGISTRY,
    Epoch,
    Frontier,
    Identity,
    Product,
    Sequence,
    SequenceToEpoch,
    register_domain,
)
from falkirk.scenario import Scenario, decode_frontier, load, loads, parse
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers


def test_spec_example_gives_the_spec_answer() -> None:
    """The SPEC §9 document solves to exactly the answer SPEC §9 prints."""
    assert parse(spec_doc()).solve().to_json() == SPEC_ANSWER


def test_spec_example_maps_onto_the_python_model() -> None:
    """Processors, edges and checkpoints become the model objects the Python API would build."""
    s = parse(spec_doc())
    d = Epoch()
    assert s.failed == frozenset({"sum"}) and s.notifications is True
    sum_ = s.dataflow.processors["sum"]
    assert sum_.logs == frozenset({"e2"}) and not sum_.stateless and sum_.live is None
    assert sum_.checkpoints == (Checkpoint(d.frontier(2), notifications=d.frontier(2), delivered={"e1": d.frontier(2)}),)
    assert s.dataflow.processors["src"].stateless
    assert s.dataflow.processors["sink"].live == Checkpoint("top", delivered={"e2": d.frontier(4)})
    assert s.dataflow.edges["e2"] == Edge("e2", "sum", "sink", Identity())
    python = Dataflow(
        [
            Processor("src", "epoch", stateless=True),
            Processor("sum", "epoch", logs=["e2"], checkpoints=[Checkpoint(2, notifications=2, delivered={"e1": 2})]),
            Processor("sink", "epoch", checkpoints=[Checkpoint(1, delivered={"e2": 1})], live=Checkpoint("top", delivered={"e2": 4})),
        ],
        [Edge("e1", "src", "sum"), Edge("e2", "sum", "sink")],
    )
    assert solve_frontiers(python, ["sum"]).to_json() == s.solve().to_json()


@pytest.mark.parametrize("doc", example_docs())
def test_example_scenarios_solve_to_their_documented_plan(doc: dict[str, Any]) -> None:
    """Every examples/scenarios file solves to the plan in its x-expected-plan annotation."""
    expected = doc["x-expected-plan"]
    s = parse(doc)
    assert s.solve().to_json() == expected
    assert s.solve(strategy="round_robin").to_json() == expected


def test_annotations_starting_with_x_are_ignored_everywhere() -> None:
    """x- fields at the top, in processors, edges, checkpoints, live and projections change nothing."""
    doc = spec_doc()
    doc["x-origin"] = {"anything": [1, 2]}
    doc["processors"]["sum"]["x-owner"] = "team"
    doc["processors"]["sum"]["checkpoints"][0]["x-taken-at"] = "noon"
    doc["processors"]["sink"]["live"]["x-host"] = "h1"
    doc["edges"]["e1"]["x-capacity"] = 3
    doc["edges"]["e2"]["projection"] = {"kind": "identity", "x-why": "same domain"}
    assert parse(doc) == parse(spec_doc())


def test_omitted_optional_fields_take_their_defaults() -> None:
    """No edges, failed or projection: no edges, nothing failed, identity projection."""
    s = parse({"format": "falkirk-scenario/1", "processors": {"p": {"domain": "epoch"}}})
    assert s.failed == frozenset() and list(s.dataflow.edges) == []
    assert s.solve().actions == {"p": "keep"}
    doc = spec_doc()
    del doc["edges"]["e1"]["projection"]
    assert parse(doc).dataflow.edges["e1"].projection == Identity()


def test_failed_all_asks_for_low_watermarks() -> None:
    """"failed": "all" fails every processor, live metadata notwithstanding."""
    doc = spec_doc()
    doc["failed"] = "all"
    s = parse(doc)
    assert s.failed == "all" and s.failed_names == ["src", "sum", "sink"]
    assert set(s.solve().actions.values()) <= {"restore", "restart"}


def test_notifications_false_declares_a_system_without_notifications() -> None:
    """Top-level "notifications": false reaches the dataflow (N = ∅ everywhere)."""
    doc = spec_doc()
    doc["notifications"] = False
    del doc["processors"]["sum"]["checkpoints"][0]["notifications"]
    s = parse(doc)
    assert s.notifications is False and not any(s.dataflow.receives_notifications.values())
    assert s.solve().to_json()["frontiers"] == SPEC_ANSWER["frontiers"]


def _sequence_doc(sent: Any, kept: Any, seen: Any) -> dict[str, Any]:
    return {
        "format": "falkirk-scenario/1",
        "processors": {
            "r": {"domain": "sequence", "logs": ["a"],
                  "checkpoints": [{"frontier": {"@input": 9}, "projection": {"a": sent}}]},
            "c": {"domain": "sequence", "checkpoints": [{"frontier": {"a": 3}, "delivered": {"a": kept}}],
                  "live": {"delivered": {"a": seen}}},
        },
        "edges": {"a": {"src": "r", "dst": "c", "projection": "sequence"}},
    }


def test_sequence_bare_integers_stand_for_the_edge_they_are_filed_under() -> None:
    """In delivered/projection/discarded of a sequence domain, n means {edge: n}."""
    bare = parse(_sequence_doc(4, 3, 7))
    assert bare == parse(_sequence_doc({"a": 4}, {"a": 3}, {"a": 7}))
    assert bare != parse(_sequence_doc({"a": 4}, {"a": 3}, {"a": 8}))
    c = bare.dataflow.processors["c"]
    assert c.live is not None and c.live.delivered["a"] == Sequence(["a"]).frontier({"a": 7})


def test_product_frontiers_accept_upto_and_before() -> None:
    """{"upto": ...} and the equivalent {"before": ...} give the same checkpoint."""
    def doc(frontier: Any) -> dict[str, Any]:
        return {"format": "falkirk-scenario/1",
                "processors": {"p": {"domain": "product", "arity": 2, "checkpoints": [{"frontier": frontier}]}}}
    upto = parse(doc({"upto": [[0, 2], [2, 0]]}))
    before = parse(doc({"before": [[3, 0], [1, 1], [0, 3]]}))
    assert upto == before
    assert upto.dataflow.processors["p"].checkpoints[0].frontier == Frontier.upto(Product(2), [(0, 2), (2, 0)])


@pytest.mark.parametrize("text", ["top", "empty"])
def test_top_and_empty_are_accepted_wherever_a_frontier_is(text: str) -> None:
    """"top"/"empty" decode in every built-in domain."""
    for dom in (Epoch(), Sequence(["a"]), Product(3)):
        f = decode_frontier(dom, text)
        assert f.is_top if text == "top" else f.is_empty


def test_options_given_as_a_kind_object_reach_the_projection() -> None:
    """{"kind": "sequence_to_epoch", "cuts": [...]} builds that projection with its options."""
    doc = {
        "format": "falkirk-scenario/1",
        "processors": {"s": {"domain": "sequence", "stateless": True}, "w": {"domain": "epoch"}},
        "edges": {"r": {"src": "s", "dst": "w", "projection": {"kind": "sequence_to_epoch", "cuts": [2, 5]}}},
    }
    assert parse(doc).dataflow.edges["r"].projection == SequenceToEpoch([2, 5])


def test_loads_and_load_read_text_bytes_paths_and_files(tmp_path: Path) -> None:
    """loads accepts str and bytes; load accepts a path, a str path and an open file."""
    text = json.dumps(spec_doc())
    path = tmp_path / "s.json"
    path.write_text(text)
    expected = parse(spec_doc())
    assert loads(text) == expected and loads(text.encode()) == expected
    assert load(path) == expected and load(str(path)) == expected
    assert load(io.StringIO(text)) == expected


def test_scenario_equality_and_construction_from_python() -> None:
    """Scenario(...) validates failed names; equal documents give equal, hashable scenarios."""
    a, b = parse(spec_doc()), parse(spec_doc())
    assert a == b and hash(a) == hash(b)
    other = spec_doc()
    other["processors"]["sink"]["checkpoints"][0]["frontier"] = 0
    other["processors"]["sink"]["checkpoints"][0]["delivered"]["e2"] = 0
    assert parse(other) != a
    assert Scenario(a.dataflow, failed="sum").failed == frozenset({"sum"})
    assert Scenario(a.dataflow, failed=["sum"]) == a


def test_a_registered_domain_with_its_own_option_is_readable() -> None:
    """A user domain registered with options takes those options as processor fields."""

    class Scaled(Epoch):  # an epoch domain that remembers an option
        def __init__(self, step: int) -> None:
            object.__setattr__(self, "step", step)

        @property
        def name(self) -> str:
            return "scaled"

    register_domain("scaled", Scaled, options=("step",))
    try:
        doc = {"format": "falkirk-scenario/1", "processors": {"p": {"domain": "scaled", "step": 4}}}
        s = parse(doc)
        assert s.dataflow.domains["p"].step == 4
    finally:
        REGISTRY.pop("scaled")
