"""Packaging and set-up script checks."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
JAVA_SH = ROOT / "scripts" / "_java.sh"
BASH = shutil.which("bash") or "/bin/bash"


def test_import_falkirk_does_not_import_pyspark_or_hypothesis() -> None:
    """`import falkirk` succeeds and pulls in neither pyspark nor hypothesis."""
    code = (
        "import sys, falkirk; "
        "assert 'pyspark' not in sys.modules and 'hypothesis' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _fake_java(directory: Path, version_line: str) -> None:
    """Write a fake `java` into directory that prints version_line to stderr."""
    java = directory / "java"
    java.write_text(f"#!{BASH}\necho '{version_line}' >&2\n")
    java.chmod(0o755)


def _check_java(path: Path, java_home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run falkirk_check_java with only `path` on PATH (and JAVA_HOME if given)."""
    env = {"PATH": str(path)}
    if java_home is not None:
        env["JAVA_HOME"] = str(java_home)
    return subprocess.run(
        [BASH, "-c", f"source '{JAVA_SH}'; falkirk_check_java"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "version_line",
    ['openjdk version "11.0.2" 2019-01-15', 'java version "1.8.0_292"'],
)
def test_java_check_rejects_old_java(tmp_path: Path, version_line: str) -> None:
    """A Java older than 17 fails the check with a message naming Java 17."""
    _fake_java(tmp_path, version_line)
    result = _check_java(tmp_path)
    assert result.returncode != 0
    assert "Java 17" in result.stderr


@pytest.mark.parametrize(
    "version_line",
    ['openjdk version "17.0.15" 2025-04-15', 'openjdk version "21" 2023-09-19'],
)
def test_java_check_accepts_java_17_or_newer(tmp_path: Path, version_line: str) -> None:
    """Java 17 or newer passes the check silently."""
    _fake_java(tmp_path, version_line)
    result = _check_java(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_java_check_fails_without_java(tmp_path: Path) -> None:
    """No java on PATH and no JAVA_HOME fails the check with a clear message."""
    result = _check_java(tmp_path)
    assert result.returncode != 0
    assert "Java 17" in result.stderr
    assert "no 'java' found" in result.stderr


def test_java_check_prefers_java_home(tmp_path: Path) -> None:
    """JAVA_HOME's java is checked instead of the one on PATH."""
    on_path = tmp_path / "path"
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    on_path.mkdir()
    _fake_java(on_path, 'openjdk version "11.0.2"')
    _fake_java(java_home / "bin", 'openjdk version "21.0.1"')
    assert _check_java(on_path, java_home).returncode == 0
    assert _check_java(java_home / "bin", on_path.parent / "missing").returncode != 0


def test_scripts_are_executable() -> None:
    """The set-up scripts and the CI entry point have the executable bit set."""
    names = ["scripts/_env.sh", "scripts/_java.sh", "scripts/run.sh", "scripts/test.sh", ".ci/run"]
    for name in names:
        assert os.access(ROOT / name, os.X_OK), name


def test_spark_tests_are_in_two_xdist_groups(tmp_path: Path) -> None:
    """Under `--dist loadgroup` every Spark test is in a group (all of a group on one worker): the tests of the
    cluster and the Connect server in `spark-procs`, every other Spark test in `spark` (one SparkSession); the
    rest in none. Checked on the collected items' marks (a probe plugin), without running them."""
    probe = tmp_path / "group_probe.py"
    probe.write_text(
        "def pytest_collection_finish(session):\n"
        "    for item in session.items:\n"
        "        mark = item.get_closest_marker('xdist_group')\n"
        "        print('GROUP', item.nodeid, mark.args[0] if mark else '-')\n"
    )
    env = {**os.environ, "HYPOTHESIS_PROFILE": "dev", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "group_probe", "--collect-only", "-q",
         f"--basetemp={tmp_path / 'inner'}", "tests/spark/pipeline/store/test_keyed.py", "tests/spark/cluster",
         "tests/spark/connect", "tests/domains/test_domain_registry.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    groups = dict(line.split()[1:3] for line in run.stdout.splitlines() if line.startswith("GROUP "))
    by_dir: dict[str, set[str]] = {}
    for nodeid, group in groups.items():
        by_dir.setdefault(nodeid.rsplit("/", 1)[0], set()).add(group)
    assert by_dir == {"tests/spark/pipeline/store": {"spark"}, "tests/spark/cluster": {"spark-procs"},
                      "tests/spark/connect": {"spark", "spark-procs"}, "tests/domains": {"-"}}, by_dir
    through_connect = {n: g for n, g in groups.items() if n.startswith("tests/spark/connect/")}
    assert through_connect.pop("tests/spark/connect/test_connect.py::test_pipeline_code_touches_the_jvm_only_in_the_"
                               "session_module") == "spark"  # no server: it reads the source
    assert set(through_connect.values()) == {"spark-procs"}, through_connect


def test_tests_that_provoke_a_fetch_failure_run_after_every_other_test(tmp_path: Path) -> None:
    """A fetch failure breaks the shared local session's block manager for the rest of the run (tests/conftest.py):
    the ``fetch_failure`` tests (every test that deletes shuffle files in the shared session: the lineage tests
    and the lineage example) are collected last, in their own order."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
         f"--basetemp={tmp_path / 'inner'}", "tests/spark/lineage", "tests/spark/pipeline/store/test_keyed.py"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    ids = [line for line in run.stdout.splitlines() if "::" in line]
    provoking = ("tests/spark/lineage/test_lineage_spark.py::", "tests/spark/lineage/test_run_examples.py::test_lineage")
    marked = [i for i, line in enumerate(ids) if line.startswith(provoking)]
    assert len(marked) > 5 and marked == list(range(len(ids) - len(marked), len(ids))), ids


def test_importing_the_tests_helper_scripts_writes_nothing(tmp_path: Path) -> None:
    """Importing each helper script under tests/, as ``--doctest-modules`` does, writes no file in the current directory."""
    helpers = [p for p in sorted((ROOT / "tests").rglob("*.py"))
               if p.name != "conftest.py" and not p.name.startswith("test_")]
    assert any(p.name == "make.py" for p in helpers), helpers  # the fixture script that once wrote root/ on import
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--doctest-modules",
                          "-p", "no:cacheprovider", *map(str, helpers)], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode in (0, 5), run.stdout + run.stderr  # 5: no doctests among them
    assert sorted(p.name for p in tmp_path.iterdir()) == []
