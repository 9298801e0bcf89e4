"""Declaring a pipeline: what it is, before anything runs.

* :mod:`~falkirk.spark.pipeline.declare.definition` — inputs, steps and edges
  (:class:`~falkirk.spark.pipeline.declare.definition.Definition`), the
  pipeline as a falkirk dataflow, and ``pipeline.json``;
* :mod:`~falkirk.spark.pipeline.declare.regimes` — what each step persists
  (SPEC §8): :class:`Ephemeral`, :class:`Batch`, :class:`Lazy`,
  :class:`Eager`, :class:`Output`. **A new regime goes here** (its runner
  in :mod:`falkirk.spark.pipeline.run.runners`);
* :mod:`~falkirk.spark.pipeline.declare.evolution` — which changes of a
  definition a running root accepts.

May import: :mod:`falkirk.solver`, :mod:`falkirk.spark.errors` and
:mod:`falkirk.spark.pipeline.store` (a definition owns its input logs and
root). Never the run, the plans or the tools.
"""
