"""The flagship's two ``cc`` algorithms: union–find and label propagation give the same components and outputs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spark_support import EPOCHS, SMALL, flagship

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.tools.flagship import build, cc_propagation, cc_unionfind, union_find
from falkirk.spark.pipeline.tools.verify import compare_runs


def _components(edges: list[tuple[int, int]], nodes: set[int]) -> dict[int, int]:
    """Each node's component as its smallest node id, by depth-first search over the whole graph."""
    adj: dict[int, set[int]] = {n: set() for n in nodes}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    comp: dict[int, int] = {}
    for n in sorted(adj):
        if n in comp:
            continue
        stack, seen = [n], {n}
        while stack:
            x = stack.pop()
            for y in adj[x] - seen:
                seen.add(y)
                stack.append(y)
        for x in seen:
            comp[x] = n
    return comp


edge_lists = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=25)


@given(st.lists(edge_lists, min_size=1, max_size=4))
def test_union_find_seeded_epoch_by_epoch_equals_the_components_of_all_edges(epochs: list[list[tuple[int, int]]]) -> None:
    """Seeding with the previous epoch's node -> component map and adding the epoch's links gives the components
    (smallest node id) of every link so far: what the incremental step promises."""
    state: dict[int, int] = {}
    seen: list[tuple[int, int]] = []
    for links in epochs:
        state = union_find(dict(state), [a for a, _ in links], [b for _, b in links])
        seen += links
        assert state == _components(seen, {x for e in seen for x in e})


def test_an_unknown_algorithm_is_refused_naming_both() -> None:
    """build(cc=...) accepts only the two algorithms, and says which."""
    with pytest.raises(PipelineError, match="unionfind or propagation"):
        build("memory://falkirk-test/flagship-cc", cc="bfs")


@pytest.mark.spark
def test_both_algorithms_give_the_same_state_epoch_by_epoch(spark: Any) -> None:
    """cc_unionfind and cc_propagation, each fed its own previous state, return the same (node, comp) rows."""
    from falkirk.spark.pipeline.tools.flagship import events_source, parse_graph

    source = events_source(SMALL["events_per_epoch"], SMALL["users"], SMALL["nodes"], SMALL["seed"])
    states: dict[str, Any] = {"uf": None, "lp": None}
    for epoch in range(EPOCHS):
        links = parse_graph(spark.createDataFrame(source(epoch), "user BIGINT, kind STRING, category STRING, "
                                                  "amount BIGINT, src BIGINT, dst BIGINT"))
        got = {}
        for name, fn in (("uf", cc_unionfind), ("lp", cc_propagation)):
            out, new = fn(links, state=states[name], spark=spark)
            assert out is new
            states[name] = new.localCheckpoint()
            got[name] = Counter(map(tuple, states[name].collect()))
        assert got["uf"] == got["lp"] and sum(got["uf"].values()) > 0, epoch


@pytest.mark.spark
def test_label_propagation_flagship_gives_the_union_find_flagships_outputs(
    spark: Any, reference: Path, tmp_path: Path,
) -> None:
    """The flagship with cc='propagation', recovering from a failure of cc, has the responses and SQLite rows
    (as multisets) of the failure-free union–find reference (the default algorithm)."""
    result = flagship(tmp_path, spark, cc="propagation").run(EPOCHS, fail=["cc@2:mid"])
    assert len(result.journal.recoveries) == 1
    cmp = compare_runs(spark, flagship(tmp_path, spark, cc="propagation"), tmp_path, reference)
    assert not cmp.differences, [d.describe() for d in cmp.differences]
    assert cmp.identical and cmp.rows_compared >= EPOCHS * SMALL["queries_per_epoch"]
