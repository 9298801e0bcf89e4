"""Every Python block of README.md and docs/**/*.md runs as written.

The blocks of one file run in order in one namespace (as a reader pasting
them into one session would), from the repository's root. A block may opt out
with the line ``<!-- docs-test: skip: REASON -->`` right before its fence; a
marker without a reason fails. Files whose code uses PySpark run on the
shared SparkSession (``tests/conftest.py``'s ``spark``), which their
``local_session()``/``getOrCreate()`` calls then return. README.md's blocks
must also leave what the README says they give (``CHECKS``), and its table of
falkirk against Structured Streaming must be what the benchmark's results say.

The normative spec, ``docs/spec.md``, is checked too: its §9 scenario solves
to the plan it documents, and every "SPEC §N" of the code and the docs names
one of its sections.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"<!--\s*docs-test:\s*skip\b:?\s*(.*?)\s*-->")


def blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, code, skip_reason)`` of every Python block of ``path``, in order."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        reason = None
        if marker is not None:
            reason = marker.group(1)
            if not reason:
                raise AssertionError(f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}: docs-test skip needs a reason")
        out.append((text.count("\n", 0, m.start()) + 2, m.group(1), reason))
    return out


def _uses_spark(path: Path) -> bool:
    return any("falkirk.spark" in code or "pyspark" in code for _, code, _ in blocks(path))


def _check_readme(namespace: dict[str, Any]) -> None:
    """README.md's examples give what the README says: the solver's plan, a pipeline recovered from its failure."""
    assert namespace["plan"].actions == {"src": "rollback", "sum": "restore", "sink": "rollback"}
    result = namespace["result"]
    assert [str(i) for i in result.fired] == ["totals@4:mid"] and result.journal.recoveries


#: per file, what its blocks must leave in their namespace (beyond running without an error)
CHECKS = {"README.md": _check_readme}


def _run(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[str]]:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {"__name__": f"docs:{path.name}"}
    ran, skipped = 0, []
    for line, code, reason in blocks(path):
        if reason is not None:
            skipped.append(f"{path.name}:{line}: {reason}")
            continue
        exec(compile(code, f"{path.relative_to(ROOT)}:{line}", "exec"), namespace)
        ran += 1
    CHECKS.get(path.relative_to(ROOT).as_posix(), lambda namespace: None)(namespace)
    return ran, skipped


PLAIN = [p for p in DOCS if blocks(p) and not _uses_spark(p)]
SPARK = [p for p in DOCS if blocks(p) and _uses_spark(p)]


def test_the_docs_have_python_blocks() -> None:
    """The collection itself: README.md and docs/ hold Python blocks (a broken fence pattern would find none)."""
    found = {p.relative_to(ROOT).as_posix(): len(blocks(p)) for p in DOCS if blocks(p)}
    assert found.get("README.md", 0) >= 2 and found.get("docs/spark.md", 0) >= 3, found
    assert [reason for _, _, reason in blocks(ROOT / "README.md") if reason is not None] == []  # every example runs


@pytest.mark.parametrize("path", PLAIN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_blocks_run(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each Python block of a doc without Spark code runs without an error."""
    ran, skipped = _run(path, monkeypatch)
    assert ran + len(skipped) == len(blocks(path)) and ran > 0
    print(f"{path.name}: {ran} blocks ran; skipped: {skipped}")


