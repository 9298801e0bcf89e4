"""Simulator graphs: processors (operator + policy + domain), edges, external input.

A :class:`SimGraph` is a pure description — nothing runs until a
:class:`~falkirk.sim.engine.Simulation` is made from it — so the same graph
can be run with and without failures, printed as a readable counterexample,
and turned into the falkirk :class:`~falkirk.solver.Processor` declarations
the solver needs.

>>> from falkirk.sim import Node, Link, SimGraph, Source, Sum, Output, Ephemeral, Lazy, Commit
>>> g = SimGraph(
...     [Node("src", Source(), Ephemeral()), Node("sum", Sum(), Lazy()),
...      Node("out", Output(), Commit())],
...     [Link("e1", "src", "sum"), Link("e2", "sum", "out")],
...     inputs={"src": [[1, 2], [3]]})
>>> g.epochs, g.outputs
(2, ['out'])
>>> print(g.describe())
inputs: src=[[1, 2], [3]]
src: Source() epoch Ephemeral()
sum: Sum() epoch Lazy()
out: Output() epoch Commit()
e1: src -> sum
e2: sum -> out
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from attrs import field, frozen

from falkirk.domains import Sequence as SequenceDomain
from falkirk.domains.base import Domain
from falkirk.errors import UnknownNameError, ValidationError
from falkirk.sim.operators import Operator, Output, RunningTotal, Source
from falkirk.sim.policies import Policy
from falkirk.sim.transforms import (
    TRANSFORMS,
    Summary,
    Transform,
    compose,
    domain_of,
    identity_summary,
    summary_le,
)
from falkirk.solver import Edge, Processor

__all__ = ["Node", "Link", "SimGraph"]


@frozen
class Node:
    """A processor: its name, operator prototype, policy and domain (``epoch``, ``loop``, ``sequence``)."""

    name: str
    op: Operator
    policy: Policy
    domain: str = "epoch"


@frozen
class Link:
    """An edge ``src → dst`` fed by ``src``'s output ``port``, transforming times by ``transform``."""

    name: str
    src: str
    dst: str
    transform: str = "identity"
    port: str = "out"


def _batches(value: Mapping[str, Sequence[Sequence[Any]]]) -> dict[str, tuple[tuple[Any, ...], ...]]:
    return {k: tuple(tuple(b) for b in v) for k, v in value.items()}


@frozen
class _Spec:
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    inputs: dict[str, tuple[tuple[Any, ...], ...]] = field(converter=_batches)


