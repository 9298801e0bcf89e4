"""Hypothesis strategies for the simulator, and the one-call property :func:`assert_recovers`.

In the style of ``hypothesis.extra``: keyword-only options, validated at once
(``InvalidArgument`` naming the argument), ``min_size``/``max_size``.

* :func:`sim_cases` — a random graph with a policy mix, a failure schedule
  and a scheduler seed (:class:`falkirk.sim.cases.Case`);
* :func:`sim_graphs` — just the graphs (epoch operators, optional loops and
  sequence-domain tails, every processor with a policy its operator allows);
* :func:`failure_schedules` — lists of :class:`~falkirk.sim.Failure` for a graph;
* :func:`assert_recovers` — "my graph recovers from any failures under each
  of these policies": runs hypothesis and fails with a shrunk, readable
  counterexample.

>>> from hypothesis import find
>>> from falkirk.sim import Node, Link, SimGraph, Source, Output, Ephemeral, Commit
>>> g = SimGraph([Node("src", Source(), Ephemeral()), Node("out", Output(), Commit())],
...              [Link("e", "src", "out")], inputs={"src": [[1]]})
>>> find(failure_schedules(g, min_size=2), lambda s: True)
[Failure(step=0, processors=frozenset({'out'})), Failure(step=0, processors=frozenset({'out'}))]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import HealthCheck, given
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from falkirk.sim import Failure, Policy, SimGraph
from falkirk.sim.cases import Case, Chooser, build_case
from falkirk.sim.oracle import check_run
from falkirk.sim.schedule import SCHEDULES
from falkirk.testing._args import check_sizes

__all__ = ["sim_cases", "sim_graphs", "failure_schedules", "assert_recovers"]


class _DrawChooser(Chooser):
    def __init__(self, draw: DrawFn) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))


def _check_int(value: Any, name: str, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgument(f"{name}={value!r} must be an integer >= {low}")


def _check_bool(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be a bool")


def sim_cases(
    *,
    max_ops: int = 4,
    loops: bool = True,
    sequences: bool = True,
    nondeterministic: bool = True,
    max_failures: int = 3,
    max_step: int = 40,
    final: bool = True,
    schedule: str | None = "sequential",
    max_window: int = 3,
) -> SearchStrategy[Case]:
    """Cases: a graph, ``0..max_failures`` failures at steps ``0..max_step``, a seed.

    ``final``: an output with only deterministic operators upstream may draw
    a final commit (``Commit(final=True)``: committed output is final).
    ``schedule``: ``"sequential"``, ``"pipelined"`` (with a window drawn in
    ``1..max_window``) or ``None`` (either, drawn); see :mod:`falkirk.sim.schedule`.

    >>> from hypothesis import find
    >>> find(sim_cases(max_failures=1), lambda c: len(c.failures) == 1).failures
    [Failure(step=0, processors=frozenset({'src'}))]
    """
    _check_int(max_ops, "max_ops", 1)
    _check_int(max_failures, "max_failures", 0)
    _check_int(max_step, "max_step", 0)
    _check_int(max_window, "max_window", 1)
    for name, v in (
        ("loops", loops),
        ("sequences", sequences),
        ("nondeterministic", nondeterministic),
        ("final", final),
    ):
        _check_bool(v, name)
    if schedule is not None and schedule not in SCHEDULES:
        raise InvalidArgument(f"schedule={schedule!r} must be one of {list(SCHEDULES)} or None")

    @st.composite
    def cases(draw: DrawFn) -> Case:
        return build_case(
            _DrawChooser(draw),
            max_ops=max_ops,
            loops=loops,
            sequences=sequences,
            nondeterministic=nondeterministic,
            max_failures=max_failures,
            max_step=max_step,
            final=final,
            schedule=schedule,
            max_window=max_window,
        )

    return cases()


def sim_graphs(
    *,
    max_ops: int = 4,
    loops: bool = True,
    sequences: bool = True,
    nondeterministic: bool = True,
    final: bool = True,
) -> SearchStrategy[SimGraph]:
    """Simulator graphs with a policy mix (the graphs of :func:`sim_cases`).

    >>> from hypothesis import find
    >>> g = find(sim_graphs(loops=True), lambda g: "body" in g.nodes)
    >>> any(link.transform == "feedback" for link in g.links.values())  # its loop closes with a feedback edge
    True
    """
    return sim_cases(
        max_ops=max_ops,
        loops=loops,
        sequences=sequences,
        nondeterministic=nondeterministic,
        max_failures=0,
        final=final,
    ).map(lambda c: c.graph)


def failure_schedules(
    graph: SimGraph, *, min_size: int = 0, max_size: int = 3, max_step: int = 60, max_together: int = 2
) -> SearchStrategy[list[Failure]]:
    """``min_size..max_size`` failures of ``graph``'s processors, sorted by step.

    Each strikes ``1..max_together`` processors before a step in ``0..max_step``;
    failures after the run's last step strike at its end, one after another.
    """
    if not isinstance(graph, SimGraph):
        raise InvalidArgument(f"graph={graph!r} must be a falkirk.sim.SimGraph")
    check_sizes(min_size, max_size)
    _check_int(max_step, "max_step", 0)
    _check_int(max_together, "max_together", 1)
    names = sorted(graph.nodes)
    one = st.builds(
        Failure,
        st.integers(0, max_step),
        st.frozensets(st.sampled_from(names), min_size=1, max_size=max_together),
    )
    return st.lists(one, min_size=min_size, max_size=max_size).map(
        lambda fs: sorted(fs, key=lambda f: f.step)
    )


def assert_recovers(
    graph_factory: Callable[..., SimGraph],
    policies: Iterable[Policy] | SearchStrategy[Policy] | None = None,
    *,
    max_failures: int = 3,
    max_step: int = 60,
    settings: Settings | None = None,
    schedule: str | None = "sequential",
    max_window: int = 3,
) -> None:
    """Check that ``graph_factory(policy)`` recovers from any failures, for each policy.

    For every drawn policy (``graph_factory()`` when ``policies`` is
    ``None``), failure schedule and scheduler seed, the run's output must
    equal a failure-free run's (:func:`falkirk.sim.check_run`); otherwise an
    ``AssertionError`` shows the shrunk counterexample. ``settings`` are
    hypothesis settings (``max_examples`` etc.); the deadline is always off.
    ``schedule``: the runs' schedule (``None``: drawn); a pipelined run draws
    its window in ``1..max_window`` (:mod:`falkirk.sim.schedule`).

    >>> from falkirk.sim import Node, Link, SimGraph, Source, Sum, Output, Ephemeral, Lazy, Commit
    >>> def pipeline(policy):
    ...     return SimGraph([Node("src", Source(), Ephemeral()), Node("sum", Sum(), policy),
    ...                      Node("out", Output(), Commit())],
    ...                     [Link("a", "src", "sum"), Link("b", "sum", "out")],
    ...                     inputs={"src": [[1, 2], [3]]})
    >>> from hypothesis import settings
    >>> assert_recovers(pipeline, [Lazy(), Lazy(every=2, logs=["b"])], settings=settings(max_examples=20))
    """
    if not callable(graph_factory):
        raise InvalidArgument(f"graph_factory={graph_factory!r} must be callable")
    _check_int(max_window, "max_window", 1)
    if schedule is not None and schedule not in SCHEDULES:
        raise InvalidArgument(f"schedule={schedule!r} must be one of {list(SCHEDULES)} or None")
    schedules = st.sampled_from(SCHEDULES) if schedule is None else st.just(schedule)
    how = schedules.flatmap(
        lambda s: st.tuples(st.just(s), st.integers(1, max_window) if s == "pipelined" else st.just(1))
    )
    if policies is None:
        pol: SearchStrategy[Any] = st.none()
    elif isinstance(policies, SearchStrategy):
        pol = policies
    else:
        options = list(policies)
        if not options or not all(isinstance(p, Policy) for p in options):
            raise InvalidArgument(
                f"policies={policies!r} must be a non-empty list of falkirk.sim policies or a strategy"
            )
        pol = st.sampled_from(options)

    @st.composite
    def graph_and_failures(draw: DrawFn) -> tuple[SimGraph, list[Failure]]:
        p = draw(pol)
        graph = graph_factory() if p is None else graph_factory(p)
        return graph, draw(failure_schedules(graph, max_size=max_failures, max_step=max_step))

    @given(graph_and_failures(), st.integers(0, 2**16), how)
    def recovers(gf: tuple[SimGraph, list[Failure]], seed: int, sw: tuple[str, int]) -> None:
        graph, failures = gf
        verdict = check_run(graph, failures, seed=seed, schedule=sw[0], window=sw[1])
        if not verdict.ok:
            fails = "; ".join(str(f) for f in failures) or "none"
            sched = "" if sw[0] == "sequential" else f"\nschedule: {sw[0]}, window {sw[1]}"
            raise AssertionError(
                f"{verdict.problem}\n{graph.describe()}\nfailures: {fails}\nseed: {seed}{sched}"
            )

    # runs take milliseconds, but their time is not what is under test
    recovers = Settings(settings, deadline=None, suppress_health_check=[HealthCheck.too_slow])(recovers)
    recovers()
