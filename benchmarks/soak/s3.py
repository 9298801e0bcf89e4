"""The S3 soak: the root in a bucket of the suite's SeaweedFS server (``tests/spark/objectstore.py``).

The driver reaches the bucket as falkirk always does, through s3fs (conditional creates, ETags, listings
without a cache). Spark's executors need Hadoop's S3A connector for ``s3a://``, which PySpark does not ship
and these machines cannot download (``docs/storage.md``); so they reach *the same bucket* through the
server's filer, mounted with FUSE (``weed mount``), and Hadoop's ``ViewFileSystemOverloadScheme`` maps
``s3a://falkirk-tests/…`` onto that mount. What an executor writes there is an object of the bucket the
driver then lists, checks and publishes manifests for over S3; the server is one process, so stopping it
(``server-restart``) takes both paths down at once.

The server's data directory and ports are kept in ``WORK/seaweed`` so that a stopped soak resumes on the
same bucket. ``read-only-creds`` starts a driver with the server's read-only identity.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.soak.variants import REPO, Env

__all__ = ["S3Env", "spark_conf"]

BUCKET = "falkirk-tests"


def _objectstore() -> Any:
    where = str(REPO / "tests" / "spark")
    if where not in sys.path:
        sys.path.insert(0, where)
    import objectstore

    return objectstore


def spark_conf(mount: Path, bucket: str = BUCKET) -> dict[str, str]:
    """Spark settings mapping ``s3a://<bucket>/`` onto ``mount`` (the bucket through the filer)."""
    return {
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme",
        "spark.hadoop.fs.viewfs.overload.scheme.target.s3a.impl": "org.apache.hadoop.fs.LocalFileSystem",
        f"spark.hadoop.fs.viewfs.mounttable.{bucket}.linkFallback": mount.resolve().as_uri(),
        "spark.hadoop.fs.s3a.impl.disable.cache": "true",
    }


class Server:
    """A SeaweedFS server (``objectstore.SeaweedS3``) whose data and ports survive a stop (:meth:`halt`)."""

    def __init__(self, work: Path) -> None:
        store = _objectstore()
        reason = store.why_unavailable()
        if reason:
            raise SystemExit(f"no S3 server: {reason}")
        self.inner = store.SeaweedS3()
        self.KEY, self.SECRET = self.inner.KEY, self.inner.SECRET
        self.READER_KEY, self.READER_SECRET = self.inner.READER_KEY, self.inner.READER_SECRET
        self.dir = work / "seaweed"
        saved = self.dir / "ports.json"
        shutil.rmtree(self.inner.dir, ignore_errors=True)  # its own temporary directory: ours is kept
        self.inner.dir = self.dir
        self.inner.log = self.dir / "weed.log"
        if saved.exists():
            self.inner.ports = json.loads(saved.read_text())
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps(self.inner.ports))
        self.inner.endpoint = f"http://127.0.0.1:{self.inner.ports['s3']}"
        self.endpoint = self.inner.endpoint
        self.mount: subprocess.Popen[bytes] | None = None

    def options(self, **override: Any) -> dict[str, Any]:
        return self.inner.options(**override)

    def start(self) -> None:
        """A new server (and bucket), or the kept one of a resumed soak."""
        if (self.dir / "data").exists():
            self.resume()
        else:
            self.inner.start()

    def halt(self) -> None:
        """Stop the server's processes (SIGKILL of its process group), keeping its data."""
        proc = self.inner.proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def resume(self) -> None:
        """Start the server again on the same ports and data (nothing if it runs: two faults may both end)."""
        if self.inner.proc is not None and self.inner.proc.poll() is None:
            return
        store = _objectstore()
        p = self.inner.ports
        cmd = [
            self.inner.binary, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.dir / 'data'}",
            "-volume.max=8", "-master.volumeSizeLimitMB=64", "-master.telemetry=false",
            f"-master.port={p['master']}", f"-master.port.grpc={p['master_grpc']}",
            f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume_grpc']}",
            f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer_grpc']}",
            "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3_grpc']}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.config={self.dir / 's3.json'}",
        ]
        mark = self.inner.log.stat().st_size if self.inner.log.exists() else 0
        with open(self.inner.log, "ab") as out:
            self.inner.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                               start_new_session=True)
        deadline = time.monotonic() + 120
        while store.READY not in self.inner.log.read_bytes()[mark:].decode(errors="replace"):
            self.inner._check_alive(deadline, 120)
            time.sleep(0.1)

    def mount_filer(self, where: Path) -> None:
        """``weed mount`` the bucket's filer directory at ``where`` (FUSE; in the soak's mount namespace)."""
        where.mkdir(parents=True, exist_ok=True)
        log = open(self.dir / "mount.log", "ab")
        filer, grpc = self.inner.ports["filer"], self.inner.ports["filer_grpc"]
        self.mount = subprocess.Popen(
            [self.inner.binary, "mount", f"-filer=127.0.0.1:{filer}.{grpc}", f"-dir={where}", f"-filer.path=/buckets/{BUCKET}", f"-cacheDir={self.dir / 'mount-cache'}", "-cacheCapacityMB=0"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while not os.path.ismount(where):
            if self.mount.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"weed mount failed:\n{(self.dir / 'mount.log').read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.mount is not None and self.mount.poll() is None:
            os.killpg(self.mount.pid, signal.SIGTERM)
            try:
                self.mount.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.mount.pid, signal.SIGKILL)
        self.halt()
        for port in self.inner.ports.values():
            for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)


class S3Env(Env):
    """Drivers on ``local[2]`` with the root at ``s3a://falkirk-tests/soak`` (see the module docstring)."""

    name = "s3"
    local = False

    def __init__(self, work: Path) -> None:
        super().__init__(work)
        self.root = f"s3a://{BUCKET}/soak"
        self.base = f"{BUCKET}/soak"
        self.fuse = work / "fuse"
        self.database = work / "alerts.sqlite"

    def start(self, resume: bool) -> None:
        import s3fs

        self.server = Server(self.work)
        self.server.start()
        self.server.mount_filer(self.fuse)
        self.storage_options = self.server.options()
        self.fs = s3fs.S3FileSystem(key=self.server.KEY, secret=self.server.SECRET,
                                    endpoint_url=self.server.endpoint, skip_instance_cache=True,
                                    use_listings_cache=False)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "conf": spark_conf(self.fuse), "database": str(self.database),
                "storage_timeout": 20}

    def environ(self) -> dict[str, str]:
        return {**super().environ(), "FALKIRK_CACHE": str(self.work / "cache")}

    def read_db(self) -> Path | None:
        return self.database if self.database.exists() else None
