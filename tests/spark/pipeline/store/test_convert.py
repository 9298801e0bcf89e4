"""The vectorised check (convert.py) refuses exactly what the per-record check (records.py) refuses, and keeps values."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math
import zoneinfo
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from falkirk.spark.pipeline.store.convert import Converter, Rejected
from falkirk.spark.pipeline.store.records import RecordSchema, Type, parse_schema

SCHEMAS = [
    "a BIGINT, b INT NOT NULL, c TINYINT, e SMALLINT",
    "d DOUBLE, f FLOAT, s STRING, v VARCHAR(3), c CHAR(2), z BOOLEAN",
    "m DECIMAL(5, 2), n DECIMAL(38, 0), o DECIMAL(3, 3), p DECIMAL(10, 0) NOT NULL",
    "d DATE, t TIMESTAMP, u TIMESTAMP_NTZ",
    "a ARRAY<BIGINT>, m MAP<STRING, DOUBLE>, s STRUCT<x: INT NOT NULL, y: ARRAY<STRING>>, t ARRAY<DATE>",
]
ZONES = [dt.UTC, zoneinfo.ZoneInfo("Europe/Paris")]
D = decimal.Decimal

_DATES = st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))
_NAIVE = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))
_AWARE = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1), timezones=st.sampled_from(
    [dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)), zoneinfo.ZoneInfo("America/New_York")]))
_DECIMALS = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False, min_value=-10**6, max_value=10**6),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.sampled_from([D("1.50"), D("0.00"), D("1E+2"), D("123.45"), D("-999.99"), D("0.001"), D(10) ** 37, D("1E+40")]),
)
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.integers(-200, 200),
    st.floats(allow_nan=True), st.text(max_size=4), _DECIMALS, _DATES, _NAIVE, _AWARE,
    _DATES.map(dt.date.isoformat), _NAIVE.map(dt.datetime.isoformat), _AWARE.map(dt.datetime.isoformat),
    st.sampled_from(["2026-13-01", "20260101", "2026-01-01T25:00", b"bytes", "\ud800"]),
)


def _good(t: Type) -> st.SearchStrategy[Any]:
    """Values the declared type accepts (and some near misses drawn the same way)."""
    n = t.name
    if n in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        bits = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}[n]
        return st.integers(-2**(bits - 1), 2**(bits - 1)) | st.integers(-100, 100)
    if n in ("FLOAT", "DOUBLE"):
        return st.one_of(st.floats(allow_nan=True), st.integers(-2**70, 2**70))
    if n == "BOOLEAN":
        return st.booleans()
    if n in ("STRING", "VARCHAR", "CHAR"):
        return st.text(max_size=5)
    if n == "DECIMAL":
        p, s = t.params
        fits = st.decimals(min_value=-(10**(p - s)) + 1, max_value=10**(p - s) - 1, places=s)
        return st.one_of(fits, fits, _DECIMALS, st.integers(-10**(p - s + 1), 10**(p - s + 1)))
    if n == "DATE":
        return _DATES | _DATES.map(dt.date.isoformat)
    if n in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        return st.one_of(_NAIVE, _AWARE, _NAIVE.map(dt.datetime.isoformat), _AWARE.map(dt.datetime.isoformat))
    if n == "ARRAY":
        return st.lists(st.one_of(st.none(), _good(t.element)), max_size=3)  # type: ignore[arg-type]
    if n == "MAP":
        return st.dictionaries(st.text(max_size=2), st.one_of(st.none(), _good(t.element)), max_size=2)  # type: ignore[arg-type]
    return _struct(t.fields, odd=False)


def _struct(fields: Any, *, odd: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Mappings of ``fields``: NOT NULL ones present, nullable ones optional (``odd``: sometimes any value)."""
    def value(f: Any) -> st.SearchStrategy[Any]:
        good = _good(f.type) if not f.nullable else st.one_of(st.none(), _good(f.type))
        return st.one_of(*[good] * 8, _SCALARS, st.lists(_SCALARS, max_size=2)) if odd else good
    return st.fixed_dictionaries({f.name: value(f) for f in fields if not f.nullable},
                                 optional={f.name: value(f) for f in fields if f.nullable})


def _records(schema: RecordSchema) -> st.SearchStrategy[Any]:
    clean, dirty = _struct(schema.fields, odd=False), _struct(schema.fields, odd=True)
    odd = st.dictionaries(st.sampled_from([f.name for f in schema.fields] + ["extra", 3]), _SCALARS, max_size=3)
    return st.one_of(*[clean] * 12, dirty, dirty, odd, st.none(), st.just([1, 2]))


@st.composite
def _cases(draw: Any) -> tuple[RecordSchema, list[Any], dt.tzinfo]:
    schema = parse_schema(draw(st.sampled_from(SCHEMAS)))
    records = _struct(schema.fields, odd=False) if draw(st.booleans()) else _records(schema)
    return schema, draw(st.lists(records, max_size=6)), draw(st.sampled_from(ZONES))


def _convert(conv: Converter, records: list[Any]) -> list[dict[str, Any]] | None:
    try:
        return conv.records(records).to_pylist(maps_as_pydicts="strict")
    except Rejected:
        return None


