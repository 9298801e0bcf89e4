"""Random simulator cases: a graph with a policy mix, a failure schedule and a seed.

:func:`build_case` draws everything through a small :class:`Chooser`
interface, so the same generator serves the fuzzer (:class:`RandomChooser`,
a seeded ``random.Random``) and hypothesis (``falkirk.testing.sim_strategies``
adapts ``draw``), and cases shrink well under both. The chooser and
:func:`policy_for` live in :mod:`falkirk.sim.choices`, which the schemes
share (importable from here too).

Graphs: one or two sources, a few operators in the epoch domain (one or two
inputs each), optionally a loop (``Halve`` with a feedback edge, a stateful
operator inside the loop, and a way out), one or two outputs, and
optionally a tail in the ``sequence`` domain (a ``Sequencer``, one or two
operators, a sequence output). Every processor gets a policy its operator
allows, with random logging.

>>> case = build_case(RandomChooser(7))
>>> case.graph.outputs
['out', 'seqout']
>>> check_case(case).ok
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import define, field

from falkirk.sim.choices import Chooser, RandomChooser, policy_for
from falkirk.sim.engine import Failure
from falkirk.sim.graph import Link, Node, SimGraph
from falkirk.sim.operators import (
    Buffer,
    Filter,
    Halve,
    Map,
    Operator,
    Output,
    RunningTotal,
    Salt,
    Scan,
    Sequencer,
    Source,
    Sum,
)
from falkirk.sim.operators import (
    Chooser as ChooserOp,
)
from falkirk.sim.oracle import Verdict, check_run
from falkirk.sim.schedule import SCHEDULES
from falkirk.sim.schemes.base import Role, Scheme, falkirk_policy

__all__ = ["Case", "Chooser", "RandomChooser", "build_case", "check_case", "policy_for"]


@define
class Case:
    """A graph, a failure schedule, a scheduler seed, and the schedule (:mod:`falkirk.sim.schedule`)."""

    graph: SimGraph
    failures: list[Failure] = field(factory=list)
    seed: int = 0
    schedule: str = "sequential"
    window: int = 1

    def describe(self) -> str:
        """A readable multi-line description (a counterexample)."""
        fails = "; ".join(str(f) for f in self.failures) or "none"
        text = f"{self.graph.describe()}\nfailures: {fails}\nseed: {self.seed}"
        if self.schedule != "sequential":
            text += f"\nschedule: {self.schedule}, window {self.window}"
        return text


def check_case(case: Case, **kwargs: Any) -> Verdict:
    """:func:`~falkirk.sim.oracle.check_run` on a case (``kwargs``: its options, e.g. ``planner``)."""
    kwargs.setdefault("schedule", case.schedule)
    kwargs.setdefault("window", case.window)
    return check_run(case.graph, case.failures, seed=case.seed, **kwargs)


STATELESS_OPS: list[Callable[[Chooser], Operator]] = [
    lambda c: Map(mul=c.integer(1, 3), add=c.integer(0, 5)),
    lambda c: Filter(mod=c.integer(2, 3), drop=c.integer(0, 1)),
    lambda c: Salt(),
]
STATEFUL_OPS: list[Callable[[Chooser], Operator]] = [
    lambda c: Sum(),
    lambda c: Buffer(),
    lambda c: RunningTotal(),
    lambda c: ChooserOp(),
]


def build_case(
    c: Chooser,
    *,
    max_ops: int = 4,
    loops: bool = True,
    sequences: bool = True,
    nondeterministic: bool = True,
    max_failures: int = 3,
    max_step: int = 40,
    broken: bool = False,
    scheme: Scheme | None = None,
    final: bool = True,
    schedule: str | None = "sequential",
    max_window: int = 3,
) -> Case:
    """Draw a random :class:`Case` (see the module docstring).

    ``broken`` mixes in the deliberately wrong :class:`~falkirk.sim.policies.WrongLog`.
    ``final``: outputs with only deterministic operators upstream may draw a
    final commit (``Commit(final=True)``).
    ``schedule``: the case's schedule (``None``: either, drawn); a pipelined
    case draws its window in ``1..max_window``.
    ``scheme`` picks every processor's policy (:mod:`falkirk.sim.schemes`;
    default: falkirk's own mix); its ``case_options`` further restrict the
    graph (a scheme without loops turns ``loops`` off, integer options are
    capped).
    """
    if scheme is not None:
        limits = scheme.case_options
        loops = loops and limits.get("loops", True)
        sequences = sequences and limits.get("sequences", True)
        nondeterministic = nondeterministic and limits.get("nondeterministic", True)
        max_ops = min(max_ops, limits.get("max_ops", max_ops))
        max_failures = min(max_failures, limits.get("max_failures", max_failures))
    specs: list[tuple[str, Operator, str]] = []  # name, op, domain
    links: list[tuple[str, str, str, str]] = []  # src, dst, transform, port
    n_src = 1 + int(c.integer(0, 3) == 3)
    epochs = c.integer(1, 4)
    inputs = {}
    for i in range(n_src):
        specs.append((f"src{i}" if n_src > 1 else "src", Source(), "epoch"))
        inputs[specs[-1][0]] = [[c.integer(0, 9) for _ in range(c.integer(0, 3))] for _ in range(epochs)]
    epoch_nodes = [s[0] for s in specs]
    for i in range(c.integer(1, max_ops)):
        pool = STATELESS_OPS + STATEFUL_OPS
        if not nondeterministic:
            pool = [f for f in pool if f(RandomChooser(0)).deterministic]
        op = c.choice(pool)(c)
        name = f"{type(op).__name__.lower()}{i}"
        # draw order, not hash order
        for src in dict.fromkeys(c.choice(epoch_nodes) for _ in range(c.integer(1, 2))):
            links.append((src, name, "identity", "out"))
        specs.append((name, op, "epoch"))
        epoch_nodes.append(name)
    if loops and c.integer(0, 2) == 2:
        _add_loop(c, specs, links, epoch_nodes)
    outs = ["out"] if c.integer(0, 3) < 3 else ["out", "out2"]
    for k, o in enumerate(outs):
        specs.append((o, Output(), "epoch"))
        src = epoch_nodes[-1] if k == 0 else c.choice(epoch_nodes[n_src:] or epoch_nodes)
        links.append((src, o, "identity", "out"))
    if sequences and c.integer(0, 2) == 2:
        _add_sequence_tail(c, specs, links, epoch_nodes)
    edges = [Link(f"e{i}", s, d, tr, port) for i, (s, d, tr, port) in enumerate(links)]
    out_edges: dict[str, list[str]] = {}
    for e in edges:
        out_edges.setdefault(e.src, []).append(e.name)
    chosen = _after_choices(specs, edges)
    nodes = []
    for name, op, dom in specs:
        role = Role(
            name,
            op,
            tuple(out_edges.get(name, [])),
            dom,
            stateless_ok=not _leaves(edges, name) and dom != "sequence",
            final_ok=final and name not in chosen,
        )
        pol = falkirk_policy(c, role, broken=broken) if scheme is None else scheme.policy(c, role)
        nodes.append(Node(name, op, pol, dom))
    graph = SimGraph(nodes, edges, inputs=inputs)
    names = [n for n, _, _ in specs]
    failures = []
    for _ in range(c.integer(0, max_failures)):
        step = c.integer(0, max_step)
        failures.append(Failure(step, {c.choice(names) for _ in range(c.integer(1, 2))}))
    seed = c.integer(0, 1000)
    if schedule is None:
        schedule = c.choice(SCHEDULES)
    window = c.integer(1, max_window) if schedule == "pipelined" else 1
    return Case(graph, sorted(failures, key=lambda f: f.step), seed, schedule, window)


def _after_choices(specs: list[tuple[str, Operator, str]], edges: list[Link]) -> set[str]:
    """Processors downstream of a non-deterministic operator (as :attr:`SimGraph.after_choices`)."""
    work = [name for name, op, _ in specs if not op.deterministic]
    out: set[str] = set()
    while work:
        n = work.pop()
        for e in edges:
            if e.src == n and e.dst not in out:
                out.add(e.dst)
                work.append(e.dst)
    return out


def _leaves(edges: list[Link], name: str) -> bool:
    return any(e.src == name and e.transform in ("leave", "sequence") for e in edges)


def _add_sequence_tail(
    c: Chooser,
    specs: list[tuple[str, Operator, str]],
    links: list[tuple[str, str, str, str]],
    epoch_nodes: list[str],
) -> None:
    """Epochs to sequence numbers: a Sequencer, one or two sequence operators, a sequence output."""
    specs.append(("seq", Sequencer(), "epoch"))
    links.append((c.choice(epoch_nodes), "seq", "identity", "out"))
    last = "seq"
    for i in range(c.integer(1, 2)):
        op = c.choice([Scan(), Map(mul=c.integer(1, 3), add=1), Filter(mod=c.integer(2, 3), drop=0)])
        name = f"s{i}"
        specs.append((name, op, "sequence"))
        links.append((last, name, "sequence", "out"))
        last = name
    specs.append(("seqout", Output(), "sequence"))
    links.append((last, "seqout", "sequence", "out"))


def _add_loop(
    c: Chooser,
    specs: list[tuple[str, Operator, str]],
    links: list[tuple[str, str, str, str]],
    epoch_nodes: list[str],
) -> None:
    """A loop: ``body`` (Halve) with a feedback edge, maybe a stateful op inside, then a way out."""
    links.append((c.choice(epoch_nodes), "body", "enter", "out"))
    links.append(("body", "body", "feedback", "loop"))
    specs.append(("body", Halve(), "loop"))
    last = "body"
    if c.boolean():
        inner = c.choice([Sum(), Buffer()])
        specs.append(("inner", inner, "loop"))
        links.append(("body", "inner", "identity", "out"))
        last = "inner"
    specs.append(("after", Map(mul=1, add=c.integer(0, 3)), "epoch"))
    links.append((last, "after", "leave", "out"))
    epoch_nodes.append("after")
