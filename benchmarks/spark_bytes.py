"""What falkirk writes per epoch under the flagship's root, file kind by file kind (issue 28).

Runs the flagship (:mod:`falkirk.spark.pipeline.tools.flagship`, 4,000
events and 60 queries per epoch, ``cc`` checkpointed every 3 epochs,
durable defaults) for ``--epochs`` epochs on a fresh root and, after every
epoch, lists the root: a new file counts in full, a file that grew by its
growth (by category: ``data/<step>/<kind>``, ``manifests/<step>/<kind>``,
``journal``, ``meta.sqlite`` and its ``-wal``/``-shm``, ``input/<name>``,
``output``, ``stats.sqlite``). Two runs in one SparkSession:

* ``shipped`` — as falkirk runs. The monitor's write-ahead log is
  checkpointed every 64 pages and then rewritten from its start, so its
  growth undercounts what was written; the WAL's frames of the current
  generation are counted from its header as well.
* ``wal-exact`` — the same with the monitor's WAL never checkpointed
  (``wal_autocheckpoint=0``, ``Planner.WAL_BYTES`` huge): its growth is
  then exactly the frames written. The monitor store's calls
  (``append``, ``discard``) and its committed transactions (``commit``;
  one per epoch since the executor batches an epoch's monitor writes) are
  counted per epoch in both (the store's methods are wrapped).

Writes ``benchmarks/results/spark_bytes.json`` (per epoch, per category;
the load average before and after) and prints a line per epoch.

Usage: ``.venv/bin/python benchmarks/spark_bytes.py [--epochs 8] [--mode shipped,wal-exact] [--page-size 4096 --out …]``
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shutil
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

from falkirk.solver.monitor import store as mstore
from falkirk.spark.pipeline.plan import planner as pplanner
from falkirk.spark.pipeline.run.session import local_session
from falkirk.spark.pipeline.tools.flagship import build

RESULTS = Path(__file__).resolve().parent / "results" / "spark_bytes.json"
CALLS: collections.Counter[str] = collections.Counter()
WAL_EXACT = [False]


def _wrap_store() -> None:
    """Count the monitor store's calls and commits; in ``wal-exact`` mode, never checkpoint its WAL."""
    append, discard, init = mstore.SQLiteStore.append, mstore.SQLiteStore.discard, mstore.SQLiteStore.__init__
    commit = getattr(mstore.SQLiteStore, "_commit", None)  # absent before batches: then append/discard commit each

    def counted_append(self: Any, *a: Any, **k: Any) -> None:
        CALLS["append"] += 1
        append(self, *a, **k)

    def counted_discard(self: Any, *a: Any, **k: Any) -> None:
        CALLS["discard"] += 1
        discard(self, *a, **k)

    def opened(self: Any, *a: Any, **k: Any) -> None:
        CALLS["open"] += 1
        init(self, *a, **k)
        if WAL_EXACT[0]:
            self._db.execute("PRAGMA wal_autocheckpoint=0")

    def counted_commit(self: Any) -> None:
        assert commit is not None
        commit(self)
        CALLS["commit"] += 1

    mstore.SQLiteStore.append = counted_append  # type: ignore[method-assign]
    if commit is not None:
        mstore.SQLiteStore._commit = counted_commit  # type: ignore[method-assign]
    mstore.SQLiteStore.discard = counted_discard  # type: ignore[method-assign]
    mstore.SQLiteStore.__init__ = opened  # type: ignore[method-assign]


def category(rel: str) -> str:
    parts = rel.split(os.sep)
    if parts[0] in ("data", "manifests"):
        return "/".join(parts[:3])
    if parts[0] == "input":
        return "input/" + (parts[1] if len(parts) > 1 else "")
    return parts[0]


