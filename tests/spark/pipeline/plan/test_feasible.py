"""Executable plans: a what-if says "executable" exactly when the recovery it predicts then succeeds.

The property runs the all-regimes pipeline with garbage collection on (a random ``retain``), and at a random
epoch boundary — after the collection of that epoch — optionally damages one random file a recovery may
read (a checkpoint's or a log's data file, a manifest, an old input segment), asks the live what-if for a
random failure set, and then lets that failure happen (``STEP@E:after``). The what-if must be executable
exactly when the recovery succeeds; when it is not, it names what is missing, and the real recovery's
error starts with the same file. ``FALKIRK_FEASIBLE_EXAMPLES`` sets the number of examples.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spark_support import all_regimes

from falkirk.spark import RecoveryError

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STEPS = ["events", "clean", "hourly", "rolling", "alerts", "report"]
DAMAGE = [None, "data", "manifest", "segment"]


def _damage(root: Path, kind: str, rnd: random.Random, at: int) -> Path | None:
    """Delete one file a recovery may read; ``None`` when there is nothing of that kind."""
    if kind == "data":
        candidates = [p for p in (root / "data").rglob("*.parquet")]
    elif kind == "manifest":
        candidates = sorted(p for p in (root / "manifests").glob("*/*/*.json") if p.parent.name != "output")
    else:  # an input segment of an epoch before the boundary (the boundary's own cut must stay readable)
        candidates = sorted(p for p in (root / "input" / "events").glob("part-*/*.jsonl")
                            if not p.name.endswith(f"@epoch-{at}.jsonl"))
    if not candidates:
        return None
    victim = rnd.choice(sorted(candidates))
    victim.unlink()
    return victim


@settings(max_examples=int(os.environ.get("FALKIRK_FEASIBLE_EXAMPLES", "5")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(epochs=st.integers(4, 6), retain=st.integers(1, 2), boundary=st.integers(1, 3),
       failed=st.lists(st.sampled_from(STEPS), min_size=1, max_size=2, unique=True),
       damage=st.sampled_from(DAMAGE), seed=st.integers(0, 2**16))
def test_what_if_is_executable_exactly_when_the_recovery_succeeds(
    epochs: int, retain: int, boundary: int, failed: list[str], damage: str | None, seed: int, spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Live what-if at a boundary, then the same failure for real: executable ⇔ recovered."""
    root = tmp_path_factory.mktemp("feasible")
    at = min(boundary, epochs - 2)
    pipe = all_regimes(root, spark, retain=retain)
    seen: dict[str, Any] = {}

    def progress(line: str) -> None:
        if line.startswith(f"epoch {at:>3}") and "what" not in seen:
            seen["victim"] = _damage(root, damage, random.Random(seed), at) if damage else None
            seen["what"] = pipe.plan_failure(failed)

    try:
        pipe.run(epochs, fail=[f"{s}@{at}:after" for s in failed], progress=progress)
        recovered, error = True, ""
    except RecoveryError as exc:
        recovered, error = False, str(exc)
    what = seen["what"]
    assert what.executable == recovered, (what.table(), error, seen["victim"])
    if not recovered:
        first = what.blocked.split(" ", 1)[0]
        assert error.startswith(first), (what.blocked, error)