class SimGraph:
    """A validated simulator graph (raises :class:`~falkirk.errors.ValidationError` naming the culprit).

    ``inputs`` maps each source processor to its batches, one per epoch.
    """

    def __init__(
        self, nodes: Iterable[Node], links: Iterable[Link], *, inputs: Mapping[str, Sequence[Sequence[Any]]]
    ) -> None:
        self.spec = _Spec(tuple(nodes), tuple(links), inputs)
        self.nodes: dict[str, Node] = {}
        self._domains: dict[str, Domain] = {}
        for n in self.spec.nodes:
            if n.name in self.nodes:
                raise ValidationError(f"processor {n.name!r} is declared twice")
            if n.domain != "sequence":
                domain_of(n.domain)
            self.nodes[n.name] = n
        self.links: dict[str, Link] = {}
        self.inputs_of: dict[str, list[str]] = {n: [] for n in self.nodes}
        self.outputs_of: dict[str, list[str]] = {n: [] for n in self.nodes}
        self.transforms: dict[str, Transform] = {}
        for e in self.spec.links:
            self._add_link(e)
        self.inputs = dict(self.spec.inputs)
        self.epochs = max((len(b) for b in self.inputs.values()), default=0)
        self.outputs = [n for n, node in self.nodes.items() if isinstance(node.op, Output)]
        for name, node in self.nodes.items():
            self._check_node(name, node)
        self._check_cycles()
        self.summaries = self._summaries()
        #: per processor, the (processor, summary) pairs it can reach
        self.reach: dict[str, list[tuple[str, Summary]]] = {n: [] for n in self.nodes}
        for (p, q), ss in self.summaries.items():
            self.reach[p].extend((q, s) for s in ss)
        #: processors strictly downstream of a non-deterministic operator
        self.after_choices = self._after_choices()
        self._check_final_outputs()

    # -- validation ---------------------------------------------------------------
    def _add_link(self, e: Link) -> None:
        if e.name in self.links:
            raise ValidationError(f"edge {e.name!r} is declared twice")
        for end, who in (("src", e.src), ("dst", e.dst)):
            if who not in self.nodes:
                raise UnknownNameError(f"edge {e.name!r}: {end} {who!r} is not a declared processor")
        if e.transform not in TRANSFORMS:
            raise ValidationError(
                f"edge {e.name!r}: unknown transform {e.transform!r}; use one of {sorted(TRANSFORMS)}"
            )
        tr = TRANSFORMS[e.transform]
        tr.check(e.name, self.nodes[e.src].domain, self.nodes[e.dst].domain)
        if e.port not in self.nodes[e.src].op.ports:
            raise ValidationError(
                f"edge {e.name!r}: {type(self.nodes[e.src].op).__name__} at {e.src!r} has no output port "
                f"{e.port!r} (ports: {list(self.nodes[e.src].op.ports)})"
            )
        self.links[e.name] = e
        self.transforms[e.name] = tr
        self.outputs_of[e.src].append(e.name)
        self.inputs_of[e.dst].append(e.name)

    def _check_node(self, name: str, node: Node) -> None:
        op = node.op
        if not isinstance(op, Operator):
            raise ValidationError(f"processor {name!r}: {op!r} is not a falkirk.sim Operator")
        is_source = isinstance(op, Source)
        if is_source != (name in self.inputs):
            raise ValidationError(
                f"processor {name!r}: give input batches for every Source and only for Sources"
            )
        if is_source and (self.inputs_of[name] or node.domain != "epoch"):
            raise ValidationError(f"processor {name!r}: a Source is an epoch processor with no input edges")
        if not is_source and not self.inputs_of[name]:
            raise ValidationError(f"processor {name!r} has no input edges and is not a Source")
        if isinstance(op, Output) and self.outputs_of[name]:
            raise ValidationError(f"processor {name!r}: an Output has no output edges")
        if isinstance(op, RunningTotal) and node.domain != "epoch":
            raise ValidationError(
                f"processor {name!r}: RunningTotal folds in notification order, so it needs the epoch domain"
            )
        if node.domain == "sequence" and len(self.inputs_of[name]) != 1:
            raise ValidationError(
                f"processor {name!r}: a sequence processor here has exactly one input edge "
                "(merging sequences would make its output depend on the schedule)"
            )
        numbered = [e for e in self.outputs_of[name] if self.links[e].transform == "sequence"]
        if numbered and node.domain == "epoch" and not op.ordered:
            raise ValidationError(
                f"processor {name!r} sends on sequence edge {numbered[0]!r}, so its operator must send "
                f"epoch by epoch in order (ordered = True, like Sequencer); {type(op).__name__} does not"
            )
        if numbered and node.policy.stateless:
            raise ValidationError(
                f"processor {name!r}: it numbers the messages of {numbered[0]!r}, so it needs a "
                "checkpointing policy (a stateless restart would lose the count)"
            )
        node.policy.check(name, op, self.outputs_of[name])
        if node.policy.stateless:
            logged = node.policy.claimed_edges(self.outputs_of[name])
            for e in self.outputs_of[name]:
                if self.links[e].transform == "leave" and e not in logged:
                    raise ValidationError(
                        f"processor {name!r}: it is stateless and sends on {e!r}, which leaves a loop, "
                        "without logging it; the loop_exit projection is not exact, so log the edge "
                        "or give the processor a checkpointing policy"
                    )

    def _check_cycles(self) -> None:
        """Every cycle must pass a feedback edge (times must strictly grow round a loop)."""
        succ = {
            n: [self.links[e].dst for e in self.outputs_of[n] if self.links[e].transform != "feedback"]
            for n in self.nodes
        }
        state: dict[str, int] = {}

        def visit(n: str, path: list[str]) -> None:
            state[n] = 1
            for m in succ[n]:
                if state.get(m) == 1:
                    cyc = path[path.index(m) :] + [m] if m in path else [n, m]
                    raise ValidationError(f"cycle {' -> '.join(cyc)} has no feedback edge")
                if m not in state:
                    visit(m, path + [m])
            state[n] = 2

        for n in self.nodes:
            if n not in state:
                visit(n, [n])

    def _after_choices(self) -> frozenset[str]:
        """Processors with a non-deterministic operator upstream (along a path of length >= 1)."""
        work = [n for n, node in self.nodes.items() if not node.op.deterministic]
        out: set[str] = set()
        while work:
            n = work.pop()
            for e in self.outputs_of[n]:
                q = self.links[e].dst
                if q not in out:
                    out.add(q)
                    work.append(q)
        return frozenset(out)

    def _check_final_outputs(self) -> None:
        """A final output (``Commit(final=True)``) needs deterministic operators upstream.

        It keeps what it committed and discards what a re-execution sends for
        those times; downstream of a non-deterministic operator the
        re-execution may choose differently, and the kept times would then
        disagree with later times or with other outputs (no failure-free run
        gives both).
        """
        for name in self.outputs:
            if getattr(self.nodes[name].policy, "final", False) and name in self.after_choices:
                up, work = set(), [name]
                while work:
                    for e in self.inputs_of[work.pop()]:
                        u = self.links[e].src
                        if u not in up:
                            up.add(u)
                            work.append(u)
                culprits = sorted(n for n in up if not self.nodes[n].op.deterministic)
                raise ValidationError(
                    f"processor {name!r}: a final commit (Commit(final=True)) needs deterministic operators "
                    f"upstream, but {', '.join(map(repr, culprits))} upstream may choose differently when re-executed; "
                    "use Commit() (a rollback may then rewrite committed output until it is released)"
                )

    def _summaries(self) -> dict[tuple[str, str], list[Summary]]:
        """Minimal path summaries from each processor to each one it can reach (paths of length >= 1)."""
        out: dict[tuple[str, str], list[Summary]] = {}
        for p, node in self.nodes.items():
            if node.domain == "sequence":
                continue  # completeness at sequence processors is their delivered count
            start = identity_summary(node.domain)
            work = [
                (self.links[e].dst, compose(start, self.transforms[e]))
                for e in self.outputs_of[p]
                if self.transforms[e].name != "sequence"
            ]
            while work:
                q, s = work.pop()
                known = out.setdefault((p, q), [])
                if any(summary_le(k, s) for k in known):
                    continue
                known[:] = [k for k in known if not summary_le(s, k)] + [s]
                work.extend(
                    (self.links[e].dst, compose(s, self.transforms[e]))
                    for e in self.outputs_of[q]
                    if self.transforms[e].name != "sequence"
                )
        return out

    # -- queries ------------------------------------------------------------------
    def domain(self, name: str) -> Domain:
        """The falkirk domain of processor ``name``."""
        d = self._domains.get(name)
        if d is None:
            kind = self.nodes[name].domain
            d = SequenceDomain(tuple(self.inputs_of[name])) if kind == "sequence" else domain_of(kind)
            self._domains[name] = d
        return d

    def processor_decl(self, name: str) -> dict[str, Any]:
        """Keyword arguments of the falkirk :class:`~falkirk.solver.Processor` for ``name`` (no
        checkpoints)."""
        node = self.nodes[name]
        dom = self.domain(name)
        return {
            "name": name,
            "domain": dom,
            "stateless": node.policy.stateless,
            "logs": node.policy.claimed_edges(self.outputs_of[name]),
            "notifications": (node.op.notifications or name in self.after_choices)
            and node.domain != "sequence",
        }

    def solver_edges(self) -> list[Edge]:
        """The falkirk edges, each with its transform's projection."""
        return [
            Edge(e.name, e.src, e.dst, self.transforms[e.name].projection(self.nodes[e.src].domain))
            for e in self.links.values()
        ]

    def solver_processors(self) -> list[Processor]:
        """Processor declarations with no checkpoints (every one at its safe defaults)."""
        return [Processor(**self.processor_decl(n)) for n in self.nodes]

    def describe(self) -> str:
        """A readable, line-per-item description (used in counterexamples)."""
        lines = ["inputs: " + ", ".join(f"{k}={[list(b) for b in v]}" for k, v in self.inputs.items())]
        for n in self.nodes.values():
            lines.append(f"{n.name}: {n.op!r} {n.domain} {n.policy.describe()}")
        for e in self.links.values():
            extra = "" if e.transform == "identity" else f" [{e.transform}]"
            port = "" if e.port == "out" else f" (port {e.port})"
            lines.append(f"{e.name}: {e.src} -> {e.dst}{extra}{port}")
        return "\n".join(lines)

    def replace(
        self,
        *,
        nodes: Iterable[Node] | None = None,
        inputs: Mapping[str, Sequence[Sequence[Any]]] | None = None,
    ) -> SimGraph:
        """A copy with some nodes or inputs replaced (used by shrinking)."""
        return SimGraph(
            self.spec.nodes if nodes is None else nodes,
            self.spec.links,
            inputs=self.spec.inputs if inputs is None else inputs,
        )

    def __repr__(self) -> str:
        return f"<SimGraph: {len(self.nodes)} processors, {len(self.links)} edges, {self.epochs} epochs>"
