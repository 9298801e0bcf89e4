"""The input log: idempotent appends, immutable cuts, detection of missing segments, acknowledgement.

The tests taking ``place`` run on a local directory and on a real S3 server
(``conftest.place``), through the log's public API only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from places import Place

from falkirk.spark import CorruptDataError, InputLog, StorageError


def _log(where: Path | Place, partitions: int = 2) -> InputLog:
    root = where.root() if isinstance(where, Place) else where
    return InputLog(root, "events", "user BIGINT, v BIGINT", partitions=partitions, key="user", fsync=False)


def test_resending_a_batch_appends_nothing(place: Place) -> None:
    """A batch re-sent after a crash (same key) is ignored; a new key appends."""
    log = _log(place)
    recs = [{"user": u, "v": u} for u in range(10)]
    first = log.append(recs, batch="b0")
    assert sum(first.values()) == 10
    assert log.append(recs, batch="b0") == {}
    assert sum(log.end_offsets().values()) == 10
    assert sum(log.append(recs, batch="b1").values()) == 10


def test_half_written_batch_is_completed_on_resend(place: Place) -> None:
    """If only one partition's segment of a batch was written, re-sending writes the other one only."""
    log = _log(place)
    recs = [{"user": u, "v": u} for u in range(10)]
    written = log.append(recs, batch="b0")
    lost = max(written)
    for seg in log.segments(lost):
        log.fs.delete(seg.path)
    again = log.append(recs, batch="b0")
    assert again == {lost: written[lost]}


@settings(max_examples=25)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=6))
def test_cuts_partition_the_log(tmp_path_factory: Any, sizes: list[int]) -> None:
    """Epoch cuts are contiguous, never change, and hold exactly the records appended before each cut."""
    log = _log(tmp_path_factory.mktemp("log"), partitions=3)
    total = 0
    for epoch, n in enumerate(sizes):
        log.append([{"user": epoch * 100 + i, "v": i} for i in range(n)], batch=f"e{epoch}")
        cut = log.cut(epoch)
        assert cut.records == n and log.cut(epoch) == cut
        if epoch:
            assert cut.start == log.get_cut(epoch - 1).end
        total += n
    assert sum(log.end_offsets().values()) == total


def test_missing_segment_is_detected(place: Place) -> None:
    """Deleting a segment an epoch needs makes that epoch unreadable, naming the offsets."""
    log = _log(place, partitions=1)
    for e in range(3):
        log.append([{"user": e, "v": e}, {"user": e, "v": -e}], batch=f"e{e}")
        log.cut(e)
    place.arrow.delete_file(place.arrow_path(log.segments(0)[1].path))  # another client deletes it
    assert log.files(log.get_cut(0)) and log.files(log.get_cut(2))
    with pytest.raises(CorruptDataError, match=r"^input/events/part-0/ is missing offsets 2\.\.3 of epoch 1"):
        log.files(log.get_cut(1))
    with pytest.raises(CorruptDataError, match=r"^input/events/part-0/ is missing offsets 2\.\.3") as err:
        log.check(1)  # epoch 1 was never acknowledged: not garbage collection's doing
    assert "garbage collection" not in str(err.value)


def test_acknowledge_deletes_only_wholly_consumed_segments(place: Place) -> None:
    """Acknowledging epoch 1 deletes the segments and cuts before it, keeps what later epochs need."""
    log = _log(place, partitions=1)
    for e in range(4):
        log.append([{"user": e, "v": e}], batch=f"e{e}")
        log.cut(e)
    assert log.acknowledge(1) > 0
    assert log.cut_epochs() == [1, 2, 3]
    assert [s.start for s in log.segments(0)] == [2, 3]
    assert log.files(log.get_cut(3))
    with pytest.raises(CorruptDataError):
        log.files(log.get_cut(1))


def test_new_cut_needs_the_previous_one(place: Place) -> None:
    """Epochs are cut in order: cutting epoch 2 without a cut for epoch 1 is refused."""
    log = _log(place)
    log.cut(0)
    with pytest.raises(CorruptDataError, match=r"^input/events/cuts/00000001\.json is missing \(epochs are cut in order\)"):
        log.cut(2)


def test_a_second_driver_sees_the_first_ones_appends_and_cuts(place: Place) -> None:
    """Two logs on the same input (two processes' views): each sees what the other appended and cut, a
    batch re-sent through the other is ignored, and a cut is the same from both."""
    a, b = _log(place), _log(place)
    a.append([{"user": u, "v": u} for u in range(4)], batch="x")
    assert b.end_offsets() == a.end_offsets() and sum(b.end_offsets().values()) == 4
    assert b.append([{"user": u, "v": u} for u in range(4)], batch="x") == {}
    assert a.cut(0) == b.cut(0) == b.get_cut(0)
    b.append([{"user": 9, "v": 9}], batch="y")
    assert a.cut(1).records == 1 and b.cut_epochs() == [0, 1]
    assert a.files(a.get_cut(1)) == b.files(b.get_cut(1))


def test_a_store_that_does_not_answer_is_not_a_corrupt_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage failure while reading a cut is that StorageError, never a CorruptDataError (which would make
    recovery treat the epoch as lost)."""
    log = _log(tmp_path)
    log.cut(0)

    def unreachable(rel: str) -> bytes:
        raise StorageError(f"root {log.fs.uri}: read {rel} failed: EndpointConnectionError: no route")

    monkeypatch.setattr(log.fs, "read_bytes", unreachable)
    with pytest.raises(StorageError, match="EndpointConnectionError") as err:
        log.get_cut(0)
    assert not isinstance(err.value, CorruptDataError)


@pytest.mark.spark
def test_read_returns_exactly_the_epoch(spark: Any, tmp_path: Path) -> None:
    """Reading an epoch with Spark returns its records with their partitions and offsets."""
    log = _log(tmp_path)
    log.append([{"user": u, "v": u} for u in range(6)], batch="a")
    log.cut(0)
    log.append([{"user": u, "v": 10 * u} for u in range(6, 9)], batch="b")
    log.cut(1)
    rows = log.read(spark, 1).collect()
    assert sorted(r["user"] for r in rows) == [6, 7, 8]
    assert all(r["_offset"] >= log.get_cut(0).end[r["_partition"]] for r in rows)
