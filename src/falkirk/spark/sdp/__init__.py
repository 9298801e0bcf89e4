"""Spark Declarative Pipelines projects run by falkirk: the same definitions, selective recovery and refresh.

An SDP project (a ``spark-pipeline.yml`` and Python files declaring
datasets with ``pyspark.pipelines``: ``@dp.table``, ``@dp.materialized_view``,
``@dp.temporary_view``, ``@dp.append_flow``, ``dp.create_sink``) runs under
falkirk as it is:

1. **Load** (:func:`load`): the spec is found and read as ``spark-pipelines``
   does (:mod:`~falkirk.spark.sdp.spec`); the definition files are imported
   with falkirk's ``GraphElementRegistry`` (:mod:`~falkirk.spark.sdp.registry`);
   every query function is called once to see what it reads
   (:mod:`~falkirk.spark.sdp.graph`) and whether its shape lets falkirk keep
   it incrementally (:mod:`~falkirk.spark.sdp.analysis`).
2. **Regimes** (:mod:`~falkirk.spark.sdp.regimes`): each dataset and flow is a
   step with a checkpoint regime — a default by kind, overridden by a
   ``falkirk.regime`` table property, a ``falkirk.regime.<name>`` spec
   setting or ``regimes=``.
3. **Run** (:meth:`Project.run`, :mod:`~falkirk.spark.sdp.build`): one run is
   one update and one falkirk epoch; a query's reads resolve to that epoch's
   data; ``refresh``, ``full_refresh``, failures and changed queries are
   recovered selectively (:mod:`~falkirk.spark.sdp.project`).
4. **Look** (:meth:`Project.plan`, :mod:`~falkirk.spark.sdp.show`;
   :meth:`Project.table`): the plan of a run before it runs, the tables after.

``falkirk sdp run [SPEC] [--refresh X] [--full-refresh X] [--dry-run]`` is the
command line (:mod:`~falkirk.spark.sdp.cli`); ``docs/sdp.md`` is the guide.
"""

from falkirk.spark.sdp.analysis import Shape
from falkirk.spark.sdp.graph import Dataset, Graph
from falkirk.spark.sdp.project import Project, Update, load
from falkirk.spark.sdp.show import RunPlan
from falkirk.spark.sdp.spec import Spec, load_spec

__all__ = ["load", "load_spec", "Project", "Update", "RunPlan", "Spec", "Graph", "Dataset", "Shape"]
