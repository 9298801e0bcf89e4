"""Node positions for ``falkirk draw`` (networkx only, no matplotlib).

Self-loops are ignored (they are drawn over their box). Acyclic graphs get a left-to-right layered layout: one
column per topological generation, each column ordered by the mean height of its predecessors (one barycentre
pass, which removes most crossings in small dataflows). Graphs with cycles fall back to a spring layout with a
fixed seed. Both are deterministic.

>>> from falkirk.solver import Dataflow, Edge, Processor
>>> df = Dataflow([Processor(n, "epoch") for n in "abc"], [Edge("ab", "a", "b"), Edge("ac", "a", "c")])
>>> layout(df)
{'a': (0.0, 0.0), 'b': (1.0, 0.5), 'c': (1.0, -0.5)}
"""

from __future__ import annotations

import math

import networkx as nx

from falkirk.solver import Dataflow

__all__ = ["SEED", "layout"]

#: Seed of the spring layout used for cyclic graphs.
SEED = 7


def layout(df: Dataflow) -> dict[str, tuple[float, float]]:
    """Positions of ``df``'s processors: columns 1 apart, rows 1 apart (layered) or similar spacing."""
    graph = nx.DiGraph()
    graph.add_nodes_from(df.processors)
    graph.add_edges_from((e.src, e.dst) for e in df.edges.values() if e.src != e.dst)
    order = {name: i for i, name in enumerate(df.processors)}
    if not nx.is_directed_acyclic_graph(graph):
        return _spring(graph)
    pos: dict[str, tuple[float, float]] = {}
    for x, generation in enumerate(nx.topological_generations(graph)):

        def height(n: str) -> float:
            ys = [pos[u][1] for u in graph.predecessors(n) if u in pos]
            return -sum(ys) / len(ys) if ys else 0.0

        column = sorted(generation, key=lambda n: (height(n), order[n]))
        for i, name in enumerate(column):
            pos[name] = (float(x), (len(column) - 1) / 2 - i)
    return {name: pos[name] for name in df.processors}


def _spring(graph: nx.DiGraph) -> dict[str, tuple[float, float]]:
    n = graph.number_of_nodes()
    raw = nx.spring_layout(graph.to_undirected(), seed=SEED, k=1.5 / math.sqrt(max(n, 1)))
    scale = max(1.0, 0.7 * math.sqrt(n))
    return {name: (float(x) * scale, float(y) * scale) for name, (x, y) in raw.items()}
