"""``falkirk gc`` and ``falkirk monitor``: the command lines of the monitor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from falkirk.cli import main
from falkirk.scenario import load
from falkirk.solver.monitor import Monitor

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.json"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_gc_json_is_solve_json_with_failed_all(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`falkirk gc FILE --json` prints what `falkirk solve` prints for FILE with "failed": "all"."""
    doc = json.loads(path.read_text())
    doc["failed"] = "all"
    all_failed = tmp_path / path.name
    all_failed.write_text(json.dumps(doc))
    status, gc_out, _ = run(capsys, "gc", str(path), "--json")
    assert status == 0
    status, solve_out, _ = run(capsys, "solve", str(all_failed), "--json")
    assert status == 0
    assert json.loads(gc_out) == json.loads(solve_out)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_monitor_on_example_scenarios_matches_gc(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A monitor built from each example scenario announces the watermarks `falkirk gc` prints."""
    status, gc_out, _ = run(capsys, "gc", str(path), "--json")
    assert status == 0
    m = Monitor(load(path).dataflow)
    m._check()
    assert {p: f for p, f in json.loads(gc_out)["frontiers"].items()} == m.current().to_json()["watermarks"]


def test_gc_table_names_deletable_logs_and_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The gc table shows each watermark, deletable checkpoints, logs, inputs and declared outputs."""
    doc = {
        "format": "falkirk-scenario/1",
        "processors": {
            "src": {"domain": "epoch", "stateless": True, "checkpoints": [{"frontier": 3}]},
            "sum": {"domain": "epoch", "logs": ["e2"], "checkpoints": [{"frontier": 1}, {"frontier": 2}]},
            "sink": {"domain": "epoch", "checkpoints": [{"frontier": 2}]},
        },
        "edges": {"e1": {"src": "src", "dst": "sum"}, "e2": {"src": "sum", "dst": "sink"}},
        "failed": [],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    status, out, _ = run(capsys, "gc", str(path), "--output", "sink")
    assert status == 0
    assert "sum        stateful  2              2            1" in out
    assert "e2 (sum -> sink): 2" in out
    assert "src: 2" in out and "sink: 2" in out
    status, _, err = run(capsys, "gc", str(path), "--output", "nope")
    assert status == 2 and "'nope'" in err


def test_monitor_command_init_record_ack_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`falkirk monitor` creates, feeds and shows a persisted monitor; bad input exits 2."""
    db = str(tmp_path / "m.db")
    scenario = str(ROOT / "examples" / "scenarios" / "spec_example.json")
    assert run(capsys, "monitor", "--db", db, "init", scenario, "--output", "sink")[0] == 0
    status, out, _ = run(capsys, "monitor", "--db", db, "record", "src", '{"frontier": 4}')
    assert status == 0 and json.loads(out)["watermarks"] == {"src": 2, "sum": 2, "sink": 1}
    status, out, _ = run(capsys, "monitor", "--db", db, "ack-output", "sink", "2")
    assert status == 0 and json.loads(out)["outputs"] == {"sink": 2}
    status, out, _ = run(capsys, "monitor", "--db", db, "status", "--json")
    doc = json.loads(out)
    assert status == 0 and doc["watermarks"] == {"src": 2, "sum": 2, "sink": 2}
    assert doc["checkpoints"] == {"src": 1, "sum": 1, "sink": 2} and doc["logs"] == {"e2": 2}
    status, out, _ = run(capsys, "monitor", "--db", db, "status")
    assert status == 0 and "sink       output    2" in out
    for argv, needle in [
        (("record", "sum", '{"frontier": 1}'), "out of order"),
        (("record", "sum", "{"), "not valid JSON"),
        (("record", "sum", "[1]"), "JSON object"),
        (("record", "sum", '{"frontier": 5, "colour": 1}'), "fields"),
        (("ack-output", "sum", "5"), "not an external output"),
    ]:
        status, _, err = run(capsys, "monitor", "--db", db, *argv)
        assert status == 2 and needle in err, (argv, err)
    status, _, err = run(capsys, "monitor", "--db", str(tmp_path / "none.db"), "status")
    assert status == 2 and "no monitor database" in err
    status, _, err = run(capsys, "monitor", "--db", db, "init", scenario)
    assert status == 2 and "already holds a monitor" in err
