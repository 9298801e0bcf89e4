"""Where YSB's CPU per epoch goes, falkirk against Structured Streaming, over a JVM's life (issue 53).

``python -m benchmarks.ysb_cpu [--epochs 80] [--drivers 2] [--events 20000] [--out FILE]``

The YSB matrix (:mod:`benchmarks.spark_matrix.ysb`) measures 14 paced epochs of a fresh driver; this
measures what that leaves open: how each system's CPU per epoch changes as its JVM ages, and what it is
spent on. Both systems run the matrix's YSB code unchanged (falkirk: :func:`~.spark_matrix.ysb.ysb_pipeline`,
the shipped regimes; the stream: :class:`~.spark_matrix.ysb_streaming.StreamingYSB`, RocksDB with changelog
checkpointing, ``foreachBatch``) on the same input, **unpaced**: every epoch's events are prepared before the
timing (falkirk: appended to its input log and cut; the stream: one Parquet file per epoch, read one file per
micro-batch, the trigger at 0 s), so each system runs epoch after epoch as fast as it can and the CPU of an
epoch is its work, not its waiting. Each system runs in ``--drivers`` fresh driver processes, alternated.

Per epoch (at each output commit) a driver records: the CPU of its process tree (Python, JVM, Python
workers); of the JVM's threads by kind — the JIT compilers (``C1``/``C2 CompilerThread``), the executor's
task threads, the garbage collector, and the rest (query planning on the py4j threads or the stream's
execution thread, the DAG scheduler, listeners); the py4j calls the driver made; and the classes Spark
generated and compiled (``CodegenMetrics``). Each run's outputs are compared, epoch by epoch as multisets,
with a pure-Python count of the generator's events; a difference makes the benchmark exit 1.

Results: per system and window of epochs, the median and the mean over the epochs of every driver, and each
driver's mean CPU per epoch; the ratios falkirk ÷ stream per window and per driver of the same round; a picture
of CPU per epoch over epochs (``.png`` beside ``--out``). The load average is recorded before and after. An
epoch ends at a different point of each system's work — the stream's when ``foreachBatch`` has written (its
state store and offsets commit after it), falkirk's at its progress line — so single epochs are shifted
against each other; the windows' figures are not.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import result_header

HERE = Path(__file__).resolve().parent
SYSTEMS = ("falkirk", "streaming")
#: windows of epochs the medians are taken over (the last runs to the end)
WINDOWS = ((3, 20), (20, 40), (40, None))
#: what an epoch's CPU is split into: the JVM's threads by kind, and ``rest``, the rest of the process tree (the
#: Python driver, Python workers, and JVM threads that ended during the epoch)
KINDS = ("jit", "tasks", "gc", "jvm_rest", "rest")
FIGURES = ("wall", "cpu", "cpu_nojit", *KINDS, "py4j", "compiled")


def thread_kind(comm: str) -> str:
    """The kind of a JVM thread from its name (``/proc/.../comm``; a numbered suffix such as ``#3`` ignored)."""
    comm = re.sub(r"[-#\s]*\d+$", "", comm)
    if "CompilerThre" in comm:
        return "jit"
    if comm.startswith("Executor task"):
        return "tasks"
    if comm.startswith(("GC Thread", "G1 ")):
        return "gc"
    return "jvm_rest"


class JvmThreads:
    """CPU seconds of one JVM's live threads, summed by :func:`thread_kind` (a thread that ended keeps none: the
    tree's total, read beside it, still counts it)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.tick = pid, os.sysconf("SC_CLK_TCK")

    def read(self) -> dict[str, float]:
        out: collections.Counter[str] = collections.Counter()
        base = f"/proc/{self.pid}/task"
        for tid in os.listdir(base):
            try:
                with open(f"{base}/{tid}/comm") as f:
                    comm = f.read().strip()
                with open(f"{base}/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[thread_kind(comm)] += (int(fields[11]) + int(fields[12])) / self.tick
        return dict(out)


def count_py4j_calls() -> list[int]:
    """Count every py4j command this process sends from now on; the count is the returned list's only item."""
    import py4j.clientserver as cs

    calls, send = [0], cs.ClientServerConnection.send_command

    def counted(self: Any, command: str) -> Any:
        calls[0] += 1
        return send(self, command)

    cs.ClientServerConnection.send_command = counted  # type: ignore[method-assign]
    return calls


# -- one driver process ---------------------------------------------------------------------------------------------
def drive(spec: dict[str, Any]) -> None:
    """Run one system over the prepared input, recording each epoch; write the records and the output check."""
    from benchmarks.spark_matrix.measure import session
    from benchmarks.spark_matrix.ysb import compare, expected_counts, outputs, ysb_pipeline
    from benchmarks.spark_matrix.ysb_streaming import StreamingYSB
    from benchmarks.spark_vs_streaming import jvm_pid, tree_and_jit
    from falkirk.spark.pipeline.run.session import codegen_compilations

    size, base, n = spec["size"], Path(spec["base"]), spec["size"]["epochs"]
    spark = session(None)
    threads, calls = JvmThreads(jvm_pid(spark)), count_py4j_calls()
    records: list[dict[str, Any]] = []

    def stamp(*_: Any) -> None:
        tree, jit = tree_and_jit(os.getpid())
        records.append({"t": time.perf_counter(), "tree": tree, "jit_tree": jit, "jvm": threads.read(),
                        "py4j": calls[0], "compiled": codegen_compilations(spark)})

    stamp()
    if spec["system"] == "falkirk":
        pipe = ysb_pipeline(base, spark, size)
        pipe.run(n, progress=lambda line: line.startswith("epoch") and stamp())
    else:  # the trigger at 0 s: the next micro-batch starts as soon as the previous one ended
        StreamingYSB(spark, base, {**size, "interval": 0.0}, on_commit=stamp).run(n)
    calls[0] = -1  # the check below is not measured
    differences = compare(outputs(spark, base), expected_counts(size), n)
    Path(spec["result"]).write_text(json.dumps({"records": records, "differences": differences}))


# -- the parent -----------------------------------------------------------------------------------------------------
def prepare(work: Path, size: dict[str, Any]) -> tuple[Path, Path]:
    """Every epoch's events, once: a falkirk root whose input log holds them cut per epoch, and the stream's
    source directory (one Parquet file per epoch)."""
    import pyarrow.parquet as pq

    from benchmarks.spark_matrix.ysb_input import EVENTS_SCHEMA, events_table
    from falkirk.spark.pipeline.store.inputlog import InputLog

    root, source = work / "falkirk-input", work / "source"
    source.mkdir(parents=True)
    log = InputLog(str(root), "events", EVENTS_SCHEMA, partitions=2)
    for e in range(size["epochs"]):
        table = events_table(e, size)
        log.append(table, batch=f"epoch-{e}")
        log.cut(e)
        pq.write_table(table, source / f"epoch-{e:05d}.parquet")
    return root, source


def one_driver(system: str, d: int, work: Path, size: dict[str, Any], prepared: tuple[Path, Path]) -> dict[str, Any]:
    base = work / f"{system}-d{d + 1}"
    if system == "falkirk":
        shutil.copytree(prepared[0], base)
    else:
        base.mkdir()
        (base / "source").symlink_to(prepared[1])
    spec = {"system": system, "size": size, "base": str(base), "result": str(work / f"{system}-d{d + 1}.json")}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE.parent),
                                                       os.environ.get("PYTHONPATH", "")])}
    with open(work / f"{system}-d{d + 1}.log", "w") as log:
        p = subprocess.run([sys.executable, "-m", "benchmarks.ysb_cpu", "--driver", json.dumps(spec)], env=env,
                           stdout=log, stderr=subprocess.STDOUT)
    if p.returncode or not Path(spec["result"]).exists():
        raise SystemExit(f"{system} driver {d + 1} failed ({p.returncode}): "
                         + (work / f"{system}-d{d + 1}.log").read_text(errors="replace")[-3000:])
    shutil.rmtree(base, ignore_errors=True)
    return json.loads(Path(spec["result"]).read_text())


