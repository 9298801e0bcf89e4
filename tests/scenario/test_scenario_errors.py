"""Invalid scenario documents: each is rejected with the JSON path of the culprit (SPEC §9)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from scenario_docs import spec_doc

from falkirk.errors import (
    DomainError,
    FalkirkError,
    NotAChainError,
    NotMonotoneError,
    ProjectionError,
    ScenarioError,
    UnknownNameError,
    ValidationError,
)
from falkirk.scenario import Scenario, loads, parse

Doc = dict[str, Any]


def _sum_ck(d: Doc) -> dict[str, Any]:
    return d["processors"]["sum"]["checkpoints"][0]


def _set(path: list[Any], value: Any) -> Callable[[Doc], None]:
    def mutate(d: Doc) -> None:
        target = d
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(path: list[Any]) -> Callable[[Doc], None]:
    def mutate(d: Doc) -> None:
        target = d
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


SINK_CKS = ["processors", "sink", "checkpoints"]

# (mutation of the SPEC §9 document, expected path, expected class, words the message must contain)
CASES: list[tuple[str, Callable[[Doc], None], str, type[Exception], tuple[str, ...]]] = [
    ("misspelt checkpoint field", _set(["processors", "sum", "checkpoints", 0, "deliverd"], {}),
     "processors.sum.checkpoints[0].deliverd", ScenarioError, ("deliverd", "delivered")),
    ("misspelt processor field", _set(["processors", "sum", "log"], ["e2"]), "processors.sum.log", ScenarioError, ("log",)),
    ("misspelt top-level field", _set(["faild"], []), "faild", ScenarioError, ("faild", "failed")),
    ("misspelt edge field", _set(["edges", "e1", "dest"], "sum"), "edges.e1.dest", ScenarioError, ("dest",)),
    ("misspelt live field", _set(["processors", "sink", "live", "delivred"], {}), "processors.sink.live.delivred", ScenarioError, ("delivred",)),
    ("frontier in live", _set(["processors", "sink", "live", "frontier"], "top"), "processors.sink.live.frontier", ScenarioError, ("live",)),
    ("projection in live", _set(["processors", "sink", "live", "projection"], {}), "processors.sink.live.projection", ScenarioError, ("⊤",)),
    ("missing format", _delete(["format"]), "format", ScenarioError, ("falkirk-scenario/1",)),
    ("wrong format", _set(["format"], "falkirk-scenario/2"), "format", ScenarioError, ("falkirk-scenario/2",)),
    ("a plan given as a scenario", _set(["format"], "falkirk-plan/1"), "format", ScenarioError, ("plan",)),
    ("missing processors", _delete(["processors"]), "processors", ScenarioError, ("processors",)),
    ("processors not an object", _set(["processors"], ["src"]), "processors", ScenarioError, ("object",)),
    ("missing domain", _delete(["processors", "sink", "domain"]), "processors.sink.domain", ScenarioError, ("domain",)),
    ("unknown domain", _set(["processors", "sink", "domain"], "epochs"), "processors.sink.domain", UnknownNameError, ("epochs", "epoch")),
    ("product without arity", _set(["processors", "sink", "domain"], "product"), "processors.sink.arity", ScenarioError, ("arity",)),
    ("arity on an epoch", _set(["processors", "sink", "arity"], 2), "processors.sink.arity", ScenarioError, ("arity",)),
    ("stateless not a bool", _set(["processors", "src", "stateless"], "yes"), "processors.src.stateless", ScenarioError, ("true or false",)),
    ("unknown edge source", _set(["edges", "e1", "src"], "srx"), "edges.e1.src", UnknownNameError, ("srx",)),
    ("unknown edge target", _set(["edges", "e2", "dst"], "snk"), "edges.e2.dst", UnknownNameError, ("snk",)),
    ("missing edge target", _delete(["edges", "e2", "dst"]), "edges.e2.dst", ScenarioError, ("dst",)),
    ("unknown projection", _set(["edges", "e1", "projection"], "ident"), "edges.e1.projection", ProjectionError, ("ident",)),
    ("projection with a bad option", _set(["edges", "e1", "projection"], {"kind": "identity", "k": 1}),
     "edges.e1.projection", ProjectionError, ("k",)),
    ("mismatched projection", _set(["processors", "sink"], {"domain": "product", "arity": 2}),
     "edges.e2.projection", ProjectionError, ("e2", "identity")),
    ("logs an input edge", _set(["processors", "sum", "logs"], ["e1"]), "processors.sum.logs[0]", UnknownNameError, ("e1",)),
    ("unknown edge in delivered", _set(["processors", "sum", "checkpoints", 0, "delivered", "e9"], 1),
     "processors.sum.checkpoints[0].delivered.e9", UnknownNameError, ("e9", "sum")),
    ("output edge in delivered", _set(["processors", "sum", "checkpoints", 0, "delivered", "e2"], 1),
     "processors.sum.checkpoints[0].delivered.e2", UnknownNameError, ("e2",)),
    ("input edge in discarded", _set(["processors", "sum", "checkpoints", 0, "discarded"], {"e1": 1}),
     "processors.sum.checkpoints[0].discarded.e1", UnknownNameError, ("e1",)),
    ("frontier of the wrong kind", _set(["processors", "sum", "checkpoints", 0, "frontier"], "two"),
     "processors.sum.checkpoints[0].frontier", DomainError, ("epoch", "two")),
    ("fractional epoch", _set(["processors", "sum", "checkpoints", 0, "frontier"], 2.5),
     "processors.sum.checkpoints[0].frontier", DomainError, ("2.5",)),
    ("negative epoch", _set(["processors", "sink", "live", "delivered", "e2"], -2),
     "processors.sink.live.delivered.e2", DomainError, ("-2",)),
    ("product frontier in an epoch domain", _set(["processors", "sum", "checkpoints", 0, "notifications"], {"upto": [[1, 1]]}),
     "processors.sum.checkpoints[0].notifications", DomainError, ("epoch",)),
    ("checkpoint at empty", _set(["processors", "sink", "checkpoints", 0, "frontier"], "empty"),
     "processors.sink.checkpoints[0].frontier", ScenarioError, ("∅",)),
    ("checkpoint at top", _set(["processors", "sink", "checkpoints", 0, "frontier"], "top"),
     "processors.sink.checkpoints[0].frontier", ScenarioError, ("live",)),
    ("checkpoint without frontier", _delete(["processors", "sum", "checkpoints", 0, "frontier"]),
     "processors.sum.checkpoints[0].frontier", ScenarioError, ("frontier",)),
    ("checkpoints not a list", _set(["processors", "sum", "checkpoints"], {"frontier": 2}),
     "processors.sum.checkpoints", ScenarioError, ("list",)),
    ("metadata not monotone", _set(SINK_CKS, [{"frontier": 1, "delivered": {"e2": 1}}, {"frontier": 3, "delivered": {"e2": 0}}]),
     "processors.sink.checkpoints[1].delivered.e2", NotMonotoneError, ("monotone",)),
    ("live metadata not monotone", _set(["processors", "sink", "live", "delivered", "e2"], 0),
     "processors.sink.live.delivered.e2", NotMonotoneError, ("monotone",)),
    ("checkpoints not a chain", _set(SINK_CKS, [{"frontier": 3}, {"frontier": 1}]),
     "processors.sink.checkpoints[1].frontier", NotAChainError, ("increasing",)),
    ("stateless with delivered", _set(["processors", "src", "checkpoints"], [{"frontier": 3, "delivered": {}}]),
     "processors.src.checkpoints[0].delivered", ScenarioError, ("stateless",)),
    ("stateless with live", _set(["processors", "src", "live"], {}), "processors.src.live", ScenarioError, ("stateless",)),
    ("recorded projection without discarded", lambda d: (_set(["edges", "e2", "projection"], "recorded")(d),
                                                         _set(["processors", "sum", "logs"], [])(d)),
     "processors.sum.checkpoints[0]", ValidationError, ("discarded", "e2")),
    ("notifications in a system without them", _set(["notifications"], False),
     "processors.sum.checkpoints[0].notifications", ScenarioError, ("notifications",)),
    ("notifications not a bool", _set(["notifications"], "no"), "notifications", ScenarioError, ("true or false",)),
    ("unknown failed processor", _set(["failed"], ["sum", "sun"]), "failed[1]", UnknownNameError, ("sun", "sum")),
    ("failed listed twice", _set(["failed"], ["sum", "sum"]), "failed[1]", ScenarioError, ("twice",)),
    ("failed neither a list nor all", _set(["failed"], "sum"), "failed", ScenarioError, ("all",)),
    ("reserved edge name", _set(["edges", "@input"], {"src": "src", "dst": "sum"}), "edges.@input", ScenarioError, ("reserved",)),
]


@pytest.mark.parametrize(("mutate", "path", "kind", "words"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_invalid_document_is_rejected_at_its_path(
    mutate: Callable[[Doc], None], path: str, kind: type[Exception], words: tuple[str, ...]
) -> None:
    """The error is a ScenarioError of the expected kind whose path and message name the culprit."""
    doc = spec_doc()
    mutate(doc)
    with pytest.raises(ScenarioError) as info:
        parse(doc)
    err = info.value
    assert isinstance(err, kind)
    assert err.path == path
    assert str(err).startswith(f"{path}: ")
    for word in words:
        assert word in str(err)
    assert "\n" not in str(err)


def test_sequence_specific_errors_name_the_field() -> None:
    """Bare counts where no edge is implied, and counts of other edges under an edge, are rejected."""
    doc = {
        "format": "falkirk-scenario/1",
        "processors": {
            "r": {"domain": "sequence", "logs": ["a"]},
            "c": {"domain": "sequence", "checkpoints": [{"frontier": 3}]},
        },
        "edges": {"a": {"src": "r", "dst": "c", "projection": "sequence"}},
    }
    with pytest.raises(DomainError, match=r'\{"a": 3\}') as info:
        parse(doc)
    assert info.value.path == "processors.c.checkpoints[0].frontier"
    doc["processors"]["c"]["checkpoints"] = [{"frontier": {"a": 3}, "delivered": {"a": {"b": 2}}}]
    with pytest.raises(DomainError, match="only") as info:
        parse(doc)
    assert info.value.path == "processors.c.checkpoints[0].delivered.a"
    doc["processors"]["c"]["checkpoints"] = [{"frontier": {"a": 3}, "notifications": {"a": 1}}]
    with pytest.raises(ScenarioError, match="no notifications") as info:
        parse(doc)
    assert info.value.path == "processors.c.checkpoints[0].notifications"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"format": "falkirk-scenario/1",\n "processors": {,}}', ("line 2", "column 17")),
        ('{"format": "falkirk-scenario/1", "processors": {}, "processors": {}}', ("duplicate", "processors")),
        (('{"format": "falkirk-scenario/1", "processors": {"p": {"domain": "epoch", '
         '"checkpoints": [{"frontier": NaN}]}}}'), ("NaN",)),
        ("[]", ("JSON object",)),
        ("", ("line 1", "column 1")),
        (b"\xff\xfe{", ("UTF",)),
    ],
)
def test_bad_json_is_a_scenario_error(text: str | bytes, words: tuple[str, ...]) -> None:
    """Syntax errors (with line and column), duplicate keys, NaN and non-objects are ScenarioErrors."""
    with pytest.raises(ScenarioError) as info:
        loads(text)
    for word in words:
        assert word in str(info.value)


def test_scenario_constructor_rejects_unknown_failed_names() -> None:
    """Scenario(dataflow, failed=[unknown]) raises UnknownNameError naming it."""
    df = parse(spec_doc()).dataflow
    with pytest.raises(UnknownNameError, match="nobody"):
        Scenario(df, failed=["nobody"])


def test_errors_are_falkirk_errors_and_value_errors() -> None:
    """Scenario errors can be caught as FalkirkError or ValueError."""
    with pytest.raises(FalkirkError):
        parse({"format": "falkirk-scenario/1"})
    with pytest.raises(ValueError):
        parse(42)
