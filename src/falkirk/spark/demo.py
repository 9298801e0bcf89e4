"""``python -m falkirk.spark.demo``: the main job (see :mod:`falkirk.spark.pipeline.demo`)."""

from falkirk.spark.pipeline.demo import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
