"""A seeded corruption fuzz: one damaged file per trial, and never a silent loss or a raw error.

A pipeline of every regime — input ``events`` (keyed, 2 partitions) → Ephemeral ``clean`` → Batch ``hourly``
→ ``Lazy(every=3, key=user)`` ``rolling`` → output ``report``, and an ``Eager`` SQLite step ``alerts`` over
``clean`` — runs ``FIRST`` epochs with garbage collection on (``retain=2``). Each trial copies that root,
applies **one** damage drawn by a seeded generator, and resumes to ``THEN`` epochs. Damage kinds:

==================  ====================================================================================
kind                what is done
==================  ====================================================================================
data-delete         a Parquet file of a checkpoint, log or output (named by its manifest) is deleted
data-truncate       … truncated to half its size
data-flip           … has bytes flipped in its middle
manifest-delete     a manifest (checkpoint, log, complete marker or output) is deleted
manifest-garbage    … is overwritten with garbage
manifest-size       … has a recorded file size changed
meta-delete         the monitor's ``meta.sqlite`` is deleted
meta-garbage        … is overwritten with garbage
segment-delete      an input log segment is deleted
segment-truncate    … truncated
cut-delete          an input cut is deleted
cut-garbage         … overwritten with garbage
pipeline-json       ``pipeline.json`` is overwritten with garbage
database-delete     the Eager step's SQLite database is deleted
output-delete       an epoch partition of the output is deleted
journal-garbage     an execution record under ``journal/`` is overwritten with garbage
==================  ====================================================================================

Each trial is classified:

* **identical** — the resumed run's output and database equal, as multisets, a failure-free run's;
* **named** — it stopped with a falkirk error (:class:`~falkirk.errors.FalkirkError`) whose message names the
  damaged file by its path under the root (or, for ``meta.sqlite``/journal damage, which must never stop a
  run, this is not allowed);
* **silent** — it finished with a different output: a loss nobody was told about;
* **raw** — any other exception, or a falkirk error that does not name the damaged file.

The test fails on any silent or raw trial. ``FALKIRK_CORRUPTION_TRIALS`` sets the number of trials (CI: a
modest number; the acceptance run uses ≥ 100) and ``FALKIRK_CORRUPTION_SEED`` the seed; the counts per
kind and outcome are printed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_support import all_regimes

from falkirk.errors import FalkirkError
from falkirk.spark import compare_runs

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FIRST, THEN = 7, 9
TRIALS = int(os.environ.get("FALKIRK_CORRUPTION_TRIALS", "16"))
SEED = int(os.environ.get("FALKIRK_CORRUPTION_SEED", "20261126"))
KINDS = ("data-delete", "data-truncate", "data-flip", "manifest-delete", "manifest-garbage", "manifest-size",
         "meta-delete", "meta-garbage", "segment-delete", "segment-truncate", "cut-delete", "cut-garbage",
         "pipeline-json", "database-delete", "output-delete", "journal-garbage")
#: damage that must never stop a run: caches and advisory records
HARMLESS = ("meta-delete", "meta-garbage", "journal-garbage")


@pytest.fixture(scope="module")
def roots(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The damaged trials' starting root (``FIRST`` epochs, GC on) and a failure-free reference (``THEN``)."""
    base = tmp_path_factory.mktemp("fuzz-base")
    all_regimes(base, spark).run(FIRST)
    reference = tmp_path_factory.mktemp("fuzz-reference")
    all_regimes(reference, spark, durable=False).run(THEN)
    return base, reference


def _manifests(root: Path, kinds: tuple[str, ...]) -> list[Path]:
    return sorted(p for p in (root / "manifests").glob("*/*/*.json") if p.parent.name in kinds)


def _data_files(root: Path) -> list[Path]:
    out = []
    for m in _manifests(root, ("checkpoint", "log", "output")):
        doc = json.loads(m.read_text())
        out += [root / doc["location"] / name for name, _, _ in doc["files"]]
    return out


