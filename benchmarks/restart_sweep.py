"""What a restart's sweep of orphaned data costs on S3 as an output's history grows (issue 58).

``python -m benchmarks.restart_sweep [--sizes 100,500,2000] [--repeats 3]``

At every start a driver deletes data directories no manifest names
(:func:`falkirk.spark.pipeline.store.sweep.sweep_orphans`), and to know which are
named it read, until 55ae327, every manifest under the root. An output's manifests
are never collected, so that is two more per epoch for a pipeline with two outputs.
The S3 soak (seed 58) saw its restarts grow by ~0.07 s per epoch of history outside
the redone steps; a read of the restart path pointed at the sweep reading the
manifests one GET after another. Now it reads only the manifests of kinds that
have data (an output's name ``output/...``).

For each history size N this puts N output manifests, a few checkpoint
items with data and N/2 garbage-collected ones (the names SeaweedFS keeps) under a fresh prefix of the suite's SeaweedFS server
(``tests/spark/objectstore.py``, started and stopped here; the build is not timed),
then times, alternately in one process:

* ``serial``: the manifests read one after another (the sweep before 01de336);
* ``together``: every manifest read together, concurrently (01de336 to 55ae327);
* ``sweep``: the whole of :meth:`Storage.sweep_orphans` as it is now (listing ``data/``,
  reading the manifests of kinds that have a ``data/<step>/<kind>`` directory, together,
  and deleting the orphan in its first repeat): more work than the two columns before,
  which only read.

It writes ``results/restart_sweep.json`` with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from . import source_commit

HERE = Path(__file__).resolve().parent


def serial_referenced(storage: Any) -> set[str]:
    """The sweep's reading before 01de336: each manifest read on its own."""
    refs = set()
    for step in storage.fs.listdir("manifests"):
        for kind in storage.fs.listdir(f"manifests/{step}"):
            for name in storage.fs.listdir(f"manifests/{step}/{kind}"):
                loc = json.loads(storage.fs.read_bytes(f"manifests/{step}/{kind}/{name}")).get("location")
                if loc:
                    refs.add(loc)
    return refs


def together_referenced(storage: Any) -> set[str]:
    """The sweep's reading from 01de336 to 55ae327: every manifest, read together (``Root.read_many``)."""
    names = [f"manifests/{step}/{kind}/{name}"
             for step in storage.fs.listdir("manifests")
             for kind in storage.fs.listdir(f"manifests/{step}")
             for name in storage.fs.listdir(f"manifests/{step}/{kind}")]
    return {loc for raw in storage.fs.read_many(names).values() if (loc := json.loads(raw).get("location"))}


def build(storage: Any, n: int) -> None:
    """``n`` epochs of an output's manifests, three checkpoint items with data (one of them orphaned), and
    ``n // 2`` checkpoint items garbage-collected (their data deleted: SeaweedFS keeps each one's directory
    name for ever, as the soak's root kept them)."""
    for e in range(n // 2):
        loc = f"data/totals/checkpoint/{10**6 + e:08d}-{uuid.uuid4().hex[:12]}"
        storage.fs.replace(f"{loc}/part-0.parquet", b"x" * 100)
        storage.fs.delete(loc, recursive=True)
    for e in range(n):
        doc = {"step": "report", "kind": "output", "epoch": e, "location": f"output/report/epoch={e}"}
        storage.fs.publish(f"manifests/report/output/{e:08d}.json", json.dumps(doc).encode())
    for e in range(3):
        loc = f"data/totals/checkpoint/{e:08d}-{uuid.uuid4().hex[:12]}"
        storage.fs.replace(f"{loc}/part-0.parquet", b"x" * 100)
        if e < 2:
            doc = {"step": "totals", "kind": "checkpoint", "epoch": e, "location": loc}
            storage.fs.publish(f"manifests/totals/checkpoint/{e:08d}.json", json.dumps(doc).encode())


def s3_benchmark(doc: str, name: str, argv: list[str] | None) -> tuple[argparse.Namespace, Any]:
    """The arguments of an S3 restart benchmark (``--sizes``, ``--repeats``, ``--out``) and the suite's
    ``objectstore`` module (exits when no S3 server can run here)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,500,2000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / f"{name}.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE.parent / "tests" / "spark"))
    import objectstore

    reason = objectstore.why_unavailable()
    if reason:
        raise SystemExit(f"no S3 server: {reason}")
    return args, objectstore


def write_result(args: argparse.Namespace, name: str, argv: list[str] | None, load_before: Any, rows: list) -> None:
    """``args.out``: the rows with the command, the load average before and after, the time and the commit."""
    result = {"command": f"python -m benchmarks.{name} " + " ".join(sys.argv[1:] if argv is None else argv),
              "load_before": load_before, "load_after": os.getloadavg(), "rows": rows,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "commit": source_commit()}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


def main(argv: list[str] | None = None) -> int:
    args, objectstore = s3_benchmark(__doc__, "restart_sweep", argv)

    from falkirk.spark.pipeline.store.storage import Storage
    from falkirk.spark.pipeline.store.sweep import referenced

    load_before = os.getloadavg()
    server = objectstore.SeaweedS3().start()
    rows = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            storage = Storage(f"s3a://{objectstore.BUCKET}/sweep-{n}-{uuid.uuid4().hex[:8]}", fsync=False,
                              storage_options=server.options())
            build(storage, n)
            # the same data directories named, read differently
            assert serial_referenced(storage) == together_referenced(storage)
            assert {r for r in serial_referenced(storage) if r.startswith("data/")} == referenced(storage)
            times: dict[str, list[float]] = {"serial": [], "together": [], "sweep": []}
            for _ in range(args.repeats):
                for name, call in (("serial", lambda s=storage: serial_referenced(s)),
                                   ("together", lambda s=storage: together_referenced(s)),
                                   ("sweep", lambda s=storage: s.sweep_orphans())):
                    t0 = time.perf_counter()
                    call()
                    times[name].append(time.perf_counter() - t0)
            row = {"epochs": n, **{k: round(statistics.median(v), 4) for k, v in times.items()},
                   "all": {k: [round(x, 4) for x in v] for k, v in times.items()}}
            row["ratio"] = round(row["serial"] / row["sweep"], 2)
            rows.append(row)
            print(f"{n:>6} output epochs: serial {row['serial']:.3f} s, together {row['together']:.3f} s, "
                  f"sweep now {row['sweep']:.3f} s "
                  f"({row['ratio']}x)", flush=True)
    finally:
        server.stop()
    write_result(args, "restart_sweep", argv, load_before, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
