"""Malformed input to the pipeline API ends in a named falkirk error or a correct result, never a stray traceback.

Hypothesis draws schemas (valid and broken DDL), records (right, wrong and
odd values), regime arguments and roots, and drives the declaration and
append paths (no Spark: these checks run before any job). Each case must
either succeed — and then what was appended reads back exactly as the
record, typed as declared (:func:`_canonical` of the value given and of the
value read from the Parquet segments agree) — or raise a :class:`~falkirk.errors.FalkirkError`
(``TypeError`` for a positional regime argument, Python's own rule). The
counts of each outcome are printed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from falkirk.errors import FalkirkError
from falkirk.spark import Batch, Eager, Ephemeral, InputLog, Lazy, Output
from falkirk.spark.pipeline.store.records import Type, parse_schema
from falkirk.spark.pipeline.store.rootfs import Root

OUTCOMES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    """Print how the fuzz cases ended (counts per outcome) when the module is done."""
    yield
    print("\nfuzz outcomes:", dict(sorted(OUTCOMES.items())))

_TYPES = ["BIGINT", "INT", "STRING", "DOUBLE", "BOOLEAN", "DATE", "TIMESTAMP", "ARRAY<STRING>", "DECIMAL(5, 2)",
          "MAP<STRING, BIGINT>", "STRUCT<a: INT, b: STRING>", "BIGNT", "VARCHAR(3)", "BINARY", "", "ARRAY<", "INT NOT NULL"]
_NAMES = ["user", "ts", "url", "_offset", "a b", "x", "user", "1st", "n"]
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.text(max_size=5),
    st.lists(st.one_of(st.text(max_size=3), st.integers()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.just(b"bytes"), st.just(object()),
)


_GOOD = ["user STRING NOT NULL, ts BIGINT, url STRING", "user BIGINT, n INT", "x DOUBLE, user STRING, ts TIMESTAMP",
         "user STRING, tags ARRAY<STRING>, n DECIMAL(5, 2)"]


@st.composite
def _schemas(draw: Any) -> str:
    if draw(st.booleans()):
        return draw(st.sampled_from(_GOOD))
    n = draw(st.integers(1, 4))
    parts = [f"{draw(st.sampled_from(_NAMES))} {draw(st.sampled_from(_TYPES))}" for _ in range(n)]
    text = ", ".join(parts)
    return draw(st.sampled_from([text, text + ",", "(" + text, text.lower(), text.replace(" ", "")]))


@st.composite
def _records(draw: Any) -> Any:
    keys = st.sampled_from(["user", "ts", "url", "x", "n", "extra", "_offset", 3])
    return draw(st.one_of(st.dictionaries(keys, _VALUES, max_size=5), st.just(None), st.lists(st.integers(), max_size=2),
                          st.text(max_size=3)))


def _outcome(kind: str, fn: Any) -> Any:
    try:
        result = fn()
    except FalkirkError as exc:
        OUTCOMES[f"{kind}: {type(exc).__name__}"] += 1
        assert str(exc), "a falkirk error with no message"
        return None
    OUTCOMES[f"{kind}: ok"] += 1
    return result


@settings(max_examples=400, deadline=None)
@given(schema=_schemas(), records=st.lists(_records(), max_size=4), partitions=st.sampled_from([1, 2, 3, 1, 2, 0, -1, "2", True]),
       key=st.sampled_from([None, None, "user", "user", "nope"]))
def test_declare_and_append_malformed_inputs(schema: str, records: list[Any], partitions: Any, key: Any) -> None:
    """Schemas, keys, partition counts and records: a falkirk error, or records that read back as appended."""
    with tempfile.TemporaryDirectory(prefix="falkirk-fuzz-") as root:
        _declare_and_append(root, schema, records, partitions, key)


def _declare_and_append(root: str, schema: str, records: list[Any], partitions: Any, key: Any) -> None:
    log = _outcome("declare", lambda: InputLog(root, "clicks", schema, partitions=partitions, key=key, fsync=False))
    if log is None:
        return
    written = _outcome("append", lambda: log.append(records))
    if written is None:
        assert sum(log.end_offsets().values()) == 0  # a refused batch appends nothing
        return
    table = log.to_arrow()
    stored = table.to_pylist(maps_as_pydicts="strict")
    assert len(stored) == len(records) == sum(written.values())
    fields = parse_schema(schema).fields
    assert set(table.column_names) - {"_partition", "_offset"} <= {f.name for f in fields}
    given_back = sorted(json.dumps({f.name: _canonical(f.type, r.get(f.name)) for f in fields}) for r in records)
    read_back = sorted(json.dumps({f.name: _canonical(f.type, r[f.name]) for f in fields}) for r in stored)
    assert read_back == given_back
    assert sorted((r["_partition"], r["_offset"]) for r in stored) == sorted(
        (k, i) for k, n in written.items() for i in range(n))  # offsets 0.. in every partition written


def _canonical(t: Type, value: Any) -> Any:
    """A JSON-able form of ``value`` of declared type ``t`` in which a given value and its stored form agree."""
    if value is None:
        return None
    if t.name in ("FLOAT", "DOUBLE"):
        x = float(value)
        return repr(float(np.float32(x)) if t.name == "FLOAT" else x)
    if t.name == "DECIMAL":
        return str(decimal.Decimal(value).normalize())
    if t.name == "DATE":
        return value if isinstance(value, str) else value.isoformat()
    if t.name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        v = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
        if t.name == "TIMESTAMP":
            return v.astimezone(dt.UTC).isoformat()  # a naive value is in the driver's local zone
        return (v.astimezone(dt.UTC).replace(tzinfo=None) if v.tzinfo else v).isoformat()
    if t.name == "ARRAY":
        return [_canonical(t.element, v) for v in value]  # type: ignore[arg-type]
    if t.name == "MAP":
        return {k: _canonical(t.element, v) for k, v in value.items()}  # type: ignore[arg-type]
    if t.name == "STRUCT":
        return {f.name: _canonical(f.type, value.get(f.name)) for f in t.fields}
    return value


_ARGS = st.one_of(st.none(), st.booleans(), st.integers(-2, 20), st.text(max_size=4),
                  st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), regime=st.sampled_from([Ephemeral, Batch, Lazy, Eager, Output]), positional=st.booleans())
def test_regime_arguments(data: Any, regime: Any, positional: bool) -> None:
    """Any regime arguments: a regime, a falkirk error naming the argument, or TypeError (unknown or positional)."""
    names = [a.name for a in attrs.fields(regime)] + ["bogus"]
    kwargs = data.draw(st.dictionaries(st.sampled_from(names), _ARGS, max_size=3))
    try:
        made = regime(3) if positional else regime(**kwargs)
    except TypeError as exc:
        OUTCOMES["regime: TypeError"] += 1
        assert positional or "bogus" in kwargs, exc  # only Python's own rules raise TypeError
        return
    except FalkirkError as exc:
        OUTCOMES[f"regime: {type(exc).__name__}"] += 1
        assert regime.__name__ in str(exc), exc  # the message names the regime (and the argument)
        return
    OUTCOMES["regime: ok"] += 1
    assert made.describe()["kind"] == made.kind


@pytest.fixture(scope="module", autouse=True)
def _no_cloud() -> Iterator[None]:
    """An ``s3a://`` root reaches a closed loopback port, once, never a cloud endpoint or metadata service."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1", "AWS_MAX_ATTEMPTS": "1",
                            "AWS_ACCESS_KEY_ID": "falkirk", "AWS_SECRET_ACCESS_KEY": "falkirk"}.items():
            mp.setenv(name, value)
        yield


@settings(max_examples=200, deadline=None)
@given(root=st.one_of(st.sampled_from(["ftp://h/x", "hdfs://127.0.0.1:9/x", "s3a://bucket/x", "gs://b/x",
                                       "memory://fuzz/x", "unknown-scheme://x", "file:///proc/falkirk-nope/x", ""]),
                      st.text(alphabet="abc-_. é", max_size=8)))
def test_roots(root: str) -> None:
    """Any root string: a usable Root or a StorageError naming the root — never a local folder named after a URI."""
    with tempfile.TemporaryDirectory(prefix="falkirk-fuzz-") as scratch:
        _root(root, root if "://" in root else f"{scratch}/{root}")


def _root(root: str, where: str) -> None:
    fs = _outcome("root", lambda: Root(where, fsync=False))
    if fs is not None and "://" in root:
        assert fs.uri.split("://")[0].lower() in {"file", "memory", "hdfs", "s3a", "gs"}
