"""Shrinking a failing case to a small, readable counterexample.

:func:`shrink` tries simplifications one at a time — fewer failures, fewer
processors per failure, earlier failures, fewer processors (bypassing one
with a single input, or dropping an extra output), fewer epochs and
records, smaller values, simpler policy options (a plain commit for a
final one), a small scheduler seed, the sequential schedule or a smaller window —
keeping each one
that still fails, until none helps (or a budget of attempts runs out).

>>> from falkirk.sim.cases import Case
>>> from falkirk.sim import Failure, Node, Link, SimGraph, Source, Output, Ephemeral, Commit
>>> g = SimGraph([Node("src", Source(), Ephemeral()), Node("out", Output(), Commit())],
...              [Link("e", "src", "out")], inputs={"src": [[5, 7], [9]]})
>>> big = Case(g, [Failure(9, {"src"}), Failure(3, {"out"})], seed=77)
>>> small = shrink(big, lambda c: any(7 in b for b in c.graph.inputs["src"]))
>>> small.graph.inputs, small.failures, small.seed
({'src': ((7,),)}, [], 0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from falkirk.errors import FalkirkError
from falkirk.sim.cases import Case
from falkirk.sim.engine import Failure
from falkirk.sim.graph import Link, Node, SimGraph
from falkirk.sim.operators import Output, Source
from falkirk.sim.policies import Commit, Policy

__all__ = ["shrink"]


def shrink(case: Case, fails: Callable[[Case], bool], *, budget: int = 400) -> Case:
    """The simplest variant of ``case`` found for which ``fails`` is still true."""
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for cand in _candidates(case):
            tries += 1
            try:
                bad = fails(cand)
            except FalkirkError:
                bad = False  # a candidate the graph rules reject
            if bad:
                case, improved = cand, True
                break
            if tries >= budget:
                break
    return case


def _candidates(case: Case) -> Iterator[Case]:
    fs = case.failures
    for i in range(len(fs)):
        yield attrs.evolve(case, failures=fs[:i] + fs[i + 1 :])
    for i, f in enumerate(fs):
        if len(f.processors) > 1:
            for p in sorted(f.processors):
                yield attrs.evolve(
                    case, failures=fs[:i] + [Failure(f.step, f.processors - {p})] + fs[i + 1 :]
                )
        for step in sorted({0, f.step // 2, f.step - 1}):
            if 0 <= step < f.step:
                new = fs[:i] + [Failure(step, f.processors)] + fs[i + 1 :]
                yield attrs.evolve(case, failures=sorted(new, key=lambda x: x.step))
    yield from _structure_candidates(case)
    yield from _input_candidates(case)
    yield from _policy_candidates(case)
    for seed in range(min(case.seed, 4)):
        yield attrs.evolve(case, seed=seed)
    if case.schedule != "sequential":
        yield attrs.evolve(case, schedule="sequential", window=1)
    for window in range(1, case.window):
        yield attrs.evolve(case, window=window)


def _with_inputs(case: Case, inputs: dict[str, Any]) -> Case | None:
    try:
        return attrs.evolve(case, graph=case.graph.replace(inputs=inputs))
    except FalkirkError:
        return None


def _input_candidates(case: Case) -> Iterator[Case]:
    inputs = {k: [list(b) for b in v] for k, v in case.graph.inputs.items()}
    epochs = max((len(v) for v in inputs.values()), default=0)
    if epochs > 1:
        cand = _with_inputs(case, {k: v[: epochs - 1] for k, v in inputs.items()})
        if cand is not None:
            yield cand
        for e in range(epochs - 1):  # drop an inner epoch
            cand = _with_inputs(case, {k: v[:e] + v[e + 1 :] for k, v in inputs.items()})
            if cand is not None:
                yield cand
    for k, batches in inputs.items():
        for e, batch in enumerate(batches):
            for j, x in enumerate(batch):
                variants = [batch[:j] + batch[j + 1 :]] + [
                    batch[:j] + [y] + batch[j + 1 :] for y in sorted({0, x // 2}) if y < x
                ]
                for b in variants:
                    new = dict(inputs)
                    new[k] = batches[:e] + [b] + batches[e + 1 :]
                    cand = _with_inputs(case, new)
                    if cand is not None:
                        yield cand


def _policy_candidates(case: Case) -> Iterator[Case]:
    nodes = list(case.graph.spec.nodes)
    for i, node in enumerate(nodes):
        pol = node.policy
        options = []
        if pol.every != 1:
            options.append(attrs.evolve(pol, every=1))
        if pol.logs and pol.logs != "*" and "logs" in attrs.fields_dict(type(pol)):
            for e in sorted(pol.logs):
                options.append(attrs.evolve(pol, logs=pol.logs - {e}))
        if isinstance(pol, Commit) and pol.final:
            options.append(attrs.evolve(pol, final=False))
        for new in options:
            try:
                g = case.graph.replace(
                    nodes=nodes[:i] + [Node(node.name, node.op, new, node.domain)] + nodes[i + 1 :]
                )
            except FalkirkError:
                continue
            yield attrs.evolve(case, graph=g)


def _without_edge(policy: Policy, edge: str) -> Policy:
    changes: dict[str, Any] = {}
    fields = attrs.fields_dict(type(policy))
    if policy.logs != "*" and edge in policy.logs:
        changes["logs"] = policy.logs - {edge}
    if "claims" in fields and edge in policy.claims:  # type: ignore[attr-defined]
        changes["claims"] = policy.claims - {edge}  # type: ignore[attr-defined]
    return attrs.evolve(policy, **changes) if changes else policy


def _rebuild(case: Case, drop: str, links: list[Link], dropped_edges: set[str]) -> Case | None:
    nodes = []
    for n in case.graph.spec.nodes:
        if n.name == drop:
            continue
        pol = n.policy
        for e in dropped_edges:
            pol = _without_edge(pol, e)
        nodes.append(Node(n.name, n.op, pol, n.domain))
    failures = [Failure(f.step, f.processors - {drop}) for f in case.failures]
    try:
        graph = SimGraph(nodes, links, inputs=case.graph.inputs)
    except FalkirkError:
        return None
    return attrs.evolve(case, graph=graph, failures=[f for f in failures if f.processors])


def _structure_candidates(case: Case) -> Iterator[Case]:
    g = case.graph
    for name, node in g.nodes.items():
        ins, outs = g.inputs_of[name], g.outputs_of[name]
        if isinstance(node.op, Source) or len(ins) != 1 or name in {g.links[e].dst for e in outs}:
            continue
        if isinstance(node.op, Output):
            if len(g.outputs) > 1:
                links = [lk for lk in g.links.values() if lk.name != ins[0]]
                cand = _rebuild(case, name, links, {ins[0]})
                if cand is not None:
                    yield cand
            continue
        inp = g.links[ins[0]]
        links, ok = [], True
        for lk in g.links.values():
            if lk.name == ins[0]:
                continue
            if lk.src != name:
                links.append(lk)
                continue
            if "identity" not in (inp.transform, lk.transform):
                ok = False
                break
            tr = lk.transform if inp.transform == "identity" else inp.transform
            links.append(Link(lk.name, inp.src, lk.dst, tr, inp.port))
        cand = _rebuild(case, name, links, {ins[0]}) if ok else None
        if cand is not None:
            yield cand
