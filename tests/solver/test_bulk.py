"""Bulk constructors (``falkirk.solver.model.bulk``): ``from_arrays`` and ``from_networkx`` give the object constructors' dataflow and plans."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.errors import NotAChainError, UnknownNameError, ValidationError
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers


@st.composite
def epoch_graphs(draw: st.DrawFn) -> dict[str, Any]:
    """A small epoch-domain job as arrays: cycles, stateless processors, logged edges, repeated checkpoints."""
    n = draw(st.integers(1, 6))
    m = draw(st.integers(0, 3 * n))
    cks = [sorted(draw(st.lists(st.integers(0, 8), max_size=4))) for _ in range(n)]
    return {
        "names": [f"p{i}" for i in range(n)],
        "src": np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), dtype=np.int64),
        "dst": np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), dtype=np.int64),
        "logged": np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)), dtype=bool),
        "stateless": np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool),
        "ck_ptr": np.cumsum([0] + [len(c) for c in cks]),
        "ck_val": np.array([x for c in cks for x in c], dtype=np.int64),
        "notifications": draw(st.booleans()),
        "failed": draw(st.one_of(st.just("all"), st.lists(st.sampled_from([f"p{i}" for i in range(n)])))),
    }


def by_objects(g: dict[str, Any]) -> Dataflow:
    """The job through the object constructors."""
    names, src, dst = g["names"], g["src"].tolist(), g["dst"].tolist()
    procs = [
        Processor(
            p,
            "epoch",
            stateless=bool(g["stateless"][i]),
            logs=[f"e{k}" for k in range(len(src)) if src[k] == i and g["logged"][k]],
            checkpoints=[Checkpoint(int(c)) for c in g["ck_val"][g["ck_ptr"][i] : g["ck_ptr"][i + 1]]],
        )
        for i, p in enumerate(names)
    ]
    edges = [Edge(f"e{k}", names[s], names[d]) for k, (s, d) in enumerate(zip(src, dst, strict=True))]
    return Dataflow(procs, edges, notifications=g["notifications"])


def by_arrays(g: dict[str, Any]) -> Dataflow:
    """The job through ``Dataflow.from_arrays``."""
    keys = ("src", "dst", "logged", "stateless", "ck_ptr", "ck_val", "notifications")
    return Dataflow.from_arrays(g["names"], **{k: g[k] for k in keys})


def by_networkx(g: dict[str, Any]) -> Dataflow:
    """The job through a networkx graph with node and edge attributes (a MultiDiGraph: edges may repeat)."""
    G = nx.MultiDiGraph()
    for i, p in enumerate(g["names"]):
        cks = g["ck_val"][g["ck_ptr"][i] : g["ck_ptr"][i + 1]].tolist()
        G.add_node(p, stateless=bool(g["stateless"][i]), checkpoints=cks)
    for k, (s, d) in enumerate(zip(g["src"].tolist(), g["dst"].tolist(), strict=True)):
        G.add_edge(g["names"][s], g["names"][d], name=f"e{k}", logged=bool(g["logged"][k]))
    return Dataflow.from_networkx(G, notifications=g["notifications"])


@given(epoch_graphs(), st.sampled_from(["auto", "worklist", "round_robin", "vectorised"]))
def test_the_three_constructors_give_identical_plans(g: dict[str, Any], strategy: Any) -> None:
    """Property: from_arrays, from_networkx and the object constructors give the same processors, edges and plan."""
    dfs = [by_objects(g), by_arrays(g), by_networkx(g)]
    assert dfs[0].processors == dfs[1].processors == dfs[2].processors
    assert dfs[0].edges == dfs[1].edges == dfs[2].edges
    plans = [solve_frontiers(df, g["failed"], strategy=strategy) for df in dfs]
    assert plans[0].to_json() == plans[1].to_json() == plans[2].to_json()
    assert plans[0].actions == plans[1].actions == plans[2].actions


def test_from_networkx_reads_processor_fields_and_projections() -> None:
    """Node attributes are Processor fields, edge attributes name, projection and logged."""
    G = nx.DiGraph()
    G.add_node("src", stateless=True)
    G.add_node("loop", domain="lexicographic", arity=2, notifications=False)
    G.add_node("sink", checkpoints=[Checkpoint(1)], live=Checkpoint("top"), restartable=False)
    G.add_edge("src", "loop", name="in", projection="epoch_to_loop", logged=True)
    G.add_edge("loop", "sink", projection={"kind": "recorded"})
    df = Dataflow.from_networkx(G)
    assert df.processors["src"].logs == frozenset({"in"}) and df.processors["src"].stateless
    assert str(df.domains["loop"]) == "lexicographic(2)" and df.processors["loop"].notifications is False
    assert not df.processors["sink"].restartable and df.edges["loop->sink"].dst == "sink"
    assert df.bound["in"].spec.name == "epoch_to_loop"


def test_from_arrays_names_the_argument_that_is_wrong() -> None:
    """Shapes, indices and CSR pointers are checked at once, naming the argument."""
    names = ["a", "b"]
    with pytest.raises(ValidationError, match=r"dst has shape \(1,\), expected shape \(2,\)"):
        Dataflow.from_arrays(names, np.array([0, 1]), np.array([1]))
    with pytest.raises(ValidationError, match=r"src holds 2, which is not a processor index \(0\.\.1\)"):
        Dataflow.from_arrays(names, np.array([2]), np.array([0]))
    with pytest.raises(ValidationError, match=r"logged has shape \(2,\), expected \(1,\)"):
        Dataflow.from_arrays(names, [0], [1], logged=[True, False])
    with pytest.raises(ValidationError, match="give both ck_ptr and ck_val"):
        Dataflow.from_arrays(names, [0], [1], ck_ptr=[0, 0, 0])
    with pytest.raises(ValidationError, match="ck_ptr must rise from 0 to len"):
        Dataflow.from_arrays(names, [0], [1], ck_ptr=[0, 2, 1], ck_val=[1])
    with pytest.raises(ValidationError, match="names must be strings"):
        Dataflow.from_arrays(["a", 1], [0], [1])  # type: ignore[list-item]


def test_bulk_constructors_take_sequence_domains() -> None:
    """A sequence domain given to from_arrays' mixed form or to from_networkx is made as the objects make it."""
    objects = Dataflow([Processor("a", "sequence"), Processor("b", "sequence")], [Edge("e0", "a", "b", "sequence")])
    arrays = Dataflow.from_arrays(["a", "b"], [0], [1], domain="sequence", projection="sequence")
    G = nx.DiGraph()
    G.add_node("a", domain="sequence")
    G.add_node("b", domain="sequence")
    G.add_edge("a", "b", name="e0", projection="sequence")
    for df in (arrays, Dataflow.from_networkx(G)):
        assert df.domains == objects.domains
        assert solve_frontiers(df, failed=["a"]).to_json() == solve_frontiers(objects, failed=["a"]).to_json()


