"""A Spark Connect server on loopback for the tests, started from the PySpark package's ``spark-submit``.

The server runs ``SparkConnectServer`` on a ``local[2,3]`` master (three
attempts per task, like the classic tests' session) in a new session
(``setsid``), bound to 127.0.0.1 on a port the OS picked, in a temporary
directory that also holds its warehouse (the tables ``spark-pipelines``
writes: :attr:`ConnectServer.warehouse`); :meth:`stop` kills exactly that
process group, by PID.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spark_support import stop_group


def why_unavailable() -> str | None:
    """Why this machine cannot run a Connect server and client (``None`` if it can)."""
    try:
        import pyspark
    except ImportError:
        return "PySpark is not installed (the spark extra)"
    try:
        import grpc  # noqa: F401
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        return f"the connect extra is not installed ({exc})"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime"
    if not list((Path(pyspark.__file__).parent / "jars").glob("spark-connect_*.jar")):
        return "this PySpark package has no spark-connect jar"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ConnectServer:
    """``sc://127.0.0.1:PORT``: a Spark Connect server on a ``local[2,3]`` master."""

    def __init__(self) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.dir = Path(tempfile.mkdtemp(prefix="falkirk-connect-"))
        self.log = self.dir / "server.log"
        self.port = _free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.warehouse = self.dir / "warehouse"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180) -> ConnectServer:
        env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable}
        cmd = [
            str(self.home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name", "falkirk-connect-tests", "--master", "local[2,3]",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.connect.grpc.binding.port={self.port}",
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", "spark.default.parallelism=2", "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.sql.warehouse.dir={self.dir / 'warehouse'}",
            "spark-internal",
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                         cwd=self.dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            if re.search(r"Spark Connect server started at", text):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Connect server exited with {self.proc.returncode}:\n{text[-3000:]}")
            time.sleep(0.25)
        raise RuntimeError(f"the Connect server did not start in {timeout} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        """Kill the server's process group (the spark-submit JVM and its Python workers)."""
        if self.proc is not None:
            stop_group(self.proc, grace=30)
        shutil.rmtree(self.dir, ignore_errors=True)
