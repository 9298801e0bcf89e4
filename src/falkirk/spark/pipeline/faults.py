"""What kind of failure a step had, its root cause, and how often falkirk retries each kind.

When a step raises (its own Python code, a Spark job it ran, the SQLite
database of an eager step), :func:`classify` sorts the error into one of
three kinds:

``input``
    Spark could not read the input log (a file missing, unreadable, or with
    a malformed record: the log is read in ``FAILFAST`` mode). A problem of
    the input, not of the step that happened to read it: no recovery can
    help, the run stops with :class:`~falkirk.spark.errors.InputDataError`
    naming the input and the file.
``deterministic``
    An error that will recur on the same data: an exception raised by the
    step's own code on the driver or in a Python UDF on an executor, a value
    that cannot be pickled, query analysis or parsing (``AnalysisException``,
    SQLSTATE classes ``42``/``22``/``0A``…), SQLite syntax or schema errors.
    Retried :attr:`Retries.deterministic` times (default once: a rollback to
    older state may still clear it), then
    :class:`~falkirk.spark.errors.StepError` carries the user's traceback.
``transient``
    Everything else — lost executors, fetch failures, killed tasks, a lost
    cached block, an injected failure, a busy database: worth a recovery,
    :attr:`Retries.transient` times (default 3) per step and epoch.

:func:`root_cause` gives a one-line summary and a detail with the user's
traceback (frames inside falkirk, PySpark and py4j left out) instead of a
truncated ``PythonException:`` line.

>>> def clean(rows):
...     return rows["missing"]
>>> try:
...     clean({})
... except KeyError as exc:
...     fault = classify(exc)
>>> fault.kind, fault.summary
('deterministic', "KeyError: 'missing'")
>>> print(fault.detail.splitlines()[-1])
KeyError: 'missing'
>>> classify(ConnectionResetError("peer went away")).kind
'transient'
>>> Retries().attempts("deterministic"), Retries(deterministic=0).attempts("deterministic")
(2, 1)
"""

from __future__ import annotations

import os
import re
import sqlite3
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import field, frozen

from falkirk.spark.errors import PipelineError

__all__ = ["Fault", "Retries", "classify", "root_cause", "KINDS"]

#: The kinds :func:`classify` returns.
KINDS = ("input", "deterministic", "transient")

#: Text of a failure that another attempt may not see (resources, executors, the network).
_TRANSIENT = re.compile(
    r"FetchFailed|ExecutorLost|Lost executor|executor \S+ (?:lost|exited)|TaskKilled|was killed|killed by|"
    r"CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND|BlockNotFound|BlockManagerId|Connection (?:reset|refused)|"
    r"Py4JNetworkError|SparkContext (?:was|has been) shut down|Python worker exited unexpectedly|"
    r"OutOfMemoryError|Container killed|heartbeat", re.IGNORECASE)
#: Input-log read failures: a file missing or unreadable, or a malformed record (FAILFAST).
_UNREADABLE = re.compile(
    r"FAILED_READ_FILE|FileNotFoundException|FILE_NOT_EXIST|MALFORMED_RECORD|BadRecordException|"
    r"PATH_NOT_FOUND|does not exist", re.IGNORECASE)
#: SQLSTATE classes of errors that recur on the same data (syntax, data, unsupported, constraint...).
_DETERMINISTIC_STATES = ("42", "22", "0A", "21", "23", "38", "39", "44", "HV")
_SQLSTATE = re.compile(r"SQLSTATE:\s*([0-9A-Z]{2})")
#: Frames of these packages are left out of the user's traceback.
_INTERNAL = tuple(
    os.sep + os.path.join(*parts) + os.sep
    for parts in (("falkirk", "spark", "pipeline"), ("pyspark",), ("py4j",), ("pyspark.zip", "pyspark"))
)
_DETERMINISTIC_NAMES = frozenset({
    "AnalysisException", "ParseException", "PySparkTypeError", "PySparkValueError", "PySparkAttributeError",
    "PySparkNotImplementedError", "IllegalArgumentException", "ArithmeticException", "NumberFormatException",
    "DateTimeException", "UnsupportedOperationException", "ArrayIndexOutOfBoundsException",
})
_SQLITE_TRANSIENT = re.compile(r"database is locked|disk I/O error|unable to open|database or disk is full", re.I)


@frozen
class Fault:
    """A classified failure: ``kind`` (:data:`KINDS`), a one-line ``summary``, the ``detail``; ``input``/``file`` for input faults."""

    kind: str
    summary: str
    detail: str = ""
    input: str | None = None
    file: str | None = None


