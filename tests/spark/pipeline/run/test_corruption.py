"""Deleted or corrupt checkpoint and log files are detected: the plan falls back, or fails clearly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, assert_identical, flagship, root_listing

from falkirk.spark import RecoveryError, Storage
from falkirk.spark.pipeline.plan.planner import epoch_of

pytestmark = pytest.mark.spark


def _data_file(root: Path, step: str, kind: str, epoch: int) -> Path:
    m = Storage(root).get(step, kind, epoch)
    assert m.files, f"{step} {kind} {epoch} has no data file"
    return root / (m.location or "") / m.files[0].name


def test_corrupt_checkpoint_falls_back_to_an_earlier_one(spark: Any, reference: Path, tmp_path: Path) -> None:
    """A flipped byte in cc's latest checkpoint: the restarted run restores the one before and ends identical."""
    pipe = flagship(tmp_path, spark, cc_every=1, gc=False)
    pipe.run(3)
    target = _data_file(tmp_path, "cc", "checkpoint", 2)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))

    result = flagship(tmp_path, spark, cc_every=1, gc=False).run(EPOCHS)  # a restarted driver
    (rec,) = result.journal.recoveries
    assert any("cc: checkpoint at epoch 2" in p and "SHA-256" in p for p in rec.problems), rec.problems
    assert epoch_of(rec.plan.frontiers["cc"]) == 1 and rec.plan.actions["cc"] == "restore"
    assert Storage(tmp_path).epochs("cc", "checkpoint") == [0, 1, 2, 3]  # 2 was rewritten by the re-run
    assert_identical(spark, tmp_path, reference)


def test_deleted_checkpoint_without_fallback_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    """With GC keeping one checkpoint (retain=1), the only cc checkpoint left deleted: no plan can work. The error
    starts with the deleted file, says what it made impossible and which setting would have saved it, and the
    root is left byte-identical."""
    flagship(tmp_path, spark, retain=1).run(EPOCHS)
    storage = Storage(tmp_path)
    assert storage.epochs("cc", "checkpoint") == [3]  # GC removed the one at 1
    victim = _data_file(tmp_path, "cc", "checkpoint", 3)
    victim.unlink()
    before = root_listing(tmp_path)

    with pytest.raises(RecoveryError) as err:
        flagship(tmp_path, spark, retain=1).run(EPOCHS + 1)
    text = str(err.value)
    assert text.startswith(f"{victim.relative_to(tmp_path)} is missing (step cc: checkpoint at epoch 3 is unusable)"), text
    assert "input/events/cuts/00000000.json (input events, epoch 0), but it was collected by garbage collection" in text
    assert "Pipeline(retain=2) would have kept" in text and "nothing under" in text, text
    assert root_listing(tmp_path) == before


def test_default_retention_survives_a_deleted_latest_checkpoint(spark: Any, reference: Path, tmp_path: Path) -> None:
    """GC on with the default retain=2: cc's checkpoints at 1 and 3 and the input since epoch 2 are kept, so
    losing the latest checkpoint falls back to the older one and the output is identical."""
    flagship(tmp_path, spark).run(EPOCHS)
    storage = Storage(tmp_path)
    assert storage.epochs("cc", "checkpoint") == [1, 3]
    _data_file(tmp_path, "cc", "checkpoint", 3).unlink()

    result = flagship(tmp_path, spark).run(EPOCHS)  # a restarted driver
    (rec,) = result.journal.recoveries
    assert any("cc: checkpoint at epoch 3" in p for p in rec.problems), rec.problems
    assert epoch_of(rec.plan.frontiers["cc"]) == 1 and rec.plan.actions["cc"] == "restore"
    assert_identical(spark, tmp_path, reference)


def test_deleted_log_is_recomputed(spark: Any, reference: Path, tmp_path: Path) -> None:
    """heavy's logged epoch 2 deleted before cc fails at 3: heavy is rolled back and recomputes it."""
    def delete_log(line: str) -> None:
        if line.startswith("epoch   2"):
            _data_file(tmp_path, "heavy", "log", 2).unlink()

    result = flagship(tmp_path, spark).run(EPOCHS, fail="cc@3:before", progress=delete_log)
    (rec,) = result.journal.recoveries
    assert any("heavy: log at epoch 2" in p and "missing" in p for p in rec.problems), rec.problems
    assert rec.plan.actions["heavy"] == "restore" and epoch_of(rec.plan.frontiers["heavy"]) == 1
    assert ("heavy", 2) in {(x.step, x.epoch) for x in result.journal.executions if x.redo}
    assert_identical(spark, tmp_path, reference)


def test_verify_names_each_damaged_item_and_nothing_else(spark: Any, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``pipe.verify()`` and ``falkirk pipeline verify ROOT`` (one listing per step directory, the manifests read
    together): nothing on an intact root; after damage to a committed output epoch's data (truncated), to a
    checkpoint's data (same size, other bytes) and to another output epoch's manifest (garbage), exactly those three, each named
    by its file, and the CLI exits 1. Nothing under the root is changed."""
    from spark_support import all_regimes

    from falkirk.cli import main

    pipe = all_regimes(tmp_path, spark)
    pipe.run(5)
    assert pipe.verify() == []
    assert main(["pipeline", "verify", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().startswith("ok: ")
    storage = Storage(tmp_path)
    out = _data_file(tmp_path, "report", "output", 1)
    out.write_bytes(out.read_bytes()[: out.stat().st_size // 2])
    ck_epoch = storage.epochs("rolling", "checkpoint")[-1]
    ck = _data_file(tmp_path, "rolling", "checkpoint", ck_epoch)
    data = bytearray(ck.read_bytes())
    data[len(data) // 2] ^= 0xFF
    ck.write_bytes(bytes(data))
    (tmp_path / "manifests/report/output/00000003.json").write_bytes(b"\x00 garbage")
    before = root_listing(tmp_path)
    problems = pipe.verify()
    assert len(problems) == 3, problems
    assert any(p.startswith(str(out.relative_to(tmp_path))) and "expected" in p for p in problems), problems
    assert any(p.startswith(str(ck.relative_to(tmp_path))) and "SHA-256" in p for p in problems), problems
    assert any(p.startswith("manifests/report/output/00000003.json is unreadable") for p in problems), problems
    assert main(["pipeline", "verify", str(tmp_path)]) == 1
    printed = capsys.readouterr().out
    assert printed.count("damaged: ") == 3 and "NOT OK" in printed
    assert root_listing(tmp_path) == before
