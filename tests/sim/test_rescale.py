"""Rescaling on recovery from unaligned checkpoints (seed 001): key groups, forward edges, FLINK-38267."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.errors import ValidationError
from falkirk.sim.rescale import (
    Job,
    Rescale,
    RescaleError,
    check_rescale,
    expected_output,
    key_group,
    key_group_range,
    operator_index,
    run_job,
)
from falkirk.sim.rescale.keygroups import overlapping

KEYED = [[(k % 5, k) for k in range(12)], [(k % 3, 100 + k) for k in range(9)]]
ORDERED = [[1, 2, 3, 4], [5, 6, 7], [8, 9]]
SCHEDULES = [(12, 2, 3), (12, 3, 2), (20, 3, 1), (8, 1, 3)]

keyed_splits = st.lists(
    st.lists(st.tuples(st.integers(0, 12), st.integers(0, 99)), max_size=8), min_size=1, max_size=4
)
ordered_splits = st.lists(st.lists(st.integers(0, 99), max_size=6), min_size=1, max_size=3)
parallelism = st.integers(1, 4)
rescales = st.lists(st.builds(Rescale, st.integers(0, 60), parallelism), min_size=1, max_size=2)


def _runs(job: Job, strategy: str) -> list[str]:
    """Verdicts ("ok", "bad", "refused") over a fixed set of seeds and rescale schedules."""
    out = []
    for seed in range(30):
        for step, n, m in SCHEDULES:
            try:
                out.append("ok" if check_rescale(job, n, [Rescale(step, m)], seed=seed, strategy=strategy).ok else "bad")
            except RescaleError:
                out.append("refused")
    return out


@given(keyed_splits, parallelism, rescales, st.integers(0, 10**6), st.sampled_from([4, 8, 16]))
def test_keyed_rescale_up_and_down_matches_failure_free_run(keyed, n, rs, seed, groups) -> None:  # type: ignore[no-untyped-def]
    """Keyed only: any n -> m (up, down, repeated) restores per-key results identical to the failure-free run."""
    job = Job(keyed=keyed, max_parallelism=groups)
    verdict = check_rescale(job, n, rs, seed=seed)
    assert verdict.ok, verdict.problem
    assert verdict.outcome.output == expected_output(job)
    assert [(r.old, r.new) for r in verdict.outcome.restores][:1] == [(n, sorted(rs, key=lambda r: r.step)[0].parallelism)]


@given(keyed_splits, ordered_splits, parallelism, rescales, st.integers(0, 10**6), st.sampled_from(["aligned", "by-split"]), st.booleans())
def test_mixed_hash_and_forward_rescale_is_correct(keyed, ordered, n, rs, seed, forward, completed_only) -> None:  # type: ignore[no-untyped-def]
    """FLINK-38267 shape: a task with hash and forward inputs rescales correctly (aligned or by-split forward)."""
    job = Job(keyed=keyed, ordered=ordered, forward=forward)
    verdict = check_rescale(job, n, rs, seed=seed, completed_only=completed_only)
    assert verdict.ok, verdict.problem


@given(keyed_splits, parallelism, rescales, st.integers(0, 10**6))
def test_latest_completed_checkpoint_is_what_the_solver_chooses(keyed, n, rs, seed) -> None:  # type: ignore[no-untyped-def]
    """With completed checkpoints only, falkirk's solver picks one checkpoint id for all subtasks (Flink's choice)."""
    outcome = run_job(Job(keyed=keyed), n, rs, seed=seed)
    for r in outcome.restores:
        assert len(set(r.checkpoints.values())) == 1


def test_inflight_data_is_restored_and_filtered_by_key_group() -> None:
    """Restores carry in-flight hash data, and scaling makes subtasks drop records of others' key groups."""
    job = Job(keyed=KEYED)
    outcomes = [run_job(job, n, [Rescale(step, m)], seed=s) for s in range(30) for step, n, m in SCHEDULES]
    assert all(o.output == expected_output(job) for o in outcomes)
    assert any(o.restores[0].inflight.get("src->agg", 0) for o in outcomes)
    assert any(o.restores[0].filtered for o in outcomes)


def test_naive_modulo_redistribution_loses_and_duplicates() -> None:
    """Naive: in-flight data by old subtask index (j % m), unfiltered, splits a key's state over two subtasks."""
    job = Job(keyed=KEYED)
    verdict = check_rescale(job, 2, [Rescale(12, 3)], seed=1, strategy="modulo")
    assert not verdict.ok
    keys = [k for k, _ in verdict.outcome.output.keyed]
    assert len(keys) > len(set(keys))  # one key answered twice, each answer missing records
    assert check_rescale(job, 2, [Rescale(12, 3)], seed=1).ok


