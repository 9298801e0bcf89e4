"""Invalid input on the command line: exit status 2 and one clear line on stderr, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import run

SPEC_DOC: dict[str, Any] = {
    "format": "falkirk-scenario/1",
    "processors": {
        "src": {"domain": "epoch", "stateless": True},
        "sum": {"domain": "epoch", "logs": ["e2"],
                "checkpoints": [{"frontier": 2, "notifications": 2, "delivered": {"e1": 2}}]},
        "sink": {"domain": "epoch", "checkpoints": [{"frontier": 1, "delivered": {"e2": 1}}],
                 "live": {"delivered": {"e2": 4}}},
    },
    "edges": {"e1": {"src": "src", "dst": "sum", "projection": "identity"},
              "e2": {"src": "sum", "dst": "sink", "projection": "identity"}},
    "failed": ["sum"],
}


def _variant(**changes: Any) -> str:
    """The SPEC §9 document with dotted-path changes applied (value None deletes), as JSON text."""
    doc = json.loads(json.dumps(SPEC_DOC))
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = doc
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return json.dumps(doc, indent=2)


# (file contents, words stderr must contain)
INVALID = {
    "unknown processor": (_variant(edges__e1__src="srx"), ["edges.e1.src", "srx"]),
    "unknown edge": (_variant(processors__sum__checkpoints__0__delivered={"e9": 1}), ["delivered.e9", "e9"]),
    "frontier not fitting its domain": (_variant(processors__sum__checkpoints__0__frontier={"upto": [[1, 1]]}),
                                        ["processors.sum.checkpoints[0].frontier", "epoch"]),
    "metadata not monotone": (_variant(processors__sink__live__delivered={"e2": 0}), ["processors.sink.live.delivered.e2", "monotone"]),
    "mismatched projection": (_variant(processors__sink={"domain": "lexicographic", "arity": 2}), ["edges.e2.projection", "identity"]),
    "unknown field": (_variant(processors__sum__checkpoints__0__deliverd={}), ["processors.sum.checkpoints[0].deliverd", "delivered"]),
    "missing format": (_variant(format=None), ["format", "falkirk-scenario/1"]),
    "wrong format": (_variant(format="falkirk-scenario/9"), ["format", "falkirk-scenario/9"]),
    "unknown failed name": (_variant(failed=["sum", "sinc"]), ["failed[1]", "sinc"]),
    "missing arity": (_variant(processors__sink={"domain": "product"}), ["processors.sink.arity", "arity"]),
    "bad JSON": ('{\n  "format": "falkirk-scenario/1",\n  "processors": {\n}', ["line 4", "column 2", "invalid JSON"]),
    "duplicate key": ('{"format": "falkirk-scenario/1", "processors": {}, "processors": {}}', ["duplicate", "processors"]),
}


def _assert_one_clean_line(code: int, out: str, err: str, words: list[str]) -> None:
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("falkirk: error: ")
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize("command", ["solve", "check", "explain", "draw"])
@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_scenarios_exit_2_with_one_line_naming_the_culprit(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str, command: str) -> None:
    """Every command rejects every invalid file the same way: status 2, one line, the JSON path."""
    text, words = INVALID[case]
    path = tmp_path / "bad.json"
    path.write_text(text)
    extra = {"explain": ["sum"], "draw": ["-o", str(tmp_path / "x.png")]}.get(command, [])
    code, out, err = run(capsys, command, str(path), *extra)
    _assert_one_clean_line(code, out, err, words)
    assert not (tmp_path / "x.png").exists()


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file that does not exist is reported with its name."""
    missing = tmp_path / "nope.json"
    _assert_one_clean_line(*run(capsys, "solve", str(missing)), [str(missing), "No such file"])


def test_directory_instead_of_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A directory given as FILE is an error, not a crash."""
    _assert_one_clean_line(*run(capsys, "check", str(tmp_path)), [str(tmp_path)])


def test_errors_without_a_json_path_name_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Errors about the whole document (bad JSON) are prefixed by the file name."""
    path = tmp_path / "broken.json"
    path.write_text("{")
    _assert_one_clean_line(*run(capsys, "check", str(path)), [f"falkirk: error: {path}: invalid JSON"])


def test_explain_unknown_processor(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """explain with a processor the scenario lacks suggests the close name and lists the known ones."""
    path = tmp_path / "s.json"
    path.write_text(_variant())
    _assert_one_clean_line(*run(capsys, "explain", str(path), "snk"), ["snk", "sink", "known: src, sum, sink"])


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """No command, or an unknown option, is an argparse usage error with status 2."""
    code, _, err = run(capsys)
    assert code == 2 and "usage:" in err
    code, _, err = run(capsys, "solve", "x.json", "--strategy", "fastest")
    assert code == 2 and "fastest" in err


def test_a_closed_pipe_ends_quietly_like_a_unix_tool(tmp_path: Path) -> None:
    """``falkirk solve … | head``: the reader went away; no "Broken pipe" error, status 141 (SIGPIPE's)."""
    import os
    import subprocess
    import sys

    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({
        "format": "falkirk-scenario/1",
        "processors": {f"p{i}": {"domain": "epoch", "stateless": True} for i in range(200)},
        "edges": {f"e{i}": {"src": f"p{i}", "dst": f"p{i + 1}"} for i in range(199)},
        "failed": ["p0"]}))
    read, write = os.pipe()
    os.close(read)  # nobody reads what it writes
    try:
        done = subprocess.run([sys.executable, "-m", "falkirk", "solve", str(scenario)], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode == 141, (done.returncode, done.stderr)