@given(_cases())
def test_a_batch_is_refused_exactly_when_one_of_its_records_is(case: Any) -> None:
    """Batch and single records: the vectorised check refuses iff RecordSchema.check finds a problem."""
    schema, records, zone = case
    conv = Converter(schema, zone=zone)
    bad = [i for i, r in enumerate(records) if schema.check(r, zone) is not None]
    singles = [i for i, r in enumerate(records) if _convert(conv, [r]) is None]
    assert singles == bad, [(records[i], schema.check(records[i], zone)) for i in set(singles) ^ set(bad)]
    converted = _convert(conv, records)
    event(f"{schema.ddl.split()[0]}…: {len(records) - len(bad)} good, {len(bad)} bad")
    assert (converted is None) == bool(bad)
    good = [r for r in records if schema.check(r, zone) is None]
    rows = _convert(conv, good)
    assert rows is not None and len(rows) == len(good)
    pq.write_table(pa.Table.from_batches([conv.records(good)]), io.BytesIO())  # Parquet takes it as it is
    for r, row in zip(good, rows, strict=True):
        for f in schema.fields:
            assert _same(f.type, r.get(f.name), row[f.name], zone), (f.name, r.get(f.name), row[f.name])


@given(_cases())
def test_arrow_data_means_what_its_python_values_mean(case: Any) -> None:
    """Arrow columns (as pyarrow infers them from good records) convert to what their to_pylist() records give."""
    schema, records, zone = case
    conv = Converter(schema, zone=zone)
    good = [r for r in records if schema.check(r, zone) is None]
    for f in schema.fields:
        values = [r.get(f.name) for r in good]
        try:
            column = pa.array(values)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            continue
        batch = pa.RecordBatch.from_arrays([column], names=[f.name])
        python = _convert(conv, batch.to_pylist(maps_as_pydicts="strict"))
        try:
            typed = conv.arrow(batch).to_pylist(maps_as_pydicts="strict")
        except Rejected:
            typed = None
        assert typed == python or _nan_equal(typed, python), (f.name, column.type, typed, python)


def _nan_equal(a: Any, b: Any) -> bool:
    return repr(a) == repr(b)


def _same(t: Type, given_value: Any, stored: Any, zone: dt.tzinfo) -> bool:
    """Whether ``stored`` is what the record's ``given_value`` of declared type ``t`` should read back as."""
    if given_value is None:
        return stored is None
    n = t.name
    if n in ("FLOAT", "DOUBLE"):
        try:
            want = float(given_value)
        except OverflowError:  # an int beyond a double's range
            want = math.copysign(math.inf, given_value)
        if n == "FLOAT":
            with np.errstate(over="ignore"):
                want = float(np.float32(want))
        return (math.isnan(want) and math.isnan(stored)) or want == stored
    if n == "DECIMAL":
        return D(given_value) == stored
    if n == "DATE":
        return (dt.date.fromisoformat(given_value) if isinstance(given_value, str) else given_value) == stored
    if n in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        v = dt.datetime.fromisoformat(given_value) if isinstance(given_value, str) else given_value
        if n == "TIMESTAMP":  # the same instant: == between zones is False for a time in a repeated hour (PEP 495)
            return stored is not None and (v if v.tzinfo else v.replace(tzinfo=zone)).timestamp() == stored.timestamp()
        return (v.astimezone(dt.UTC).replace(tzinfo=None) if v.tzinfo else v) == stored
    if n == "ARRAY":
        return len(given_value) == len(stored) and all(
            _same(t.element, a, b, zone) for a, b in zip(given_value, stored, strict=True))  # type: ignore[arg-type]
    if n == "MAP":
        return given_value.keys() == stored.keys() and all(
            _same(t.element, given_value[k], stored[k], zone) for k in given_value)  # type: ignore[arg-type]
    if n == "STRUCT":
        return all(_same(f.type, given_value.get(f.name), stored[f.name], zone) for f in t.fields)
    return bool(given_value == stored)


@pytest.mark.parametrize(("value", "stored"), [(5.0, None), (5.5, None), (True, None), ("5", None), (5, 5)])
def test_pyarrow_leniency_is_not_inherited(value: Any, stored: Any) -> None:
    """pa.array([5.5], pa.int64()) gives [5]; the check refuses a float, a bool or a string for BIGINT."""
    rows = _convert(Converter(parse_schema("n BIGINT")), [{"n": value}])
    assert (rows[0]["n"] if rows else None) == stored


@pytest.mark.parametrize("value", ["0001-01-01", "0001-01-01T00:05:00", dt.datetime(1, 1, 1, 0, 5)])
def test_an_instant_before_year_1_utc_is_refused_by_both_checks(value: Any) -> None:
    """Found by the property above: a TIMESTAMP at 0001-01-01 read in Paris (then UTC+0:09:21) is an instant
    before year 1 UTC — Arrow stored it, Python could not read it back. Both the per-record check and the
    converter refuse it, with the field named; in UTC the same value is accepted; an NTZ wall-clock time stays
    accepted; an instant after 9999 UTC is refused too."""
    schema = parse_schema("t TIMESTAMP, u TIMESTAMP_NTZ")
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    problem = schema.check({"t": value}, paris)
    assert problem is not None and problem.field == "t" and "0001-01-01 to 9999-12-31 UTC" in problem.expected
    with pytest.raises(Rejected):
        Converter(schema, zone=paris).records([{"t": value}])
    assert schema.check({"t": value}, dt.UTC) is None
    assert Converter(schema, zone=dt.UTC).records([{"t": value}]).num_rows == 1
    assert schema.check({"u": value}, paris) is None
    late = dt.datetime(9999, 12, 31, 23, 30, tzinfo=dt.timezone(-dt.timedelta(hours=1)))  # after 9999 in UTC
    assert schema.check({"t": late}, paris) is not None
    with pytest.raises(Rejected):
        Converter(schema, zone=dt.UTC).records([{"t": late}])