def damage(root: Path, kind: str, rnd: random.Random) -> Path:
    """Apply one damage of ``kind`` to the root; the damaged path (absolute)."""
    def pick(paths: list[Path]) -> Path:
        assert paths, f"nothing to damage for {kind}"
        return rnd.choice(paths)

    if kind.startswith("data-"):
        target = pick(_data_files(root))
    elif kind.startswith("manifest-"):
        target = pick(_manifests(root, ("checkpoint", "log", "complete", "output")))
    elif kind.startswith("meta-"):
        target = root / "meta.sqlite"
    elif kind.startswith("segment-"):
        target = pick(sorted((root / "input" / "events").glob("part-*/*")))
    elif kind.startswith("cut-"):
        target = pick(sorted((root / "input" / "events" / "cuts").glob("*.json")))
    elif kind == "pipeline-json":
        target = root / "pipeline.json"
    elif kind == "database-delete":
        target = root / "alerts.sqlite"
    elif kind == "output-delete":
        target = pick(sorted((root / "output" / "report").glob("epoch=*")))
    else:
        target = pick(sorted((root / "journal").glob("*/*.json")))
    garbage = bytes(rnd.randrange(256) for _ in range(64))
    if kind.endswith("-delete") and target.is_dir():
        shutil.rmtree(target)
    elif kind.endswith("-delete"):
        target.unlink()
        for suffix in ("-wal", "-shm"):  # a database deleted with its journal files
            Path(f"{target}{suffix}").unlink(missing_ok=True)
    elif kind.endswith("-truncate"):
        data = target.read_bytes()
        target.write_bytes(data[: len(data) // 2])
    elif kind == "data-flip":
        data = bytearray(target.read_bytes())
        for i in range(len(data) // 2, min(len(data), len(data) // 2 + 8)):
            data[i] ^= 0xFF
        target.write_bytes(bytes(data))
    elif kind == "manifest-size":
        doc = json.loads(target.read_text())
        if doc["files"]:
            doc["files"][0][1] += 1
        else:
            doc["rows"] += 1  # a marker without files: its row count
        target.write_text(json.dumps(doc))
    else:  # -garbage, pipeline-json
        target.write_bytes(garbage)
    return target


def _outcome(root: Path, spark: Any, reference: Path, target: Path, kind: str) -> tuple[str, str]:
    rel = str(target.relative_to(root))
    try:
        all_regimes(root, spark).run(THEN)
    except FalkirkError as exc:
        named = rel in str(exc) or rel.rstrip("/") in str(exc)
        if kind in HARMLESS or not named:
            return "raw", f"{type(exc).__name__}: {exc}"
        return "named", str(exc)
    except Exception as exc:  # noqa: BLE001 - the point: anything else is a raw error
        return "raw", f"{type(exc).__name__}: {exc}"
    cmp = compare_runs(spark, all_regimes(root, spark), root, reference)
    if cmp.identical:
        return "identical", ""
    return "silent", "; ".join(d.describe() for d in cmp.differences)


def test_corruption_fuzz_has_no_silent_or_raw_outcome(roots: tuple[Path, Path], spark: Any, tmp_path: Path) -> None:
    """Every trial ends identical or with a falkirk error naming the damaged file (see the module docstring)."""
    base, reference = roots
    rnd = random.Random(SEED)
    counts: Counter[tuple[str, str]] = Counter()
    bad = []
    for trial in range(TRIALS):
        kind = KINDS[trial % len(KINDS)] if trial < len(KINDS) else rnd.choice(KINDS)
        root = tmp_path / f"trial-{trial}"
        shutil.copytree(base, root)
        target = damage(root, kind, rnd)
        outcome, detail = _outcome(root, spark, reference, target, kind)
        counts[(kind, outcome)] += 1
        print(f"trial {trial:3d} {kind:17s} {str(target.relative_to(root)):70s} {outcome:9s} {detail[:300]}")
        if outcome in ("silent", "raw"):
            bad.append((trial, kind, str(target.relative_to(root)), outcome, detail))
        shutil.rmtree(root)
    by_outcome = Counter(o for (_, o), n in counts.items() for _ in range(n))
    print(f"{TRIALS} trials (seed {SEED}): " + ", ".join(f"{o} {n}" for o, n in sorted(by_outcome.items())))
    assert not bad, bad


@pytest.mark.parametrize("which", ["latest", "retained"])
def test_a_deleted_output_partition_still_covered_is_repaired(
    which: str, roots: tuple[Path, Path], spark: Any, tmp_path: Path,
) -> None:
    """Deleting one acknowledged output epoch that the retained restore points cover: the restart rewrites it."""
    base, reference = roots
    root = tmp_path / "root"
    shutil.copytree(base, root)
    epochs = sorted(int(p.name.split("=")[1]) for p in (root / "output" / "report").glob("epoch=*"))
    # rolling checkpoints every 3 epochs and retain=2 keeps two: the older one is what the epochs after it need
    kept = sorted(int(p.stem) for p in (root / "manifests" / "rolling" / "checkpoint").glob("*.json"))
    victim = epochs[-1] if which == "latest" else kept[0] + 1
    shutil.rmtree(root / "output" / "report" / f"epoch={victim}")
    result = all_regimes(root, spark).run(THEN)
    (rec,) = result.journal.recoveries
    assert any(f"output/report/epoch={victim}/" in p for p in rec.problems), rec.problems
    assert ("report", victim) in {(x.step, x.epoch) for x in result.journal.executions if x.redo}
    cmp = compare_runs(spark, all_regimes(root, spark), root, reference)  # the report and the alerts table
    assert cmp.identical, [d.describe() for d in cmp.differences]

