"""A step's code is everything of the user's it reaches (falkirk.spark.pipeline.declare.fingerprint).

Each case writes the user's modules twice — as they were when the root was
written and as they are now — into two directories, imports the step from
each in turn under the same module names, and asks the pipeline to start
on the root the first version wrote: a changed helper, closure variable,
module constant, nested helper or class method is refused naming it; an
unchanged re-import is not. No Spark: the check runs before any job.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import Ephemeral, Pipeline, PipelineError
from falkirk.spark.pipeline.declare.fingerprint import STEP, dependencies, describe_differences

MODULES = ("fp_steps", "fp_helpers", "fp_deeper")

#: The user's code as it was: the step calls a helper, which calls another and reads constants.
BEFORE = {
    "fp_steps.py": """
        import fp_helpers
        from fp_helpers import normalise

        def make(limit):
            def clean(events):
                return normalise(events).where(f"amount > {limit}")
            return clean

        def clean(events):
            return normalise(events).where(f"amount > {fp_helpers.LIMIT}")
        """,
    "fp_helpers.py": """
        import json
        from fp_deeper import rescale

        LIMIT = 3
        COLUMNS = ["user", "amount"]

        class Scaler:
            factor = 2
            def apply(self, df):
                return df.selectExpr("user", f"amount * {self.factor} AS amount")

        def normalise(events):
            json.dumps(COLUMNS)  # library code: not followed
            return rescale(events.select(*COLUMNS))
        """,
    "fp_deeper.py": """
        def rescale(df):
            return df.selectExpr("user", "amount * 10 AS amount")
        """,
}


@pytest.fixture
def user_code(tmp_path: Path) -> Iterator[Any]:
    """``load(files)``: write the user's modules (``BEFORE`` with ``files`` replaced) and import them afresh."""
    versions = 0

    def load(files: dict[str, str] | None = None) -> Any:
        nonlocal versions
        versions += 1
        where = tmp_path / f"v{versions}"
        where.mkdir()
        for name, text in {**BEFORE, **(files or {})}.items():
            (where / name).write_text(textwrap.dedent(text))
        for m in MODULES:
            sys.modules.pop(m, None)
        sys.path.insert(0, str(where))
        try:
            importlib.invalidate_caches()
            return importlib.import_module("fp_steps")
        finally:
            sys.path.remove(str(where))

    yield load
    for m in MODULES:
        sys.modules.pop(m, None)


def pipeline(root: Path, fn: Any, **options: Any) -> Pipeline:
    pipe = Pipeline(root, None, fsync=False, **options)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=1)
    pipe.step(fn, name="clean", inputs=["events"], regime=Ephemeral())
    pipe.output("report", inputs=["clean"])
    return pipe


def refusal(tmp_path: Path, before: Any, after: Any) -> str:
    """The error a pipeline with step function ``after`` meets on a root written with ``before``; the root stays."""
    root = tmp_path / "root"
    pipeline(root, before).check_root()
    recorded = (root / "pipeline.json").read_bytes()
    with pytest.raises(PipelineError, match=r"step 'clean': its code changed") as info:
        pipeline(root, after).check_root()
    assert (root / "pipeline.json").read_bytes() == recorded
    return str(info.value)


def test_a_changed_helper_is_refused_naming_it(tmp_path: Path, user_code: Any) -> None:
    """The step is unchanged; the helper it calls filters differently now."""
    old = user_code().clean
    new = user_code({"fp_helpers.py": BEFORE["fp_helpers.py"].replace("events.select(*COLUMNS)",
                                                                      "events.select(*COLUMNS).distinct()")}).clean
    message = refusal(tmp_path, old, new)
    assert "function normalise changed" in message and STEP not in message, message


def test_a_changed_nested_helper_two_calls_deep_is_refused_naming_it(tmp_path: Path, user_code: Any) -> None:
    """step → normalise → rescale: rescale's factor changes."""
    old = user_code().clean
    new = user_code({"fp_deeper.py": BEFORE["fp_deeper.py"].replace("amount * 10", "amount * 100")}).clean
    message = refusal(tmp_path, old, new)
    assert "function rescale changed" in message and "normalise" not in message, message


