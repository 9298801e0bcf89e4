"""What a restart's check of the committed outputs costs on S3 as the history grows (issue 58).

``python -m benchmarks.restart_check_s3 [--sizes 100,500,2000] [--repeats 3]``

A restarting driver checks an output's committed epochs against their manifests
(:meth:`Storage.verify_all <falkirk.spark.pipeline.store.storage.Storage.verify_all>`).
On the S3 soak this phase grew by ~13 s per 1,000 epochs of two outputs: reading
each manifest costs the client ~4 ms of CPU. A driver now keeps the manifests it
read by their content's MD5 (:mod:`falkirk.spark.pipeline.store.manifestcache`), so
the next one reads only new or changed ones.

For each history size N this puts one output with N committed epochs under a fresh
prefix of the suite's SeaweedFS server (``tests/spark/objectstore.py``, started and
stopped here): a 2.6 kB data file per epoch (about the soak's) and its manifest with
the file's size and ETag. The build is not timed. Then, alternately in one process,
each a new :class:`Storage` (a new driver: nothing in memory), it times
``verify_all`` of every epoch:

* ``cold``: with no cache file (the first restart after the cache is deleted; it
  also lists with detail, hashes and stores every manifest, so it costs a little
  more than the code before the cache, which read every manifest at every restart);
* ``warm``: with the cache the runs before left (every later restart).

Both must find every epoch intact. It writes ``results/restart_check_s3.json``
with the load average and the commit.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.restart_sweep import s3_benchmark, write_result


def main(argv: list[str] | None = None) -> int:
    args, objectstore = s3_benchmark(__doc__ or "", "restart_check_s3", argv)

    from falkirk.spark.pipeline.store.manifest import Manifest, manifest_path
    from falkirk.spark.pipeline.store.storage import Storage

    cache = Path(tempfile.mkdtemp(prefix="falkirk-check-cache-"))
    os.environ["FALKIRK_CACHE"] = str(cache)
    load_before = os.getloadavg()
    server = objectstore.SeaweedS3().start()
    rows = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            uri = f"s3a://{objectstore.BUCKET}/check-{n}-{uuid.uuid4().hex[:8]}"

            def driver(uri: str = uri) -> Storage:
                return Storage(uri, fsync=False, storage_options=server.options())

            s = driver()
            for e in range(n):  # the build: not timed
                loc = f"output/report/epoch={e}"
                s.fs.replace(f"{loc}/part-00000.parquet", os.urandom(2600))
                m = Manifest("report", "output", e, 10, loc, s.describe_files(loc), "{}")
                s.fs.publish(manifest_path("report", "output", e), json.dumps(m.to_json(), sort_keys=True).encode())
            times: dict[str, list[float]] = {"cold": [], "warm": []}
            for _ in range(args.repeats):
                for name in ("cold", "warm"):
                    if name == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
                        cache.mkdir()
                    d = driver()
                    t0 = time.perf_counter()
                    checked, problems = d.verify_all("report", "output")
                    times[name].append(time.perf_counter() - t0)
                    assert (checked, problems) == (n, []), (name, checked, problems[:3])
            row = {"epochs": n, **{k: round(statistics.median(v), 4) for k, v in times.items()},
                   "all": {k: [round(x, 4) for x in v] for k, v in times.items()}}
            row["ratio"] = round(row["cold"] / row["warm"], 2)
            rows.append(row)
            print(f"{n:>6} output epochs: cold {row['cold']:.3f} s, warm {row['warm']:.3f} s ({row['ratio']}x)",
                  flush=True)
    finally:
        server.stop()
        shutil.rmtree(cache, ignore_errors=True)
    write_result(args, "restart_check_s3", argv, load_before, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
