"""Properties of solve_frontiers against SPEC §4–§6 and the brute-force reference.

Each property runs ``FALKIRK_PROPERTY_EXAMPLES`` cases (default 2000 when
``CI`` is set, 200 otherwise). Failing cases print the dataflow as Python
source (``falkirk.testing.describe.dataflow_source``) and the failed set.
"""

from __future__ import annotations

import os
from typing import Any

import attrs
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from falkirk.domains import Frontier, Recorded
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, check_consistent, solve_frontiers
from falkirk.solver.model.resolve import coerce
from falkirk.testing import brute_force_solve, candidate_frontiers, dataflows, failure_sets, is_consistent
from falkirk.testing.describe import dataflow_source


def _examples() -> int:
    env = os.environ.get("FALKIRK_PROPERTY_EXAMPLES")
    if env:
        return int(env)
    return 2000 if os.environ.get("CI") else 200


PROPERTY = settings(
    max_examples=_examples(),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Small enough for the brute force (a few processors, a few candidates each).
SMALL: dict[str, Any] = {"max_size": 4, "max_checkpoints": 3}
#: Every F(p) totally ordered: epochs, lexicographic times, one-edge sequence domains.
TOTAL: dict[str, Any] = {"domains": ["epoch", "lexicographic", "sequence"], "max_inputs": 1}
#: Partially ordered frontiers: product times, multi-edge sequence domains, epochs feeding a loop.
PARTIAL: dict[str, Any] = {"domains": ["product", "sequence", "loop"]}

Assignment = dict[str, Frontier]


def cases(**options: Any) -> st.SearchStrategy[tuple[Dataflow, frozenset[str]]]:
    """A generated dataflow and a set of failed processors."""
    return dataflows(**options).flatmap(lambda df: st.tuples(st.just(df), failure_sets(df)))


def _note(df: Dataflow, failed: frozenset[str]) -> None:
    note(dataflow_source(df))
    note(f"failed = {sorted(failed)}")


def _show(a: Assignment) -> dict[str, Any]:
    return {p: f.domain.encode(f) for p, f in a.items()}  # type: ignore[attr-defined]


def _below(a: Assignment, b: Assignment) -> bool:
    return all(a[p] <= b[p] for p in a)


@PROPERTY
@given(cases())
def test_answer_satisfies_c1_to_c4(case: tuple[Dataflow, frozenset[str]]) -> None:
    """(a) The plan's f and n satisfy C1–C4 (check_consistent and the independent checker agree)."""
    df, failed = case
    _note(df, failed)
    plan = solve_frontiers(df, failed)
    violations = check_consistent(
        df, plan.frontiers, failed=failed, notification_frontiers=plan.notification_frontiers
    )
    assert violations == []
    assert is_consistent(df, plan.frontiers, failed)


@PROPERTY
@given(cases(**SMALL, **TOTAL))
def test_total_orders_give_the_unique_maximal_assignment(case: tuple[Dataflow, frozenset[str]]) -> None:
    """(b) With totally ordered frontiers the answer is the brute force's unique maximal assignment."""
    df, failed = case
    _note(df, failed)
    answer = solve_frontiers(df, failed).frontiers
    maximal = brute_force_solve(df, failed, maximal=True)
    note(f"answer = {_show(answer)}; brute-force maximal = {[_show(m) for m in maximal]}")
    assert maximal == [answer]


@PROPERTY
@given(cases(**SMALL))
def test_every_consistent_assignment_is_below_the_answer(case: tuple[Dataflow, frozenset[str]]) -> None:
    """(c) Every brute-force consistent assignment is pointwise ⊆ the answer (it is the greatest)."""
    df, failed = case
    _note(df, failed)
    answer = solve_frontiers(df, failed).frontiers
    for assignment in brute_force_solve(df, failed):
        note(f"answer = {_show(answer)}; consistent = {_show(assignment)}")
        assert _below(assignment, answer)


@PROPERTY
@given(cases(**SMALL, **PARTIAL))
def test_partial_orders_answer_is_maximal(case: tuple[Dataflow, frozenset[str]]) -> None:
    """(d) In product, multi-edge sequence and loop dataflows nothing consistent is strictly above the answer."""
    df, failed = case
    _note(df, failed)
    answer = solve_frontiers(df, failed).frontiers
    maximal = brute_force_solve(df, failed, maximal=True)
    note(f"answer = {_show(answer)}; brute-force maximal = {[_show(m) for m in maximal]}")
    assert not any(_below(answer, m) and m != answer for m in maximal)
    assert maximal == [answer]  # SPEC §5's argument gives the greatest, not only a maximal one


@PROPERTY
@given(cases())
def test_worklist_and_round_robin_agree(case: tuple[Dataflow, frozenset[str]]) -> None:
    """(e) The worklist and round-robin strategies return the same plan, cycles included."""
    df, failed = case
    _note(df, failed)
    fast = solve_frontiers(df, failed, strategy="worklist")
    slow = solve_frontiers(df, failed, strategy="round_robin")
    assert fast.frontiers == slow.frontiers
    assert fast.notification_frontiers == slow.notification_frontiers
    assert fast.to_json() == slow.to_json()


def _without_checkpoint(df: Dataflow, name: str, index: int) -> Dataflow:
    procs = []
    for p in df.processors.values():
        if p.name == name:
            p = attrs.evolve(p, checkpoints=p.checkpoints[:index] + p.checkpoints[index + 1 :])
        procs.append(p)
    return Dataflow(procs, df.edges.values(), notifications=df.system_notifications)


@PROPERTY
@given(st.data())
def test_adding_a_checkpoint_never_lowers_low_watermarks(data: st.DataObject) -> None:
    """(f) GC soundness: with one checkpoint fewer, no low-watermark (failed="all") is higher."""
    df, failed = data.draw(cases(max_checkpoints=3))
    _note(df, failed)
    with_ck = [p for p in df.processors.values() if p.checkpoints]
    assume(with_ck)  # nothing to remove: draw again rather than pass without a check
    proc = data.draw(st.sampled_from(with_ck), label="processor")
    index = data.draw(st.integers(0, len(proc.checkpoints) - 1), label="checkpoint removed")
    fewer = _without_checkpoint(df, proc.name, index)
    for which in ("all", failed):
        more_lw = solve_frontiers(df, which).frontiers
        fewer_lw = solve_frontiers(fewer, which).frontiers
        note(f"failed={which}: with it {_show(more_lw)}, without it {_show(fewer_lw)}")
        assert _below(fewer_lw, more_lw)


@PROPERTY
@given(cases())
def test_actions_and_replay_follow_the_spec(case: tuple[Dataflow, frozenset[str]]) -> None:
    """(g) Actions and replay entries are exactly SPEC §9's definitions applied to f."""
    df, failed = case
    _note(df, failed)
    plan = solve_frontiers(df, failed)
    f = plan.frontiers
    for p in df.processors:
        if p in failed:
            want = "restart" if f[p].is_empty else "restore"
        else:
            want = "keep" if f[p].is_top else "rollback"
        assert plan.actions[p] == want
        assert plan.notification_frontiers[p] <= f[p]
    logged = {
        e: edge for e, edge in df.edges.items() if e in df.processors[edge.src].logs and not f[edge.dst].is_top
    }
    assert set(plan.replay) == set(logged)
    for e, edge in logged.items():
        r = plan.replay[e]
        assert (r.sender, r.receiver) == (edge.src, edge.dst)
        assert (r.log_frontier, r.exclude) == (f[edge.src], f[edge.dst])
    doc = plan.to_json()
    assert doc["frontiers"] == _show(f)
    assert doc["actions"] == plan.actions


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])  # the profile's count
@given(st.data())
def test_check_consistent_agrees_with_the_independent_checker(data: st.DataObject) -> None:
    """check_consistent finds no violation exactly when the brute force's independent checker accepts."""
    df, failed = data.draw(cases(**SMALL))
    _note(df, failed)
    cands = candidate_frontiers(df, failed)
    assignment = {p: data.draw(st.sampled_from(c), label=p) for p, c in cands.items()}
    assert (check_consistent(df, assignment, failed=failed) == []) == is_consistent(df, assignment, failed)


