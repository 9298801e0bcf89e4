"""Input records are checked against the declared schema: never a silent NULL (issue: bad input rows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from falkirk.spark import (
    Ephemeral,
    InputLog,
    Pipeline,
    PipelineError,
    RecordError,
    RecoveryError,
    SchemaError,
)

SCHEMA = "user STRING NOT NULL, ts BIGINT, url STRING"

#: The bad records a permissive JSON read used to turn into NULLs (or silently coerce / drop).
BAD = [
    ({"user": None, "ts": 1, "url": "/a"}, "user"),        # NULL in a NOT NULL field
    ({"user": "alice", "ts": "later", "url": "/a"}, "ts"),  # a string for BIGINT
    ({"user": "alice", "ts": 5003.7, "url": "/a"}, "ts"),   # a float for BIGINT
    ({"user": "alice", "ts": 1, "url": 42}, "url"),         # an int for STRING (Spark would make it "42")
    ({"user": "alice", "ts": 1, "referrer": "x"}, "referrer"),  # an unknown field (Spark would drop it)
]


@pytest.mark.parametrize(("record", "field"), BAD)
def test_bad_record_is_refused_naming_input_partition_offset_and_field(tmp_path: Path, record: Any, field: str) -> None:
    """Each bad record: RecordError naming the input, partition, offset and field; nothing of its batch is written."""
    log = InputLog(tmp_path, "clicks", SCHEMA, partitions=2, key="user", fsync=False)
    log.append([{"user": "bob", "ts": 0, "url": "/"}], batch="b0")
    before = log.end_offsets()
    with pytest.raises(RecordError) as err:
        log.append([{"user": "carol", "ts": 2, "url": "/b"}, record], batch="b1")
    e = err.value
    assert (e.input, e.field, e.index) == ("clicks", field, 1)
    assert f"input 'clicks', partition {e.partition}, offset {e.offset}" in str(e)
    assert log.end_offsets() == before  # the good record of the batch was not appended either


def test_dead_letter_diverts_bad_records_and_keeps_the_good(tmp_path: Path) -> None:
    """With dead_letter=True the good records are appended and the bad ones kept, with the reason, under the root."""
    log = InputLog(tmp_path, "clicks", SCHEMA, partitions=1, fsync=False, dead_letter=True)
    good = [{"user": "u", "ts": i, "url": "/"} for i in range(3)]
    written = log.append(good + [r for r, _ in BAD], batch="b0")
    assert written == {0: 3} and log.dead_letters() == len(BAD) == log.dead_letters("b0")
    log.append(good + [r for r, _ in BAD], batch="b0")  # re-sent: nothing twice
    assert log.dead_letters() == len(BAD)
    lines = [json.loads(x) for x in (tmp_path / "input" / "clicks" / "dead-letter" / "b0.jsonl").read_text().splitlines()]
    assert sorted(x["field"] for x in lines) == sorted(f for _, f in BAD)
    assert all(x["input"] == "clicks" and x["problem"] for x in lines)


def test_schema_and_key_are_checked_when_declared(tmp_path: Path) -> None:
    """A DDL typo and a key that is not a field are refused at declaration, naming the input."""
    with pytest.raises(SchemaError, match="input 'clicks'.*BIGNT"):
        InputLog(tmp_path, "clicks", "user BIGNT", fsync=False)
    with pytest.raises(PipelineError, match="key='usr' is not a field"):
        InputLog(tmp_path, "clicks", SCHEMA, key="usr", fsync=False)


@pytest.mark.spark
def test_a_file_that_bypassed_append_fails_loudly(spark: Any, tmp_path: Path) -> None:
    """A segment written behind the log's back with a bad value: the run stops naming the input, no NULL row."""
    seen: list[int] = []

    def clean(clicks: Any) -> Any:
        return clicks.where("ts IS NOT NULL")  # the usual "drop nulls" that used to lose the row silently

    p = Pipeline(tmp_path, spark, fsync=False)
    log = p.input("clicks", SCHEMA)
    p.step(clean, regime=Ephemeral())
    p.output("out", inputs=["clean"])
    log.append([{"user": "a", "ts": 1, "url": "/"}], batch="b0")
    seg = log.segments(0)[0]
    line = json.dumps({"user": "b", "ts": "later", "url": "/", "_partition": 0, "_offset": 1})
    log.fs.publish(f"{log.dir}/part-0/{1:012d}.jsonl", (line + "\n").encode())  # bypassing append's check
    with pytest.raises(RecoveryError, match="input clicks|step clicks") as err:
        p.run(1, progress=lambda s: seen.append(len(s)))
    text = str(err.value)
    assert "000000000001.jsonl" in text and "'ts'" in text and "later" in text, text  # the file, field and value
    assert seg.start == 0
