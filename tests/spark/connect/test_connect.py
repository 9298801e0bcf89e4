"""The tiny flagship through Spark Connect: runs, checkpoints and recovers as through a classic session.

Every pipeline runs in a Connect *client* process (no JVM on the client);
the server is ``connect_server`` (tests/spark/conftest.py). Outputs are compared as
multisets with the classic, local, failure-free ``reference`` run.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, assert_identical

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.connect]

#: Injected into the restarted client's run: a failed Spark job and a failure mid-step.
INJECTED = ["answer@2:job", "cc@3:mid"]


@pytest.fixture(scope="module")
def connect_runs(remote: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A client killed mid-step; a second client restarts its pipeline, which then meets injected
    failures, and calls the JVM-only lineage features."""
    base = tmp_path_factory.mktemp("connect")
    first = remote([{"name": "killed", "kind": "run", "root": str(base / "killed"), "epochs": EPOCHS,
                     "fail": ["cc@1:kill-mid"]}])
    second = remote([
        {"name": "restart", "kind": "run", "root": (base / "killed").as_uri(), "epochs": EPOCHS, "fail": INJECTED},
        {"name": "lineage", "kind": "lineage"},
        {"name": "stopped", "kind": "stopped", "root": str(base / "stopped"), "epochs": EPOCHS},
    ])
    second.killed_driver = first
    print(f"connect: killed client {first.seconds:.1f} s, second client {second.seconds:.1f} s")
    for name, out in second.results.items():
        print(f"  {name}: {out.get('wall')} s " + ("ok" if out["ok"] else f"{out.get('error')}: {out.get('message')}"))
    return second, base


def test_client_killed_restarted_and_failing_through_connect(connect_runs: Any, spark: Any, reference: Path) -> None:
    """The client (the pipeline's driver) SIGKILLed mid-step; a new client resumes from the root (given as a
    ``file://`` URI this time) and recovers from a failed Spark job and a mid-step failure: output identical
    to the classic failure-free run."""
    run, base = connect_runs
    assert run.killed_driver.returncode == -signal.SIGKILL, run.killed_driver.stdout[-3000:]
    out = run["restart"]
    assert out["ok"], out
    assert sorted(out["fired"]) == sorted(INJECTED)
    restart, *failures = out["recoveries"]
    assert restart["restart"] and restart["actions"]["cc"] in ("restart", "restore")
    causes = [r["cause"] for r in failures]
    assert len(causes) == 2 and any("injected failure (mid)" in c for c in causes), causes
    assert any("injected task failure" in c for c in causes), causes  # the job's root cause, not "o123.count"
    assert_identical(spark, base / "killed", reference)


def test_jvm_only_features_name_themselves_through_connect(connect_runs: Any) -> None:
    """Lineage introspection and lose_outputs raise SparkConnectError naming the problem and the alternative."""
    run, _ = connect_runs
    raised = run["lineage"]["raised"]
    assert set(raised) == {"lineage", "lose_outputs"}
    for name, message in raised.items():
        assert message is not None and not message.startswith("WRONG"), (name, message)
        assert "classic" in message and "builder.master" in message


def test_a_stopped_connect_session_is_a_clear_error(connect_runs: Any) -> None:
    """A Connect session stopped on the client, then ``pipeline.run``: a SessionError saying so."""
    run, base = connect_runs
    out = run["stopped"]
    assert not out["ok"] and out["error"] == "SessionError", out
    assert "SparkSession was stopped" in out["message"], out
    assert not (base / "stopped" / "pipeline.json").exists()


def test_pipeline_code_touches_the_jvm_only_in_the_session_module() -> None:
    """``_jdf``, ``_jvm`` and ``sparkContext`` appear in falkirk.spark.pipeline only in session.py."""
    import falkirk.spark.pipeline as pkg

    offenders = []
    for path in sorted(Path(pkg.__file__).parent.glob("*.py")):
        if path.name == "session.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"_jdf|_jvm|sparkContext", line):
                offenders.append(f"{path.name}:{i}: {line.strip()}")
    assert offenders == []
