"""Rollback plans (``falkirk.solver.plan``): a vectorised plan decoded on read is the same plan as the worklist's."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from falkirk.solver import Dataflow, solve_frontiers
from falkirk.solver.vectorised.columns import RankFrontiers


@st.composite
def array_jobs(draw: st.DrawFn) -> tuple[Dataflow, Any]:
    """A small epoch job given as arrays (cycles, stateless processors, logged edges) and its failures."""
    n = draw(st.integers(1, 7))
    m = draw(st.integers(0, 3 * n))
    ints = st.integers(0, n - 1)
    cks = [sorted(draw(st.lists(st.integers(0, 6), max_size=3))) for _ in range(n)]
    names = [f"p{i}" for i in range(n)]
    df = Dataflow.from_arrays(
        names,
        np.array(draw(st.lists(ints, min_size=m, max_size=m)), dtype=np.int64),
        np.array(draw(st.lists(ints, min_size=m, max_size=m)), dtype=np.int64),
        logged=np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)), dtype=bool),
        stateless=np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool),
        ck_ptr=np.cumsum([0] + [len(c) for c in cks]),
        ck_val=np.array([x for c in cks for x in c], dtype=np.int64),
        notifications=draw(st.booleans()),
    )
    return df, draw(st.one_of(st.just("all"), st.lists(st.sampled_from(names), unique=True)))


@given(array_jobs())
def test_a_vectorised_plan_read_lazily_is_the_worklist_plan(job: tuple[Dataflow, Any]) -> None:
    """Property: frontiers, notification frontiers, actions, replays, JSON and explanations are the same."""
    df, failed = job
    lazy = solve_frontiers(df, failed, strategy="vectorised")
    ref = solve_frontiers(df, failed, strategy="worklist")
    assert isinstance(lazy.frontiers, RankFrontiers)
    assert lazy.frontiers == ref.frontiers and ref.frontiers == lazy.frontiers
    assert dict(lazy.notification_frontiers) == ref.notification_frontiers
    assert lazy.actions == ref.actions
    assert list(lazy.replay) == list(ref.replay) and dict(lazy.replay.items()) == ref.replay
    assert len(lazy.replay) == len(ref.replay) and bool(lazy.replay) == bool(ref.replay)
    assert lazy.to_json() == ref.to_json()
    assert lazy.table() == ref.table()
    for p in df.processors:
        assert lazy.explain(p) == ref.explain(p)


@given(array_jobs(), st.integers(1, 3))
def test_the_streamed_json_is_the_document(job: tuple[Dataflow, Any], chunk: int) -> None:
    """Property: ``iter_json``/``write_json`` write exactly ``json.dumps(plan.to_json())``, for both kinds of plan."""
    df, failed = job
    for strategy in ("vectorised", "worklist"):
        plan = solve_frontiers(df, failed, strategy=strategy)
        out = io.StringIO()
        plan.write_json(out, chunk=chunk)
        assert out.getvalue() == json.dumps(plan.to_json())
        assert json.loads(out.getvalue()) == plan.to_json()
