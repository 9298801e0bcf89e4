"""Helpers of the SDP tests: copies of the example project, its updates' input, tables as multisets.

``make_project`` copies ``examples/sdp_orders`` (spec and definitions,
unchanged but for an absolute ``storage``) into a test directory;
``write_update`` writes update ``k``'s orders there (the example's own
generator, ``ROWS`` orders); ``clone`` copies a project, falkirk's root
included (the root moves with its project: it holds no absolute path);
``multiset``/``tables`` turn tables into multisets of rows. The
``sdp_reference`` fixture (``conftest.py``) is the example run for ``UPDATES``
updates by falkirk without failures (``Reference``).
"""

from __future__ import annotations

import collections
import importlib.util
import shutil
from pathlib import Path
from typing import Any

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
