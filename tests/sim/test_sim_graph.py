"""Graph and policy validation: every mistake is named."""

from __future__ import annotations

from typing import Any

import pytest

from falkirk.errors import UnknownNameError, ValidationError
from falkirk.sim import (
    Batch,
    Commit,
    Ephemeral,
    Halve,
    Lazy,
    Link,
    Map,
    Node,
    Output,
    RunningTotal,
    Scan,
    Sequencer,
    SimGraph,
    Source,
    Sum,
    WrongLog,
)
from falkirk.solver import Dataflow

SRC = Node("src", Source(), Ephemeral())
OUT = Node("out", Output(), Commit())


def _graph(nodes: list[Node], links: list[Link]) -> SimGraph:
    out = OUT if all(lk.dst != "sout" for lk in links) else Node("sout", Output(), Commit(), "sequence")
    return SimGraph([SRC, *nodes, out], links, inputs={"src": [[1]]})


@pytest.mark.parametrize(
    "nodes, links, match",
    [
        ([Node("s", Sum(), Ephemeral())], [Link("a", "src", "s"), Link("b", "s", "out")], "keeps state between times"),
        ([Node("s", Sum(), Lazy(logs=["zz"]))], [Link("a", "src", "s"), Link("b", "s", "out")], "'zz'"),
        ([Node("s", Sum(), Commit())], [Link("a", "src", "s"), Link("b", "s", "out")], "Commit policy"),
        ([Node("m", Map(), Lazy())], [Link("a", "src", "m"), Link("b", "m", "out", port="loop")], "no output port"),
        ([Node("m", Map(), Lazy())], [Link("a", "src", "m"), Link("b", "m", "out", "enter")], "transform 'enter'"),
        ([Node("m", Map(), Lazy())], [Link("a", "src", "m"), Link("b", "m", "out"), Link("c", "m", "m")], "no feedback edge"),
        ([Node("r", RunningTotal(), Lazy(), "loop")], [Link("a", "src", "r", "enter"), Link("b", "r", "out", "leave")], "epoch domain"),
        (
            [Node("h", Halve(), Ephemeral(), "loop")],
            [Link("a", "src", "h", "enter"), Link("f", "h", "h", "feedback", "loop"), Link("b", "h", "out", "leave")],
            "leaves a loop",
        ),
        ([Node("m", Map(), Lazy())], [Link("a", "src", "m"), Link("b", "m", "out", "sequence")], "sequence"),
        (
            [Node("m", Map(), Lazy()), Node("s", Scan(), Lazy(), "sequence")],
            [Link("a", "src", "m"), Link("b", "m", "s", "sequence"), Link("c", "s", "sout", "sequence")],
            "ordered",
        ),
        (
            [Node("q", Sequencer(), Lazy()), Node("s", Scan(), Lazy(), "sequence"), Node("t", Scan(), Lazy(), "sequence")],
            [Link("a", "src", "q"), Link("b", "q", "s", "sequence"), Link("c", "q", "t", "sequence"),
             Link("d", "s", "t", "sequence"), Link("e", "t", "sout", "sequence")],
            "exactly one input edge",
        ),
    ],
)
def test_invalid_graphs_are_rejected(nodes: list[Node], links: list[Link], match: str) -> None:
    """Each invalid graph raises ValidationError with a message naming what is wrong."""
    with pytest.raises(ValidationError, match=match):
        _graph(nodes, links)


def test_unknown_processor_in_edge() -> None:
    """An edge to an undeclared processor raises UnknownNameError."""
    with pytest.raises(UnknownNameError, match="'nowhere'"):
        _graph([], [Link("a", "src", "nowhere")])


def test_sources_and_inputs_must_match() -> None:
    """Batches are given for Sources and only for them."""
    with pytest.raises(ValidationError, match="input batches"):
        SimGraph([SRC, OUT], [Link("a", "src", "out")], inputs={})


def test_solver_view_of_a_graph() -> None:
    """The graph's falkirk declarations validate as a Dataflow: domains, logs and projections."""
    g = _graph(
        [Node("h", Halve(), Batch(), "loop"), Node("s", Sum(), Lazy(), "loop")],
        [Link("a", "src", "h", "enter"), Link("f", "h", "h", "feedback", "loop"), Link("b", "h", "s"),
         Link("c", "s", "out", "leave")],
    )
    df = Dataflow(g.solver_processors(), g.solver_edges())
    assert df.processors["h"].logs == frozenset({"f", "b"}) and df.processors["h"].stateless
    assert df.bound["f"].spec.name == "loop_feedback" and df.bound["c"].spec.name == "loop_exit"
    assert str(df.domains["s"]) == "product(2)"


def test_wrong_log_claims_without_logging() -> None:
    """WrongLog tells the solver it logs an edge while logging nothing."""
    p: Any = WrongLog(claims=["a", "b"])
    assert p.claimed_edges(["a", "c"]) == frozenset({"a"}) and p.logged_edges(["a", "c"]) == frozenset()
    assert p.describe() == "WrongLog(claims=['a', 'b'])"


def test_describe_is_readable() -> None:
    """describe() lists inputs, processors with operator/domain/policy, and edges."""
    g = _graph([Node("m", Map(mul=3), Lazy(every=2, logs=["b"]))], [Link("a", "src", "m"), Link("b", "m", "out")])
    text = g.describe()
    assert "m: Map(mul=3, add=0, mod=97) epoch Lazy(every=2, logs=['b'])" in text
    assert "a: src -> m" in text and text.startswith("inputs: src=[[1]]")
