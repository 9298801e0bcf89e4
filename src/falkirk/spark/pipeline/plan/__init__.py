"""Plans: falkirk's solver applied to a pipeline — rollback plans, low-watermarks and what-ifs.

* :mod:`~falkirk.spark.pipeline.plan.planner` — the available frontiers of
  every step and the solver's answers (the incremental monitor in ``meta.sqlite``);
* :mod:`~falkirk.spark.pipeline.plan.live` — the live metadata (``⊤``) of the
  steps that did not fail;
* :mod:`~falkirk.spark.pipeline.plan.whatif` — "what if these steps failed
  now?", from a live run or from the root alone;
* :mod:`~falkirk.spark.pipeline.plan.explain` — plans for people;
* the regime advisor (``docs/advisor.md``):
  :mod:`~falkirk.spark.pipeline.plan.costs` (what each step costs),
  :mod:`~falkirk.spark.pipeline.plan.measured` (those costs from a root's
  journal and manifests), :mod:`~falkirk.spark.pipeline.plan.closure` (the
  rollback closure of many assignments and failures at once, beside the
  planner), :mod:`~falkirk.spark.pipeline.plan.advisor` (the cost model),
  :mod:`~falkirk.spark.pipeline.plan.search` (the search),
  :mod:`~falkirk.spark.pipeline.plan.prediction` (one failure's predicted
  cost), :mod:`~falkirk.spark.pipeline.plan.advising` (computing an advice)
  and :mod:`~falkirk.spark.pipeline.plan.advice` (the advice, as the user
  reads it).

May import: :mod:`falkirk.solver`, :mod:`falkirk.spark.pipeline.declare` and
:mod:`falkirk.spark.pipeline.store`. Never the run: a live run hands the
what-if its planner and live metadata (:mod:`falkirk.spark.pipeline.api`).
"""