@pytest.mark.parametrize("path", SPARK, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_spark_blocks_run(path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each Python block of a doc with PySpark code runs without an error on the shared session."""
    ran, skipped = _run(path, monkeypatch)
    assert ran + len(skipped) == len(blocks(path)) and ran > 0
    print(f"{path.name}: {ran} blocks ran; skipped: {skipped}")


def test_no_merge_conflict_markers_are_left_in_tracked_text() -> None:
    """A merge that left ``<<<<<<<``/``>>>>>>>`` lines behind (it happened in README.md) fails here, not in a reader."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:  # not a git checkout (an sdist): the files themselves
        files = [p for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts]
    else:
        files = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    marker = re.compile(r"^(<{7}|>{7})( |$)", re.M)
    found = []
    for path in files:
        if path.suffix not in {".py", ".md", ".toml", ".txt", ".json", ".cfg", ".sh", ".yml", ".yaml", ""}:
            continue
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        found += [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}" for m in marker.finditer(text)]
    assert len(files) > 50 and not found, found


def _ratio(x: float) -> str:
    """A ratio as README.md rounds it: one decimal, two below 0.1."""
    return f"{x:.2f}×" if x < 0.095 else f"{x:.1f}×"


def test_readme_streaming_table_is_the_matrix_results_rounded() -> None:
    """Each row of README.md's falkirk-or-Structured-Streaming table is benchmarks/results/spark_matrix.json, rounded;
    every W workload has its row (YSB and MIXED, measured on a busy machine so far, may be left out)."""
    summary = {w: b["summary"] for w, b in
               json.loads((ROOT / "benchmarks" / "results" / "spark_matrix.json").read_text())["workloads"].items()}
    rows = re.findall(r"^\| (W\d|YSB|MIXED):[^|]*\| `([^`]+)` \| `([^`]+)` \| ([0-9.]+×) \| ([0-9.]+×) \|$",
                      (ROOT / "README.md").read_text(), re.M)
    named = sorted(w for w, *_ in rows)
    assert named == sorted({*(w for w in summary if w.startswith("W")), *(w for w in named if w in summary)}), rows
    for w, fk, st, cpu, recovery in rows:
        a, b = summary[w][fk], summary[w][st]
        assert (cpu, recovery) == (_ratio(a["cpu_median_s"] / b["cpu_median_s"]),
                                   _ratio(a["recovery_cpu_s"] / b["recovery_cpu_s"])), w
        streams = [n for n, x in summary[w].items() if x["system"] == "streaming" and x["recovery_cpu_s"] is not None]
        assert st == min(streams, key=lambda n: summary[w][n]["cpu_median_s"]), (w, st)  # the cheapest per epoch


SPEC = ROOT / "docs" / "spec.md"
JSON_FENCE = re.compile(r"^```json[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
SECTION = re.compile(r"^## §(\d+)\. ", re.M)
#: "SPEC §3", and every section of a run after it: "SPEC §3–§4", "SPEC §1, §2, §7", "SPEC §7/§9".
SPEC_REF = re.compile(r"SPEC (§\d+(?:(?:\s*[–/-]\s*|,\s*|\s+and\s+)§\d+)*)")


def _spec_document(fmt: str) -> Any:
    """The one JSON block of docs/spec.md whose ``"format"`` is ``fmt``."""
    import json

    found = [doc for doc in map(json.loads, JSON_FENCE.findall(SPEC.read_text())) if doc.get("format") == fmt]
    assert len(found) == 1, f"docs/spec.md has {len(found)} JSON blocks of format {fmt}"
    return found[0]


def test_the_spec_example_solves_to_the_plan_it_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/spec.md §9's scenario, given to ``falkirk solve FILE --json``, prints §9's plan (compared as JSON values)."""
    import json

    from falkirk.cli import main

    scenario, plan = _spec_document("falkirk-scenario/1"), _spec_document("falkirk-plan/1")
    path = tmp_path / "spec_example.json"
    path.write_text(json.dumps(scenario))
    capsys.readouterr()
    assert main(["solve", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == plan


def test_the_spec_example_is_the_shipped_example_file() -> None:
    """docs/spec.md §9's scenario and plan are examples/scenarios/spec_example.json and its ``x-expected-plan``."""
    import json

    shipped = json.loads((ROOT / "examples" / "scenarios" / "spec_example.json").read_text())
    assert {k: v for k, v in shipped.items() if not k.startswith("x-")} == _spec_document("falkirk-scenario/1")
    assert shipped["x-expected-plan"] == _spec_document("falkirk-plan/1")


def test_every_spec_reference_names_a_section_of_the_spec() -> None:
    """Every "SPEC §N" of src/, docs/ and README.md (runs like "§2–§3" included) is a ``## §N.`` heading of docs/spec.md."""
    sections = {int(n) for n in SECTION.findall(SPEC.read_text())}
    assert sections == set(range(1, 10)), sorted(sections)
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "src").rglob("*.py")]
    refs, dangling = 0, []
    for path in files:
        text = path.read_text()
        for m in SPEC_REF.finditer(text):
            for n in re.findall(r"§(\d+)", m.group(1)):
                refs += 1
                if int(n) not in sections:
                    dangling.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert refs > 100 and not dangling, dangling
