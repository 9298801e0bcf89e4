"""A soak driver process: ``python -m benchmarks.soak.driver SPEC.json`` runs the soak pipeline on its root.

It runs :func:`~benchmarks.soak.workload.build` until epoch ``spec["epochs"] - 1`` with the slice's
in-driver faults, and reports on stdout, one ``SOAK {json}`` line per event:

* ``start`` (its pid), ``epoch`` (every step completed it: the process tree's CPU seconds and RSS, from
  ``/proc``), ``recovery`` (a rollback began: its cause), ``fired`` (an injection fired), ``unfired`` (a
  task, job or executor injection declined: its step's frame had no rows, known without a job — it stays
  pending, as in ``RunResult.unfired``; or, with ``why: "no-row"``, a task or job injection found at the run's
  end to have fired nowhere: its job ran and no task saw a row — the ``fired`` line before it is void);
* ``end`` (the run finished: each step's last epoch) or ``error`` (the run stopped: type, classes, message).

Faults fired here: the injector's (``STEP@E:WHERE``), and two hooks the injector has no point for:
``publish`` — SIGKILL right after the manifest of ``STEP``'s item at ``E`` was published, before the monitor
and the journal heard of it (mid-publish) — and ``gc`` — SIGKILL inside the garbage collection at the end
of epoch ``E``, after its ``k``-th deletion (mid-GC). Everything else (timed kills, Ctrl-C, the disk, the
storage server, damaged files) is done to this process from outside by the supervisor.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "tree_usage", "CpuMeter", "live_heap"]

_TICK = os.sysconf("SC_CLK_TCK")


def emit(event: str, **fields: Any) -> None:
    """One event line for the supervisor."""
    print("SOAK " + json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


def _stat(pid: int) -> tuple[int, int, float] | None:
    """``(ppid, pgid, cpu seconds)`` of process ``pid``, or ``None``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[2]), (int(fields[11]) + int(fields[12])) / _TICK


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_usage(root: int, pgids: frozenset[int] = frozenset()) -> dict[str, Any]:
    """CPU seconds and RSS of process ``root`` and its descendants (plus every process of ``pgids``): the
    Python driver's own RSS, its JVM's, and the total."""
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                procs[int(entry)] = st
    mine, grew = {root}, True
    while grew:
        more = {p for p, (ppid, _, _) in procs.items() if ppid in mine and p not in mine}
        mine |= more
        grew = bool(more)
    mine |= {p for p, (_, pgid, _) in procs.items() if pgid in pgids}
    jvm = 0
    for p in mine:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"java" in f.read().split(b"\0")[0]:
                    jvm += _rss(p)
        except OSError:
            pass
    return {"cpu": round(sum(procs[p][2] for p in mine if p in procs), 3), "rss_py": _rss(root), "rss_jvm": jvm,
            "rss": sum(_rss(p) for p in mine), "per_pid": {p: procs[p][2] for p in mine if p in procs}}


class CpuMeter:
    """CPU seconds of the process tree since the last look, process by process: a process that appeared counts
    from zero, one that vanished (a killed executor) is not subtracted."""

    def __init__(self, root: int, pgids: frozenset[int]) -> None:
        self.root, self.pgids = root, pgids
        self.last: dict[int, float] = {}

    def look(self) -> dict[str, Any]:
        usage = tree_usage(self.root, self.pgids)
        now = usage.pop("per_pid")
        usage["cpu_delta"] = round(sum(c - self.last.get(p, 0.0) for p, c in now.items()), 3)
        self.last = now
        return usage


