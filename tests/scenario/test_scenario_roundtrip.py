"""Writing scenarios back: canonical encodings, round trips, and robustness on mangled input."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from scenario_docs import EXAMPLES, example_docs, spec_doc

from falkirk.domains import Epoch, Frontier, FunctionProjection, Lexicographic, Product, Sequence
from falkirk.errors import FalkirkError, ProjectionError, ScenarioError
from falkirk.scenario import Scenario, decode_frontier, dump, dumps, loads, parse
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, encode_frontier


@pytest.mark.parametrize("doc", example_docs())
def test_dump_of_a_parsed_example_parses_to_an_equal_scenario_and_plan(doc: dict[str, Any]) -> None:
    """parse(dump(parse(x))) equals parse(x), solves to the same plan, and dump is a fixed point."""
    s = parse(doc)
    again = loads(dumps(s))
    assert again == s
    assert again.solve().to_json() == s.solve().to_json()
    assert dump(again) == dump(s)


def test_dump_writes_canonical_encodings() -> None:
    """upto becomes before, -1 becomes "empty", a default projection is written out, x- fields go."""
    doc = {
        "format": "falkirk-scenario/1",
        "x-note": "dropped",
        "processors": {
            "a": {"domain": "epoch", "checkpoints": [{"frontier": 2, "notifications": -1}]},
            "b": {"domain": "product", "arity": 2,
                  "checkpoints": [{"frontier": {"upto": [[1, 1]]}, "delivered": {"ab": {"before": []}}}]},
        },
        "edges": {"ab": {"src": "a", "dst": "b", "projection": "epoch_to_loop"}},
    }
    out = dump(parse(doc))
    assert out == {
        "format": "falkirk-scenario/1",
        "processors": {
            "a": {"domain": "epoch", "checkpoints": [{"frontier": 2, "notifications": "empty"}]},
            "b": {"domain": "product", "arity": 2,
                  "checkpoints": [{"frontier": {"before": [[0, 2], [2, 0]]}, "delivered": {"ab": "top"}}]},
        },
        "edges": {"ab": {"src": "a", "dst": "b", "projection": "epoch_to_loop"}},
        "failed": [],
    }


def test_dump_writes_options_and_flags() -> None:
    """notifications false, failed "all", stateless, logs and projection options survive a dump."""
    doc = {
        "format": "falkirk-scenario/1",
        "notifications": False,
        "processors": {"s": {"domain": "sequence", "stateless": True, "logs": ["r"]}, "w": {"domain": "epoch"}},
        "edges": {"r": {"src": "s", "dst": "w", "projection": {"kind": "sequence_to_epoch", "cuts": [2, 5]}}},
        "failed": "all",
    }
    out = dump(parse(doc))
    assert out["notifications"] is False and out["failed"] == "all"
    assert out["processors"]["s"] == {"domain": "sequence", "stateless": True, "logs": ["r"]}
    assert out["edges"]["r"]["projection"] == {"kind": "sequence_to_epoch", "cuts": [2, 5]}


def test_dump_of_a_python_dataflow_uses_canonical_encodings() -> None:
    """A dataflow built in Python with raw encodings dumps to the same document as the file."""
    df = Dataflow(
        [
            Processor("src", "epoch", stateless=True),
            Processor("sum", "epoch", logs=["e2"], checkpoints=[Checkpoint(2, notifications=2, delivered={"e1": 2})]),
            Processor("sink", "epoch", checkpoints=[Checkpoint(1, delivered={"e2": 1})], live=Checkpoint("top", delivered={"e2": 4})),
        ],
        [Edge("e1", "src", "sum"), Edge("e2", "sum", "sink")],
    )
    assert dump(Scenario(df, failed=["sum"])) == dump(parse(spec_doc()))


@pytest.mark.parametrize(
    ("processor", "path"),
    [
        (Processor("a", "epoch", checkpoints=[Checkpoint(1, state=object())]), "processors.a.checkpoints[0].state"),
        (Processor("a", "epoch", checkpoints=[Checkpoint(1, logged={"ab": [1, 2]})], logs=["ab"]), "processors.a.checkpoints[0].logged"),
        (Processor("a", "epoch", restartable=False, checkpoints=[Checkpoint(1)]), "processors.a"),
        (Processor("a", "epoch", notifications=False), "processors.a"),
    ],
)
def test_dump_refuses_what_has_no_json_form(processor: Processor, path: str) -> None:
    """State handles, logged references, restartable=False, per-processor notifications are named."""
    df = Dataflow([processor, Processor("b", "epoch")], [Edge("ab", "a", "b")])
    with pytest.raises(ScenarioError) as info:
        dump(Scenario(df))
    assert info.value.path == path


def test_dump_refuses_function_projections() -> None:
    """A Python-function projection cannot be written; the error names the edge."""
    proj = FunctionProjection(lambda f: f, label="mine")
    df = Dataflow([Processor("a", "epoch"), Processor("b", "epoch")], [Edge("ab", "a", "b", proj)])
    with pytest.raises(ProjectionError) as info:
        dump(Scenario(df))
    assert info.value.path == "edges.ab.projection"


# -- frontier encodings, per built-in domain ------------------------------------------------
EDGE_NAMES = ["a", "b", "c"]
epoch_frontiers = st.one_of(st.just(Frontier.top(Epoch())), st.integers(-1, 40).map(Epoch().frontier))


@st.composite
def sequence_frontiers(draw: st.DrawFn) -> Frontier:
    dom = Sequence(draw(st.lists(st.sampled_from(EDGE_NAMES), min_size=1, unique=True)))
    counts = draw(st.dictionaries(st.sampled_from(dom.edges), st.one_of(st.integers(0, 30), st.just("top"))))
    return dom.frontier(counts)


@st.composite
def tuple_frontiers(draw: st.DrawFn) -> Frontier:
    k = draw(st.integers(1, 3))
    dom = draw(st.sampled_from([Product(k), Lexicographic(k)]))
    times = draw(st.lists(st.tuples(*[st.integers(0, 5)] * k), max_size=4))
    build = draw(st.sampled_from([Frontier.before, Frontier.upto]))
    return build(dom, times)


any_frontier = st.one_of(epoch_frontiers, sequence_frontiers(), tuple_frontiers())


@given(any_frontier)
def test_frontier_encoding_round_trips(f: Frontier) -> None:
    """decode(encode(f)) == f for every built-in domain, through JSON text."""
    enc = json.loads(json.dumps(encode_frontier(f)))
    assert decode_frontier(f.domain, enc) == f


@given(any_frontier)
def test_frontier_encoding_is_canonical(f: Frontier) -> None:
    """⊤/∅ are "top"/"empty"; epochs are integers >= 0; no zero counts; before is sorted."""
    enc = encode_frontier(f)
    if f.is_top or f.is_empty:
        assert enc == ("top" if f.is_top else "empty")
    elif isinstance(f.domain, Epoch):
        assert isinstance(enc, int) and enc >= 0
    elif isinstance(f.domain, Sequence):
        assert enc and all(c == "top" or c > 0 for c in enc.values())
    else:
        assert list(enc) == ["before"] and enc["before"] == sorted(enc["before"])
    assert encode_frontier(decode_frontier(f.domain, enc)) == enc


def _doc_with_checkpoint(f: Frontier) -> dict[str, Any]:
    """A scenario whose processor p (in f's domain) has a checkpoint at f and live metadata at f."""
    dom = f.domain
    p: dict[str, Any] = {"domain": dom.name, "checkpoints": [{"frontier": encode_frontier(f)}]}
    procs: dict[str, Any] = {"p": p}
    edges: dict[str, Any] = {}
    if isinstance(dom, (Product, Lexicographic)):
        p["arity"] = dom.arity
    if isinstance(dom, Sequence):
        for e in dom.edges:
            procs[f"src_{e}"] = {"domain": "epoch", "logs": [e]}
            edges[e] = {"src": f"src_{e}", "dst": "p", "projection": "recorded"}
        p["checkpoints"][0]["delivered"] = {e: encode_frontier(dom.restrict(f, e)) for e in dom.edges}
    return {"format": "falkirk-scenario/1", "processors": procs, "edges": edges, "failed": ["p"]}


@given(any_frontier.filter(lambda f: not (f.is_top or f.is_empty)))
def test_checkpoint_frontiers_round_trip_through_a_whole_scenario(f: Frontier) -> None:
    """A checkpoint at f survives parse → dumps → loads unchanged, in every built-in domain."""
    s = parse(_doc_with_checkpoint(f))
    again = loads(dumps(s))
    assert again == s
    assert again.dataflow.processors["p"].checkpoints[0].frontier == f


# -- mangled documents -----------------------------------------------------------------------
WORDS = ["top", "empty", "e1", "e2", "a", "sum", "src", "sink", "identity", "sequence", "epoch",
         "product", "all", "frontier", "delivered", "projection", "upto", "before", "kind", "x-a"]
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.floats(allow_nan=False, allow_infinity=False),
              st.sampled_from(WORDS), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(st.sampled_from(WORDS), st.text(max_size=4)), inner, max_size=3)),
    max_leaves=8,
)
BASES = [spec_doc()] + [json.loads(p.read_text()) for p in EXAMPLES]


def _places(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _places(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _places(v, path + (i,))
    return out


@st.composite
def mangled_documents(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 3))):
        place = draw(st.sampled_from(_places(doc)))
        value = draw(json_values)
        if not place:
            doc = value
            continue
        parent = doc
        for key in place[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "delete" and isinstance(parent, (dict, list)):
            del parent[place[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(WORDS))] = value
        else:
            parent[place[-1]] = value
    return doc


@given(mangled_documents())
def test_mangled_documents_fail_only_with_falkirk_errors(doc: Any) -> None:
    """Random damage to valid documents gives a Scenario or a FalkirkError with a path, never a crash."""
    try:
        s = parse(doc)
    except ScenarioError as exc:
        event(f"rejected as {type(exc).__name__}")
        assert isinstance(exc.path, str) and "\n" not in str(exc)
        return
    event("parsed")
    assert loads(dumps(s)) == s
    try:
        s.solve()
    except FalkirkError:
        pass