def scan(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under ``root``: (size, mtime_ns, inode)."""
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def wal_frames(path: Path) -> dict[str, Any] | None:
    """The WAL's header and its frames of the current generation (salts equal to the header's)."""
    try:
        b = path.read_bytes()
    except OSError:
        return None
    if len(b) < 32:
        return {"size": len(b), "ckseq": None, "frames": 0, "commits": 0}
    _, _, psz, ckseq, s1, s2 = struct.unpack(">IIIIII", b[:24])
    n = commits = 0
    off = 32
    while off + 24 + psz <= len(b):
        _, dbsz, f1, f2 = struct.unpack(">IIII", b[off:off + 16])
        if (f1, f2) != (s1, s2):
            break
        n += 1
        commits += dbsz != 0
        off += 24 + psz
    return {"size": len(b), "ckseq": ckseq, "frames": n, "commits": commits, "page": psz}


def diff(prev: dict[str, tuple[int, int, int]], now: dict[str, tuple[int, int, int]]) -> dict[str, Any]:
    """Bytes of new files and growth of changed ones, by category; files changed; bytes deleted."""
    new: collections.Counter[str] = collections.Counter()
    grown: collections.Counter[str] = collections.Counter()
    changed: collections.Counter[str] = collections.Counter()
    deleted: collections.Counter[str] = collections.Counter()
    files: collections.Counter[str] = collections.Counter()
    for rel, (size, mt, ino) in now.items():
        c = category(rel)
        old = prev.get(rel)
        if old is None or old[2] != ino:
            new[c] += size
            files[c] += 1
        elif old[1] != mt or old[0] != size:
            grown[c] += max(size - old[0], 0)
            changed[c] += 1
    for rel, (size, _, _) in prev.items():
        if rel not in now:
            deleted[category(rel)] += size
    return {"new_bytes": dict(new), "new_files": dict(files), "grown_bytes": dict(grown),
            "changed_files": dict(changed), "deleted_bytes": dict(deleted)}


def one(spark: Any, mode: str, epochs: int) -> dict[str, Any]:
    """One run of the flagship in ``mode``; per epoch what was written."""
    WAL_EXACT[0] = mode == "wal-exact"
    old_wal = pplanner.Planner.WAL_BYTES
    if WAL_EXACT[0]:
        pplanner.Planner.WAL_BYTES = 1 << 40
    scratch = Path(tempfile.mkdtemp(prefix=f"falkirk-bytes-{mode}-"))
    root = scratch / "root"
    out: list[dict[str, Any]] = []
    state: dict[str, Any] = {"prev": {}, "calls": collections.Counter(CALLS), "t": time.perf_counter()}

    def progress(line: str) -> None:
        if not line.startswith("epoch"):
            return
        now = scan(root)
        d = diff(state["prev"], now)
        d.update(epoch=int(line.split()[1]), wal=wal_frames(root / "meta.sqlite-wal"),
                 sqlite_calls=dict(CALLS - state["calls"]), wall=time.perf_counter() - state["t"],
                 files_under_root=len(now), root_bytes=sum(v[0] for v in now.values()))
        out.append(d)
        state.update(prev=now, calls=collections.Counter(CALLS), t=time.perf_counter())
        print(mode, "epoch", d["epoch"], json.dumps({k: d[k] for k in ("new_bytes", "grown_bytes", "wal", "sqlite_calls")}),
              flush=True)

    try:
        pipe = build(root, spark, events_per_epoch=4000, queries_per_epoch=60, users=300, nodes=1500, cc_every=3)
        pipe.run(epochs, progress=progress)
        listing = sorted((rel, v[0]) for rel, v in scan(root).items())
    finally:
        pplanner.Planner.WAL_BYTES = old_wal
        WAL_EXACT[0] = False
        shutil.rmtree(scratch, ignore_errors=True)
    return {"epochs": out, "final_listing": listing}


def main() -> None:
    """Run and write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--mode", default="shipped,wal-exact")
    ap.add_argument("--page-size", type=int, default=None,
                    help="the monitor database's page size (default: SQLiteStore.PAGE_SIZE; 4096 is SQLite's default)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.page_size:
        mstore.SQLiteStore.PAGE_SIZE = args.page_size
    _wrap_store()
    spark = local_session()
    doc: dict[str, Any] = {"benchmark": "spark_bytes", "epochs": args.epochs, "page_size": mstore.SQLiteStore.PAGE_SIZE,
                           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                       "spark": spark.version, "load_average_before": os.getloadavg()},
                           "runs": {}}
    for mode in args.mode.split(","):
        doc["runs"][mode] = one(spark, mode, args.epochs)
    doc["machine"]["load_average"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