def _hooks(spec: dict[str, Any], meter: CpuMeter) -> None:
    """Report epochs, recoveries and fired injections; arm the ``publish`` and ``gc`` kills."""
    from falkirk.spark.pipeline.run import executor as executor_module
    from falkirk.spark.pipeline.run import failures, recovery
    from falkirk.spark.pipeline.store import rootfs, storage

    me = os.getpid()
    end_of_epoch = executor_module.Executor.end_of_epoch
    gc_at = {int(e): int(k) for e, k in spec.get("gc_kills", {}).items()}
    live_every = int(spec.get("live_heap") or 0)
    state: dict[str, Any] = {"epoch": None, "deletes": 0}

    def reporting_end(self: Any, epoch: int, **kwargs: Any) -> None:
        state["epoch"], state["deletes"] = epoch, 0
        end_of_epoch(self, epoch, **kwargs)
        if epoch in gc_at:  # fewer deletions than k at this epoch: die at the end of its collection
            emit("fired", fault=f"gc@{epoch}")
            os.kill(me, signal.SIGKILL)
        state["epoch"] = None
        heap = live_heap(self.spark) if live_every and epoch % live_every == 0 else {}
        emit("epoch", epoch=epoch, **meter.look(), **heap)

    executor_module.Executor.end_of_epoch = reporting_end  # type: ignore[method-assign]

    delete = rootfs.Root.delete

    def deleting(self: Any, rel: str, *, recursive: bool = False) -> None:
        delete(self, rel, recursive=recursive)
        e = state["epoch"]
        if e is not None and e in gc_at:
            state["deletes"] += 1
            if state["deletes"] >= gc_at[e]:
                emit("fired", fault=f"gc@{e}", path=rel)
                os.kill(me, signal.SIGKILL)

    rootfs.Root.delete = deleting  # type: ignore[method-assign]

    publish_at = {tuple(x) for x in spec.get("publish_kills", [])}
    put = storage.Storage.put

    def putting(self: Any, manifest: Any) -> None:
        put(self, manifest)
        if (manifest.step, manifest.epoch) in publish_at:
            emit("fired", fault=f"publish@{manifest.step}@{manifest.epoch}", kind=manifest.kind)
            os.kill(me, signal.SIGKILL)

    storage.Storage.put = putting  # type: ignore[method-assign]

    take = failures.Injector._take

    def taking(self: Any, step: str, epoch: int, where: Any) -> Any:
        i = take(self, step, epoch, where)
        if i is not None:
            emit("fired", fault=str(i))
        return i

    failures.Injector._take = taking  # type: ignore[method-assign]
    after = failures.Injector.after

    def after_epoch(self: Any, epoch: int) -> Any:
        due = after(self, epoch)
        for i in due:
            emit("fired", fault=str(i))
        return due

    failures.Injector.after = after_epoch  # type: ignore[method-assign]
    wrap = failures.Injector.wrap

    reported: set[Any] = set()

    def wrapping(self: Any, step: str, epoch: int, df: Any, **kwargs: Any) -> Any:
        out = wrap(self, step, epoch, df, **kwargs)
        with self._lock:  # (a concurrent run's other threads decline theirs meanwhile: each reported once)
            new = [i for i in self._unfired_said if i not in reported]
            reported.update(new)
        for i in new:  # declined: the step's frame has no rows, known without a job
            emit("unfired", fault=str(i), step=i.step, epoch=i.epoch)
        return out

    failures.Injector.wrap = wrapping  # type: ignore[method-assign]
    settle = failures.Injector.settle

    def settling(self: Any) -> Any:
        missed = settle(self)
        for i in missed:  # reported fired by _take, found at the run's end to have failed no task
            emit("unfired", fault=str(i), step=i.step, epoch=i.epoch, why="no-row")
        return missed

    failures.Injector.settle = settling  # type: ignore[method-assign]
    recover = recovery.Rollback.recover

    def recovering(self: Any, failed: Any, cause: str, *args: Any, **kwargs: Any) -> Any:
        emit("recovery", cause=str(cause)[:500], failed=sorted(failed))
        return recover(self, failed, cause, *args, **kwargs)

    recovery.Rollback.recover = recovering  # type: ignore[method-assign]
    damaged_outputs = recovery.Rollback._damaged_outputs

    def checking_outputs(self: Any, rec: Any) -> Any:
        found = damaged_outputs(self, rec)
        emit("outputs-checked", sampled=dict(rec.sampled))  # per output: the epoch below which it only sampled
        return found

    recovery.Rollback._damaged_outputs = checking_outputs  # type: ignore[method-assign]
    sweep_orphans = storage.Storage.sweep_orphans

    def sweeping(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        removed = sweep_orphans(self, *args, **kwargs)
        emit("swept", seconds=round(time.perf_counter() - t0, 3), removed=removed)  # a restart's sweep of orphans
        return removed

    storage.Storage.sweep_orphans = sweeping  # type: ignore[method-assign]


def live_heap(spark: Any) -> dict[str, int]:
    """The driver JVM's heap after a full collection (``System.gc()``: G1 collects the whole heap, stopping
    the world), and the heap it has committed: what is live, not what G1 keeps of garbage up to its maximum
    (the RSS follows the committed heap). Only in a run that asks for it (``--live-heap N``): forcing a
    collection changes the memory behaviour being measured."""
    jvm = spark._jvm
    jvm.java.lang.System.gc()
    usage = jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage()
    return {"heap_live": int(usage.getUsed()), "heap_committed": int(usage.getCommitted())}


def _session(spec: dict[str, Any]) -> Any:
    from falkirk.spark.pipeline.run.session import local_session

    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2",
            **spec.get("conf", {})}
    spark = local_session(spec.get("master", "local[2]"), spec.get("app", "falkirk-soak"), conf)
    spark.sparkContext.setLogLevel("OFF")
    return spark


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    meter = CpuMeter(os.getpid(), frozenset(spec.get("pgids", [])))
    emit("start", pid=os.getpid(), **meter.look())
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.soak import workload
    from falkirk.spark.pipeline.run.session import SMALL_DATA

    workload.BROKEN = bool(spec.get("broken", False))
    _hooks(spec, meter)
    spark = _session(spec)
    emit("session", **meter.look())
    pipe = workload.build(spec["root"], spark, database=spec.get("database", "alerts.sqlite"), fsync=spec.get("fsync", False), code_changes={"hourly": "keep"},
                          spark_conf=SMALL_DATA, concurrency=spec.get("concurrency", 1),
                          storage_options=spec.get("storage_options"), storage_timeout=spec.get("storage_timeout", 30))
    try:
        result = pipe.run(spec["epochs"], fail=spec.get("fail", []), progress=lambda line: print(line, flush=True))
    except BaseException as exc:  # noqa: BLE001 - every way a run stops is reported, then re-raised
        emit("error", type=type(exc).__name__, classes=[c.__name__ for c in type(exc).__mro__],
             message=str(exc)[:4000])
        if isinstance(exc, KeyboardInterrupt):
            return 130
        return 1
    emit("end", done=result.done, recoveries=len(result.journal.recoveries), root_bytes=result.root_bytes,
         notes=[n for n in result.journal.notes][:20])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
