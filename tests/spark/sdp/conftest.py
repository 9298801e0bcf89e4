"""Fixtures of the SDP tests: a failure-free reference run of the example, and ``spark-pipelines`` itself.

``sdp_reference`` is the example run for ``UPDATES`` updates by falkirk without
failures (``sdp_support``); ``spark_pipelines`` runs ``spark-pipelines
--remote URL run --spec SPEC`` (the PySpark package's own launcher) against
the session's Connect server, in a new process group stopped by PID if it
overruns.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sdp_support import UPDATES, Reference, clone, make_project, tables, write_update


@pytest.fixture(scope="session")
def sdp_reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The example's tables after ``UPDATES`` failure-free updates under falkirk (``gc=False``), as multisets."""
    from falkirk.spark.sdp import load

    where = make_project(tmp_path_factory.mktemp("sdp-reference") / "p")
    ref = Reference()
    ref.first = tmp_path_factory.mktemp("sdp-first") / "p"
    for k in range(UPDATES):
        write_update(where, k)
        project = load(where, spark, gc=False)
        project.run()
        if k == 0:
            clone(where, ref.first)
    ref.update(tables(project))
    ref.last = where
    return ref


@pytest.fixture(scope="session")
def spark_pipelines(connect_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """``run(project_dir, *args)``: ``spark-pipelines --remote URL run --spec SPEC *args``; its output."""
    import pyspark
    from spark_support import stop_group

    launcher = Path(sys.executable).parent / "spark-pipelines"
    if not launcher.exists():
        pytest.skip(f"no spark-pipelines launcher beside {sys.executable}")
    logs = tmp_path_factory.mktemp("spark-pipelines")

    def run(project: Path, *args: str, timeout: float = 300) -> str:
        env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "PYSPARK_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1"}
        log = logs / f"run-{len(list(logs.iterdir()))}.log"
        cmd = [str(launcher), "--remote", connect_server.url, "run", "--spec", str(project / "spark-pipeline.yml"),
               *args]
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=project,
                                    start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                stop_group(proc, grace=10)
                pytest.fail(f"spark-pipelines ran over {timeout} s:\n{log.read_text()[-3000:]}")
        text = log.read_text(errors="replace")
        if proc.returncode != 0:
            pytest.fail(f"spark-pipelines exited with {proc.returncode}:\n{text[-4000:]}")
        return text

    return run
