"""The matrix's workloads, their configurations and sizes.

What each configuration runs is defined in its workload's module (:mod:`.w1`, :mod:`.w4`, :mod:`.w6`,
:mod:`.w2_w3`, :mod:`.w5`, :mod:`.ysb`, :mod:`.mixed`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the ``benchmarks`` directory (``results/`` holds the matrix's JSON and pictures)
BENCHMARKS = Path(__file__).resolve().parents[1]


RESULTS = BENCHMARKS / "results"
WORKLOADS = ("W1", "W4", "W6", "W2", "W3", "W5", "YSB", "MIXED")
IMPLEMENTED = ("W1", "W4", "W6", "W2", "W3", "W5", "YSB", "MIXED")
SNAPSHOT_KEY = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
SNAP2 = {SNAPSHOT_KEY: "2"}
#: Java options of the ``-c1`` configurations (a configuration's ``jvm``, its driver JVM's): the client JIT only.
#: A driver's epochs are few and small; C2's compiling (most of the JIT's CPU in a young JVM) may not pay back.
C1 = "-XX:TieredStopAtLevel=1"
#: failures per epoch ``falkirk-advised`` is advised for (each step failing alone), as in benchmarks/spark_advisor.py
ADVISE_RATE = 0.05
#: the configurations of each workload: name → (system, options)
CONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "W1": {"streaming": {"base": "streaming"}, "streaming-snap2": {"base": "streaming", "conf": SNAP2},
           "falkirk": {"base": "falkirk"}, "falkirk-tuned": {"base": "falkirk-tuned"},
           "falkirk-advised": {"base": "falkirk-advised"}, "falkirk-eager": {"base": "falkirk-eager"},
           "streaming-spark-cc": {"base": "streaming-spark-cc"}, "falkirk-propagation": {"base": "falkirk-propagation"}},
    "W4": {"streaming": {"mode": "single"}, "streaming-snap2": {"mode": "single", "conf": SNAP2},
           "streaming-split": {"mode": "split"}, "falkirk": {"totals": "lazy"}, "falkirk-inc": {"totals": "incremental"},
           "falkirk-advised": {"totals": "lazy", "advise": True}},
    "W6": {"streaming": {"mode": "single"}, "streaming-split": {"mode": "split"}, "falkirk": {"totals": "lazy"}},
    "W2": {"streaming-native": {"form": "native"}, "streaming-native-snap2": {"form": "native", "conf": SNAP2},
           "streaming": {"form": "pandas-state"}, "streaming-snap2": {"form": "pandas-state", "conf": SNAP2},
           "falkirk-inc": {"regime": "eager-inc"}, "falkirk-lazy3": {"regime": "lazy3"}},
    "W3": {"streaming-merge": {"form": "merge"}, "streaming-tws": {"form": "tws"},
           "streaming-tws-rows": {"form": "tws-rows"}, "streaming": {"form": "pandas-state"},
           "streaming-snap2": {"form": "pandas-state", "conf": SNAP2}, "falkirk-lazy3": {"regime": "lazy3"},
           "falkirk-inc": {"regime": "eager-inc"}},
    "W5": {"streaming-native": {"form": "native"}, "streaming": {"form": "pandas-state"},
           "streaming-snap2": {"form": "pandas-state", "conf": SNAP2}, "falkirk-lazy3": {"regime": "lazy3"},
           "falkirk-inc": {"regime": "eager-inc"}, "falkirk-lazy3-r1": {"regime": "lazy3-r1"}},
    "YSB": {"streaming": {}, "streaming-rtm": {"rtm": True}, "falkirk": {}, "falkirk-concurrent": {"concurrency": 3},
            "streaming-c1": {"jvm": C1}, "falkirk-c1": {"jvm": C1}},
    "MIXED": {"streaming-two-queries": {}, "falkirk": {}, "falkirk-logged": {"log_views": True},
              "falkirk-logged-concurrent": {"log_views": True, "concurrency": 3},
              "falkirk-logged-concurrent-rollback": {"log_views": True, "concurrency": 3, "retry_in_place": False}},
}
#: YSB's shape at every size: 100 campaigns × 10 ads, 10-second windows, an epoch every 5 seconds (the issue's)
#: ``warm``: epochs of an unmeasured paced run first in each driver; ``warmup``: steady figures from this epoch
YSB_SHAPE = {"campaigns": 100, "window_ms": 10000, "interval": 5.0, "warm": 3, "warmup": 3}
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "quick": {"W1": {"epochs": 6, "crash": 4, "events": 4000, "queries": 60},
              "W4": {"epochs": 8, "fail": 5, "events": 20000, "users": 2000},
              "W6": {"epochs": 14, "events": 10000, "users": 2000},
              "W2": {"epochs": 8, "crash": 6, "keys": 100000, "churn": 0.01},
              "W3": {"epochs": 8, "crash": 6, "keys": 30000, "churn": 1.0},
              "W5": {"epochs": 9, "crash": 4, "keys": 20000, "churn": 0.05},
              "YSB": {"epochs": 14, "fail": 6, "events": 20000, **YSB_SHAPE},
              "MIXED": {"epochs": 16, "fail": 9, "events": 20000, "heavy_every": 5, **YSB_SHAPE}},
    "default": {"W1": {"epochs": 12, "crash": 10, "events": 4000, "queries": 60},
                "W4": {"epochs": 10, "fail": 7, "events": 100000, "users": 20000},
                "W6": {"epochs": 20, "events": 50000, "users": 10000},
                "W2": {"epochs": 12, "crash": 10, "keys": 1000000, "churn": 0.01},
                "W3": {"epochs": 12, "crash": 10, "keys": 500000, "churn": 1.0},
                "W5": {"epochs": 10, "crash": 7, "keys": 100000, "churn": 0.01},
                "YSB": {"epochs": 24, "fail": 12, "events": 50000, **YSB_SHAPE},
                "MIXED": {"epochs": 26, "fail": 19, "events": 50000, "heavy_every": 5, **YSB_SHAPE}},
    "full": {"W1": {"epochs": 12, "crash": 10, "events": 4000, "queries": 60},
             "W4": {"epochs": 12, "fail": 9, "events": 200000, "users": 50000},
             "W6": {"epochs": 30, "events": 200000, "users": 50000},
             "W2": {"epochs": 12, "crash": 10, "keys": 2000000, "churn": 0.01},
             "W3": {"epochs": 12, "crash": 10, "keys": 10000000, "churn": 1.0},
             "W5": {"epochs": 12, "crash": 10, "keys": 1000000, "churn": 0.01},
             "YSB": {"epochs": 36, "fail": 18, "events": 50000, **YSB_SHAPE},
             "MIXED": {"epochs": 36, "fail": 24, "events": 50000, "heavy_every": 5, **YSB_SHAPE}},
}
