"""Records to Arrow, checked column by column: the vectorised form of the per-record check.

What an input accepts is stated once, record by record, in
:meth:`~falkirk.spark.pipeline.store.records.RecordSchema.check`. This module
converts a whole chunk of records to the input's Arrow schema
(:mod:`~falkirk.spark.pipeline.store.arrowschema`) and refuses it
(:class:`Rejected`) exactly when that check would refuse one of its records;
the caller then runs the per-record check on that chunk only, to find the bad
records and word the problem. Two kinds of chunk:

* **Python mappings.** Per field, the *set* of Python types present
  (``set(map(type, values))``, a C loop) must be ones the declared type
  accepts — an ``int`` but not a ``bool`` for ``BIGINT``, a ``date`` but not a
  ``datetime`` for ``DATE``… — because pyarrow's converters are more lenient
  than a schema: ``pa.array([5.5], pa.int64())`` gives ``[5]`` and
  ``pa.array([date, datetime])`` truncates the ``datetime``. Then pyarrow
  converts the column and checks the rest: integer ranges and decimal
  precision and scale by safe casts, ``VARCHAR(n)`` by ``utf8_length``,
  ``NOT NULL`` by null counts. ISO date and timestamp strings are parsed by
  Python's ``fromisoformat``, as the per-record check does.
* **Arrow data** (``Table``/``RecordBatch``, pandas, Parquet). Each column's
  type must be one the declared type accepts (any integer type for an integer
  field, range-checked by a safe cast; integers or floats for ``DOUBLE``;
  strings, also dictionary-encoded, for ``STRING``; …); a column this fast path
  does not handle (a nested type that differs from the declared one, strings
  for a date) is converted through its Python values and the first path, so
  Arrow data means exactly what its ``to_pylist()`` records would.

Timestamps: a ``TIMESTAMP`` is an instant. A value without a zone (a naive
``datetime``, an ISO string without an offset, an Arrow timestamp without a
zone) is read in ``zone`` — the Spark session's time zone, or the driver's
local one — as Spark reading JSON text would have; ``TIMESTAMP_NTZ`` keeps
wall-clock times (an aware value gives its UTC wall-clock time).

>>> import pyarrow as pa
>>> from falkirk.spark.pipeline.store.records import parse_schema
>>> conv = Converter(parse_schema("user STRING NOT NULL, n INT"))
>>> conv.records([{"user": "ann", "n": 1}, {"user": "bob"}]).to_pylist()
[{'user': 'ann', 'n': 1}, {'user': 'bob', 'n': None}]
>>> conv.records([{"user": "ann", "n": 2 ** 40}])
Traceback (most recent call last):
...
falkirk.spark.pipeline.store.convert.Rejected: n
>>> conv.arrow(pa.record_batch({"n": pa.array([7], pa.int8()), "user": ["cy"]})).to_pylist()
[{'user': 'cy', 'n': 7}]
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Mapping
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from falkirk.spark.pipeline.store.arrowschema import MAX_LENGTH, arrow_schema
from falkirk.spark.pipeline.store.records import _INTS, Field, Problem, RecordSchema, Type

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Converter", "Rejected", "bad_records"]

_NONE = type(None)
_CONVERSION_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, OverflowError, ArithmeticError)


class Rejected(Exception):  # noqa: N818 - internal signal, never reaches the user
    """A chunk failed a vectorised check; the caller finds its bad records with the per-record check."""


def _int(k: type) -> bool:
    return issubclass(k, int) and not issubclass(k, bool)


def _number(k: type) -> bool:
    return _int(k) or issubclass(k, float)


def _str(k: type) -> bool:
    return issubclass(k, str)


def _date(k: type) -> bool:
    return (issubclass(k, dt.date) and not issubclass(k, dt.datetime)) or issubclass(k, str)


def _datetime(k: type) -> bool:
    return issubclass(k, (dt.datetime, str))


def _mapping(k: type) -> bool:
    return issubclass(k, Mapping)


def _sequence(k: type) -> bool:
    return issubclass(k, (list, tuple))


def _kinds(values: list[Any], accept: Callable[[type], bool], where: str) -> set[type]:
    """The Python types of ``values`` other than ``None``; :class:`Rejected` unless ``accept`` takes each."""
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if not all(accept(k) for k in kinds):
        raise Rejected(where)
    return kinds


class Converter:
    """Converts chunks of records to ``schema``'s Arrow form (see the module docstring).

    ``zone``: the time zone of timestamps given without one (``None``: the
    driver's local zone); ``spark``: a session whose parser maps the DDL.
    """

    def __init__(self, schema: RecordSchema, *, zone: dt.tzinfo | None = None, spark: Any = None) -> None:
        self.schema = schema
        self.arrow_schema = arrow_schema(schema, spark)
        self.zone = zone
        self._types = {f.name: f for f in schema.fields}

    # -- Python mappings ---------------------------------------------------------------
    def records(self, records: list[Any]) -> pa.RecordBatch:
        """``records`` (mappings) as a RecordBatch of the declared fields; :class:`Rejected` if one is bad."""
        import pyarrow as pa

        kinds = set(map(type, records))
        if not all(_mapping(k) for k in kinds):
            raise Rejected("(record)")
        struct = self._struct(self.schema.fields, self.arrow_schema, records, "", plain=kinds == {dict})
        return pa.RecordBatch.from_struct_array(struct)

    def _struct(
        self, fields: tuple[Field, ...], arrow: Any, values: list[Any], prefix: str, *, plain: bool = False
    ) -> pa.StructArray:
        import pyarrow as pa
        import pyarrow.compute as pc

        present = [v for v in values if v is not None] if not plain else values
        known = {f.name for f in fields}
        if not set().union(*present) <= known:
            raise Rejected(prefix + "(unknown field)")
        mask = pa.array([v is None for v in values], pa.bool_()) if len(present) < len(values) else None
        children = []
        for f in fields:
            if plain:
                column = list(map(dict.get, values, repeat(f.name)))
            else:
                column = [None if v is None else v.get(f.name) for v in values]
            child = self._column(f.type, arrow.field(f.name), column, prefix + f.name)
            if not f.nullable and child.null_count:
                valid = pc.is_null(child) if mask is None else pc.and_(pc.is_null(child), pc.invert(mask))
                if pc.any(valid).as_py():
                    raise Rejected(prefix + f.name)
            children.append(child)
        return pa.StructArray.from_arrays(children, fields=list(arrow), mask=mask)

    def _column(self, t: Type, field: pa.Field, values: list[Any], where: str) -> pa.Array:
        """One declared field's values (``None`` for missing) as an Arrow array of ``field.type``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        name, target = t.name, field.type
        try:
            if name in _INTS:
                _kinds(values, _int, where)
                return pc.cast(pa.array(values, pa.int64()), target, safe=True)
            if name in ("FLOAT", "DOUBLE"):
                _kinds(values, _number, where)
                try:
                    arr = pa.array(values, pa.float64())
                # an int beyond 64 bits: as Python rounds it
                except _CONVERSION_ERRORS + (pa.ArrowException,):
                    arr = pa.array([None if v is None else _float(v) for v in values], pa.float64())
                return arr if name == "DOUBLE" else pc.cast(arr, target, safe=False)
            if name == "BOOLEAN":
                _kinds(values, lambda k: issubclass(k, bool), where)
                return pa.array(values, pa.bool_())
            if name in ("STRING", "VARCHAR", "CHAR"):
                _kinds(values, _str, where)
                arr = pa.array(values, pa.string())
                if field.metadata and MAX_LENGTH in field.metadata:
                    limit = int(field.metadata[MAX_LENGTH])
                    if pc.any(pc.greater(pc.utf8_length(arr), limit)).as_py():
                        raise Rejected(where)
                return arr
            if name == "DECIMAL":
                return self._decimal(values, target, where)
            if name == "DATE":
                if _kinds(values, _date, where) - {dt.date}:
                    values = [_parse(dt.date.fromisoformat, v) if isinstance(v, str) else v for v in values]
                return pa.array(values, pa.date32())
            if name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
                return self._timestamp(values, target, where)
            if name == "ARRAY":
                _kinds(values, _sequence, where)
                return self._list(t, target, values, where)
            if name == "MAP":
                _kinds(values, _mapping, where)
                return self._map(t, target, values, where)
            _kinds(values, _mapping, where)
            return self._struct(t.fields, target, values, where + ".")
        except Rejected:
            raise
        except _CONVERSION_ERRORS + (pa.ArrowException,) as exc:
            raise Rejected(where) from exc

    def _decimal(self, values: list[Any], target: pa.DataType, where: str) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        kinds = _kinds(values, lambda k: _int(k) or issubclass(k, decimal.Decimal), where)
        if not kinds:
            return pa.nulls(len(values), target)
        try:
            arr = pa.array(values)  # inferred: int64, or a decimal wide enough for every value
        except _CONVERSION_ERRORS + (pa.ArrowException,):  # ints beyond 64 bits, or ints beside decimals
            arr = pa.array([None if v is None else decimal.Decimal(v) for v in values])
        if pa.types.is_integer(arr.type):
            arr = pc.cast(arr, pa.decimal128(38, 0))
        return pc.cast(arr, target, safe=True)

    def _timestamp(self, values: list[Any], target: pa.DataType, where: str) -> pa.Array:
        import pyarrow as pa

        kinds = _kinds(values, _datetime, where)
        aware = target.tz is not None
        if kinds <= {dt.datetime} and (not aware or self.zone is dt.UTC):
            if aware or not any(v.tzinfo for v in values if v is not None):
                return _in_years(pa.array(values, target), where)
        out = []
        for v in values:
            if v is not None:
                v = _parse(dt.datetime.fromisoformat, v) if isinstance(v, str) else v
                if aware and v.tzinfo is None:
                    v = v.replace(tzinfo=self.zone) if self.zone is not None else v.astimezone()
                elif not aware and v.tzinfo is not None:
                    v = v.astimezone(dt.UTC).replace(tzinfo=None)
            out.append(v)
        return _in_years(pa.array(out, target), where)

    def _list(self, t: Type, target: pa.DataType, values: list[Any], where: str) -> pa.Array:
        import numpy as np
        import pyarrow as pa

        assert t.element is not None
        lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int32, len(values))
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int32)
        flat = list(chain.from_iterable(v for v in values if v is not None))
        child = self._column(t.element, target.value_field, flat, where + "[]")
        mask = pa.array([v is None for v in values], pa.bool_())
        return pa.ListArray.from_arrays(pa.array(offsets), child, type=target, mask=mask)

    def _map(self, t: Type, target: pa.DataType, values: list[Any], where: str) -> pa.Array:
        import numpy as np
        import pyarrow as pa

        assert t.element is not None
        present = [v for v in values if v is not None]
        keys = list(chain.from_iterable(v.keys() for v in present))
        _kinds(keys, _str, where + "[key]")
        items = self._column(
            t.element, target.item_field, list(chain.from_iterable(v.values() for v in present)), where + "[]"
        )
        lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int32, len(values))
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int32)
        mask = pa.array([v is None for v in values], pa.bool_())
        return pa.MapArray.from_arrays(
            pa.array(offsets), pa.array(keys, pa.string()), items, type=target, mask=mask
        )

    # -- Arrow data -----------------------------------------------------------------------
    def arrow(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """An Arrow batch as a RecordBatch of the declared fields; :class:`Rejected` if a record is bad."""
        import pyarrow as pa

        if batch.num_columns and not set(batch.column_names) <= set(self._types):
            raise Rejected("(unknown field)")
        if len(set(batch.column_names)) != batch.num_columns:
            raise Rejected("(duplicate column)")
        columns = []
        for f in self.schema.fields:
            target = self.arrow_schema.field(f.name)
            if f.name in batch.column_names:
                columns.append(self._typed(f.type, target, batch.column(f.name), f.name))
            elif f.nullable or not batch.num_rows:
                columns.append(pa.nulls(batch.num_rows, target.type))
            else:
                raise Rejected(f.name)
        for f, col in zip(self.schema.fields, columns, strict=True):
            if not f.nullable and col.null_count:
                raise Rejected(f.name)
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)

    def _typed(self, t: Type, field: pa.Field, col: pa.Array, where: str) -> pa.Array:
        """One typed column as ``field.type``; through its Python values when no fast rule applies."""
        import pyarrow as pa
        import pyarrow.compute as pc

        target, src = field.type, col.type
        if pa.types.is_dictionary(src):
            col = col.dictionary_decode()
            src = col.type
        fast = None
        if pa.types.is_null(src):
            fast = pa.nulls(len(col), target)
        elif t.name in _INTS and pa.types.is_integer(src):
            fast = (col, True)
        elif t.name in ("FLOAT", "DOUBLE") and (pa.types.is_integer(src) or pa.types.is_floating(src)):
            fast = (col, False)
        elif t.name == "BOOLEAN" and pa.types.is_boolean(src):
            fast = col
        elif t.name in ("STRING", "VARCHAR", "CHAR") and (
            pa.types.is_string(src) or pa.types.is_large_string(src)
        ):
            fast = (col, True)
        elif t.name == "DECIMAL" and (pa.types.is_decimal(src) or pa.types.is_integer(src)):
            fast = (pc.cast(col, pa.decimal128(38, 0)) if pa.types.is_integer(src) else col, True)
        elif t.name == "DATE" and (pa.types.is_date32(src) or pa.types.is_date64(src)):
            fast = (col, True)
        elif t.name in ("TIMESTAMP", "TIMESTAMP_NTZ") and pa.types.is_timestamp(src):
            fast = self._typed_timestamp(col, target)
        elif src == target:
            fast = col if _nested_nulls_ok(col, t) else None
        if isinstance(fast, tuple):
            try:
                fast = fast[0] if fast[0].type == target else pc.cast(fast[0], target, safe=fast[1])
            except _CONVERSION_ERRORS + (pa.ArrowException,):
                fast = None
        if fast is None:  # no rule here: what its Python values mean
            values = col.to_pylist(maps_as_pydicts="strict")
            return self._column(t, field, values, where)
        assert isinstance(fast, pa.Array)
        if field.metadata and MAX_LENGTH in field.metadata:
            if pc.any(pc.greater(pc.utf8_length(fast), int(field.metadata[MAX_LENGTH]))).as_py():
                raise Rejected(where)
        return fast

    def _typed_timestamp(self, col: pa.Array, target: pa.DataType) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        if target.tz is None and col.type.tz is not None:  # an instant as its UTC wall-clock time
            col = pc.cast(col, pa.timestamp(col.type.unit, tz="UTC")).cast(pa.timestamp(col.type.unit))
        elif target.tz is not None and col.type.tz is None:
            if self.zone is not dt.UTC:
                return None  # wall-clock times in a zone Arrow may not name: through Python
            col = col.cast(pa.timestamp(col.type.unit, tz="UTC"))
        return (col, True)