def _nonneg(instance: object, attribute: Any, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PipelineError(f"Retries: {attribute.name}={value!r} must be an integer >= 0")


@frozen
class Retries:
    """How many recoveries falkirk attempts per step and epoch for each kind of failure.

    ``transient``: lost executors and the like (default 3); ``deterministic``:
    errors in the step's code or query (default 1: one recovery, in case
    rolled-back state was the cause; 0 stops at the first). Input faults are
    never retried.
    """

    transient: int = field(default=3, validator=_nonneg, kw_only=True)
    deterministic: int = field(default=1, validator=_nonneg, kw_only=True)

    def attempts(self, kind: str) -> int:
        """How many times a step may fail with ``kind`` at one epoch before falkirk gives up (retries + 1)."""
        return 1 + (self.deterministic if kind == "deterministic" else self.transient if kind == "transient" else 0)

    def __str__(self) -> str:
        return f"Retries(transient={self.transient}, deterministic={self.deterministic})"


def _user_frames(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not any(p in f.filename for p in _INTERNAL)]
    return "".join(traceback.format_list(frames))


def _python_worker_traceback(text: str) -> tuple[str, str]:
    """The last line and the user's part of a Python worker's traceback inside a Spark error message."""
    start = text.find("Traceback (most recent call last):")
    body = text[start:] if start >= 0 else text
    lines = body.splitlines()
    # the traceback ends at the first line after it that is neither a frame nor indented source
    out: list[str] = []
    skip = False
    for line in lines[1:]:
        if line.startswith("  File "):
            skip = any(p in line for p in _INTERNAL)
            if not skip:
                out.append(line)
            continue
        if line.startswith("    "):
            if not skip:
                out.append(line)
            continue
        if line.strip():
            out.append(line)
        break
    last = out[-1] if out else (lines[-1] if lines else text)
    return last.strip(), "\n".join(["Traceback (most recent call last) in a Python worker:", *out])


def _java_chain(exc: BaseException) -> list[str]:
    """``toString()`` of a Py4JJavaError's JVM exception and each of its causes (best effort)."""
    jexc = getattr(exc, "java_exception", None)
    chain: list[str] = []
    try:
        while jexc is not None and len(chain) < 12:
            chain.append(str(jexc.toString()))
            nxt = jexc.getCause()
            jexc = None if nxt is None or nxt.equals(jexc) else nxt
    except Exception:  # the JVM is gone, or not a Throwable
        pass
    return chain


def root_cause(exc: BaseException) -> tuple[str, str]:
    """``(summary, detail)`` of ``exc``: its root cause on one line, and the user's traceback or the cause chain."""
    text = str(exc)
    name = type(exc).__name__
    if "Traceback (most recent call last):" in text:  # a Python UDF failed on an executor
        last, tb = _python_worker_traceback(text)
        return f"{last} (in a Python worker; Spark reported {name})", tb
    chain = _java_chain(exc)
    if chain:
        deepest = chain[-1].splitlines()[0]
        return deepest[:300], "\n".join(f"{'  ' * i}caused by: {c.splitlines()[0][:500]}" if i else c.splitlines()[0][:500]
                                        for i, c in enumerate(chain))
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    summary = f"{name}: {first}" if first else name
    frames = _user_frames(exc)
    message = "\n".join(text.strip().splitlines()[:6])
    detail = (f"Traceback (most recent call last):\n{frames}" if frames else "") + f"{name}: {message}"
    return summary[:300], detail


def _input_of(text: str, inputs: Mapping[str, str | os.PathLike[str]]) -> tuple[str, str] | None:
    for name, directory in inputs.items():
        for form in {str(directory), os.path.abspath(directory)}:
            i = text.find(form.rstrip("/") + "/")
            if i >= 0:
                m = re.match(r"[^\s'\"]*", text[i:])
                return name, (m.group(0) if m else form).rstrip(".,;")
    return None


def classify(exc: BaseException, *, inputs: Mapping[str, str | os.PathLike[str]] | None = None) -> Fault:
    """The :class:`Fault` of ``exc``, raised while a step ran; ``inputs`` maps input names to their log directories."""
    summary, detail = root_cause(exc)
    chain = "\n".join(_java_chain(exc))
    text = f"{exc}\n{chain}"
    if inputs and _UNREADABLE.search(text):
        hit = _input_of(text, inputs)
        if hit is not None:
            name, file = hit
            return Fault("input", summary, detail, name, file)
    if isinstance(exc, sqlite3.Error):
        kind = "transient" if _SQLITE_TRANSIENT.search(text) else "deterministic"
        return Fault(kind, summary, detail)
    module = type(exc).__module__ or ""
    if module.startswith(("pyspark", "py4j")):
        if _TRANSIENT.search(text):
            return Fault("transient", summary, detail)
        states = _SQLSTATE.findall(text)
        state = _sqlstate(exc) or (states[-1] if states else None)
        if "Could not serialize" in text or (state is not None and state[:2] in _DETERMINISTIC_STATES):
            return Fault("deterministic", summary, detail)
        if "Traceback (most recent call last):" in text:  # the step's own code, run by a Python worker
            return Fault("deterministic", summary, detail)
        if type(exc).__name__ in _DETERMINISTIC_NAMES:
            return Fault("deterministic", summary, detail)
        return Fault("transient", summary, detail)
    if isinstance(exc, (OSError, MemoryError)):  # ConnectionError and TimeoutError are OSErrors
        return Fault("transient", summary, detail)
    return Fault("deterministic", summary, detail)  # raised by the step's own Python code (pickling included)


def _sqlstate(exc: BaseException) -> str | None:
    get = getattr(exc, "getSqlState", None)
    if get is None:
        return None
    try:
        state = get()
    except Exception:
        return None
    return state if isinstance(state, str) and state else None


def describe_file(file: str, root: str | os.PathLike[str]) -> str:
    """``file`` relative to ``root`` when it lies under it (for messages)."""
    plain = re.sub(r"^file:(//)?", "", file)
    try:
        return Path(plain).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return file
