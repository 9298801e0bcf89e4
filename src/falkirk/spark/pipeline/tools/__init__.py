"""Tools around pipelines: the recovery report, comparing runs, the flagship application, the demo and the
CLI.

* :mod:`~falkirk.spark.pipeline.tools.report` — a recovery's plan and cost
  next to a global rollback and a replay from the start;
* :mod:`~falkirk.spark.pipeline.tools.verify` — two runs' external effects
  compared as multisets;
* :mod:`~falkirk.spark.pipeline.tools.flagship` — the paper's Figure 1
  application; :mod:`~falkirk.spark.pipeline.tools.demo` — the main job
  (``python -m falkirk.spark.demo``);
* :mod:`~falkirk.spark.pipeline.tools.cli` — ``falkirk pipeline …``.

May import everything below it, :mod:`falkirk.spark.pipeline.api` included;
nothing in :mod:`falkirk.spark.pipeline` imports the tools.
"""