def test_a_changed_module_constant_is_refused_naming_it(tmp_path: Path, user_code: Any) -> None:
    """A threshold read as ``fp_helpers.LIMIT`` (a module attribute), and a column list read by the helper."""
    old = user_code().clean
    new = user_code({"fp_helpers.py": BEFORE["fp_helpers.py"].replace("LIMIT = 3", "LIMIT = 4")}).clean
    assert "constant LIMIT changed" in refusal(tmp_path / "limit", old, new)
    new = user_code({"fp_helpers.py": BEFORE["fp_helpers.py"].replace('["user", "amount"]',
                                                                      '["user", "amount", "tag"]')}).clean
    assert "constant COLUMNS changed" in refusal(tmp_path / "columns", old, new)


def test_a_changed_closure_variable_is_refused_naming_it(tmp_path: Path, user_code: Any) -> None:
    """The step comes from a factory: the same code with another captured limit."""
    steps = user_code()
    message = refusal(tmp_path, steps.make(3), steps.make(5))
    assert "closure variable limit of make.<locals>.clean changed" in message, message


def test_a_changed_method_of_a_users_class_is_refused_naming_it(tmp_path: Path, user_code: Any) -> None:
    """A step using an instance of the user's class: its method and its class attribute are followed."""
    text = BEFORE["fp_steps.py"] + "\n        SCALER = fp_helpers.Scaler()\n\n" \
        "        def scaled(events):\n            return SCALER.apply(events)\n"
    old = user_code({"fp_steps.py": text}).scaled
    new = user_code({"fp_steps.py": text, "fp_helpers.py": BEFORE["fp_helpers.py"].replace("factor = 2",
                                                                                           "factor = 3")}).scaled
    assert "class Scaler changed" in refusal(tmp_path / "attr", old, new)
    new = user_code({"fp_steps.py": text, "fp_helpers.py": BEFORE["fp_helpers.py"].replace(
        '"user", f"amount', '"user", f"amount + 1 +')}).scaled
    assert "function Scaler.apply changed" in refusal(tmp_path / "method", old, new)


def test_an_unchanged_reimport_is_not_refused(tmp_path: Path, user_code: Any) -> None:
    """The same files imported again (a new driver): the same fingerprints, accepted with nothing to note."""
    root = tmp_path / "root"
    pipeline(root, user_code().clean).check_root()
    found = pipeline(root, user_code().clean).check_root(write=False)
    assert not found and found.accepted == ()


def test_code_changes_accepts_a_changed_helper(tmp_path: Path, user_code: Any) -> None:
    """The refusal's remedy works for a helper's change too."""
    root = tmp_path / "root"
    pipeline(root, user_code().clean).check_root()
    new = user_code({"fp_deeper.py": BEFORE["fp_deeper.py"].replace("amount * 10", "amount * 100")}).clean
    found = pipeline(root, new, code_changes={"clean": "keep"}).check_root(write=False)
    assert dict(found.code) == {"clean": "keep"}


def test_what_is_followed_and_what_is_not(user_code: Any) -> None:
    """User functions, classes and plain values are parts; library code (json, pyspark, falkirk) is not."""
    parts = dependencies(user_code().clean)
    assert sorted(parts) == ["constant COLUMNS", "constant LIMIT", "function normalise", "function rescale", STEP]
    from pyspark.sql import functions as F

    def step(events: Any) -> Any:
        return events.select(F.col("user"), F.lit(os.sep))
    assert sorted(dependencies(step)) == [STEP]


def test_a_root_without_code_deps_is_upgraded_not_refused(tmp_path: Path, user_code: Any) -> None:
    """A root written before dependencies were recorded: accepted with nothing to note, then recorded."""
    import json

    root = tmp_path / "root"
    fn = user_code().clean
    pipeline(root, fn).check_root()
    doc = json.loads((root / "pipeline.json").read_text())
    del doc["steps"]["clean"]["code_deps"]
    (root / "pipeline.json").write_text(json.dumps(doc))
    found = pipeline(root, fn).check_root(write=False)
    assert not found and found.accepted == () and found.record


def test_dependencies_are_the_same_in_every_process(tmp_path: Path) -> None:
    """String hashing differs per process (PYTHONHASHSEED): the dependencies' fingerprints must not."""
    for name, text in BEFORE.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    script = ("import json, fp_steps\nfrom falkirk.spark.pipeline.declare.fingerprint import dependencies\n"
              "print(json.dumps(dependencies(fp_steps.clean), sort_keys=True))\n")
    seen = {subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(tmp_path)}).stdout
            for seed in (1, 2, 3)}
    assert len(seen) == 1 and "function rescale" in next(iter(seen)), seen
    assert describe_differences({}, {}) == []
