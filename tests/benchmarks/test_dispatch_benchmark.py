"""Smoke test of the dispatch benchmark (benchmarks/dispatch.py): every cell is measured, compared and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.dispatch import FACTOR, SLACK, main
from benchmarks.graphs import make

from benchmarks import dispatch


def test_the_grid_writes_auto_against_the_best_strategy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 100 processors every shape and failed fraction gets the three times, the choice and auto ÷ best; plans agree."""
    monkeypatch.setattr(dispatch, "_repeat", lambda n: 1)  # one solve per timing: a smoke test, not a measurement
    monkeypatch.setattr(dispatch, "_batch", lambda n: 1)
    monkeypatch.setattr(dispatch, "COLLECT", False)  # no full collections: costly in a worker's grown heap
    out = tmp_path / "dispatch.json"
    res = main(["--sizes", "100", "--shapes", "chain,tree(in),sparse_dag", "--general", "--out", str(out)])
    assert json.loads(out.read_text())["rows"] == res["rows"]
    assert len(res["rows"]) == 3 * (3 + 2)  # 3 shapes × (3 fractions on the columns + 2 with live metadata)
    for r in res["rows"]:
        assert r["same_plan"] and r["chosen"] in ("worklist", "vectorised")
        assert r["best_cpu_s"] == min(r["worklist_cpu_s"], r["vectorised_cpu_s"])
        assert r["auto_over_best"] == r["auto_cpu_s"] / max(r["best_cpu_s"], 1e-9)
        assert r["within_target"] == (r["auto_cpu_s"] <= FACTOR * r["best_cpu_s"] + SLACK)
    assert {r["chosen"] for r in res["rows"] if r["path"] == "columns"} == {"vectorised"}
    assert {r["chosen"] for r in res["rows"] if r["path"] == "live"} == {"worklist"}  # V + E < CONVERT_FROM


def test_the_new_families_have_their_shapes() -> None:
    """sparse_dag has about 1.1 edges per processor; tree(in) and tree(out) are the same tree, edges reversed."""
    assert 1.05 < make("sparse_dag", 5000, seed=2).m / 5000 < 1.15
    fan_in, fan_out = make("tree", 31, fan="in"), make("tree", 31, fan="out")
    assert sorted(zip(fan_in.src.tolist(), fan_in.dst.tolist(), strict=True)) == sorted(
        zip(fan_out.dst.tolist(), fan_out.src.tolist(), strict=True)
    )
    assert fan_in.dst.tolist().count(0) == 2  # binary: the root has two children
