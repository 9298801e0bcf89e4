"""The array form of plain epoch dataflows (``falkirk.solver.vectorised.columns``) solves as the general conversion and the reference do."""

from __future__ import annotations

import random

import numpy as np
import pytest

from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
from falkirk.solver.model.access import View, normalise_failed
from falkirk.solver.vectorised.build import solve_view
from falkirk.solver.vectorised.columns import epoch_columns, solve_columns
from falkirk.solver.vectorised.engine import Engine


def plain_case(seed: int) -> tuple[Dataflow, list[str]]:
    """A random plain epoch dataflow (cycles, stateless processors, logged edges, repeated checkpoints) and failures."""
    rng = random.Random(seed)
    n = rng.randint(1, 8)
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 3 * n))]
    logged = [rng.random() < 0.3 for _ in edges]
    procs = []
    for i in range(n):
        cks = sorted(rng.randint(0, 9) for _ in range(rng.randint(0, 4)))  # repeats allowed: one checkpoint
        notes = rng.choice([None, None, True, False])
        procs.append(
            Processor(
                f"p{i}",
                "epoch",
                stateless=rng.random() < 0.3,
                logs=[f"e{k}" for k, (s, _) in enumerate(edges) if s == i and logged[k]],
                checkpoints=[Checkpoint(c) for c in cks],
                notifications=notes,
            )
        )
    df = Dataflow(
        procs,
        [Edge(f"e{k}", f"p{s}", f"p{d}") for k, (s, d) in enumerate(edges)],
        notifications=rng.random() < 0.8,
    )
    failed = [f"p{i}" for i in range(n) if rng.random() < 0.3]
    return df, failed


@pytest.mark.parametrize("mode", [(-1, 0), (10**9, 10**9), (2, 4)], ids=["arrays", "scalar", "mixed"])
def test_columns_agree_with_the_general_conversion_and_the_reference(
    mode: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 300 plain epoch dataflows: the same f and n as the general conversion the same plan as the round robin."""
    monkeypatch.setattr(Engine, "SCALAR_BELOW", mode[0])
    monkeypatch.setattr(Engine, "SCALAR_UNTIL", mode[1])
    for seed in range(300):
        df, failed = plain_case(seed)
        assert epoch_columns(df) is not None
        got = solve_columns(df, normalise_failed(df, failed))
        want = solve_view(View(df, normalise_failed(df, failed)))
        assert got[:2] == want[:2]  # the work differs: an epoch problem looks only at constraints below ⊤ at first
        ref = solve_frontiers(df, failed, strategy="round_robin")
        vec = solve_frontiers(df, failed, strategy="vectorised")
        assert vec.to_json() == ref.to_json()


def test_the_arrays_are_built_once_and_reused() -> None:
    """Later solves of the same dataflow reuse its arrays; nothing is resolved on the way."""
    df, _ = plain_case(7)
    cols = epoch_columns(df)
    for p in df.processors:
        solve_frontiers(df, [p], strategy="vectorised")
    assert epoch_columns(df) is cols
    assert not df._resolved


def test_dataflows_that_are_not_all_plain_epoch_have_no_array_form() -> None:
    """Live metadata, a non-restartable processor or another domain: the general conversion runs instead."""
    for proc in (
        Processor("a", "epoch", checkpoints=[Checkpoint(1)], live=Checkpoint("top")),
        Processor("a", "epoch", checkpoints=[Checkpoint(1)], restartable=False),
        Processor("a", "lexicographic", arity=2),
    ):
        df = Dataflow([proc, Processor("b", "epoch")], [])
        assert epoch_columns(df) is None and solve_columns(df, frozenset()) is None


def test_per_processor_notification_flags_reach_the_problem() -> None:
    """A processor that receives no notifications has N = ∅ at every candidate in the array problem."""
    df = Dataflow(
        [Processor("a", "epoch", checkpoints=[Checkpoint(2)], notifications=False), Processor("b", "epoch")],
        [],
    )
    cols = epoch_columns(df)
    assert cols is not None
    prob = cols.problem(frozenset())
    assert prob.notes.tolist() == [False, True]
    assert np.all(prob.c_N[prob.c_ptr[0] : prob.c_ptr[1]] == 0)
