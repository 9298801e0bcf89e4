"""Smoke test of benchmarks/input_log.py: every ingest case runs on a small table, the old log comes from git."""

from __future__ import annotations

from pathlib import Path

from benchmarks.input_log import LAYOUTS, ingest, legacy_inputlog, make_table


def test_every_ingest_case_appends_the_table(tmp_path: Path) -> None:
    """Each case of each layout gives a CPU time and a size; the JSON-lines log of commit 27438cf is the old one."""
    legacy = legacy_inputlog()
    assert legacy is not None, "git show of the legacy commit failed"
    rows = ingest(make_table(3000), tmp_path, legacy, reps=1)
    cases = {(r["case"], r["layout"]) for r in rows}
    assert cases == {("bare", "-"), ("bare, same encodings", "-")} | {
        (c, layout) for layout in LAYOUTS for c in ("json (before)", "dicts", "arrow", "pandas")}
    assert all(r["cpu_s"] > 0 and r["bytes"] > 0 and r["rows"] == 3000 for r in rows)
    old = {r["layout"]: r["bytes"] for r in rows if r["case"] == "json (before)"}
    new = {r["layout"]: r["bytes"] for r in rows if r["case"] == "arrow"}
    assert all(old[k] > 2 * new[k] for k in old)  # JSON lines against Parquet
