"""What a restart's check of the committed output epochs costs as the history grows (issue 58).

``python -m benchmarks.restart_check [--sizes 1000,10000,50000] [--repeats 3]``

A restarting driver checks an output's committed epochs against their manifests
(:meth:`Rollback._damaged_outputs <falkirk.spark.pipeline.run.recovery.Rollback._damaged_outputs>`).
It used to check every one. Now it checks those from the output's oldest restore
point on, plus at most ``Rollback.SCRUB`` older ones drawn at random.

For each history size N, this builds a local root (no Spark) holding one output
with N committed epochs. Each epoch has a data file of ~2.6 kB, about what the
soak's outputs write, and its manifest with size and SHA-256. The build is not
timed. Then, alternately in one process, it times:

* ``all``: :meth:`Storage.verify_all` of every epoch (the old restart check, and
  ``falkirk pipeline verify``);
* ``restart``: the epochs a restart checks now, the newest ``--recent`` (the
  soak's restore points keep ~10) and ``SCRUB`` of the older ones.

It writes ``results/restart_check.json`` with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def build(root: Path, n: int) -> None:
    """One output ``report`` with ``n`` committed epochs (a data file and a manifest each)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from falkirk.spark.pipeline.store.manifest import Manifest
    from falkirk.spark.pipeline.store.storage import Storage

    storage = Storage(root, fsync=False)
    payload = os.urandom(1300).hex()
    for e in range(n):
        where = f"output/report/epoch={e}"
        (root / where).mkdir(parents=True)
        # 10 rows in ~2.6 kB of Parquet (a manifest's rows must be its files' rows: Storage.put reads footers)
        rows = [payload[i * 200 : i * 200 + 180 + e % 20] for i in range(10)]
        pq.write_table(pa.table({"v": rows}), root / where / "part-00000.parquet", compression="none")
        storage.put(Manifest("report", "output", e, 10, where, storage.describe_files(where), "{}"))


def measure(sizes: list[int], repeats: int, recent: int, work: Path) -> dict[str, Any]:
    from falkirk.spark.pipeline.run.recovery import Rollback
    from falkirk.spark.pipeline.store.storage import Storage

    draw = random.Random(58)
    rows = []
    for n in sizes:
        root = work / f"root-{n}"
        shutil.rmtree(root, ignore_errors=True)
        t = time.perf_counter()
        build(root, n)
        built = time.perf_counter() - t
        storage = Storage(root, fsync=False)
        times: dict[str, list[float]] = {"all": [], "restart": []}
        checked: dict[str, int] = {}
        for _ in range(repeats):
            for how in ("all", "restart"):  # alternately, in one process
                epochs = list(range(n))
                lo = max(0, n - recent)
                older = epochs[:lo]
                if len(older) > Rollback.SCRUB:
                    older = draw.sample(older, Rollback.SCRUB)
                t = time.perf_counter()
                if how == "all":
                    count, problems = storage.verify_all("report", "output")
                else:
                    chosen = [*older, *epochs[lo:]]
                    count, problems = storage.verify_all("report", "output", select=lambda _, c=chosen: c)
                times[how].append(time.perf_counter() - t)
                assert not problems, problems[:3]
                checked[how] = count
        row = {
            "epochs": n,
            "build_seconds": round(built, 1),
            **{f"{how}_checked": checked[how] for how in times},
            **{f"{how}_seconds_median": round(statistics.median(v), 4) for how, v in times.items()},
            **{f"{how}_seconds": [round(x, 4) for x in v] for how, v in times.items()},
        }
        row["ratio_all_over_restart"] = round(row["all_seconds_median"] / row["restart_seconds_median"], 2)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not isinstance(v, list)}), flush=True)
        shutil.rmtree(root, ignore_errors=True)
    return {"rows": rows, "scrub": Rollback.SCRUB, "recent": recent, "repeats": repeats}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--recent", type=int, default=10, help="epochs at or after the output's oldest restore point")
    ap.add_argument("--work", default=None, help="where the roots are built (default: a temporary directory)")
    ap.add_argument("--out", default=str(HERE / "results" / "restart_check.json"))
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        result = measure([int(s) for s in args.sizes.split(",")], args.repeats, args.recent, Path(tmp))
    result["load_average"] = {"before": [round(x, 2) for x in load_before],
                              "after": [round(x, 2) for x in os.getloadavg()]}
    result["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result["command"] = "python -m benchmarks.restart_check " + " ".join(
        f"--{k} {v}" for k, v in (("sizes", args.sizes), ("repeats", args.repeats), ("recent", args.recent))
    )
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
