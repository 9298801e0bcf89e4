"""Running a pipeline on Spark: epochs, failures and recoveries.

* :mod:`~falkirk.spark.pipeline.run.executor` — the loop that runs epochs;
  :mod:`~falkirk.spark.pipeline.run.start` — a driver's start (the restart's
  recovery, the pipeline's accepted changes);
* :mod:`~falkirk.spark.pipeline.run.state` — the run's mutable state, one
  owner: each node's progress, runners, queues, planner, journal. The loop,
  recovery, retention and a what-if during the run see the run through it and
  the :class:`~falkirk.spark.pipeline.run.context.RunContext`, never through
  the executor;
* :mod:`~falkirk.spark.pipeline.run.recovery` — from a failure to a consistent
  state (plan, validate, apply); :mod:`~falkirk.spark.pipeline.run.retention` —
  garbage collection with retention;
* :mod:`~falkirk.spark.pipeline.run.runners` — how each regime runs, persists,
  restores and collects one node, seeing the run only through a
  :class:`~falkirk.spark.pipeline.run.context.RunContext`;
  :mod:`~falkirk.spark.pipeline.run.incremental` — how a state is checkpointed (whole, keyed, snapshots and
  deltas); :mod:`~falkirk.spark.pipeline.run.layers` — keyed state updated in place (``changes=True``: a
  base and the changes since, and :func:`~falkirk.spark.pipeline.run.layers.lookup`);
* :mod:`~falkirk.spark.pipeline.run.queues` and :mod:`~falkirk.spark.pipeline.run.frames`
  — what travels on the edges, and the lifetime of DataFrames in executor memory;
  :mod:`~falkirk.spark.pipeline.run.fusion` — steps computed by their consumer's job;
* :mod:`~falkirk.spark.pipeline.run.failures` — injected failures. **A new
  failure kind goes here** (and, if Spark reports it, in
  :mod:`~falkirk.spark.pipeline.run.causes`, which tells transient failures from
  errors in a step's own code);
* :mod:`~falkirk.spark.pipeline.run.session` (classic vs Spark Connect),
  :mod:`~falkirk.spark.pipeline.run.probe` (shared storage check),
  :mod:`~falkirk.spark.pipeline.run.guard` (Eager SQLite writes),
  :mod:`~falkirk.spark.pipeline.run.journal`,
  :mod:`~falkirk.spark.pipeline.run.cpu` (CPU per step on a ``local`` master),
  :mod:`~falkirk.spark.pipeline.run.watch` (lost executors, recompiled code),
  :mod:`~falkirk.spark.pipeline.run.interrupt` (Ctrl-C) and
  :mod:`~falkirk.spark.pipeline.run.progress` (what a run did and says).

May import: :mod:`falkirk.spark.pipeline.plan`, ``declare`` and ``store``.
Never the tools or :mod:`falkirk.spark.pipeline.api`.
"""