def per_epoch(records: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Each epoch's figures: the difference of two consecutive records."""
    out = []
    for a, b in zip(records, records[1:], strict=False):
        jvm = {k: b["jvm"].get(k, 0.0) - a["jvm"].get(k, 0.0) for k in ("jit", "tasks", "gc", "jvm_rest")}
        cpu = b["tree"] - a["tree"]
        out.append({"wall": b["t"] - a["t"], "cpu": cpu, "cpu_nojit": cpu - (b["jit_tree"] - a["jit_tree"]), **jvm,
                    "rest": cpu - sum(jvm.values()), "py4j": b["py4j"] - a["py4j"],
                    "compiled": None if None in (a["compiled"], b["compiled"]) else b["compiled"] - a["compiled"]})
    return out


def windows(epochs: list[list[dict[str, float]]]) -> list[tuple[str, int, int]]:
    """``(label, first, end)`` of each window every driver reached (the last ends with the shortest driver)."""
    n = min(len(d) for d in epochs)
    return [(f"{lo}-{min(hi or n, n)}", lo, min(hi or n, n)) for lo, hi in WINDOWS if lo < n]


def summarise(epochs: list[list[dict[str, float]]]) -> dict[str, Any]:
    """Per window, over every driver's epochs in it: the median and the mean of each figure (where known), and
    each driver's own mean CPU per epoch."""
    out = {}
    for label, lo, hi in windows(epochs):
        rows = [e for drv in epochs for e in drv[lo:hi]]
        got: dict[str, Any] = {}
        for k in FIGURES:
            known = [r[k] for r in rows if r[k] is not None]
            if known:
                got[k], got[f"{k}_mean"] = statistics.median(known), statistics.fmean(known)
        got["cpu_mean_per_driver"] = [statistics.fmean(e["cpu"] for e in drv[lo:hi]) for drv in epochs]
        out[label] = got
    return out


def ratios(falkirk: dict[str, Any], stream: dict[str, Any]) -> dict[str, Any]:
    """falkirk ÷ stream per window and figure (``None`` where the stream's is 0), and per driver of the same
    round (falkirk's driver d against the stream's driver d) for the mean CPU."""
    out = {}
    for w in falkirk:
        if w not in stream:
            continue
        f, s = falkirk[w], stream[w]
        out[w] = {k: f[k] / s[k] if s.get(k) else None
                  for k in ("cpu", "cpu_mean", "cpu_nojit", "cpu_nojit_mean", "jit", "tasks", "jvm_rest", "rest")
                  if k in f}
        out[w]["cpu_mean_per_driver"] = [a / b if b else None for a, b in
                                         zip(f["cpu_mean_per_driver"], s["cpu_mean_per_driver"], strict=True)]
    return out


def draw(path: Path, series: dict[str, list[list[dict[str, float]]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for system, colour in zip(SYSTEMS, ("tab:red", "tab:blue"), strict=True):
        drivers = series[system]
        med = [statistics.median(d[i]["cpu"] for d in drivers) for i in range(len(drivers[0]))]
        nojit = [statistics.median(d[i]["cpu_nojit"] for d in drivers) for i in range(len(drivers[0]))]
        ax.plot(range(1, len(med) + 1), med, color=colour, label=f"{system}: CPU-s per epoch")
        ax.plot(range(1, len(nojit) + 1), nojit, color=colour, linestyle=":", label=f"{system}: without the JIT")
    ax.set_xlabel("epoch of the driver's life (unpaced)")
    ax.set_ylabel("CPU-s per epoch (median over drivers)")
    ax.set_title("YSB, 20,000 events per epoch: CPU per epoch as the JVM ages")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--epochs", type=int, default=80)
    ap.add_argument("--drivers", type=int, default=2)
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ysb_cpu.json")
    ap.add_argument("--driver", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.driver:
        drive(json.loads(args.driver))
        return 0
    from benchmarks.spark_matrix.configs import YSB_SHAPE

    size = {**YSB_SHAPE, "events": args.events, "epochs": args.epochs}
    load_before, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    series: dict[str, list[list[dict[str, float]]]] = {s: [] for s in SYSTEMS}
    differences = []
    with tempfile.TemporaryDirectory(prefix="ysb-cpu-") as tmp:
        work = Path(tmp)
        prepared = prepare(work, size)
        for d in range(args.drivers):
            for system in SYSTEMS:
                got = one_driver(system, d, work, size, prepared)
                series[system].append(per_epoch(got["records"]))
                differences += [f"{system} driver {d + 1}: {x}" for x in got["differences"]]
                print(f"{system} driver {d + 1}: {len(series[system][-1])} epochs, "
                      f"{'identical to the oracle' if not got['differences'] else got['differences']}", flush=True)
    summary = {s: summarise(series[s]) for s in SYSTEMS}
    ratio = ratios(summary["falkirk"], summary["streaming"])
    for w, r in ratio.items():
        f, s = summary["falkirk"][w], summary["streaming"][w]
        print(f"epochs {w}: CPU-s per epoch falkirk {f['cpu']:.2f} (without the JIT {f['cpu_nojit']:.2f}), "
              f"stream {s['cpu']:.2f} ({s['cpu_nojit']:.2f}): {r['cpu']:.2f}x ({r['cpu_nojit']:.2f}x without the JIT; means {r['cpu_mean']:.2f}x)")
    args.out.write_text(json.dumps({
        **result_header("ysb_cpu", argv, started, load_before), "size": size, "windows": [list(w) for w in WINDOWS], "summary": summary, "ratio_falkirk_over_stream": ratio,
        "differences": differences, "per_epoch": series}, indent=1) + "\n")
    draw(args.out.with_suffix(".png"), series)
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
