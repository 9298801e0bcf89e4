"""A Spark standalone cluster on loopback for the tests: one master, N workers, each worker on "its own machine".

Started from the ``spark-class`` of the PySpark package in the test's
Python environment, so nothing beyond pip is needed. Each Worker runs in
its own mount namespace (``unshare -m``) with a fresh tmpfs on ``/tmp``, as
if on a separate machine: what the driver writes under its ``/tmp`` the
workers do not see and vice versa. Paths under ``/tmp`` that every machine
must see (the Python environment, the source tree, when they live there)
are bound back into the worker's ``/tmp``. A directory under ``/var/tmp``
stands in for the cluster filesystem every process reaches (an NFS-like
shared mount).

Every process is started in a new session (``setsid``); :meth:`stop` kills
exactly those process groups — the master, the workers and the executors
the workers forked — by PID, and removes the shared directory.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Runs in the worker's new mount namespace: a private /tmp, the kept paths bound back, then the command.
_PRIVATE_TMP = r"""
set -eu
stage=$(mktemp -d /var/tmp/falkirk-stage.XXXXXX)
mount --bind /tmp "$stage"
mount -t tmpfs -o size=2g,mode=1777 falkirk-private-tmp /tmp
for keep in $FALKIRK_KEEP; do
    mkdir -p "$keep"
    mount --bind "$stage${keep#/tmp}" "$keep"
done
umount "$stage"
rmdir "$stage"
mkdir -p /tmp/spark-work /tmp/spark-local
exec "$@"
"""


def why_unavailable() -> str | None:
    """Why this machine cannot run the cluster (``None`` if it can)."""
    try:
        import pyspark
    except ImportError:
        return "PySpark is not installed (the spark extra)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime"
    if not (Path(pyspark.__file__).parent / "bin" / "spark-class").exists():
        return "this PySpark package has no bin/spark-class"
    if shutil.which("unshare") is None:
        return "no `unshare` (util-linux): cannot give each worker a private /tmp"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /mnt && umount /mnt"],
        capture_output=True, text=True, check=False,
    )
    if probe.returncode != 0:
        return f"`unshare -m` with a tmpfs mount is not permitted here ({probe.stderr.strip()[:200]})"
    return None


def _kept_paths() -> list[str]:
    """Paths under /tmp every machine must see: the Python environment and the falkirk sources."""
    import falkirk

    candidates = {os.path.realpath(sys.prefix), str(Path(falkirk.__file__).resolve().parents[1])}
    return sorted(p for p in candidates if p.startswith("/tmp/"))


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` cores, ``memory`` each) on 127.0.0.1."""

    def __init__(self, workers: int = 2, *, cores: int = 1, memory: str = "1g") -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.spark_class = str(self.home / "bin" / "spark-class")
        self.shared = Path(tempfile.mkdtemp(prefix="falkirk-cluster-", dir="/var/tmp"))
        self.logs = self.shared / "logs"
        self.logs.mkdir()
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.master_url = ""
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self.started: list[subprocess.Popen[bytes]] = []

    # -- processes -------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "384m",
            "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        })
        return env

    def _spawn(self, cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.started.append(proc)
        return proc

    @staticmethod
    def _wait_for(log: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            m = re.search(pattern, text)
            if m:
                return m
            if proc.poll() is not None:
                raise RuntimeError(f"{log.name}: process exited with {proc.returncode}:\n{text[-3000:]}")
            time.sleep(0.25)
        raise RuntimeError(f"{log.name}: no {pattern!r} after {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")

    def start(self) -> StandaloneCluster:
        """Start the master, then every worker, and wait until each worker registered."""
        log = self.logs / "master.log"
        self.master = self._spawn(
            [self.spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", "0", "--webui-port", "0"], log, self._env(),
        )
        m = self._wait_for(log, r"Starting Spark master at (spark://\S+)", self.master)
        self.master_url = m.group(1)
        for i in range(self.n_workers):
            self.start_worker(i)
        return self

    def start_worker(self, i: int) -> subprocess.Popen[bytes]:
        """Start worker ``i`` in its own mount namespace with a private /tmp; wait until it registered."""
        env = self._env()
        env.update({"SPARK_WORKER_DIR": "/tmp/spark-work", "SPARK_LOCAL_DIRS": "/tmp/spark-local",
                    "FALKIRK_KEEP": " ".join(_kept_paths())})
        log = self.logs / f"worker-{i}.log"
        log.write_text("")
        proc = self._spawn(
            ["unshare", "-m", "--propagation", "private", "bash", "-c", _PRIVATE_TMP, "worker",
             self.spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
             "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory, self.master_url],
            log, env,
        )
        self._wait_for(log, r"Successfully registered with master", proc)
        self.workers[i] = proc
        return proc

    def kill_worker(self, i: int) -> int:
        """SIGKILL worker ``i``'s JVM (not its executors: they notice their worker is gone). Returns its pid."""
        proc = self.workers.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        return proc.pid

    def executor_pids(self) -> list[int]:
        """PIDs of the executor JVMs running now (children of the workers this cluster started)."""
        pids = []
        groups = {p.pid for p in self.started if p.poll() is None}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.getpgid(int(entry.name)) not in groups:
                    continue
                cmd = (entry / "cmdline").read_bytes()
            except (OSError, ProcessLookupError):
                continue
            if b"CoarseGrainedExecutorBackend" in cmd:
                pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        """Kill every process group this cluster started (master, workers, their executors); remove the shared dir."""
        for proc in reversed(self.started):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 20
        for proc in self.started:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.started:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if proc.poll() is None:
                proc.wait(timeout=10)
        shutil.rmtree(self.shared, ignore_errors=True)

    # -- drivers -----------------------------------------------------------------------------
    def driver_conf(self) -> dict[str, str]:
        """Spark settings of a test driver on this cluster (small executors, one per worker)."""
        return {
            "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": str(self.n_workers),
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": sys.executable, "spark.task.maxFailures": "4",
            # Every worker is on 127.0.0.1, so Spark would believe they share a disk and read each
            # other's shuffle files directly; on this cluster they do not (private /tmp), as on real
            # machines with different host names.
            "spark.shuffle.readHostLocalDisk": "false",
            # the suite's JVM options (tests/conftest.py) for the executors too; none outside the suite
            **({"spark.executor.extraJavaOptions": opts} if (opts := os.environ.get("FALKIRK_TEST_JVM_OPTIONS"))
               else {}),
        }
