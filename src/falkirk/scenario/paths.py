"""JSON paths for scenario errors, and model errors re-raised at a path.

A path names a place in a scenario document the way a reader would look it
up: ``processors.sum.checkpoints[0].delivered.e1``. Names that are not plain
words are quoted: ``processors["my proc"]``.

Errors raised at a path are :class:`~falkirk.errors.ScenarioError`. When the
underlying problem has a more precise class (``NotMonotoneError``,
``UnknownNameError``…) the error is an instance of both, so callers can catch
either.

>>> join(join("processors", "sum"), "checkpoints")
'processors.sum.checkpoints'
>>> join("processors", "my proc"), join("failed", 0)
('processors["my proc"]', 'failed[0]')
>>> from falkirk.errors import NotMonotoneError
>>> err = error_at("processors.sum", "it shrinks", NotMonotoneError)
>>> isinstance(err, NotMonotoneError), err.path, str(err)
(True, 'processors.sum', 'processors.sum: it shrinks')
"""

from __future__ import annotations

import json
import re
from typing import Any

from falkirk.errors import FalkirkError, ScenarioError, did_you_mean

__all__ = ["did_you_mean", "error_at", "from_model_error", "join", "show"]

_PLAIN = re.compile(r"[\w@-]+")
_COMBINED: dict[type[FalkirkError], type[ScenarioError]] = {}


def join(path: str, key: str | int) -> str:
    """The path of ``key`` (a field name, map key or list index) inside ``path``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if not _PLAIN.fullmatch(key):
        return f"{path}[{json.dumps(key, ensure_ascii=False)}]"
    return f"{path}.{key}" if path else key


def error_at(path: str, message: str, kind: type[FalkirkError] = ScenarioError) -> ScenarioError:
    """A :class:`ScenarioError` at ``path`` that is also a ``kind``."""
    message = " ".join(message.splitlines())
    if issubclass(kind, ScenarioError):
        return kind(message, path)
    cls = _COMBINED.get(kind)
    if cls is None:
        cls = type(f"Scenario{kind.__name__}", (ScenarioError, kind), {"__module__": __name__})
        _COMBINED[kind] = cls
    return cls(message, path)


# "processor 'p'" optionally followed by ", checkpoint i" or ", live"; then maybe a field.
_WHERE = re.compile(r"processor '(?P<p>[^']*)'(?:, (?:checkpoint (?P<i>\d+)|(?P<live>live)))?")
_CHAIN = re.compile(r"processor '(?P<p>[^']*)': checkpoint (?P<i>\d+) ")
_FIELD = re.compile(
    r"(?<![\w'])(?P<f>frontier|notifications|delivered|discarded|projection)"
    r"(?:\['(?P<e>[^']*)'\])?(?= =|:)"
)
_EDGE = re.compile(r"edge '(?P<e>[^']*)'")


def from_model_error(exc: FalkirkError) -> ScenarioError:
    """Re-raise an error of :mod:`falkirk.solver.model` at the JSON path it concerns.

    The model names the processor, checkpoint, field and edge in its
    messages; this recovers the path from them (falling back to the
    processor, the edge or the document).
    """
    if isinstance(exc, ScenarioError):
        return exc
    msg = str(exc)
    path = ""
    chain = _CHAIN.match(msg)
    where = _WHERE.match(msg)
    edge = _EDGE.match(msg)
    if chain:
        path = f"{join('processors', chain['p'])}.checkpoints[{chain['i']}].frontier"
    elif where:
        path = join("processors", where["p"])
        if where["i"] is not None:
            path = f"{path}.checkpoints[{where['i']}]"
        elif where["live"]:
            path = f"{path}.live"
        if where["i"] is not None or where["live"]:
            field = _FIELD.search(msg, where.end())
            if field:
                path = join(path, field["f"])
                if field["e"] is not None:
                    path = join(path, field["e"])
    elif edge:
        path = join("edges", edge["e"])
        if "projection" in msg:
            path = join(path, "projection")
    return error_at(path, msg, type(exc))


def show(value: Any, limit: int = 60) -> str:
    """A short rendering of ``value`` for error messages (JSON, strings quoted like names)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else repr(value[: limit - 1]) + "…"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