def test_bulk_constructors_raise_the_model_errors() -> None:
    """A checkpoint chain out of order, or a duplicate name, is refused as the object constructors refuse it."""
    with pytest.raises(NotAChainError, match=r"processor 'a': checkpoint 1 .*increasing order"):
        Dataflow.from_arrays(["a"], [], [], ck_ptr=[0, 2], ck_val=[3, 1])
    with pytest.raises(ValidationError, match="processor 'a' is declared twice"):
        Dataflow.from_arrays(["a", "a"], [], [])
    G = nx.DiGraph()
    G.add_edge("a", "b", logged=True)
    G.nodes["a"]["logs"] = ["nope"]
    with pytest.raises(UnknownNameError, match=r"logs \['nope'\]"):
        Dataflow.from_networkx(G)
    with pytest.raises(ValidationError, match="needs a directed graph"):
        Dataflow.from_networkx(nx.Graph())


@pytest.mark.parametrize(
    ("node", "edge", "message"),
    [
        ({"chekpoints": [1]}, {}, r"node 'a': unknown attribute 'chekpoints' \(did you mean 'checkpoints'\?\)"),
        ({"stateless": "no"}, {}, r"node 'a': attribute 'stateless' must be True or False, got 'no'"),
        ({"stateless": 1}, {}, r"node 'a': attribute 'stateless' must be True or False, got 1"),
        ({"stateless": True, "live": Checkpoint("top")}, {}, r"node 'a': a stateless processor takes no 'live'"),
        ({}, {"loged": True}, r"edge 'a' -> 'b': unknown attribute 'loged' \(did you mean 'logged'\?\)"),
        ({}, {"logged": "no"}, r"edge 'a' -> 'b': attribute 'logged' must be True or False, got 'no'"),
    ],
)
def test_from_networkx_validates_attributes_like_the_scenario_reader(node: dict, edge: dict, message: str) -> None:
    """A misspelt attribute, a bool that is not a bool, live on a stateless node: a named error, never ignored."""
    graph = nx.DiGraph()
    graph.add_node("a", **node)
    graph.add_node("b")
    graph.add_edge("a", "b", **edge)
    with pytest.raises(ValidationError, match=message):
        Dataflow.from_networkx(graph)


def test_from_networkx_ignores_x_annotations() -> None:
    """Attributes named ``x-…`` are free annotations, as in scenario files."""
    graph = nx.DiGraph()
    graph.add_node("a", stateless=True, **{"x-owner": "team"})
    graph.add_node("b", checkpoints=[1])
    graph.add_edge("a", "b", **{"x-note": "hot"})
    plain = nx.DiGraph([("a", "b")])
    plain.nodes["a"]["stateless"] = True
    plain.nodes["b"]["checkpoints"] = [1]
    assert solve_frontiers(Dataflow.from_networkx(graph), ["b"]).to_json() == \
        solve_frontiers(Dataflow.from_networkx(plain), ["b"]).to_json()
