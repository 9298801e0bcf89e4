"""A driver that starts from the root alone: ``python fresh_driver.py URI OPTIONS_JSON``.

It declares the pipeline of :func:`build` on the root, makes the
:class:`~falkirk.spark.pipeline.run.executor.Executor` (which reads the
manifests and rebuilds the monitor's SQLite database, the metadata cache),
and prints one JSON line: the frontiers it found, where the cache is, and the
checkpoints the rebuilt database holds. All of that happens before the first
Spark job, so the executor is given :class:`LocalStandIn`, a session that
answers "local master" and runs nothing (starting a JVM costs 5-30 s here).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def cc(events: Any, *, state: Any, epoch: int) -> Any:
    new = events if state is None else state.unionByName(events)
    return new, new


def build(uri: str, options: dict[str, Any] | None) -> Any:
    """An input, a Lazy step and an Output on ``uri``."""
    from falkirk.spark import Lazy, Pipeline

    pipe = Pipeline(uri, None, storage_options=options, fsync=False)
    pipe.input("events", "user BIGINT, v BIGINT")
    pipe.step(cc, regime=Lazy(every=2))
    pipe.output("sink", inputs=["cc"])
    return pipe


class LocalStandIn:
    """What the executor asks a session before the first job: its master (``local[1]``), nothing else."""

    class conf:  # noqa: N801
        @staticmethod
        def get(key: str, default: str = "") -> str:
            return "local[1]" if key == "spark.master" else default

    class sparkContext:  # noqa: N801
        master = "local[1]"


def main() -> None:
    from falkirk.solver.monitor import Monitor
    from falkirk.spark.pipeline.run.executor import Executor
    from falkirk.spark.pipeline.store.rootfs import metadata_cache

    pipe = build(sys.argv[1], json.loads(sys.argv[2]) or None)
    pipe.spark = LocalStandIn()
    ex = Executor(pipe)
    ex.state.planner.watermarks()  # uses, and so rebuilds, the monitor's database
    ex.state.planner.close()
    path = metadata_cache(pipe.location)
    monitor = Monitor.open(path)
    held = {n: [str(c.frontier) for c in monitor.checkpoints(n)] for n in pipe.order}
    monitor.close()
    print(json.dumps({"available": ex.state.planner.available, "cache": str(path), "held": held}), flush=True)


if __name__ == "__main__":
    main()
