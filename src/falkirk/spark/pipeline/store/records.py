"""An input's declared schema, parsed without Spark, and what one record must be to fit it.

Spark's own readers are *permissive*: a value of the wrong type becomes
``NULL`` and an unknown field is dropped, so a bad record would silently turn
into a row of NULL values. falkirk therefore checks records when they are
appended to an input log (:mod:`falkirk.spark.pipeline.store.inputlog`),
against :func:`parse_schema`'s reading of the DDL string. This module states
the rules once, for one record:

* every field the record has is declared (no unknown fields);
* every value has the declared type — an ``int`` (not ``bool``, not
  ``float``) within range for ``BIGINT``/``INT``/``SMALLINT``/``TINYINT``, a
  ``str`` (encodable as UTF-8) for ``STRING`` (at most ``n`` characters for
  ``VARCHAR(n)``/``CHAR(n)``), a ``bool`` for ``BOOLEAN``, a number for
  ``DOUBLE``/``FLOAT``, an ``int`` or :class:`~decimal.Decimal` whose value
  fits for ``DECIMAL(p, s)``, an ISO date or timestamp string (or
  :class:`~datetime.date`/:class:`~datetime.datetime`) for
  ``DATE``/``TIMESTAMP``, a list for ``ARRAY<…>``, a mapping with string keys
  for ``MAP<STRING, …>``, a mapping of declared fields for ``STRUCT<…>``;
* a ``NOT NULL`` field is present and not ``None``.

Whole batches are checked column by column with pyarrow
(:mod:`~falkirk.spark.pipeline.store.convert`, which follows these rules);
:meth:`RecordSchema.check` runs only on a chunk that failed there, to find
its bad records and say what is wrong with each: the first problem as a
:class:`Problem` (field path, what was expected, what was found) or ``None``.
It is also the reference the vectorised check is tested against. Types an
input log does not carry (``BINARY``, intervals, ``VARIANT``…) are refused
when the schema is parsed, as are ``_partition`` and ``_offset`` (the log's
own columns).

>>> s = parse_schema("user STRING NOT NULL, ts BIGINT, url STRING, tags ARRAY<STRING>")
>>> [f.name for f in s.fields], s.fields[0].nullable
(['user', 'ts', 'url', 'tags'], False)
>>> s.check({"user": "alice", "ts": 5003, "url": "/a", "tags": ["x"]}) is None
True
>>> str(s.check({"user": "alice", "ts": 5003.7}))
"field 'ts': expected BIGINT, got float 5003.7"
>>> str(s.check({"user": "bob", "url": 42}))
"field 'url': expected STRING, got int 42"
>>> str(s.check({"user": "carol", "extra": 1}))
"field 'extra': not declared in the schema (declared: user, ts, url, tags)"
>>> str(s.check({"ts": 1}))
"field 'user': missing, but declared NOT NULL"
>>> parse_schema("user BIGNT")
Traceback (most recent call last):
...
falkirk.spark.errors.SchemaError: schema 'user BIGNT': field 'user': unknown type 'BIGNT'
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Mapping
from typing import Any

from attrs import frozen

from falkirk.spark.errors import SchemaError

__all__ = ["Field", "Type", "RecordSchema", "Problem", "parse_schema", "RESERVED_COLUMNS"]

#: Columns every input log adds to its records.
RESERVED_COLUMNS = frozenset({"_partition", "_offset"})

_INTS = {
    "TINYINT": 8,
    "BYTE": 8,
    "SMALLINT": 16,
    "SHORT": 16,
    "INT": 32,
    "INTEGER": 32,
    "BIGINT": 64,
    "LONG": 64,
}
_CANONICAL = {
    "BYTE": "TINYINT",
    "SHORT": "SMALLINT",
    "INTEGER": "INT",
    "LONG": "BIGINT",
    "REAL": "FLOAT",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "TIMESTAMP_LTZ": "TIMESTAMP",
}
_SIMPLE = {
    "BOOLEAN",
    "FLOAT",
    "REAL",
    "DOUBLE",
    "STRING",
    "DATE",
    "TIMESTAMP",
    "TIMESTAMP_LTZ",
    "TIMESTAMP_NTZ",
}
_UNSUPPORTED = {"BINARY", "INTERVAL", "VARIANT", "VOID", "NULL", "OBJECT", "GEOMETRY", "GEOGRAPHY", "TIME"}
_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|('(?:[^'\\]|\\.)*')|(.))")


@frozen
class Type:
    """A parsed data type: ``name`` (canonical upper case) and its parameters."""

    name: str
    params: tuple[int, ...] = ()
    element: Type | None = None  # ARRAY element, MAP value
    fields: tuple[Field, ...] = ()  # STRUCT fields

    def __str__(self) -> str:
        if self.name == "ARRAY":
            return f"ARRAY<{self.element}>"
        if self.name == "MAP":
            return f"MAP<STRING, {self.element}>"
        if self.name == "STRUCT":
            return "STRUCT<" + ", ".join(f"{f.name}: {f.type}" for f in self.fields) + ">"
        return self.name + (f"({', '.join(map(str, self.params))})" if self.params else "")


@frozen
class Field:
    """A declared field: name, type and whether it may be missing or ``None``."""

    name: str
    type: Type
    nullable: bool = True


@frozen
class Problem:
    """Why a record does not fit the schema: the field (a dotted path), what was expected and found."""

    field: str
    expected: str
    found: str

    def __str__(self) -> str:
        return f"field {self.field!r}: {self.expected}" + (f", got {self.found}" if self.found else "")


def _found(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                break
            if m.group(0).strip():
                self.tokens.append(m.group(0).strip())
            pos = m.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise SchemaError(f"schema {self.text!r}: unexpected end")
        self.i += 1
        return tok

    def expect(self, what: str, where: str) -> None:
        tok = self.peek()
        if tok is None or tok.upper() != what:
            raise SchemaError(f"schema {self.text!r}: {where}: expected {what!r}, found {tok or 'the end'!r}")
        self.i += 1

    def fields(self, end: str | None) -> tuple[Field, ...]:
        out: list[Field] = []
        while True:
            if end is not None and self.peek() == end and not out:
                break
            out.append(self.field())
            if self.peek() == ",":
                self.i += 1
                continue
            break
        names = [f.name for f in out]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise SchemaError(f"schema {self.text!r}: field {dup!r} is declared twice")
        return tuple(out)

    def field(self) -> Field:
        tok = self.take()
        if tok.startswith("`"):
            name = tok[1:-1].replace("``", "`")
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tok):
            name = tok
        else:
            raise SchemaError(f"schema {self.text!r}: expected a field name, found {tok!r}")
        if self.peek() == ":":
            self.i += 1
        typ = self.type(name)
        nullable = True
        while self.peek() is not None and self.peek().upper() in ("NOT", "COMMENT"):  # type: ignore[union-attr]
            word = self.take().upper()
            if word == "NOT":
                self.expect("NULL", f"field {name!r}")
                nullable = False
            else:
                text = self.take()
                if not text.startswith("'"):
                    raise SchemaError(f"schema {self.text!r}: field {name!r}: COMMENT needs a quoted string")
        return Field(name, typ, nullable)

    def number(self, where: str) -> int:
        tok = self.take()
        if not tok.isdigit():
            raise SchemaError(f"schema {self.text!r}: {where}: expected a number, found {tok!r}")
        return int(tok)

    def type(self, name: str) -> Type:
        where = f"field {name!r}"
        tok = self.take()
        word = tok.upper()
        if word in _UNSUPPORTED:
            raise SchemaError(
                f"schema {self.text!r}: {where}: type {word} cannot be carried faithfully by an input log; "
                "declare it as STRING or a number and convert it in a step"
            )
        if word in _INTS:
            return Type(_CANONICAL.get(word, word))
        if word in _SIMPLE:
            return Type(_CANONICAL.get(word, word))
        if word in ("DECIMAL", "DEC", "NUMERIC"):
            p, s = 10, 0
            if self.peek() == "(":
                self.i += 1
                p = self.number(where)
                if self.peek() == ",":
                    self.i += 1
                    s = self.number(where)
                self.expect(")", where)
            if not 1 <= p <= 38 or s > p:
                raise SchemaError(
                    f"schema {self.text!r}: {where}: DECIMAL({p}, {s}) needs 1 <= precision <= 38, scale <= precision"
                )
            return Type("DECIMAL", (p, s))
        if word in ("VARCHAR", "CHAR"):
            self.expect("(", where)
            n = self.number(where)
            self.expect(")", where)
            return Type(word, (n,))
        if word == "ARRAY":
            self.expect("<", where)
            element = self.type(name)
            self.expect(">", where)
            return Type("ARRAY", element=element)
        if word == "MAP":
            self.expect("<", where)
            key = self.type(name)
            if key.name not in ("STRING", "VARCHAR", "CHAR"):
                raise SchemaError(
                    f"schema {self.text!r}: {where}: MAP keys must be STRING in an input log (JSON object keys)"
                )
            self.expect(",", where)
            value = self.type(name)
            self.expect(">", where)
            return Type("MAP", element=value)
        if word == "STRUCT":
            self.expect("<", where)
            fields = self.fields(">")
            self.expect(">", where)
            return Type("STRUCT", fields=fields)
        raise SchemaError(f"schema {self.text!r}: {where}: unknown type {tok!r}")


def parse_schema(ddl: str) -> RecordSchema:
    """Parse a Spark DDL schema (``"a BIGINT NOT NULL, b ARRAY<STRING>"``) into a :class:`RecordSchema`.

    :class:`~falkirk.spark.errors.SchemaError` names the field and the
    problem (unknown or unsupported type, syntax, duplicate or reserved name).
    """
    if not isinstance(ddl, str) or not ddl.strip():
        raise SchemaError(
            f"schema {ddl!r}: expected a non-empty Spark DDL string such as 'user BIGINT, url STRING'"
        )
    parser = _Parser(ddl)
    fields = parser.fields(None)
    if parser.peek() is not None:
        raise SchemaError(f"schema {ddl!r}: unexpected {parser.peek()!r} after the last field")
    reserved = sorted(RESERVED_COLUMNS & {f.name for f in fields})
    if reserved:
        raise SchemaError(f"schema {ddl!r}: {reserved} are the input log's own columns; rename the field")
    return RecordSchema(ddl, fields)


@frozen
class RecordSchema:
    """The declared fields of an input (see the module docstring)."""

    ddl: str
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field | None:
        """The declared field ``name``, or ``None``."""
        return next((f for f in self.fields if f.name == name), None)

    def check(self, record: Any, zone: dt.tzinfo | None = None) -> Problem | None:
        """The first way ``record`` does not fit the schema, or ``None``. ``zone``: the time zone a ``TIMESTAMP``
        without one is read in (``None``: the driver's local zone), as the converter reads it: a timestamp whose
        instant falls outside 0001-01-01 to 9999-12-31 UTC does not fit."""
        if not isinstance(record, Mapping):
            return Problem("(record)", "expected a mapping of field names to values", _found(record))
        return _check_struct(self.fields, record, "", zone)


def _check_struct(
    fields: tuple[Field, ...], record: Mapping[str, Any], prefix: str, zone: dt.tzinfo | None = None
) -> Problem | None:
    known = {f.name for f in fields}
    for key in record:
        if key not in known:
            return Problem(
                prefix + str(key),
                "not declared in the schema (declared: " + ", ".join(f.name for f in fields) + ")",
                "",
            )
    for f in fields:
        value = record.get(f.name)
        if value is None:
            if not f.nullable:
                return Problem(
                    prefix + f.name,
                    "missing, but declared NOT NULL"
                    if f.name not in record
                    else "None, but declared NOT NULL",
                    "",
                )
            continue
        problem = _check_value(f.type, value, prefix + f.name, zone)
        if problem is not None:
            return problem
    return None


def _check_value(t: Type, value: Any, path: str, zone: dt.tzinfo | None = None) -> Problem | None:
    bad = Problem(path, f"expected {t}", _found(value))
    name = t.name
    if name in _INTS:
        if isinstance(value, bool) or not isinstance(value, int):
            return bad
        bits = _INTS[name]
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            return Problem(path, f"expected {t} (a {bits}-bit integer)", f"{value}, out of range")
        return None
    if name in ("FLOAT", "DOUBLE"):
        return bad if isinstance(value, bool) or not isinstance(value, (int, float)) else None
    if name == "BOOLEAN":
        return None if isinstance(value, bool) else bad
    if name in ("STRING", "VARCHAR", "CHAR"):
        if not isinstance(value, str):
            return bad
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return Problem(path, f"expected {t}", f"{_found(value)} (not encodable as UTF-8)")
        if t.params and len(value) > t.params[0]:
            return Problem(path, f"expected {t}", f"a string of {len(value)} characters")
        return None
    if name == "DECIMAL":
        return _check_decimal(t, value, path, bad)
    if name == "DATE":
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return None
        return None if isinstance(value, str) and _parses(dt.date.fromisoformat, value) else bad
    if name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        if isinstance(value, dt.datetime):
            when = value
        elif isinstance(value, str):
            try:
                when = dt.datetime.fromisoformat(value)  # parsed once: the range check below reads it
            except ValueError:
                return bad
        else:
            return bad
        if _instant_in_range(when, aware=name == "TIMESTAMP", zone=zone):
            return None
        return Problem(path, f"expected {t} from 0001-01-01 to 9999-12-31 UTC", _found(value))
    if name == "ARRAY":
        if not isinstance(value, (list, tuple)):
            return bad
        assert t.element is not None
        for i, v in enumerate(value):
            if v is not None:
                problem = _check_value(t.element, v, f"{path}[{i}]", zone)
                if problem is not None:
                    return problem
        return None
    if name == "MAP":
        if not isinstance(value, Mapping):
            return bad
        assert t.element is not None
        for k, v in value.items():
            if not isinstance(k, str):
                return Problem(f"{path}[{k!r}]", "expected a STRING map key", _found(k))
            if v is not None:
                problem = _check_value(t.element, v, f"{path}[{k!r}]", zone)
                if problem is not None:
                    return problem
        return None
    if name == "STRUCT":
        return _check_struct(t.fields, value, path + ".", zone) if isinstance(value, Mapping) else bad
    raise AssertionError(f"unhandled type {t}")  # parse_schema only builds the types above


def _check_decimal(t: Type, value: Any, path: str, bad: Problem) -> Problem | None:
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        return bad
    d = decimal.Decimal(value)
    if not d.is_finite():
        return bad
    precision, scale = t.params
    if d.is_zero():
        return None
    _, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    while exponent < 0 and digits[-1] == 0:  # by value: 1.50 has one digit after the point
        digits, exponent = digits[:-1], exponent + 1
    frac = max(0, -exponent)
    whole = max(0, len(digits) + exponent)
    if frac > scale or whole > precision - scale:
        return Problem(
            path,
            f"expected {t} (at most {precision - scale} digits before the point, {scale} after)",
            _found(value),
        )
    return None


def _instant_in_range(when: dt.datetime, *, aware: bool, zone: dt.tzinfo | None) -> bool:
    """Whether ``when`` — read in ``zone`` when it has none and the type is an instant (``aware``) — is a UTC
    time Python, Arrow's readers and Spark can all hold (years 1 to 9999). A wall-clock time without a zone
    for ``TIMESTAMP_NTZ`` always is."""
    if when.tzinfo is None and not aware:
        return True
    try:
        if when.tzinfo is None:
            when = when.replace(tzinfo=zone) if zone is not None else when.astimezone()
        when.astimezone(dt.UTC)
    except (OverflowError, ValueError):
        return False
    return True


def _parses(fn: Any, text: str) -> bool:
    try:
        fn(text)
    except ValueError:
        return False
    return True
