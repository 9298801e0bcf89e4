"""A dataflow's columns (``falkirk.solver.model.table``): the arrays agree with the values they were made from."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from falkirk.domains.encoding import encode_frontier
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
from falkirk.solver.model.plain import _epochs
from falkirk.solver.model.table import epoch_chains


@given(st.lists(st.lists(st.integers(-2, 6), max_size=5), max_size=6))
def test_epoch_chains_agree_with_checking_one_chain_at_a_time(chains: list[list[int]]) -> None:
    """Property: each segment is ok and deduplicated exactly as the one-processor check (``plain._epochs``) says."""
    ptr = np.cumsum([0] + [len(c) for c in chains])
    val = np.array([v for c in chains for v in c], dtype=np.int64)
    out_ptr, out_val, ok = epoch_chains(ptr, val)
    for i, c in enumerate(chains):
        want = _epochs(tuple(Checkpoint(v) for v in c))
        assert ok[i] == (want is not None)
        got = out_val[out_ptr[i] : out_ptr[i + 1]].tolist()
        assert got == (want if want is not None else [])


@st.composite
def jobs(draw: st.DrawFn) -> tuple[list[Processor], list[Edge]]:
    n = draw(st.integers(1, 6))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.booleans()), max_size=12))
    procs = []
    for i in range(n):
        cks: list[Any] = sorted(draw(st.lists(st.integers(0, 5), max_size=3)))
        live = draw(st.sampled_from([None, None, Checkpoint("top")]))
        procs.append(
            Processor(
                f"p{i}",
                "epoch",
                stateless=draw(st.booleans()),
                logs=[f"e{k}" for k, (s, _, lg) in enumerate(edges) if s == i and lg],
                checkpoints=[Checkpoint(c) for c in cks],
                live=live,
                restartable=draw(st.booleans()) or draw(st.booleans()),
            )
        )
    return procs, [Edge(f"e{k}", f"p{s}", f"p{d}") for k, (s, d, _) in enumerate(edges)]


@given(jobs())
def test_the_columns_of_a_dataflow_match_its_processors_and_edges(job: tuple[list[Processor], list[Edge]]) -> None:
    """Property: src/dst/logged/stateless/restartable and the plain chains say what the objects say."""
    procs, edges = job
    df = Dataflow(procs, edges)
    t = df.table
    t._check()
    assert t.names == list(df.processors)
    for k, e in enumerate(df.edges.values()):
        assert (t.names[t.src[k]], t.names[t.dst[k]], t.edge_name(k)) == (e.src, e.dst, e.name)
        assert bool(t.logged[k]) == (e.name in df.processors[e.src].logs)
    for i, p in enumerate(df.processors.values()):
        assert (bool(t.stateless[i]), bool(t.restartable[i])) == (p.stateless, p.restartable)
        assert bool(t.plain[i]) == (p.name in df.plain)
        if t.plain[i]:
            assert df.plain[p.name] == [encode_frontier(m.frontier) for m in df.candidates(p.name, failed=True)[1:]]
        assert df.inputs[p.name] == [e.name for e in edges if e.dst == p.name]
        assert df.outputs[p.name] == [e.name for e in edges if e.src == p.name]
    assert t.epoch_plain == (bool(t.plain.all()) and all(p.restartable for p in procs))
