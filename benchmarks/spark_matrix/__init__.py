"""Where per-step regimes win: a workload matrix, falkirk against Spark Structured Streaming (issue 32).

Each workload runs on both systems, on the same input (generated before any
timing), one driver JVM at a time, and puts every configuration on one
picture: **steady-state CPU per epoch** (x) against **recovery CPU** (y);
lower left is better, the non-dominated points are circled.

Workloads implemented (one module each; its docstring defines the workload and its configurations)
----------------------------------------------------------------------------------------------------
* :mod:`.w1` — ``W1``, the flagship (:mod:`benchmarks.spark_vs_streaming` run as a library), driver
  SIGKILLed in the stateful step, restarted;
* :mod:`.w4` — ``W4``, a heavy logged aggregate feeding a stateful branch and an exactly-once SQLite sink
  that fails once (its steps shared by both systems in :mod:`.w4_steps`, its streaming queries in
  :mod:`.w4_streaming`);
* :mod:`.w6` — ``W6``, a code change of W4's stateful step, its last epochs recomputed;
* :mod:`.w2_w3` — ``W2`` (large, slowly changing keyed state) and ``W3`` (high-churn state), driver
  SIGKILLed in the stateful step, restarted (the stream's formulations of both, and of W5, in
  :mod:`.keyed_streaming`: native aggregation, ``foreachBatch`` over a state table, the state API v2,
  ``applyInPandasWithState``);
* :mod:`.w5` — ``W5``, W2's keyed state on a standalone cluster, an executor SIGKILLed mid-step;
* :mod:`.ysb` — ``YSB``, the Yahoo streaming benchmark paced by a producer process, **response latency**
  (from the input's release, and from an event-time window's end) steady and around an exception in the
  counting step and a driver SIGKILL (its input, producer and clocks in :mod:`.ysb_input`, its figures in
  :mod:`.ysb_metrics`, the stream in :mod:`.ysb_streaming`, real-time mode in :mod:`.ysb_rtm`);
* :mod:`.mixed` — ``MIXED``, YSB's counts beside a heavy branch over all history sharing the filtered stream;
  the heavy branch fails, the YSB outputs' latency during its recovery is measured.

The rest: :mod:`.configs` (configurations and sizes), :mod:`.measure` (process trees, meters, the driver
processes), :mod:`.pooling` (summaries, medians over drivers, the verdict, the advisor's check),
:mod:`.report` (pictures, tables; YSB's and MIXED's latency in :mod:`.latency_report`), :mod:`.cli` (the
command line).

YSB and MIXED are paced (an epoch released every 5 s) and define their own numbers (:mod:`.ysb`,
:mod:`.mixed`): in the table ``CPU / epoch`` is the same median, ``wall / epoch`` the median service time
(commit − the later of the release and the previous commit), ``recovery CPU`` the failure's excess CPU
(YSB: the killed driver's; MIXED: the heavy branch's exception) and ``recovery wall`` YSB's first output
after the restart (MIXED: the heavy branch's recovery); their latency tables follow the main one.

The numbers
-----------
* **CPU / epoch** (x axis), **wall / epoch**: medians over epochs
  ``--warmup``.. of the failure-free run, CPU of the driver's whole process
  tree (Python driver, JVM, Python workers; ``/proc``) between consecutive
  epoch completions. For ``streaming-split`` the two queries' per-batch
  costs are added epoch by epoch.
* **bytes / epoch**: bytes written under the checkpoint, state and log
  directories during the failure-free run (new files, growth of existing
  ones; input and outputs excluded), divided by the epochs.
* **recovery CPU** (y axis), **recovery wall**: W1 — from the restarted
  driver's SparkSession being ready to the crashed epoch's outputs committed
  (see :mod:`benchmarks.spark_vs_streaming`). W4 — from the exception being
  raised to the failed epoch's outputs committed, in the same driver. W6 —
  the whole catch-up after the code change: from the re-declared pipeline's
  run (falkirk) or the new query's start (streaming) until epoch ``N - 1``'s
  outputs are rewritten with v2.
* **phases** (falkirk, from the recovery journal): session start, metadata,
  validation, replay/recompute, catch-up; for Structured Streaming the
  re-run batches' ``durationMs`` (query planning, ``addBatch``, WAL commit…)
  are kept in the JSON.
* **records recomputed**: rows output by (step, epoch) pairs that had
  completed before the failure and ran again (falkirk: its journal; streaming:
  ``heavy``'s and the stateful operator's rows of the re-run batches; W2/W3
  streaming: none — the killed batch's operator had not returned).
  **input rows re-read**: source rows read again (falkirk: replays of its
  input log; streaming: ``numInputRows`` of the re-run batches).
* **peak memory**: the highest resident set size of the driver's process tree
  (driver, JVM — which holds the executors in ``local`` mode — and workers),
  sampled after each epoch; ``local[2,3]`` has no separate executor. W5: the
  driver's and the cluster's processes together ("peak RSS"), and the largest
  executor alone ("peak executor", see W5).
* **outputs identical**: each run with a failure is compared, as multisets,
  with the same configuration's failure-free run — ``totals_out`` per epoch
  and the SQLite ``heavy_rows`` table (W4), ``totals_out`` of the last 10
  epochs against a fresh run of v2 (W6), the flagship's responses and
  statistics (W1), ``changes`` per epoch (W2, W3, W5: also against the
  workload computed from the input in NumPy, so that every formulation of
  either system must give the same rows); any difference makes the
  benchmark exit with status 1.

Sizes (:data:`SIZES`): ``--quick`` (W1 6 epochs at 4,000 events; W4 8
epochs at 20,000 events, W6 14 epochs at 10,000 events, over 2,000 users; W2
10^5 keys, W3 3·10^4 keys, 8 epochs, crash at 6; W5 as above), the default, and
``--full`` (W1 12 epochs; W4 12 epochs and W6 30 epochs at 200,000 events
over 50,000 users; W2 2·10^6 keys, W3 10^7 keys, 12 epochs, crash at 10).
Results: ``benchmarks/results/spark_matrix.json`` (with the load average at
the start, after each configuration and at the end) and
``benchmarks/results/spark_matrix_<W>.png``; ``--markdown`` prints the
table from the JSON.

``--drivers N`` (W1–W4, W6, YSB, MIXED): each configuration is measured by N pairs of driver
processes (killed, restarted), taken round-robin over the configurations,
and every number reported is the median of the N drivers' (each driver's
under ``drivers``, each driver's ratio to the streaming configurations' of
the same round under ``per_driver_over``). Why: W1's CPU per epoch differs
by up to 1.3× between two drivers of the same configuration in one run —
a spread between driver processes, not the machine's drift, and not the
JIT's (read apart, it does not narrow it) — so a single pair of drivers
per configuration cannot settle a 1.15× target. ``falkirk-advised`` is
profiled and advised once; its later drivers run with that advice.

Usage (from the repository's root)::

    python -m benchmarks.spark_matrix --quick
    python -m benchmarks.spark_matrix --quick --only W4,W6
    python -m benchmarks.spark_matrix --quick --only W1 --merge   # keep the other workloads' results
    python -m benchmarks.spark_matrix --quick --only W1 --drivers 3 --merge   # medians of 3 drivers each
    python -m benchmarks.spark_matrix --quick --only W5 --merge   # starts (and stops) the standalone cluster
    python -m benchmarks.spark_matrix --quick --only YSB,MIXED --drivers 3 --merge   # paced: ~5 min per driver
    python -m benchmarks.spark_matrix --full
    python -m benchmarks.spark_matrix --markdown
"""
