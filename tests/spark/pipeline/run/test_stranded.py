"""Errors that must not strand a user: each ends in a falkirk error (or one line) saying what to do, and the
root stays usable.

* a read-only root: a ``StorageError`` naming the root, the operation and the cause; nothing changed;
* a full disk: a ``StorageError`` naming the root and saying the disk is full;
* a typo in a keyed step's ``key=`` that failed the first epoch: the corrected pipeline runs on the same root
  (nothing keyed was ever checkpointed), and its output equals a fresh run's;
* Ctrl-C in a running driver: one line saying the root is consistent and the same call resumes (no py4j
  traceback); resuming gives the output of a run that was never interrupted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from spark_support import root_listing

from falkirk.spark import Ephemeral, Lazy, Pipeline, PipelineError, StorageError, compare_runs

pytestmark = [pytest.mark.spark]

HERE = Path(__file__).resolve().parent
EPOCHS = 4


def readings(epoch: int) -> list[dict[str, Any]]:
    return [{"device": d, "value": (5 * epoch + d) % 7} for d in range(6)]


def clean(readings: Any) -> Any:
    return readings.where("value > 0").select("device", "value")


def rolling(clean: Any, *, state: Any) -> Any:
    from pyspark.sql import functions as F

    both = clean if state is None else state.unionByName(clean)
    new = both.groupBy("device").agg(F.sum("value").alias("value"))
    return new, new


def build(root: Path, spark: Any, *, key: str = "device", **options: Any) -> Pipeline:
    pipe = Pipeline(root, spark, fsync=False, **options)
    pipe.input("readings", "device BIGINT, value BIGINT", partitions=2, source=readings)
    pipe.step(clean, regime=Ephemeral())
    pipe.step(rolling, regime=Lazy(every=2, key=key, partitions=2))
    pipe.output("report", inputs=["rolling"])
    return pipe


def test_a_key_typo_that_failed_the_first_epoch_does_not_lock_the_root(spark: Any, tmp_path: Path) -> None:
    """key='devce' fails epoch 0 (no such column); key='device' then runs on that root, noting the change, and
    equals a fresh run; once a keyed checkpoint exists, another key is refused."""
    root = tmp_path / "root"
    with pytest.raises(PipelineError, match="step 'rolling': key='devce' is not a column of the state"):
        build(root, spark, key="devce").run(EPOCHS)
    assert not list((root / "manifests").glob("rolling/checkpoint/*.json"))
    fixed = build(root, spark)
    result = fixed.run(EPOCHS)
    assert any("key 'devce' → 'device'" in n for n in result.journal.notes), result.journal.notes
    fresh = tmp_path / "fresh"
    build(fresh, spark, durable=False).run(EPOCHS)
    cmp = compare_runs(spark, fixed, root, fresh)
    assert cmp.identical and cmp.rows_compared > 0, [d.describe() for d in cmp.differences]
    before = root_listing(root)
    with pytest.raises(PipelineError, match="its key cannot change once its state was checkpointed"):
        build(root, spark, key="value").run(EPOCHS + 1)
    assert root_listing(root) == before


def _unshare_reason() -> str | None:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return "no `unshare` (util-linux): cannot mount the root read-only"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            "mount --bind / /mnt && mount -o remount,bind,ro /mnt && umount /mnt"],
                           capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"read-only bind mounts are not permitted here ({probe.stderr.strip()[:200]})"


RESUME = (
    "import json, sys\n"
    "sys.path[:0] = [{here!r}, {tests!r}, {store!r}]\n"
    "from test_stranded import build\n"
    "from fresh_driver import LocalStandIn\n"
    "from falkirk.spark.pipeline.run.executor import Executor\n"
    "pipe = build(sys.argv[1], None)\n"
    "pipe.spark = LocalStandIn()\n"
    "try:\n"
    "    Executor(pipe).rollback.recover(set(pipe.order), 'restart', restart=True)\n"
    "except Exception as exc:\n"
    "    print(json.dumps([type(exc).__name__, [c.__name__ for c in type(exc).__mro__], str(exc)]))\n"
)


def _restart_in_namespace(tmp_path: Path, mount: str, root: Path) -> tuple[str, list[str], str]:
    """A restarted driver's recovery of ``root``, run after the shell commands ``mount`` in a private mount
    namespace: the error it stopped with (class name, its classes, message)."""
    script = tmp_path / "resume.py"
    script.write_text(RESUME.format(here=str(HERE), tests=str(HERE.parents[1]), store=str(HERE.parent / "store")))
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", f'{mount} && exec "$0" "$@"',
                          sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0 and out.stdout.strip(), out.stderr[-3000:]
    name, mro, message = json.loads(out.stdout.strip().splitlines()[-1])
    return name, mro, message


def _two_epochs_or_skip(spark: Any, tmp_path: Path) -> tuple[Path, Any]:
    """A root after two epochs and its listing; the test is skipped (with the reason) where mount namespaces
    are not allowed."""
    reason = _unshare_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "root"
    build(root, spark).run(2)
    return root, root_listing(root)


def test_a_read_only_root_is_a_storage_error_naming_root_operation_and_cause(spark: Any, tmp_path: Path) -> None:
    """A root mounted read-only (a real read-only filesystem, in a private mount namespace): the restarted driver
    stops with a StorageError naming the root, what it was doing and the cause, and nothing under it changed."""
    root, before = _two_epochs_or_skip(spark, tmp_path)
    name, mro, message = _restart_in_namespace(
        tmp_path, f"mount --bind {root} {root} && mount -o remount,bind,ro {root}", root)
    assert name == StorageError.__name__ and "OSError" in mro, (name, message)
    assert f"root {Path(root).as_uri()}" in message, message
    assert "rebuilding the monitor's database" in message and "Read-only file system" in message, message
    assert root_listing(root) == before


def test_a_full_disk_is_a_storage_error_that_says_so(spark: Any, tmp_path: Path) -> None:
    """The root on a filesystem with no byte free (a copy on a tmpfs of a private mount namespace, the rest of
    the tmpfs taken): the restarted driver stops with a StorageError naming the root and a full disk
    (regression: the cluster soak's full disk stopped a driver with a MonitorError saying only ``disk I/O
    error``, about ``meta.sqlite.new``)."""
    root, before = _two_epochs_or_skip(spark, tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fill = (f"mount -t tmpfs -o size=64m none {mnt} && cp -a {root} {mnt}/root && "
            f"{{ dd if=/dev/zero of={mnt}/ballast bs=64k 2>/dev/null || true; }}")
    name, _, message = _restart_in_namespace(tmp_path, fill, mnt / "root")
    assert name == StorageError.__name__, (name, message)
    assert f"root {(mnt / 'root').as_uri()}" in message, message
    assert "no space left on device" in message.lower(), message
    assert root_listing(root) == before  # the copy was damaged, if anything: never the original


DRIVER = """
import sys
sys.path[:0] = [{here!r}, {spark_tests!r}]
from test_stranded import build
from falkirk.spark.pipeline.run.session import local_session

