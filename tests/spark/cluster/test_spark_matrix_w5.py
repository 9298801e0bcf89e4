"""Smoke test of W5 (benchmarks/spark_matrix/w5.py: executor loss on a standalone cluster), tiny, on the session's cluster.

Here and not in tests/benchmarks/test_spark_matrix.py: W5 needs the suite's
standalone cluster (``cluster``: session-scoped, started once for every
cluster test) and a driver process of its own, which is how the benchmark
runs it (``child`` → ``--phase W5``). One configuration per system: falkirk's
shipped regimes and the stream's native aggregation (its kill: a filter in
the killed batch's plan only), 3 epochs of 400 keys, the executor holding the most state SIGKILLed in the
stateful step at epoch 1; each failure run equals its failure-free run.
Alone (its own cluster start included) it took 4 min 38 s at load 11–12 on
2 cores: about 2 minutes per configuration, one Spark application each.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from harness import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.cluster]

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


# The stream's applyInPandasWithState form (``streaming``) is left to tests/benchmarks/test_spark_matrix.py
# (W2/W3, local): on the cluster its run is this one's but for the state function, about a minute more.
@pytest.mark.parametrize("name", ["falkirk-lazy3", "streaming-native"])
def test_w5_executor_killed_mid_step_gives_the_failure_free_output(
    cluster: StandaloneCluster, tmp_path: Path, name: str
) -> None:
    pytest.importorskip("pandas", reason="applyInPandasWithState needs pandas")
    pytest.importorskip("pyarrow", reason="applyInPandasWithState needs pyarrow")
    from benchmarks.spark_matrix.configs import CONFIGS
    from benchmarks.spark_matrix.measure import child
    from benchmarks.spark_matrix.w2_w3 import write_keyed_input

    size = {"epochs": 3, "crash": 1, "keys": 400, "churn": 0.1}
    shared = cluster.shared / f"w5-smoke-{name}"
    write_keyed_input(shared / "input", size, size["epochs"])
    info = {"master": cluster.master_url, "conf": cluster.driver_conf(),
            "roots": [p.pid for p in cluster.started if p.poll() is None]}
    system = "streaming" if name.startswith("streaming") else "falkirk"
    spec: dict[str, Any] = {"workload": "W5", "system": system, "size": size, "base": str(shared / "run"),
                            "input": str(shared / "input"), "cluster": info, **CONFIGS["W5"][name]}
    out = child(spec, tmp_path, f"W5-{name}", "W5")
    print(name, {k: out.get(k) for k in ("recovery_s", "recovery_cpu_s", "phases", "records_recomputed",
                                          "source_rows", "notes")})
    assert out["identical"], out["differences"]
    assert out["rows_compared"] > 0 and len(out["cpus"]) == size["epochs"]
    assert out["recovery_cpu_s"] > 0 and out["peak_executor_rss"] > 0
    if system == "falkirk":
        assert out["fired"] == ["agg@1:executor"], out
        assert not [x for x in out["redone"] if x[0] == "agg"], out["redone"]  # two replicas: no rollback
