"""Shared pytest configuration: hypothesis profiles.

Pick one with ``HYPOTHESIS_PROFILE`` (``dev`` by default; ``scripts/test.sh``
uses ``ci`` when ``CI`` is set).
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_ignore_collect(collection_path, config):  # type: ignore[no-untyped-def]
    """Keep conftest files out of doctest collection (they are loaded as plugins all the same)."""
    if collection_path.name == "conftest.py":
        return True
    return None


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Skip (visibly) the Spark pipeline tests unless FALKIRK_SPARK_PIPELINE_TESTS is set.

    They run whole pipelines (about a minute each on a loaded 2-core
    machine), so they are opt-in until they fit the CI budget (issue 6).
    """
    if os.environ.get("FALKIRK_SPARK_PIPELINE_TESTS"):
        return
    skip = pytest.mark.skip(
        reason="Spark pipeline tests are opt-in for now: set FALKIRK_SPARK_PIPELINE_TESTS=1"
    )
    for item in items:
        if "/tests/spark/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(skip)
