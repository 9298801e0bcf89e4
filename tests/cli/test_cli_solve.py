"""`falkirk solve`, `check` and `explain` on valid scenarios, run in-process."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cli_support import EXAMPLES, ROOT, SPEC_ANSWER, run, spec_example

from falkirk.cli import COMMANDS, build_parser


def test_solve_json_prints_exactly_the_spec_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """SPEC §9 acceptance: `falkirk solve spec_example.json --json` prints the spec's answer."""
    spec_file = spec_example()
    code, out, err = run(capsys, "solve", str(spec_file), "--json")
    assert code == 0 and err == ""
    assert json.loads(out) == SPEC_ANSWER
    assert out.startswith("{\n  ")  # indent=2


@pytest.mark.parametrize("strategy", ["worklist", "round_robin"])
def test_solve_strategies_agree(capsys: pytest.CaptureFixture[str], strategy: str) -> None:
    """--strategy worklist and round_robin print the same plan."""
    spec_file = spec_example()
    code, out, _ = run(capsys, "solve", str(spec_file), "--json", "--strategy", strategy)
    assert code == 0 and json.loads(out) == SPEC_ANSWER


def test_solve_prints_a_table_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json, solve prints the failed set and the plan's table with the replay."""
    spec_file = spec_example()
    code, out, _ = run(capsys, "solve", str(spec_file))
    assert code == 0
    assert out.splitlines()[0] == "failed: sum"
    assert "sink       rollback  1" in out and "sum        restore   2" in out
    assert "e2 (sum -> sink)" in out


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_solve_examples_print_their_documented_plans(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    """Each examples/scenarios file solves, via the CLI, to its x-expected-plan."""
    code, out, _ = run(capsys, "solve", str(path), "--json")
    assert code == 0
    assert json.loads(out) == json.loads(path.read_text())["x-expected-plan"]


def test_solve_reads_standard_input(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """FILE '-' reads the scenario from standard input."""
    spec_file = spec_example()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(spec_file.read_bytes())))
    code, out, _ = run(capsys, "solve", "-", "--json")
    assert code == 0 and json.loads(out) == SPEC_ANSWER


def test_check_prints_a_one_line_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """check prints 'ok: 3 processors, 2 edges, failed: sum' and exits 0."""
    spec_file = spec_example()
    assert run(capsys, "check", str(spec_file)) == (0, "ok: 3 processors, 2 edges, failed: sum\n", "")


def test_check_summarises_failed_all_and_none(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The summary says 'all' for low-watermark files and 'none' when nothing failed."""
    low = ROOT / "examples" / "scenarios" / "low_watermarks.json"
    assert run(capsys, "check", str(low))[1] == "ok: 3 processors, 2 edges, failed: all\n"
    one = tmp_path / "one.json"
    one.write_text('{"format": "falkirk-scenario/1", "processors": {"p": {"domain": "epoch"}}}')
    assert run(capsys, "check", str(one))[1] == "ok: 1 processor, 0 edges, failed: none\n"


def test_explain_prints_the_constraint_chain(capsys: pytest.CaptureFixture[str]) -> None:
    """explain sink: a header and the chain from sum's failure to sink's C3 step."""
    spec_file = spec_example()
    code, out, _ = run(capsys, "explain", str(spec_file), "sink")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "sink: rollback to 1"
    assert "sum failed" in lines[1]
    assert "C3 on e2" in lines[2]


def test_explain_a_processor_that_keeps_top(capsys: pytest.CaptureFixture[str]) -> None:
    """A processor nothing forced back says it keeps ⊤."""
    path = ROOT / "examples" / "scenarios" / "sequence_logged.json"
    code, out, _ = run(capsys, "explain", str(path), "reader")
    assert code == 0 and out == "reader keeps ⊤: nothing forced it to roll back\n"


def test_commands_are_registered_from_the_module_list() -> None:
    """Every module in COMMANDS registers a subcommand with a run function."""
    parser = build_parser()
    example_args = {
        "explain": ["f.json", "p"],
        "draw": ["f.json", "-o", "x.png"],
        "monitor": ["--db", "m.sqlite", "status"],
    }
    for name in COMMANDS:
        args = parser.parse_args([name, *example_args.get(name, ["f.json"])])
        assert callable(args.run)


def test_help_and_version_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """--help lists the commands; --version prints the version; both exit 0."""
    code, out, _ = run(capsys, "--help")
    assert code == 0 and all(name in out for name in COMMANDS)
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("falkirk ")
