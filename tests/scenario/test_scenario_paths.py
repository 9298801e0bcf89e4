"""JSON paths and the re-raising of model errors at them."""

from __future__ import annotations

import pytest

from falkirk.errors import (
    NotMonotoneError,
    ProjectionError,
    ScenarioError,
    SolverError,
    UnknownNameError,
    ValidationError,
)
from falkirk.scenario.paths import did_you_mean, error_at, from_model_error, join, show


def test_join_quotes_names_that_are_not_plain_words() -> None:
    """Plain names are dotted, indices bracketed, other names quoted in brackets."""
    assert join("", "processors") == "processors"
    assert join("processors", "sum") == "processors.sum"
    assert join("processors.sum.checkpoints", 2) == "processors.sum.checkpoints[2]"
    assert join("processors", "a.b") == 'processors["a.b"]'
    assert join("delivered", "@input") == "delivered.@input"


@pytest.mark.parametrize("kind", [UnknownNameError, NotMonotoneError, ProjectionError, SolverError])
def test_error_at_is_both_a_scenario_error_and_the_precise_kind(kind: type[Exception]) -> None:
    """The combined class is cached, keeps the path, and prints 'path: message' on one line."""
    err = error_at("edges.e1", "bad\nthing", kind)  # type: ignore[arg-type]
    assert isinstance(err, ScenarioError) and isinstance(err, kind)
    assert type(err) is type(error_at("x", "y", kind))  # type: ignore[arg-type]
    assert err.path == "edges.e1" and str(err) == "edges.e1: bad thing"


@pytest.mark.parametrize(
    ("message", "path"),
    [
        ("processor 'sum', checkpoint 1 (Frontier(epoch, 3)): delivered['e1'] = x is not monotone",
         "processors.sum.checkpoints[1].delivered.e1"),
        ("processor 'sum', live (Frontier(epoch, top)): notifications = x is not monotone", "processors.sum.live.notifications"),
        ("processor 'sum': checkpoint 0 (x) does not strictly contain the one before it", "processors.sum.checkpoints[0].frontier"),
        ("processor 'sum', checkpoint 2: edge 'e2' has a recorded projection with no record", "processors.sum.checkpoints[2]"),
        ("processor 'a b': something", 'processors["a b"]'),
        ("edge 'e1': projection 'identity' cannot map epoch to product(2)", "edges.e1.projection"),
        ("edge 'e1': src 'x' is not a declared processor", "edges.e1"),
        ("something global", ""),
    ],
)
def test_model_errors_are_placed_at_the_path_they_name(message: str, path: str) -> None:
    """from_model_error reads processor, checkpoint, field and edge from the model's message."""
    err = from_model_error(ValidationError(message))
    assert isinstance(err, ScenarioError) and isinstance(err, ValidationError)
    assert err.path == path and message in str(err)


def test_message_helpers() -> None:
    """show() shortens long values and quotes strings; did_you_mean() suggests close names."""
    assert show("sum") == "'sum'" and show([1, 2]) == "[1, 2]"
    assert len(show(list(range(100)))) == 60
    assert did_you_mean("delivred", ["delivered", "discarded"]) == " (did you mean 'delivered'?)"
    assert did_you_mean("zzz", ["delivered"]) == ""
