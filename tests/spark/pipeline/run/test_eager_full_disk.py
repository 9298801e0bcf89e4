"""An Eager step's SQLite database on a full disk: the error names the step, the file and the full disk, and
the epochs committed before are kept (regression: the local soak at seed 58, fault #348 ``disk-full@1991``,
stopped driver 271 during a recovery with a bare ``sqlite3.OperationalError: database or disk is full``,
which named neither the database nor falkirk's part in it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Runs in a private mount namespace, with a 256 kB tmpfs at argv[1] holding the step's database. The runner
# is driven directly (no Spark): what is tested is how it treats SQLite's answers on a full filesystem.
CHILD = """
import json, os, sys, types
from falkirk.spark import Eager
from falkirk.spark.pipeline.declare.definition import Step
from falkirk.spark.pipeline.run.runners import DatabaseRunner

d = sys.argv[1]
db_path = os.path.join(d, "sink.sqlite")
rows = {"n": 20}

def sink(src, *, db, epoch):
    db.execute("CREATE TABLE IF NOT EXISTS sums (epoch INTEGER, k INTEGER, v TEXT)")
    db.executemany("INSERT INTO sums VALUES (?, ?, ?)", [(epoch, k, "x" * 200) for k in range(rows["n"])])

def syntax(src, *, db, epoch):
    db.execute("SELEC 1 FROM sums")  # the step's own bug: stays its own error

ctx = types.SimpleNamespace(
    storage=types.SimpleNamespace(fs=None, remove_where=lambda *a, **k: None), spark=None, fsync=True,
    durable=False, injector=types.SimpleNamespace(at=lambda *a: None), record=lambda *a: None)
step = Step("sink", sink, ("src",), Eager(database=db_path, tables={"sums": "epoch"}), frozenset({"db", "epoch"}))
runner = DatabaseRunner(ctx, step)
for e in range(3):
    runner.execute(e, {"src": None})
runner.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # an empty write-ahead log: the next write needs space
with open(os.path.join(d, "ballast"), "wb", buffering=0) as f:  # take every free byte, as a full disk does
    try:
        while True:
            f.write(bytes(65536))
    except OSError:
        pass
out = []

def attempt(what, call):
    try:
        call()
        out.append([what, None, None, []])
    except Exception as exc:
        out.append([what, type(exc).__name__, str(exc), [c.__name__ for c in type(exc).__mro__]])

rows["n"] = 1000  # ~200 kB: held in SQLite's page cache until falkirk's COMMIT writes it
attempt("commit", lambda: runner.execute(3, {"src": None}))
rows["n"] = 30000  # ~6 MB: more than the page cache, so the step's own INSERT spills to the full disk
attempt("own-statement", lambda: runner.execute(3, {"src": None}))
attempt("reset", lambda: runner.reset(0))
os.remove(os.path.join(d, "ballast"))  # the operator frees the disk
runner.step = Step("sink", syntax, ("src",), step.regime, step.wants)
attempt("own-bug", lambda: runner.execute(3, {"src": None}))
import sqlite3
with sqlite3.connect(db_path) as con:
    kept = sorted(r[0] for r in con.execute("SELECT DISTINCT epoch FROM sums"))
    commits = sorted(r[0] for r in con.execute("SELECT epoch FROM falkirk_epochs"))
attempt("reset-after", lambda: runner.reset(0))
with sqlite3.connect(db_path) as con:
    after = sorted(r[0] for r in con.execute("SELECT DISTINCT epoch FROM sums"))
print(json.dumps({"out": out, "kept": kept, "commits": commits, "after": after, "path": db_path}))
"""


def test_a_full_disk_under_an_eager_database_is_named(tmp_path: Path) -> None:
    """On a real full filesystem (a small tmpfs of a private mount namespace): falkirk's commit of an epoch, a
    statement of the step's own that spills to the disk, and a reset fail with a StorageError naming the step,
    the database file and the full disk; the step's own SQL bug stays its own error; the epochs committed
    before are kept, and the reset works once space is freed.
    The soak's harness takes the new error as explaining a disk-full fault, and the old one as not."""
    from benchmarks.soak.faults import explains
    from benchmarks.soak.schedule import Fault

    if sys.platform != "linux" or shutil.which("unshare") is None:
        pytest.skip("no `unshare` (util-linux): cannot mount a small tmpfs to fill")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mount = f'mount -t tmpfs -o size=256k none {mnt} && exec "$0" "$@"'
    run = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            mount,
            sys.executable,
            "-c",
            CHILD,
            str(mnt),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    err = run.stderr.lower()
    if run.returncode != 0 and ("not permitted" in err or ("mount" in err and "permission" in err)):
        pytest.skip(f"cannot mount a tmpfs in a private namespace here ({run.stderr.strip()[:200]})")
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    outcomes = {what: (name, message, classes) for what, name, message, classes in got["out"]}
    for what in ("commit", "own-statement", "reset"):
        name, message, classes = outcomes[what]
        assert name == "StorageError", (what, name, message)
        assert "step 'sink'" in message and got["path"] in message, (what, message)
        assert "no space left on device" in message, (what, message)
        fault = Fault(348, "disk-full", 1991, {"seconds": 9})
        assert explains(fault, {"type": name, "classes": classes, "message": message}, None), message
    assert "committing epoch 3" in outcomes["commit"][1]
    assert "a statement of the step's own at epoch 3" in outcomes["own-statement"][1]
    assert "resetting it to epoch 0" in outcomes["reset"][1]
    assert outcomes["own-bug"][0] == "OperationalError" and "syntax error" in outcomes["own-bug"][1]
    assert got["kept"] == [0, 1, 2] and got["commits"] == [0, 1, 2]  # nothing of epoch 3, nothing lost
    assert outcomes["reset-after"][0] is None and got["after"] == [0]
    raw = {
        "type": "OperationalError",
        "classes": ["OperationalError", "DatabaseError", "Error", "Exception"],
        "message": "database or disk is full",
    }  # what driver 271 printed
    assert not explains(Fault(348, "disk-full", 1991, {"seconds": 9}), raw, None)
