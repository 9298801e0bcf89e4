"""Crash safety: a monitor process killed with SIGKILL at random points loses nothing it acknowledged.

The child (``_monitor_child.py``) records checkpoints into an SQLite monitor
and prints ``rec`` before and ``ack`` after each one. The parent kills it at
random moments (during start-up, between records, inside a commit), reopens
the database and checks that the state read back is exactly the state after
the acknowledged reports — or after one more, the report in flight, whose
commit may have completed before the kill. A replica monitor in memory
follows the same reports and gives the expected state.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from falkirk.solver import solve_frontiers
from falkirk.solver.monitor import Monitor
from falkirk.solver.plan import encode_frontier

CHILD = Path(__file__).with_name("_monitor_child.py")
KILLS = 55


def _child_module() -> Any:
    spec = importlib.util.spec_from_file_location("_monitor_child", CHILD)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_and_kill(db: Path, seed: int, rng: random.Random) -> list[str]:
    """Start a child, kill it at a random point, return every line it printed."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    if rng.random() < 0.15:
        time.sleep(rng.uniform(0.0, 0.3))  # somewhere in start-up (imports, open/create)
    else:
        target = rng.randint(0, 15)
        acks = -1  # "ready" counts as the zeroth
        while acks < target:
            line = proc.stdout.readline()
            if not line:
                pytest.fail(f"child exited early: {proc.stderr.read()}")
            lines.append(line.rstrip("\n"))
            acks += line.startswith(("ack", "ready"))
        time.sleep(rng.choice([0.0, rng.uniform(0.0, 0.004)]))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    lines.extend(proc.stdout.read().splitlines())
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return lines


@pytest.mark.slow
def test_sigkill_at_random_points_keeps_exactly_the_acknowledged_state(tmp_path: Path) -> None:
    """After each of 55 SIGKILLs the reopened state is the acknowledged one (or one in-flight report more)."""
    child = _child_module()
    db = tmp_path / "monitor.db"
    rng = random.Random(20240611)
    replica: Monitor | None = None
    kills = in_flight_committed = 0
    for run in range(KILLS):
        lines = _run_and_kill(db, run, rng)
        kills += 1
        acked: list[tuple[str, dict[str, Any]]] = []
        pending = None
        for i, line in enumerate(lines):
            if line.startswith("rec "):
                try:
                    rec = json.loads(line[4:])
                except json.JSONDecodeError:  # cut by the kill: the report was not started
                    assert i == len(lines) - 1, lines
                    break
                pending = (rec["p"], rec["ck"])
            elif line == "ack":
                assert pending is not None
                acked.append(pending)
                pending = None
        if any(line.startswith("ready") for line in lines) and replica is None:
            replica = Monitor(child.graph(), outputs=child.OUTPUTS)
        if replica is None:  # killed before the database was ever created
            assert not acked
            continue
        for p, doc in acked:
            child.apply(replica, p, doc)
        with Monitor.open(db) as reopened:
            state = reopened.snapshot()
            plan = solve_frontiers(reopened.dataflow(), "all")
        assert state["watermarks"] == {p: encode_frontier(f) for p, f in plan.frontiers.items()}
        if state != replica.snapshot():
            assert pending is not None, f"run {run}: state differs from the acknowledged one"
            child.apply(replica, *pending)
            assert state == replica.snapshot(), (
                f"run {run}: state is neither the acknowledged one nor one more"
            )
            in_flight_committed += 1
    print(f"kills={kills} in-flight commits={in_flight_committed}")
    assert kills >= 50
    assert replica is not None and sum(len(replica.checkpoints(p)) for p in child.NAMES) > 50
