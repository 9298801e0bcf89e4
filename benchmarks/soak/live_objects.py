"""Python's live objects in one long-lived soak driver, by type (issue 58).

``python -m benchmarks.soak.live_objects --at 100:500:100 [--history 50] [--out FILE]``

It runs the soak's pipeline (:mod:`benchmarks.soak.workload`) in this process on
``local[2]``, without faults. At each epoch in ``--at`` (FIRST:LAST:STEP) it does a
full collection and records:

* ``sys.getallocatedblocks()``;
* the process's RSS;
* the number of live objects the garbage collector tracks, by type (types with at least 50).

``--history`` lowers ``Journal.HISTORY``, so the journal's window fills early and
the epochs after it show what else grows.

``--jvm`` also counts, in the driver's JVM (``jmap -histo:live``, which collects
first), the live instances of the classes whose count would grow with the epochs
if old states stayed referenced (Spark's cache builders, shuffle dependencies,
checkpointed RDDs' data), and the bytes of shuffle files under the session's
local directories.

This answers whether RSS that still creeps is made of live Python objects (a
leak) or not. It counts every tracked object at each sample (~1 s), so it is a
probe, not a timing.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--at", default="100:500:100", help="FIRST:LAST:STEP epochs to sample")
    ap.add_argument("--history", type=int, default=None, help="Journal.HISTORY for this run (default: unchanged)")
    ap.add_argument("--root", default="/var/tmp/falkirk-live-objects")
    ap.add_argument("--out", default=str(HERE / "results" / "soak_local_live_objects.json"))
    ap.add_argument("--jvm", action="store_true", help="also the JVM's live cache builders, shuffles, shuffle bytes")
    args = ap.parse_args(argv)
    jmap = shutil.which("jmap") if args.jvm else None
    if args.jvm and jmap is None:
        ap.error("--jvm needs jmap (the JDK's) on PATH")
    first, last, step = (int(x) for x in args.at.split(":"))
    at = set(range(first, last + 1, step))

    from benchmarks.soak import workload
    from falkirk.spark.pipeline.run import executor as executor_module
    from falkirk.spark.pipeline.run.journal import Journal
    from falkirk.spark.pipeline.run.session import SMALL_DATA, local_session

    if args.history is not None:
        Journal.HISTORY = args.history
    shutil.rmtree(args.root, ignore_errors=True)
    spark = local_session(
        "local[2]",
        "live-objects",
        {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2"},
    )
    spark.sparkContext.setLogLevel("OFF")
    samples: dict[int, dict[str, Any]] = {}
    end = executor_module.Executor.end_of_epoch

    def sampled(self: Any, epoch: int, **kw: Any) -> None:
        end(self, epoch, **kw)
        if epoch not in at:
            return
        gc.collect()
        types = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects())
        rss = int(Path("/proc/self/statm").read_text().split()[1]) * 4096
        samples[epoch] = {"blocks": sys.getallocatedblocks(), "rss": rss, "objects": sum(types.values()),
                          "types": {t: c for t, c in types.most_common() if c >= 50}}  # the numerous ones
        if jmap is not None:
            samples[epoch]["jvm"] = jvm_counts(jmap, spark)
        print(f"epoch {epoch}: blocks {samples[epoch]['blocks']} objects {samples[epoch]['objects']} rss {rss}"
              + (f" jvm {samples[epoch]['jvm']}" if jmap is not None else ""), flush=True)

    executor_module.Executor.end_of_epoch = sampled  # type: ignore[method-assign]
    pipe = workload.build(args.root, spark, fsync=False, code_changes={"hourly": "keep"}, spark_conf=SMALL_DATA)
    pipe.run(last + 1)
    spark.stop()
    keys = sorted(samples)
    growing = {}
    if len(keys) >= 2:
        a, b = samples[keys[0]]["types"], samples[keys[-1]]["types"]
        growing = dict(sorted(((k, b.get(k, 0) - a.get(k, 0)) for k in set(a) | set(b)), key=lambda kv: -kv[1])[:15])
    result = {"command": "python -m benchmarks.soak.live_objects " + " ".join(sys.argv[1:] if argv is None else argv),
              "history": Journal.HISTORY, "samples": samples, "most_grown_first_to_last": growing}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


#: JVM classes whose live count grows with the epochs if old states stay referenced
JVM_CLASSES = ("CachedRDDBuilder", "InMemoryRelation", "ShuffleDependency", "ReliableCheckpointRDD", "LocalRDDCheckpointData")


def jvm_counts(jmap: str, spark: Any) -> dict[str, int]:
    """Live instances of :data:`JVM_CLASSES` in the driver's JVM, and the bytes of shuffle files under its local
    local directories (``blockmgr-*/*/shuffle_*``: no other Spark process may run meanwhile)."""
    import subprocess

    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    out = subprocess.run([jmap, "-histo:live", str(pid)], capture_output=True, text=True, check=True).stdout
    got = dict.fromkeys(JVM_CLASSES, 0)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            name = parts[3].rsplit(".", 1)[-1]
            if name in got:
                got[name] += int(parts[1])
    local = spark.sparkContext.getConf().get("spark.local.dir", "/tmp")  # no other Spark process may run meanwhile
    got["shuffle_bytes"] = sum(
        f.stat().st_size for d in local.split(",") for f in Path(d).glob("blockmgr-*/*/shuffle_*") if f.is_file()
    )
    return got


if __name__ == "__main__":
    raise SystemExit(main())