#: years 1 to 9999 UTC in microseconds: the instants Python, Arrow's readers and Spark can all hold
_FIRST_US, _LAST_US = -62_135_596_800_000_000, 253_402_300_799_999_999


def _in_years(arr: pa.Array, where: str) -> pa.Array:
    """``arr`` (timestamps in microseconds), :class:`Rejected` if an instant falls outside years 1 to 9999 UTC
    (an aware ``datetime`` near either end converts to one: Arrow does not refuse it, Python cannot read it)."""
    import pyarrow.compute as pc

    if arr.type.tz is None or arr.null_count == len(arr):
        return arr
    low, high = pc.min_max(arr.cast("int64")).values()
    if low.as_py() < _FIRST_US or high.as_py() > _LAST_US:
        raise Rejected(where)
    return arr


def _nested_nulls_ok(col: pa.Array, t: Type) -> bool:
    """Whether a nested column of declared type ``t`` has no null where a field inside a struct is ``NOT
    NULL``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if t.name == "STRUCT":
        children = col.flatten()  # a null struct's fields are null
        for f, child in zip(t.fields, children, strict=True):
            if (
                not f.nullable
                and child.null_count
                and pc.any(pc.and_(pc.is_null(child), pc.is_valid(col))).as_py()
            ):
                return False
            if not _nested_nulls_ok(child, f.type):
                return False
        return True
    if t.name == "ARRAY":
        return _nested_nulls_ok(col.flatten(), t.element)  # type: ignore[arg-type]
    if t.name == "MAP":
        assert isinstance(col, pa.MapArray)
        return _nested_nulls_ok(col.items, t.element)  # type: ignore[arg-type]
    return True


def _float(v: Any) -> float:
    try:
        return float(v)
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


def _parse(fn: Callable[[str], Any], text: str) -> Any:
    try:
        return fn(text)
    except ValueError:
        raise Rejected(text) from None


#: Below this many records, a failed chunk is searched record by record.
_SMALL = 64


def bad_records(conv: Converter, chunk: Any, *, first_only: bool) -> list[tuple[int, Any, Problem]]:
    """The bad records of a chunk that :class:`Converter` refused: ``(index, record, problem)``, in order.

    The chunk (a list of records, or a RecordBatch) is halved while a half
    still fails the vectorised check; halves that pass are good as a whole,
    and the per-record check (:meth:`RecordSchema.check`) runs on pieces of at
    most 64 records only. ``first_only``: stop at the first bad record.
    """
    import pyarrow as pa

    arrow = isinstance(chunk, pa.RecordBatch)
    out: list[tuple[int, Any, Problem]] = []

    def rows(lo: int, hi: int) -> list[Any]:
        return chunk.slice(lo, hi - lo).to_pylist(maps_as_pydicts="strict") if arrow else chunk[lo:hi]

    def passes(lo: int, hi: int) -> bool:
        try:
            conv.arrow(chunk.slice(lo, hi - lo)) if arrow else conv.records(chunk[lo:hi])
        except Rejected:
            return False
        return True

    def search(lo: int, hi: int, known_bad: bool) -> None:
        if hi - lo <= _SMALL:
            for i, r in enumerate(rows(lo, hi)):
                problem = conv.schema.check(r, conv.zone)
                if problem is not None:
                    out.append((lo + i, r, problem))
                    if first_only:
                        return
            return
        if not known_bad and passes(lo, hi):
            return
        mid = (lo + hi) // 2
        search(lo, mid, False)
        if not (first_only and out):
            search(mid, hi, False)

    search(0, len(chunk), True)
    if not out:  # the two checks disagree: a bug in falkirk, not in the data
        raise AssertionError(
            f"falkirk: pyarrow refused records that the per-record check of {conv.schema.ddl!r} accepts"
        )
    return out
