"""Durable monitor metadata: the SQLite store, the JSON codec, reopening."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from falkirk.domains import FunctionProjection
from falkirk.errors import MonitorError
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
from falkirk.solver.monitor import Monitor
from falkirk.solver.monitor.codec import (
    checkpoint_from_json,
    checkpoint_to_json,
    graph_from_json,
    graph_to_json,
)
from falkirk.solver.monitor.store import MemoryStore, SQLiteStore


def mixed() -> Dataflow:
    """Epoch, product(2) and sequence processors with every kind of projection the codec must keep."""
    return Dataflow(
        [
            Processor("src", "epoch", stateless=True, checkpoints=[Checkpoint(1)]),
            Processor(
                "loop",
                "product",
                arity=2,
                logs=["lw"],
                checkpoints=[Checkpoint({"upto": [[1, 3]]}, notifications="empty")],
            ),
            Processor("win", "epoch", checkpoints=[Checkpoint(0, projection={"ws": 2})], notifications=False),
            Processor("seq", "sequence", checkpoints=[Checkpoint({"ws": 2}, state={"blob": [1, 2]})]),
        ],
        [
            Edge("sl", "src", "loop", "epoch_to_loop"),
            Edge("lw", "loop", "win", "recorded"),
            Edge("ws", "win", "seq", "epoch_to_sequence"),
        ],
        notifications=True,
    )


def test_graph_and_checkpoints_survive_the_json_round_trip() -> None:
    """graph_to_json/graph_from_json and the checkpoint codec rebuild an equal dataflow."""
    df = mixed()
    checkpoints = {
        n: [checkpoint_from_json(checkpoint_to_json(df, n, ck)) for ck in p.checkpoints]
        for n, p in df.processors.items()
    }
    again, outputs = graph_from_json(graph_to_json(df, ["seq"]), checkpoints)
    assert outputs == {"seq"}
    assert again.domains == df.domains
    assert solve_frontiers(again, ["loop"]).to_json() == solve_frontiers(df, ["loop"]).to_json()
    assert [c.state for c in again.processors["seq"].checkpoints] == [{"blob": [1, 2]}]


def test_sqlite_monitor_reopens_with_exactly_its_state(tmp_path: Path) -> None:
    """Records survive close/open: same checkpoints, same watermarks, WAL journal."""
    db = tmp_path / "m.db"
    m = Monitor.create(mixed(), db, outputs=["seq"])
    m.record("src", Checkpoint(4))
    m.record("loop", Checkpoint({"upto": [[3, 9]]}, notifications={"upto": [[0, 0]]}))
    m.record("win", Checkpoint(2, projection={"ws": 5}))
    m.acknowledge_output("seq", {"ws": 4})
    snap = m.snapshot()
    m.close()
    with Monitor.open(db) as again:
        assert again.snapshot() == snap
        again._check()
        again.record("win", Checkpoint(3, projection={"ws": 7}))
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_opening_nothing_or_creating_twice_is_refused(tmp_path: Path) -> None:
    """Open needs an existing monitor; create refuses to overwrite one."""
    with pytest.raises(MonitorError, match="no monitor database"):
        Monitor.open(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    sqlite3.connect(tmp_path / "empty.db").close()
    with pytest.raises(MonitorError, match="holds no monitor"):
        Monitor.open(tmp_path / "empty.db")
    Monitor.create(mixed(), tmp_path / "m.db").close()
    with pytest.raises(MonitorError, match="already holds a monitor"):
        Monitor.create(mixed(), tmp_path / "m.db")
    with pytest.raises(MonitorError, match="synchronous"):
        SQLiteStore(tmp_path / "x.db", synchronous="SOMETIMES")


def test_what_has_no_json_form_is_refused_with_its_name(tmp_path: Path) -> None:
    """Function projections and non-JSON state cannot be persisted; a refused record changes nothing."""
    fn = FunctionProjection(lambda f: f, lambda y: y, label="mine")
    df = Dataflow([Processor("a", "epoch"), Processor("b", "epoch")], [Edge("ab", "a", "b", fn)])
    with pytest.raises(MonitorError, match="edge 'ab'.*'mine'"):
        Monitor.create(df, tmp_path / "f.db")
    m = Monitor.create(mixed(), tmp_path / "m.db")
    before = m.snapshot()
    with pytest.raises(MonitorError, match="processor 'seq'.*state"):
        m.record("seq", Checkpoint({"ws": 3}, state=object()))
    assert m.snapshot() == before
    m.close()
    with Monitor.open(tmp_path / "m.db") as again:
        assert again.snapshot() == before


def test_a_store_whose_watermarks_disagree_is_refused(tmp_path: Path) -> None:
    """Tampered watermarks are detected on open."""
    db = tmp_path / "m.db"
    Monitor.create(mixed(), db).close()
    con = sqlite3.connect(db)
    con.execute("UPDATE watermarks SET frontier = '\"top\"' WHERE processor = 'src'")
    con.commit()
    con.close()
    with pytest.raises(MonitorError, match=r"inconsistent.*\['src'\]"):
        Monitor.open(db)


def test_memory_store_reopens_in_process() -> None:
    """A MemoryStore holds the state for Monitor.open within one process."""
    store = MemoryStore()
    m = Monitor(mixed(), store=store)
    m.record("src", Checkpoint(2))
    assert Monitor.open(store).snapshot() == m.snapshot()
    with pytest.raises(MonitorError, match="already holds"):
        Monitor(mixed(), store=store)
    with pytest.raises(MonitorError, match="holds no monitor"):
        Monitor.open(MemoryStore())


FULL_DISK_CHILD = """
import json, os, sys
from falkirk.solver import Checkpoint, Dataflow, Processor
from falkirk.solver.monitor import Monitor
d = sys.argv[1]
df = Dataflow([Processor("a", "epoch", checkpoints=[Checkpoint(1)])], [])
Monitor.create(df, os.path.join(d, "kept.sqlite")).close()
kept = Monitor.open(os.path.join(d, "kept.sqlite"))
with open(os.path.join(d, "ballast"), "wb", buffering=0) as f:  # take every free byte, as a full disk does
    try:
        while True:
            f.write(bytes(65536))
    except OSError:
        pass
