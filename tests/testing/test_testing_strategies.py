"""falkirk.testing's strategies: validation, and what they generate."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import falkirk.domains
import falkirk.solver
from falkirk.domains import Epoch, Frontier, Lexicographic, Product, Sequence
from falkirk.solver import Dataflow
from falkirk.testing import (
    dataflows,
    failure_schedules,
    failure_sets,
    frontiers,
    register_time_strategy,
    times,
)
from falkirk.testing._hypothesis_plugin import _register
from falkirk.testing.describe import dataflow_source


@given(times(Product(3)))
def test_default_times_are_in_range(t: Any) -> None:
    """Default product times are 3-tuples of integers 0..5."""
    assert len(t) == 3 and all(0 <= x <= 5 for x in t)


@given(st.sampled_from([Epoch(), Product(2), Lexicographic(2), Sequence(["a", "b"])]).flatmap(
    lambda d: st.tuples(st.just(d), frontiers(d))
))
def test_frontiers_belong_to_their_domain(case: tuple[Any, Frontier]) -> None:
    """Generated frontiers are frontiers of the requested domain."""
    domain, f = case
    assert isinstance(f, Frontier) and f.domain == domain


@pytest.mark.parametrize("domain", [Epoch(), Product(2), Sequence(["a", "b"])], ids=str)
def test_frontiers_include_top_empty_finite_and_infinite(domain: Any) -> None:
    """⊤, ∅, proper finite frontiers and (outside epochs) infinite ones are all generated."""
    strategy = frontiers(domain)
    assert find(strategy, lambda f: f.is_top).is_top
    assert find(strategy, lambda f: f.is_empty).is_empty
    finite = find(strategy, lambda f: not f.is_top and not f.is_empty)
    assert not finite.is_top
    if not isinstance(domain, Epoch):  # e.g. every time not >= (0, 1): (k, 0) for every k
        far = (99, 0) if isinstance(domain, Product) else ("a", 99)
        assert far in find(strategy, lambda f: far in f and not f.is_top)


def test_frontiers_can_exclude_top_and_empty() -> None:
    """allow_top/allow_empty=False leave ⊤ and ∅ out."""
    @settings(max_examples=50)
    @given(frontiers(Epoch(), allow_top=False, allow_empty=False))
    def check(f: Frontier) -> None:
        assert not f.is_top and not f.is_empty

    check()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: times("epoch"), "is not a time domain"),
        (lambda: frontiers(Epoch(), max_size=0), "max_size=0"),
        (lambda: frontiers(Epoch(), times=[1]), "must be a hypothesis strategy"),
        (lambda: frontiers(Epoch(), allow_top=1), "allow_top=1"),
        (lambda: dataflows(domains="epoch"), "must be a list"),
        (lambda: dataflows(domains=[]), "names no family"),
        (lambda: dataflows(domains=["epochs"]), "unknown family 'epochs'"),
        (lambda: dataflows(domains=[Sequence(["a"])]), "pass the string 'sequence'"),
        (lambda: dataflows(min_size=0), "min_size=0"),
        (lambda: dataflows(min_size=3, max_size=2), "larger than max_size"),
        (lambda: dataflows(max_checkpoints=-1), "max_size=-1"),
        (lambda: dataflows(cycles="yes"), "cycles='yes'"),
        (lambda: dataflows(stateless="sometimes"), "stateless='sometimes'"),
        (lambda: failure_sets("df"), "must be a falkirk.solver.Dataflow"),
        (lambda: register_time_strategy("epoch", lambda d: st.just(0)), "already registered"),
        (lambda: register_time_strategy("", lambda d: st.just(0)), "non-empty string"),
    ],
)
def test_invalid_arguments_are_rejected_at_once(call: Any, message: str) -> None:
    """Bad arguments raise InvalidArgument naming the argument, when the strategy is built."""
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()


def test_failure_sets_check_min_size_against_the_dataflow() -> None:
    """min_size larger than the dataflow is rejected; failure schedules need a processor."""
    df = Dataflow([], [])
    with pytest.raises(InvalidArgument, match="only 0 processors"):
        failure_sets(df, min_size=1)
    with pytest.raises(InvalidArgument, match="nothing can fail"):
        failure_schedules(df)


@settings(max_examples=100)
@given(dataflows(domains=["epoch", "product"], min_size=2, max_size=5, cycles=False, max_inputs=1, stateless=False, logs=False))
def test_dataflow_options_are_respected(df: Dataflow) -> None:
    """Sizes, acyclicity, in-degree, stateless and logs options hold in generated dataflows."""
    names = list(df.processors)
    assert 2 <= len(names) <= 5
    assert all(names.index(e.src) < names.index(e.dst) for e in df.edges.values())
    assert all(len(df.inputs[p]) <= 1 for p in names)
    assert not any(p.stateless or p.logs for p in df.processors.values())
    assert {type(d) for d in df.domains.values()} in ({Epoch}, {Product})


@settings(max_examples=100)
@given(dataflows())
def test_generated_chains_are_strictly_increasing(df: Dataflow) -> None:
    """Checkpoint frontiers form a strictly increasing chain from ∅ (below ⊤) at every processor."""
    for p in df.processors:
        chain = [m.frontier for m in df.candidates(p, failed=False)]
        assert chain[0].is_empty and chain[-1].is_top
        assert all(a <= b and a != b for a, b in itertools.pairwise(chain))


@settings(max_examples=50)
@given(dataflows(max_size=3))
def test_dataflow_source_rebuilds_the_dataflow(df: Dataflow) -> None:
    """dataflow_source prints Python that rebuilds an equivalent dataflow."""
    namespace = {**vars(falkirk.domains), **vars(falkirk.solver)}
    rebuilt = eval(dataflow_source(df), namespace)  # our own output
    assert dataflow_source(rebuilt) == dataflow_source(df)


def test_dataflows_cover_the_interesting_cases() -> None:
    """Self-loops, stateless processors, logs, recorded edges, sequence domains and loops all appear."""
    find(dataflows(), lambda df: any(e.src == e.dst for e in df.edges.values()))
    find(dataflows(), lambda df: any(p.stateless and p.checkpoints for p in df.processors.values()))
    find(dataflows(), lambda df: any(p.logs for p in df.processors.values()))
    find(dataflows(), lambda df: any(b.recorded for b in df.bound.values()) and df.system_notifications is not None)
    find(dataflows(), lambda df: any(isinstance(d, Sequence) and len(d.edges) > 1 for d in df.domains.values()))
    find(dataflows(), lambda df: any(b.spec.name == "epoch_to_loop" for b in df.bound.values()))


@given(st.data())
def test_failure_sets_and_schedules_name_processors(data: st.DataObject) -> None:
    """Failure sets hold processor names within the size bounds; schedules are non-empty sets."""
    df = data.draw(dataflows(min_size=2, max_size=4))
    failed = data.draw(failure_sets(df, min_size=1, max_size=2))
    assert 1 <= len(failed) <= 2 and failed <= set(df.processors)
    schedule = data.draw(failure_schedules(df, max_size=2))
    assert 1 <= len(schedule) <= 2 and all(s and s <= set(df.processors) for s in schedule)


def test_plugin_registers_from_type_strategies() -> None:
    """After _register(), st.from_type builds frontiers, domains and dataflows."""
    _register()
    assert isinstance(find(st.from_type(Frontier), lambda f: True), Frontier)
    assert find(st.from_type(Product), lambda d: d.arity == 3) == Product(3)
    assert isinstance(find(st.from_type(Dataflow), lambda df: len(df.processors) >= 2), Dataflow)
