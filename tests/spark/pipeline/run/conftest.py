"""Fixtures shared by the run tests of keyed state (``test_incremental``, ``test_changes``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import KEYED_EPOCHS, keyed_pipeline


@pytest.fixture(scope="session")
def plain(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``spark_support.keyed_pipeline`` over :data:`KEYED_EPOCHS` epochs without failures, falkirk off, its step
    returning its whole state (the reference of the keyed-state tests)."""
    root = tmp_path_factory.mktemp("keyed-reference")
    keyed_pipeline(root, spark, durable=False).run(KEYED_EPOCHS)
    return root
