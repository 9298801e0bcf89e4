"""The example SDP project under ``spark-pipelines`` and under ``falkirk sdp``: a refresh, and a failure's recovery.

Both run ``examples/sdp_orders`` (a file-fed streaming table, a cleaning view,
an aggregate and a join materialized view, a sink) on the same input:
``--updates`` updates of ``--rows`` orders each, then

* **(a) a refresh of one upstream view**, ``user_totals`` (the aggregate the
  join reads), ``--repeats`` times: ``spark-pipelines run --refresh
  user_totals`` (SDP recomputes it from the whole table and nothing else),
  ``--refresh user_totals,big_orders`` (it and what reads it: falkirk's
  closure), and ``falkirk sdp``'s ``refresh=["user_totals"]`` (its latest
  update from its state before it, then what the solver says must follow);
* **(b) the recovery after a failure in one flow**, ``--repeats`` updates
  each with ``user_totals`` failing: under ``spark-pipelines`` the update
  fails (a query that raises on data, the flow's retries off) and the next
  ``spark-pipelines run`` is the recovery; under falkirk the failure is
  injected mid-step and the recovery is the rest of that run, from the
  failure to the end of the update (the failed step redone, its unlogged
  view recomputed from the table's log, the update's remaining steps).

CPU is of whole process trees, from ``/proc``: ``spark-pipelines``' =
the Connect server's (a long-running JVM, warm like falkirk's) + the client
process's (its launcher JVM and Python, started per run); falkirk's = its
driver process's (Python, JVM, Python workers; one long-running process, the
way a scheduler would keep it). Medians over the repeats; each update's
steady cost too, for scale. Tables are checked equal (row counts and sums)
at the end. Writes ``benchmarks/results/sdp.json`` with the load average.

Usage (full size, on a quiet machine; about 20 minutes on 2 cores)::

    .venv/bin/python benchmarks/sdp.py --rows 100000 --updates 4 --repeats 3

``--rows 2000 --updates 2 --repeats 1`` checks it works in a few minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EXAMPLE = REPO / "examples" / "sdp_orders"
RESULTS = HERE / "results" / "sdp.json"
FAILING = ('.agg(F.count("*").alias("orders")',
           '.agg(F.count(F.when(F.col("user") >= 0, F.raise_error(F.lit("injected failure")))).alias("orders")')


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def project(where: Path, configuration: dict[str, str] | None = None) -> Path:
    """A copy of the example at ``where`` (absolute storage; ``configuration`` added to the spec's)."""
    shutil.copytree(EXAMPLE / "transformations", where / "transformations")
    spec = (EXAMPLE / "spark-pipeline.yml").read_text().replace(
        "storage: pipeline-storage", f"storage: file://{where / 'pipeline-storage'}")
    extra = "".join(f"  {k}: \"{v}\"\n" for k, v in (configuration or {}).items())
    (where / "spark-pipeline.yml").write_text(spec.replace("configuration:\n", "configuration:\n" + extra))
    return where


# -- falkirk's side: a long-running driver process, one command per line ------------------------------------------
def driver(where: str) -> None:
    """Run commands from stdin (``{"op": "run", ...}``), answer each with its CPU and wall time (JSON lines)."""
    sys.path.insert(0, str(HERE))
    from spark_vs_streaming import tree_cpu

    from falkirk.spark.sdp import load

    spark = None
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        if cmd["op"] == "tables":
            p = load(where, spark)
            print(json.dumps(summarise({n: df for n, df in p.tables().items()})), flush=True)
            continue
        marks: dict[str, tuple[float, float]] = {}

        def progress(text: str, marks: dict[str, tuple[float, float]] = marks) -> None:
            if text.startswith("FAILURE") and "fail" not in marks:
                marks["fail"] = (time.perf_counter(), tree_cpu(os.getpid()))

        p = load(where, spark)
        spark = p.spark
        t0, c0 = time.perf_counter(), tree_cpu(os.getpid())
        update = p.run(refresh=cmd.get("refresh", ()), fail=cmd.get("fail", ()), progress=progress)
        t1, c1 = time.perf_counter(), tree_cpu(os.getpid())
        out = {"wall": t1 - t0, "cpu": c1 - c0, "executed": [f"{s}@{e}" for s, e in update.executed]}
        if "fail" in marks:
            out.update(recovery_wall=t1 - marks["fail"][0], recovery_cpu=c1 - marks["fail"][1])
        print(json.dumps(out), flush=True)


def summarise(tables: dict[str, Any]) -> dict[str, list[Any]]:
    """Per table: rows, and the sum of every numeric column (a cheap equality check at 10^5 rows)."""
    from pyspark.sql import functions as F

    out = {}
    for name, df in tables.items():
        nums = sorted(f.name for f in df.schema.fields if f.dataType.typeName() in ("long", "integer", "decimal"))
        row = df.agg(F.count(F.lit(1)), *(F.sum(c) for c in nums)).collect()[0]
        out[name] = [str(v) for v in row]
    return out


class Falkirk:
    """The driver process (see :func:`driver`)."""

    def __init__(self, where: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--driver", str(where)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=REPO)

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": "run", **cmd}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"falkirk's driver exited with {self.proc.wait()}")
        return dict(json.loads(line))

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=120)
        except Exception:  # noqa: BLE001 - a benchmark's end: the driver is stopped by its PID
            self.proc.kill()


# -- spark-pipelines' side ---------------------------------------------------------------------------------------------
class SparkPipelines:
    """``spark-pipelines --remote URL run`` against a Connect server this object started (and stops, by PID)."""

    def __init__(self, where: Path, server: Any) -> None:
        import pyspark

        self.where, self.server = where, server
        self.env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "PYSPARK_PYTHON": sys.executable,
                    "SPARK_LOCAL_IP": "127.0.0.1"}
        self.launcher = str(Path(sys.executable).parent / "spark-pipelines")

    def run(self, *args: str, ok: bool = True) -> dict[str, Any]:
        from spark_vs_streaming import tree_cpu

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        s0, t0 = tree_cpu(self.server.proc.pid), time.perf_counter()
        done = subprocess.run([self.launcher, "--remote", self.server.url, "run", "--spec",
                               str(self.where / "spark-pipeline.yml"), *args], env=self.env, cwd=self.where,
                              capture_output=True, text=True)
        t1, s1 = time.perf_counter(), tree_cpu(self.server.proc.pid)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        client = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if (done.returncode == 0) != ok:
            raise RuntimeError(f"spark-pipelines {' '.join(args)} exited with {done.returncode}:\n{done.stdout[-3000:]}")
        return {"wall": t1 - t0, "cpu": (s1 - s0) + client, "server_cpu": s1 - s0, "client_cpu": client}


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000, help="orders per update")
    ap.add_argument("--users", type=int, default=20_000)
    ap.add_argument("--updates", type=int, default=4, help="updates before the measurements")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--markdown", type=Path, metavar="JSON", help="print the table of a result document and stop")
    ap.add_argument("--driver", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.driver:
        return driver(args.driver)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return None
    sys.path[:0] = [str(HERE), str(REPO / "tests" / "spark")]  # connect_server imports spark_support
    server_module = _load("falkirk_bench_connect_server", REPO / "tests" / "spark" / "connect_server.py")
    generate = _load("falkirk_bench_generate", EXAMPLE / "generate.py")
    scratch = Path(tempfile.mkdtemp(prefix="falkirk-sdp-bench-"))
    load_before = os.getloadavg()
    server = server_module.ConnectServer().start()
    fk = None
    try:
        theirs = SparkPipelines(project(scratch / "sdp", {"spark.sql.pipelines.maxFlowRetryAttempts": "0"}), server)
        mine = scratch / "falkirk"
        project(mine)
        fk = Falkirk(mine)
        res: dict[str, Any] = {"updates": {"spark-pipelines": [], "falkirk": []}}

        def update(k: int) -> None:
            for where in (theirs.where, mine):
                generate.write_update(where, k, args.rows, users=args.users)

        for k in range(args.updates):
            update(k)
            res["updates"]["spark-pipelines"].append(theirs.run())
            res["updates"]["falkirk"].append(fk.ask())
            print(f"update {k}: spark-pipelines {res['updates']['spark-pipelines'][-1]['cpu']:.1f} CPU-s, "
                  f"falkirk {res['updates']['falkirk'][-1]['cpu']:.1f} CPU-s", flush=True)
        refresh: dict[str, list[dict[str, Any]]] = {"spark-pipelines": [], "spark-pipelines-closure": [], "falkirk": []}
        for _ in range(args.repeats):
            refresh["spark-pipelines"].append(theirs.run("--refresh", "user_totals"))
            refresh["spark-pipelines-closure"].append(theirs.run("--refresh", "user_totals,big_orders"))
            refresh["falkirk"].append(fk.ask(refresh=["user_totals"]))
            print("refresh: " + ", ".join(f"{n} {r[-1]['cpu']:.1f} CPU-s" for n, r in refresh.items()), flush=True)
        recovery: dict[str, list[dict[str, Any]]] = {"spark-pipelines": [], "falkirk": []}
        code = theirs.where / "transformations" / "orders.py"
        good = code.read_text()
        for i in range(args.repeats):
            update(args.updates + i)
            code.write_text(good.replace(*FAILING))
            failed = theirs.run(ok=False)
            code.write_text(good)
            recovery["spark-pipelines"].append({**theirs.run(), "failed_run_cpu": failed["cpu"]})
            got = fk.ask(fail=["user_totals"])
            recovery["falkirk"].append({**got, "wall": got["recovery_wall"], "cpu": got["recovery_cpu"],
                                        "run_cpu": got["cpu"]})
            print("recovery: " + ", ".join(f"{n} {r[-1]['cpu']:.1f} CPU-s" for n, r in recovery.items()), flush=True)
        assert fk.proc.stdin is not None and fk.proc.stdout is not None
        fk.proc.stdin.write(json.dumps({"op": "tables"}) + "\n")
        fk.proc.stdin.flush()
        ours = json.loads(fk.proc.stdout.readline())
        from pyspark.sql import SparkSession

        client = SparkSession.builder.remote(server.url).getOrCreate()
        theirs_tables = {n: client.read.table(n) for n in ("orders", "user_totals", "big_orders")}
        theirs_tables["export"] = client.read.schema("order_id BIGINT, user BIGINT, amount DECIMAL(12,2)").json(
            str(theirs.where / "export"))
        same = {n: v == ours.get(n) for n, v in summarise(theirs_tables).items()}
        client.stop()
    finally:
        if fk is not None:
            fk.close()
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {
        scenario: {name: {"cpu_median_s": median(rs, "cpu"), "wall_median_s": median(rs, "wall"),
                          **({"server_cpu_median_s": median(rs, "server_cpu"),
                              "client_cpu_median_s": median(rs, "client_cpu")} if "server_cpu" in rs[0] else {})}
                   for name, rs in runs.items()}
        for scenario, runs in (("refresh", refresh), ("recovery", recovery), ("update", res["updates"]))}
    for scenario in ("refresh", "recovery"):
        f = summary[scenario]["falkirk"]
        for s in summary[scenario].values():
            s["falkirk_cpu_ratio"] = f["cpu_median_s"] / s["cpu_median_s"]
            s["falkirk_wall_ratio"] = f["wall_median_s"] / s["wall_median_s"]
    doc = {"benchmark": "sdp", "rows_per_update": args.rows, "users": args.users, "updates": args.updates,
           "repeats": args.repeats, "tables_equal": same, "summary": summary,
           "runs": {"updates": res["updates"], "refresh": refresh, "recovery": recovery},
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "load_average_before": load_before, "load_average": os.getloadavg()},
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                    text=True).stdout.strip()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(markdown(doc))
    print(f"tables equal (counts and sums): {same}\nwrote {args.out}")


def markdown(doc: dict[str, Any]) -> str:
    """The README's table from a result document."""
    rows = ["| scenario | runner | CPU (s) | of which server, client | wall (s) | falkirk ÷ it (CPU, wall) |",
            "|---|---|---:|---:|---:|---:|"]
    names = {"spark-pipelines": "`spark-pipelines --refresh user_totals`",
             "spark-pipelines-closure": "`spark-pipelines --refresh user_totals,big_orders`", "falkirk": "`falkirk sdp`"}
    for scenario in ("refresh", "recovery", "update"):
        for name, s in doc["summary"][scenario].items():
            ratio = "" if name == "falkirk" or scenario == "update" else (
                f"{s['falkirk_cpu_ratio']:.2f}×, {s['falkirk_wall_ratio']:.2f}×")
            split = (f"{s['server_cpu_median_s']:.1f}, {s['client_cpu_median_s']:.1f}" if "server_cpu_median_s" in s
                     else "")
            who = names[name] if scenario == "refresh" else f"`{name}`"
            rows.append(f"| {scenario} | {who} | {s['cpu_median_s']:.1f} | {split} | {s['wall_median_s']:.1f} | "
                        f"{ratio} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
