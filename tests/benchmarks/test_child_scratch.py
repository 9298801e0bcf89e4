"""A benchmark driver process keeps every scratch file under its own directory (benchmarks/spark_matrix/measure.py,
``child_env``): once SIGKILLed — as YSB's killed driver is, JVM and Python — removing that directory leaves none
of them behind in ``/tmp``.

The driver here is a real PySpark process that makes what a benchmark driver makes in temporary directories — the
directory of files added to its session, a working directory as the stream's RocksDB state store makes one
(``Utils.createTempDir`` under ``java.io.tmpdir``, removed by a shutdown hook a SIGKILL never runs), a
temporary file of Python's — and reports where each is; it is then killed with its JVM.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from benchmarks.spark_matrix.measure import child_env

DRIVER = r"""
import json, sys, tempfile, time
from pyspark import SparkFiles
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("scratch").config("spark.ui.enabled", "false")
         .getOrCreate())
sc = spark.sparkContext
sc.addFile(sys.argv[1])
jvm_tmp = sc._jvm.java.lang.System.getProperty("java.io.tmpdir")
state_store = sc._jvm.org.apache.spark.util.Utils.createTempDir(jvm_tmp, "spark").getAbsolutePath()
held = tempfile.NamedTemporaryFile(delete=False)
print(json.dumps({"jvm_pid": int(sc._jvm.java.lang.ProcessHandle.current().pid()), "added files":
                  SparkFiles.getRootDirectory(), "state store": state_store, "python": held.name}), flush=True)
time.sleep(600)
"""


def test_a_killed_driver_leaves_its_scratch_files_under_its_own_directory(tmp_path: Path) -> None:
    local = tmp_path / "driver.spark-local"
    local.mkdir()
    added = tmp_path / "added.txt"
    added.write_text("x")
    p = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(added)],
        env=child_env(local),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    facts = None
    try:
        assert p.stdout is not None
        ready, _, _ = select.select([p.stdout], [], [], 180)  # a session starts in seconds
        line = p.stdout.readline() if ready else ""
        assert line, "the driver process exited before its session started"
        facts = json.loads(line)
    finally:
        # as YSB's failure kills a driver (its JVM, then its Python): no shutdown hook runs in either
        if facts is not None:
            os.kill(facts["jvm_pid"], signal.SIGKILL)
        p.send_signal(signal.SIGKILL)
        p.wait()
    made = {what: Path(path) for what, path in facts.items() if what != "jvm_pid"}
    assert all(path.exists() for path in made.values()), made  # still there: nothing removed them
    outside = {what: str(path) for what, path in made.items() if not path.is_relative_to(local)}
    assert outside == {}, f"scratch files outside the driver's own directory {local}: {outside}"
    shutil.rmtree(local)
    assert not any(path.exists() for path in made.values())
