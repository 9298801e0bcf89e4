"""Where a soak runs: ``local`` (a ``local[2]`` driver, the root on a tmpfs of its own), ``cluster`` (the
suite's split-disk standalone cluster, ``tests/spark/cluster/harness.py``, the root on a tmpfs every machine
mounts) and ``s3`` (the suite's SeaweedFS S3 server, ``tests/spark/objectstore.py``: :mod:`benchmarks.soak.s3`).

The tmpfs gives the disk faults a real filesystem to fill and to remount read-only. It is mounted in the
supervisor's own mount namespace (:func:`enter_private_namespace` re-executes the supervisor under
``unshare -m``), so nothing of it outlives the supervisor; the root is copied out to ``WORK/root-snapshot``
after every slice, which is what a resumed soak starts from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import fsspec

from benchmarks.soak.faults import Disk

__all__ = ["Env", "LocalEnv", "ClusterEnv", "enter_private_namespace", "make_env"]

REPO = Path(__file__).resolve().parents[2]
_MARK = "FALKIRK_SOAK_NAMESPACE"


def enter_private_namespace(argv: list[str]) -> None:
    """Re-execute this process under ``unshare -m --propagation private`` unless it already runs there."""
    if os.environ.get(_MARK) == str(os.getpid()):
        return
    if shutil.which("unshare") is None:
        raise SystemExit("the soak mounts a tmpfs for its root: it needs `unshare` (util-linux) and root")
    env = {**os.environ}
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", f'export {_MARK}=$$; exec "$0" "$@"',
           sys.executable, *argv]
    os.execvpe("unshare", cmd, env)


class Env:
    """A soak's environment: the root (``root`` for the driver, ``fs``/``base`` for the supervisor's fsspec
    access), the driver's settings, and the handles faults need (``disk``, ``cluster``, ``server``)."""

    name = "?"
    local = True
    disk: Disk | None = None
    cluster: Any = None
    server: Any = None

    def __init__(self, work: Path) -> None:
        self.work = work
        self.fs = fsspec.filesystem("file")
        self.root = ""
        self.base = ""
        self.storage_options: dict[str, Any] | None = None

    def start(self, resume: bool) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def spec(self) -> dict[str, Any]:
        """Settings of a driver process (see :mod:`benchmarks.soak.driver`)."""
        return {"root": self.root, "storage_options": self.storage_options}

    def environ(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        src = str(REPO / "src")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), src, env.get("PYTHONPATH", "")) if p)
        return env

    def restart_worker(self, i: int) -> None:
        """Start cluster worker ``i`` again (cluster only)."""

    #: whether a resumed soak starts from a copy of the root taken after the last finished slice (else from the
    #: root as the stop left it, damaged files included: the supervisor restores those first)
    snapshots = False

    def snapshot(self) -> None:
        """Keep a copy of the root that a resumed soak starts from (after a slice; no driver running)."""

    def read_db(self) -> Path | None:
        """A readable copy (or the file) of the root's ``alerts.sqlite``."""
        path = Path(self.base) / "alerts.sqlite"
        return path if path.exists() else None


class LocalEnv(Env):
    """``local[2]`` drivers; the root on a tmpfs (``WORK/fs``, ``size_mb``)."""

    name = "local"
    snapshots = True

    def __init__(self, work: Path, size_mb: int = 512) -> None:
        super().__init__(work)
        self.size_mb = size_mb
        self.mount = work / "fs"
        self.saved = work / "root-snapshot"
        self.root = self.base = str(self.mount / "root")

    def start(self, resume: bool) -> None:
        self.disk = Disk.mount_tmpfs(self.mount, self.size_mb)
        if resume and self.saved.exists():
            shutil.copytree(self.saved, self.base, symlinks=True)

    def stop(self) -> None:
        if self.disk is not None:
            self.disk.unfill()
            self.disk.unmount()

    def snapshot(self) -> None:
        tmp = self.work / "root-snapshot.new"
        shutil.rmtree(tmp, ignore_errors=True)
        if Path(self.base).exists():
            shutil.copytree(self.base, tmp, symlinks=True)
            shutil.rmtree(self.saved, ignore_errors=True)
            tmp.rename(self.saved)


class ClusterEnv(LocalEnv):
    """Drivers on the suite's standalone cluster (a master, two 1-core workers each with a private ``/tmp``);
    the root on a tmpfs mounted before the workers start, so every machine sees it."""

    name = "cluster"

    def start(self, resume: bool) -> None:
        if str(self.work.resolve()).startswith("/tmp/"):
            raise SystemExit("the cluster soak's work directory must not be under /tmp (each worker has its own)")
        super().start(resume)
        where = str(REPO / "tests" / "spark" / "cluster")
        for p in (where, str(REPO / "tests" / "spark")):
            if p not in sys.path:
                sys.path.insert(0, p)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        from harness import StandaloneCluster, why_unavailable

        reason = why_unavailable()
        if reason:
            raise SystemExit(f"no standalone cluster: {reason}")
        self.cluster = StandaloneCluster(workers=2)
        self.cluster.start()

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        super().stop()

    def spec(self) -> dict[str, Any]:
        assert self.cluster is not None
        groups = [p.pid for p in self.cluster.started if p.poll() is None]
        return {**super().spec(), "master": self.cluster.master_url, "conf": self.cluster.driver_conf(),
                "pgids": groups}

    def restart_worker(self, i: int) -> None:
        if i not in self.cluster.workers:
            self.cluster.start_worker(i)


def make_env(variant: str, work: Path) -> Env:
    if variant == "local":
        return LocalEnv(work)
    if variant == "cluster":
        return ClusterEnv(work)
    if variant == "s3":
        from benchmarks.soak.s3 import S3Env

        return S3Env(work)
    raise SystemExit(f"unknown variant {variant!r} (local, cluster, s3)")


def run_quiet(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)
