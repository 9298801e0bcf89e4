"""The examples in the benchmarks' docstrings run and hold, as ``src/falkirk``'s do (``scripts/test.sh`` runs those
with ``--doctest-modules``; these modules are not part of the package, so they are collected here)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import benchmarks

#: scripts run from benchmarks/ itself (``python spark_overhead.py``): they import their siblings by bare name, so
#: they are not importable as ``benchmarks.*`` modules (and carry no examples)
SCRIPTS = {"benchmarks.spark_overhead", "benchmarks.spark_incremental"}


def test_every_example_in_the_benchmarks_holds() -> None:
    root = Path(benchmarks.__file__).parent
    names = sorted(m.name for m in pkgutil.walk_packages([str(root)], prefix="benchmarks.") if m.name not in SCRIPTS)
    failed: list[str] = []
    attempted = 0
    for name in names:
        module = importlib.import_module(name)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False)
        attempted += result.attempted
        if result.failed:
            failed.append(f"{name}: {result.failed} of {result.attempted}")
    assert not failed, "failing examples: " + "; ".join(failed)
    assert attempted >= 33, attempted  # the examples counted when this test was written (none lost unnoticed)