spark = local_session("local[2]", "falkirk-interrupt", {{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}})
spark.sparkContext.setLogLevel("OFF")
build(sys.argv[1], spark).run(int(sys.argv[2]), progress=lambda line: print(line, flush=True))
print("finished", flush=True)
"""


def test_ctrl_c_stops_with_one_line_and_the_same_call_resumes(spark: Any, tmp_path: Path) -> None:
    """SIGINT to a driver in its second epoch: its last line says the run was interrupted, the root is consistent
    and the same call resumes; no py4j frame in what it printed; resuming equals an uninterrupted run."""
    root = tmp_path / "root"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(here=str(HERE), spark_tests=str(HERE.parents[1])))
    proc = subprocess.Popen([sys.executable, str(script), str(root), "40"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = []
    try:
        deadline = time.monotonic() + 300
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("epoch   1"):
                time.sleep(0.3)  # inside epoch 2's work
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines += out.splitlines()
    assert not any(line.startswith("finished") for line in lines), "the run was not interrupted"
    assert proc.returncode != 0
    said = [line for line in err.splitlines() if line.strip()]
    assert said and "run interrupted (Ctrl-C)" in said[-1], err[-3000:]
    assert f"the root {root.as_uri()} is consistent" in said[-1] and "the same call resumes" in said[-1]
    assert "py4j" not in err, err[-3000:]
    resumed = build(root, spark)
    result = resumed.run(6)
    assert result.done["report"] == 5
    fresh = tmp_path / "fresh"
    build(fresh, spark, durable=False).run(6)
    cmp = compare_runs(spark, resumed, root, fresh)
    assert cmp.identical and cmp.rows_compared > 0, [d.describe() for d in cmp.differences]
