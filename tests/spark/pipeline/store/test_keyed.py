"""Key-group arithmetic of keyed state (no Spark needed): ranges, owners and the rescale plan."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from falkirk.spark.pipeline.store.keyed import key_group_range, plan_rescale, subtask_of

sizes = st.integers(1, 64).flatmap(lambda k: st.tuples(st.just(k), st.integers(1, k), st.integers(1, k)))


@given(sizes)
def test_ranges_partition_the_key_groups(case: tuple[int, int, int]) -> None:
    """The ranges of n partitions are contiguous, cover every key group once, and agree with subtask_of."""
    groups, n, _ = case
    ranges = [key_group_range(i, n, groups) for i in range(n)]
    assert ranges[0][0] == 0 and ranges[-1][1] == groups - 1
    assert all(ranges[i][1] + 1 == ranges[i + 1][0] for i in range(n - 1))
    assert max(hi - lo for lo, hi in ranges) - min(hi - lo for lo, hi in ranges) <= 1
    for i, (lo, hi) in enumerate(ranges):
        assert all(subtask_of(g, n, groups) == i for g in range(lo, hi + 1))


@given(sizes)
def test_rescale_plan_reads_exactly_the_overlapping_partitions(case: tuple[int, int, int]) -> None:
    """New partition j reads old partition i iff some key group is owned by i before and by j after."""
    groups, old, new = case
    plan = plan_rescale(old, new, groups)
    needed = {(subtask_of(g, new, groups), subtask_of(g, old, groups)) for g in range(groups)}
    assert {(j, i) for j, olds in plan.items() for i in olds} == needed
