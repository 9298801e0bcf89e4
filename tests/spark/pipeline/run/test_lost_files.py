"""Files the storage loses, or that the executors cannot see for a while (regressions from the S3 soak at
seed 58, where the executors reach the bucket through a FUSE mount and the server was stopped and started):

* a data file lost between Spark's write and the driver's listing: report@104 was committed with 12 of its 30
  rows, the manifest listing the one file the driver saw. Now the epoch is not published short; it is written
  again.
* an input segment the executors reported missing just after the server came back, which the driver could
  read: the driver stopped with "no recovery is possible". Now the step is tried again; an input file the
  driver finds missing too still stops the run, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import EPOCHS, events

from falkirk.spark import Batch, Pipeline
from falkirk.spark.errors import RecoveryError
from falkirk.spark.pipeline.run import runners
from falkirk.spark.pipeline.store.storage import Storage
from falkirk.spark.pipeline.tools.verify import output_rows

pytestmark = [pytest.mark.spark]


@pytest.mark.parametrize("writer", ["spark", "collected"])
def test_an_output_file_lost_before_the_listing_is_written_again(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """Spark's writer (two files an epoch: one lost, one left), and the driver's (one file, lost: none left)."""
    _summed(tmp_path / "ref", spark, missing=None).run(EPOCHS)
    if writer == "spark":
        monkeypatch.setattr(runners, "COLLECT_MAX_ROWS", -1)  # no output epoch written from the driver
    describe = Storage.describe_files
    lost: list[str] = []

    def losing(self: Storage, location: str) -> Any:
        if location == "output/report/epoch=2" and not lost:
            parts = sorted(n for n in self.fs.listdir(location) if n.startswith("part-"))
            assert len(parts) == (2 if writer == "spark" else 1), parts
            self.fs.delete(f"{location}/{parts[0]}")
            lost.append(parts[0])
        return describe(self, location)

    monkeypatch.setattr(Storage, "describe_files", losing)
    result = _summed(tmp_path / "run", spark, missing=None).run(EPOCHS)
    assert lost, "the loss was never injected"
    causes = [r.cause for r in result.journal.recoveries]
    # Spark's: the file left holds fewer rows than counted; the driver's: no file left to publish
    said = ("not the", "counted") if writer == "spark" else ("no data file is visible",)
    assert any("report" in c and all(s in c for s in said) for c in causes), causes
    got, want = output_rows(spark, tmp_path / "run", "report"), output_rows(spark, tmp_path / "ref", "report")
    assert got == want and sorted(got) == list(range(EPOCHS))  # every epoch, as multisets


def _summed(root: Path, spark: Any, *, missing: str | None) -> Any:
    """input ``events`` → Batch ``sums`` → output ``report``; with ``missing`` (``"real"``: a file the input
    holds, else that name), ``sums`` fails once at epoch 2 as an executor that could not find the file."""
    pipe = Pipeline(root, spark, fsync=False)
    pipe.input("events", "user BIGINT, amount BIGINT", partitions=2, source=events)
    raised: list[int] = []

    @pipe.step(regime=Batch())
    def sums(events: Any, *, epoch: int) -> Any:
        if missing is not None and epoch == 2 and not raised:
            raised.append(epoch)
            seg = next(p for p in sorted(pipe.location.walk_files("input/events")) if p[0].endswith(".parquet"))[0]
            name = f"input/events/{seg}" if missing == "real" else f"input/events/part-0/{missing}"
            raise RuntimeError(f"[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while reading file "
                               f"{pipe.location.spark_uri(name)}. File does not exist.")
        return events.groupBy("user").sum("amount").repartition(2, "user")  # two files an epoch

    pipe.output("report", inputs=["sums"])
    return pipe


def test_an_input_file_an_executor_could_not_see_is_read_again(spark: Any, tmp_path: Path) -> None:
    _summed(tmp_path / "ref", spark, missing=None).run(EPOCHS)
    result = _summed(tmp_path / "run", spark, missing="real").run(EPOCHS)
    causes = [r.cause for r in result.journal.recoveries]
    assert len(causes) == 1 and "the driver sees" in causes[0] and "FILE_NOT_EXIST" in causes[0], causes
    got, want = output_rows(spark, tmp_path / "run", "report"), output_rows(spark, tmp_path / "ref", "report")
    assert got == want and sorted(got) == list(range(EPOCHS))


def test_an_input_file_the_driver_finds_missing_too_stops_the_run(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(RecoveryError, match=r"input at epoch 2 is unusable: unreadable while sums read it: .*gone-0"):
        _summed(tmp_path / "run", spark, missing="gone-0.parquet").run(EPOCHS)