out = []
for what, call in (("create", lambda: Monitor.create(df, os.path.join(d, "new.sqlite")).close()),
                   ("record", lambda: [kept.record("a", Checkpoint(e)) for e in range(2, 2000)])):
    try:
        call()
        out.append([what, None, None])
    except Exception as exc:
        out.append([what, type(exc).__name__, str(exc)])
print(json.dumps(out))
"""


def test_a_full_disk_is_named_as_such(tmp_path: Path) -> None:
    """On a real full filesystem (a small tmpfs of a private mount namespace) creating a monitor database and
    recording into an open one fail with a MonitorError that says the disk is full: SQLite alone says
    ``disk I/O error`` or ``database or disk is full`` (regression: the cluster soak's full disk stopped a
    driver with ``disk I/O error`` only, which names neither the disk nor its state)."""
    import json
    import shutil
    import subprocess
    import sys

    if sys.platform != "linux" or shutil.which("unshare") is None:
        pytest.skip("no `unshare` (util-linux): cannot mount a small tmpfs to fill")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mount = f"mount -t tmpfs -o size=256k none {mnt} && exec \"$0\" \"$@\""
    run = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", mount, sys.executable, "-c",
                          FULL_DISK_CHILD, str(mnt)], capture_output=True, text=True, timeout=120, check=False)
    err = run.stderr.lower()  # `unshare` without the privilege: "unshare failed: Operation not permitted"
    if run.returncode != 0 and ("not permitted" in err or ("mount" in err and "permission" in err)):
        pytest.skip(f"cannot mount a tmpfs in a private namespace here ({run.stderr.strip()[:200]})")
    assert run.returncode == 0, run.stderr[-3000:]
    outcomes = json.loads(run.stdout.strip().splitlines()[-1])
    assert [w for w, _, _ in outcomes] == ["create", "record"]
    for what, name, message in outcomes:
        assert name == "MonitorError", (what, name, message)
        assert "no space left on device" in message and "bytes free" in message, (what, message)


def test_discarded_checkpoints_give_their_pages_back(tmp_path: Path) -> None:
    """A peak of records (a step recovering while the others go on) grows the file; discarding them returns
    all but ``KEEP_FREE`` free pages, so a long run's file follows its live records instead of its largest
    peak (the local soak found 73 of 80 pages free after 1,120 epochs). A database made before
    ``auto_vacuum`` is converted once when opened."""
    db = tmp_path / "m.db"
    df = Dataflow([Processor("p", "epoch", stateless=True, checkpoints=[Checkpoint(0)])], [])
    m = Monitor.create(df, db)
    blob = "x" * 900  # most of a 1 kB page per checkpoint
    for e in range(1, 400):
        m.record("p", Checkpoint(e, state={"blob": blob}))
    con = sqlite3.connect(db)
    peak = con.execute("PRAGMA page_count").fetchone()[0]
    assert m.discard("p", list(range(0, 399))) == 399
    free, pages = (con.execute(f"PRAGMA {p}").fetchone()[0] for p in ("freelist_count", "page_count"))
    assert con.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert free <= SQLiteStore.KEEP_FREE and pages < peak / 4, (free, pages, peak)
    con.close()
    snap = m.snapshot()
    m.close()
    old = sqlite3.connect(db)
    old.executescript("PRAGMA auto_vacuum=NONE; VACUUM;")
    assert old.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    old.close()
    with Monitor.open(db) as again:
        assert again.snapshot() == snap
    assert sqlite3.connect(db).execute("PRAGMA auto_vacuum").fetchone()[0] == 2
