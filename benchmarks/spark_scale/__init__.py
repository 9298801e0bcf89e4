"""falkirk.spark at real data sizes: both systems at every size, each cost fitted as ``a + b·n`` (issue 56).

Four workloads, each at sizes spanning 100× or more (:mod:`.plan`): two event streams, ``n`` events per
epoch — the **flagship** (:mod:`.flagship`: the paper's Figure 1 application through
:mod:`benchmarks.spark_vs_streaming`) and a **YSB-like** stream (:mod:`.ysb`: views counted per campaign and
10-second window) — and two keyed shapes, ``n`` keys of state at 1 % and 20 % churn — **W2** (a running
aggregate of the updated keys) and **W3** (every key's score decays each epoch; the top keys out), the
matrix's own (:mod:`.keyed`, :mod:`benchmarks.spark_matrix.w2_w3`).

Configurations (:func:`.plan.configurations`): Structured Streaming on RocksDB with changelog
checkpointing, at Spark's default snapshot spacing (``streaming``) and at each ``--spacings`` value
(``streaming-snapK``), in the strongest formulation the matrix has for the workload (:mod:`.streams`:
taken from the matrix's modules, never copied); falkirk with its shipped regimes (``falkirk``), with the
stateful step's keyed state ``incremental=True`` (``falkirk-inc``), with the regimes the advisor chose
from a profile taken by a driver of its own (``falkirk-advised``), on W2 the shipped regimes with the step
written to broadcast the epoch's updates instead of joining the whole state with them (``falkirk-bcast``: the
state scanned, not shuffled; :mod:`.keyed`), and, failure-free only, the shipped pipeline with falkirk off
(``falkirk-off``: ``durable=False``; what a pipeline costs the driver without falkirk's bookkeeping).

The numbers (per point and configuration; each the median over ``--drivers`` driver processes, taken
round-robin over the configurations; :mod:`.points`, :mod:`.phases`, :mod:`.meters`):

* **CPU / epoch**, **wall / epoch**: medians over epochs ``--warmup``.. of the failure-free run; CPU of the
  driver's whole process tree (Python driver, JVM — on a ``local`` master also the executor —, Python
  workers; ``/proc``); **driver CPU / epoch**: the driver's Python process alone;
* **state / log / metadata bytes per epoch**: bytes written under the run's directory by kind
  (:func:`.meters.kind_of`), divided by the epochs;
* **peak resident memory**: of the driver's Python process, the JVM and the Python workers, after each epoch;
* **recovery (a) — the driver SIGKILLed mid-epoch** in the failing step at the crash epoch, a new driver
  started on the same directories: wall and CPU from its session being up until the crash epoch's outputs
  are committed (caught up); **recovery (b) — a failure inside one step**: every attempt of a task of the
  failing step's job fails at the crash epoch; wall and CPU from the failure reaching the driver until the
  crash epoch's outputs are committed (falkirk recovers the step in the same driver; the stream's query
  stops and is restarted in the same session); each with the records recomputed (rows of completed step
  executions done again) and the input rows re-read;
* **identical**: every run with a failure equals its failure-free reference, output by output and epoch by
  epoch as multisets, compared by Spark (:func:`falkirk.spark.pipeline.tools.verify.output_differences`);
  a point with a difference is invalid and the benchmark exits with status 1.

:mod:`.fit` fits each configuration's figures as ``a + b·n`` (the fixed per-epoch part and the part
proportional to the data); :mod:`.report` draws one log–log picture per workload and churn
(``benchmarks/results/spark_scale_<workload>.png``) and checks the issue's targets
(``targets`` in ``benchmarks/results/spark_scale.json``). The results are written after every point, and
``--resume`` measures only the points the JSON lacks, so a long run can be continued.

Memory (:func:`.plan.memory`): ``spark.driver.memory`` (and ``spark.executor.memory``, for a cluster) 1 GB up
to 10^5 keys or events, then 3–4 GB, 12 GB for 10^7 keys.

Usage (from the repository's root)::

    python -m benchmarks.spark_scale --plan smoke --drivers 1            # minutes: the whole harness, tiny sizes
    python -m benchmarks.spark_scale --plan quick --only W2 --churn 0.01  # provisional
    python -m benchmarks.spark_scale --plan full --resume                 # the issue's grid (hours to days)
    python -m benchmarks.spark_scale --report                             # fits, pictures, table, targets
"""