def test_check_consistent_rejects_discards_between_records() -> None:
    """A stateless sender between its records may not keep times whose discarded output the receiver lost.

    ``p0`` fails and may keep at most epoch 0. ``p1`` is stateless with no
    checkpoint, so its records on the recorded, unlogged edge ``e0`` are
    ``∅`` and ``⊤``. At ``f(p1) = 0`` it keeps epoch 0 and will not re-send
    what epoch 0 made it send; the only record above ``{0}`` is ``⊤``, so
    ``D_e0(0)`` is unknown, and ``p0`` at ``∅`` needs everything re-sent:
    C2 fails. The solver agrees (its residual is the largest record with
    ``φ ⊆ f(p0)``, i.e. ``∅``, and both end at ``∅``), and so must
    ``check_consistent``: ``D_e`` of a stateless sender between two records is
    ``φ`` at the smallest record containing its frontier, not the union rule.
    """
    df = Dataflow(
        [
            Processor("p0", "epoch", stateless=True, checkpoints=[Checkpoint(0)]),
            Processor("p1", "epoch", stateless=True),
        ],
        [Edge("e0", "p1", "p0", Recorded())],
        notifications=False,
    )
    assert solve_frontiers(df, ["p0"]).to_json()["frontiers"] == {"p0": "empty", "p1": "empty"}
    above = {"p0": "empty", "p1": 0}
    assert not is_consistent(df, {p: coerce(df.domains[p], v, p) for p, v in above.items()}, ["p0"])
    assert [v.constraint for v in check_consistent(df, above, failed=["p0"])] == ["C2"]


@PROPERTY
@given(dataflows(**SMALL))
def test_with_nothing_failed_every_processor_keeps_top(df: Dataflow) -> None:
    """(h) No processor failed (what a step whose job failed without losing anything is: the Spark executor's retry
    in place): every frontier stays ⊤ and every action is keep — the brute force's unique maximal assignment."""
    _note(df, frozenset())
    plan = solve_frontiers(df, [])
    assert all(f.is_top for f in plan.frontiers.values()), _show(plan.frontiers)
    assert set(plan.actions.values()) <= {"keep"}
    assert brute_force_solve(df, frozenset(), maximal=True) == [plan.frontiers]
