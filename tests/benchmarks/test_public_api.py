"""Smoke test of the public-API benchmark (benchmarks/public_api.py): every case runs and the constructors agree."""

from __future__ import annotations

from benchmarks.public_api import CASES, one, run


def test_every_case_runs_and_the_constructors_give_the_same_plan() -> None:
    """At 300 processors each case reports its times and RSS; objects, from_arrays and from_networkx solve alike."""
    rows = {case: one(case, 300) for case in CASES}
    assert all(r["processors"] == 300 and r["peak_rss_mb"] > 0 for r in rows.values())
    assert rows["networkx"]["check"] == 300  # every node in the topological order
    assert len({rows[c]["check"] for c in CASES if c != "networkx"}) == 1


def test_repeated_runs_keep_each_case_s_least_total() -> None:
    """With repeat=2 every case runs twice in fresh interpreters and keeps the run of least total CPU."""
    rows = run([200], repeat=2)
    assert sorted(r["case"] for r in rows) == sorted(CASES)
    for r in rows:
        assert len(r["runs_total_cpu_s"]) == 2
        assert r["total_cpu_s"] == min(r["runs_total_cpu_s"])
        assert r["cpu_ratio_to_networkx"] > 0
