"""Fixtures of the SDP tests: copies of the example project, its updates' input, a failure-free reference, and a
runner of ``spark-pipelines`` itself.

``make_project`` copies ``examples/sdp_orders`` (spec and definitions,
unchanged but for an absolute ``storage``) into a test directory;
``write_update`` writes update ``k``'s orders there (the example's own
generator, ``ROWS`` orders). ``reference`` is the example run for
``UPDATES`` updates by falkirk without failures (and without garbage
collection): its tables as multisets — what every run with a failure, a
refresh or ``spark-pipelines`` must give — and copies of the project after
its first and its last update, which ``clone`` copies again for a test
(falkirk's root moves with its project: it holds no absolute path).
``spark_pipelines`` runs ``spark-pipelines --remote URL run --spec SPEC``
(the PySpark package's own launcher) against the session's Connect server,
in a new process group stopped by PID if it overruns.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sdp_orders"
ROWS = 300
UPDATES = 2

_spec = importlib.util.spec_from_file_location("sdp_orders_generate", EXAMPLE / "generate.py")
assert _spec is not None and _spec.loader is not None
_generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_generate)


def make_project(where: Path, *, extra: str = "") -> Path:
    """A copy of the example project in ``where`` (absolute storage; ``extra`` appended to its definitions)."""
    where.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLE / "transformations", where / "transformations", dirs_exist_ok=True)
    spec = (EXAMPLE / "spark-pipeline.yml").read_text()
    (where / "spark-pipeline.yml").write_text(spec.replace("storage: pipeline-storage",
                                                           f"storage: file://{where / 'pipeline-storage'}"))
    if extra:
        with (where / "transformations" / "orders.py").open("a") as fh:
            fh.write("\n" + extra)
    return where


def write_update(project: Path, k: int, rows: int = ROWS) -> Path:
    """Update ``k``'s orders under ``project/data/orders``."""
    return Path(_generate.write_update(project, k, rows, users=40))


def multiset(df: Any) -> collections.Counter[tuple[Any, ...]]:
    """A DataFrame's rows as a multiset of tuples, columns in name order."""
    cols = sorted(df.columns)
    return collections.Counter(tuple(r) for r in df.select(*cols).collect())


def tables(project: Any) -> dict[str, collections.Counter[tuple[Any, ...]]]:
    """Every table of a loaded project as a multiset."""
    return {name: multiset(df) for name, df in project.tables().items()}


def run_updates(spark: Any, where: Path, updates: int = UPDATES, **options: Any) -> Any:
    """Write and run ``updates`` updates of a new copy of the example at ``where``; the loaded project."""
    from falkirk.spark.sdp import load

    make_project(where)
    project = None
    for k in range(updates):
        write_update(where, k)
        project = load(where, spark, **options)
        project.run()
    return project


def clone(project: Path, where: Path) -> Path:
    """A copy of ``project`` (its data, tables and falkirk root) at ``where``, its spec's storage moved along."""
    shutil.copytree(project, where)
    spec = where / "spark-pipeline.yml"
    spec.write_text(spec.read_text().replace(f"file://{project}/", f"file://{where}/"))
    return where


class Reference(dict):  # type: ignore[type-arg]
    """The failure-free tables (a dict of multisets), with ``first`` and ``last``: the project after its first and
    its last update."""

    first: Path
    last: Path


@pytest.fixture(scope="session")
def reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Reference:
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