def test_restored_data_must_be_consumed_before_new_input() -> None:
    """Naive: letting new input overtake restored in-flight data reorders a key's records."""
    job = Job(keyed=KEYED, ordered=ORDERED, forward="by-split")
    verdict = check_rescale(job, 2, [Rescale(12, 3)], seed=3, strategy="unordered")
    assert not verdict.ok and "keyed" in verdict.problem
    got = dict(verdict.outcome.output.keyed)
    want = dict(expected_output(job).keyed)
    def bag(rows):  # type: ignore[no-untyped-def]
        return {s: sorted(v) for s, v in rows}

    assert any(got[k] != want[k] and bag(got[k]) == bag(want[k]) for k in want)  # reordered, nothing lost
    assert check_rescale(job, 2, [Rescale(12, 3)], seed=3).ok


def test_flink_38267_mixed_task_naive_refuses_falkirk_restores() -> None:
    """Mixed hash+forward task from an unaligned checkpoint: per-task rescaling fails, per-exchange succeeds."""
    job = Job(keyed=KEYED, ordered=ORDERED)  # forward edge checkpointed aligned (the default)
    with pytest.raises(RescaleError, match=r"edge 'fwd->agg' .*FLINK-38267"):
        check_rescale(job, 3, [Rescale(20, 1)], seed=1, strategy="per-task")
    verdict = check_rescale(job, 3, [Rescale(20, 1)], seed=1)
    assert verdict.ok and verdict.outcome.restores[0].inflight.get("src->agg", 0) > 0
    assert verdict.outcome.restores[0].inflight.get("fwd->agg", 0) == 0
    runs = _runs(job, "per-task")
    assert "refused" in runs and "bad" not in runs
    assert set(_runs(job, "key-groups")) == {"ok"}


def test_naive_forward_redistribution_breaks_split_order() -> None:
    """Naive: per-split state and forward in-flight data by subtask index lose a split's order (FLIP-76 Fig. 3)."""
    job = Job(keyed=[[]], ordered=ORDERED, forward="by-split")
    runs = _runs(job, "modulo")
    assert "bad" in runs
    assert set(_runs(job, "key-groups")) == {"ok"}


def test_unaligned_forward_with_inflight_data_is_refused_naming_the_edge() -> None:
    """The seed's default: unaligned in-flight data on a forward edge is not rescaled; same parallelism is fine."""
    job = Job(keyed=KEYED, ordered=ORDERED, forward="unaligned")
    with pytest.raises(RescaleError, match=r"edge 'fwd->agg' \(forward, channel fwd0->agg0\) holds 1 in-flight"):
        check_rescale(job, 2, [Rescale(12, 3)], seed=3)
    assert check_rescale(job, 2, [Rescale(12, 2)], seed=3).ok
    assert {"ok", "refused"} == set(_runs(job, "key-groups"))


@given(st.integers(1, 64), st.data())
def test_key_group_ranges_partition_the_key_groups(groups, data) -> None:  # type: ignore[no-untyped-def]
    """Subtask ranges are contiguous, disjoint, cover every key group, and agree with operator_index."""
    n = data.draw(st.integers(1, groups))
    m = data.draw(st.integers(1, groups))
    ranges = [key_group_range(i, n, groups) for i in range(n)]
    assert [g for r in ranges for g in r] == list(range(groups))
    assert all(operator_index(g, n, groups) == i for i, r in enumerate(ranges) for g in r)
    for i in range(m):
        mine = set(key_group_range(i, m, groups))
        assert {operator_index(g, n, groups) for g in mine} == set(overlapping(i, m, n, groups))
    key = data.draw(st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=5)))
    assert 0 <= key_group(key, groups) < groups


def test_bad_configurations_are_rejected_by_name() -> None:
    """Parallelism above the number of key groups, unknown modes and strategies raise ValidationError."""
    with pytest.raises(ValidationError, match="agg: parallelism 9 must be an integer in 1..8"):
        run_job(Job(keyed=KEYED), 9)
    with pytest.raises(ValidationError, match="forward='sideways'"):
        Job(keyed=KEYED, forward="sideways")
    with pytest.raises(ValidationError, match="strategy='random'"):
        run_job(Job(keyed=KEYED), 2, [Rescale(3, 3)], strategy="random")
    with pytest.raises(ValidationError, match="not a \\(key, value\\) pair"):
        Job(keyed=[[1, 2]])
