"""``python -m falkirk.spark.demo``: the main job (see :mod:`falkirk.spark.pipeline.tools.demo`)."""

from falkirk.spark.pipeline.tools.demo import entry, main

__all__ = ["main", "entry"]

if __name__ == "__main__":
    raise SystemExit(entry())
