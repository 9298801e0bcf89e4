"""The root cause of a failed step, in one line, and whether it was the input's fault.

A failed Spark job reaches the driver as a ``Py4JJavaError`` (or a
``PythonException``, ``SparkException``…) whose first line says only
``An error occurred while calling o123.count.``; the cause is further down:
the user's Python traceback from the executor, a Spark error class such as
``[FAILED_READ_FILE.FILE_NOT_EXIST]``, or a ``Caused by:`` chain.
:func:`root_cause` finds the most telling line; :func:`unreadable_input`
says which of the pipeline's input logs an unreadable-file error points at,
:func:`unreadable_item` which step's stored log, checkpoint or complete epoch.

>>> text = '''An error occurred while calling o91.count.
... : org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 3 times,
... most recent failure: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
...   File "/jobs/steps.py", line 12, in clean
...     return row["user"]
... KeyError: 'user'
...
... \tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:600)'''
>>> root_cause(RuntimeError(text))
"KeyError: 'user' (in clean, /jobs/steps.py:12)"
>>> root_cause(RuntimeError("x\\n: org.apache.spark.SparkException: [FAILED_READ_FILE.FILE_NOT_EXIST] "
...                         "Encountered error while reading file file:///r/input/events/p-0/1.jsonl."))
'[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while reading file file:///r/input/events/p-0/1.jsonl.'
>>> unreadable_input("[FAILED_READ_FILE.FILE_NOT_EXIST] … file:///r/input/events/p-0/1.jsonl", "file:///r", ["events"])
'events'
>>> unreadable_item("[FAILED_READ_FILE.NO_HINT] … reading file s3a://b/r/data/cc/log/00000045-f1638eaa3796/p-1.parquet.",
...                 ["cc"])
('cc', 'log', 45, 'data/cc/log/00000045-f1638eaa3796/p-1.parquet')
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

__all__ = [
    "root_cause",
    "unreadable_input",
    "unreadable_item",
    "is_deterministic",
    "pyspark_class",
    "PYSPARK_CLASSES",
]

#: Failures another attempt may not see: resources, executors, the network, falkirk's own injections.
_TRANSIENT = re.compile(
    r"FetchFailed|ExecutorLost|Lost executor|executor \S+ (?:lost|exited)|TaskKilled|was killed|killed by|"
    r"CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND|BlockNotFound|Connection (?:reset|refused)|Py4JNetworkError|"
    r"SparkContext (?:was|has been) shut down|Python worker exited unexpectedly|OutOfMemoryError|heartbeat|"
    r"falkirk injected|database is locked|disk I/O error|TimeoutException",
    re.IGNORECASE,
)
#: SQLSTATE classes of errors that recur on the same data: syntax/analysis, data, unsupported, constraints.
_DETERMINISTIC_STATES = ("42", "22", "0A", "21", "23", "38")
_SQLSTATE = re.compile(r"SQLSTATE:\s*([0-9A-Z]{2})")
_DRIVER_BUGS = (
    KeyError,
    IndexError,
    TypeError,
    ValueError,
    AttributeError,
    NameError,
    ZeroDivisionError,
    AssertionError,
    NotImplementedError,
    LookupError,
    ArithmeticError,
)

_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\]")
_PY_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)|AssertionError)\b")
_FRAME = re.compile(r'^File "([^"]+)", line (\d+), in (\S+)')
_UNREADABLE = re.compile(
    r"FAILED_READ_FILE|FILE_NOT_EXIST|PATH_NOT_FOUND|FileNotFoundException|MALFORMED_RECORD"
)
#: a data file of a published item: ``data/<step>/<kind>/<epoch>-<id>/<file>`` (``Storage.new_location``)
_ITEM_FILE = re.compile(
    r"/(data/([^/\s]+)/(checkpoint|log|complete)/(\d{8})-[0-9a-f]{12}/[^\s]*?)\.?(?:\s|$)"
)
_JAVA_PREFIX = re.compile(r"^(?::\s*)?(?:[a-z][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error):\s*")


def _python_cause(text: str) -> str | None:
    """The last ``Name: message`` line of the last Python traceback in ``text``, with its frame."""
    at = text.rfind("Traceback (most recent call last):")
    if at < 0:
        return None
    frame, last = None, None
    for raw in text[at:].splitlines()[1:]:
        line = raw.strip()
        if raw.startswith("\tat ") or line.startswith("at org.") or (last and not line):
            break
        m = _FRAME.match(line)
        if m:
            frame = m
        elif _PY_ERROR.match(line):
            last = line
    if last is None:
        return None
    if frame is not None and "/pyspark/" not in frame.group(1) and "pyspark.zip" not in frame.group(1):
        return f"{last[:300]} (in {frame.group(3)}, {frame.group(1)}:{frame.group(2)})"
    return last[:300]


def root_cause(exc: BaseException) -> str:
    """The most telling line of ``exc``: the user's Python error, a Spark error class, or the last ``Caused
    by``."""
    text = str(exc)
    python = _python_cause(text)
    if python:
        return python
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    classed = [
        _JAVA_PREFIX.sub("", line.removeprefix("Caused by:").strip())
        for line in lines
        if _ERROR_CLASS.search(line)
    ]
    if classed:
        first, last = classed[0], classed[-1]
        inner = _ERROR_CLASS.search(last).group(0)  # type: ignore[union-attr]
        if inner not in first:  # a wrapper (e.g. FAILED_READ_FILE.NO_HINT) around the real problem
            return f"{first[:300]} (caused by {last[:300]})"
        return first[:400]
    caused = [line for line in lines if line.startswith("Caused by:")]
    if caused:
        return _JAVA_PREFIX.sub("", caused[-1][len("Caused by:") :].strip())[:400]
    useful = [line for line in lines if not line.startswith("An error occurred while calling")]
    return _JAVA_PREFIX.sub("", (useful or lines or [type(exc).__name__])[0])[:400]


#: How falkirk treats each PySpark error class (matched by class name along the exception's MRO, so the
#: classic ``captured`` and the Spark Connect variants of a class are treated alike). ``deterministic``:
#: an error in the step's own code or query, which recurs on the same data — one recovery (in case rolled-back
#: state was the cause), then :class:`~falkirk.spark.errors.StepError`; ``transient``: the cluster, the
#: network or the session — up to three recoveries; ``by cause``: its SQLSTATE or its text decides.
PYSPARK_CLASSES: dict[str, str] = {
    "AnalysisException": "deterministic",
    "ParseException": "deterministic",
    "TempTableAlreadyExistsException": "deterministic",
    "IllegalArgumentException": "deterministic",
    "ArithmeticException": "deterministic",
    "ArrayIndexOutOfBoundsException": "deterministic",
    "DateTimeException": "deterministic",
    "NumberFormatException": "deterministic",
    "UnsupportedOperationException": "deterministic",
    "SparkUpgradeException": "deterministic",
    "SparkNoSuchElementException": "deterministic",
    "SessionNotSameException": "deterministic",
    "PySparkValueError": "deterministic",
    "PySparkTypeError": "deterministic",
    "PySparkAttributeError": "deterministic",
    "PySparkIndexError": "deterministic",
    "PySparkKeyError": "deterministic",
    "PySparkAssertionError": "deterministic",
    "PySparkNotImplementedError": "deterministic",
    "PySparkImportError": "deterministic",
    "PySparkPicklingError": "deterministic",
    "PickleException": "deterministic",
    "PythonException": "by cause",
    "SparkRuntimeException": "by cause",
    "QueryExecutionException": "by cause",
    "StreamingQueryException": "by cause",
    "PySparkRuntimeError": "by cause",
    "SparkConnectGrpcException": "by cause",
    "UnknownException": "transient",
    "StreamingPythonRunnerInitializationException": "transient",
}


def pyspark_class(exc: BaseException) -> tuple[str, str] | None:
    """``(class name, treatment)`` of the nearest PySpark error class of ``exc`` in :data:`PYSPARK_CLASSES`.

    >>> class AnalysisException(Exception): pass   # stands in for pyspark's (matched by name)
    >>> pyspark_class(AnalysisException("x")), pyspark_class(KeyError("k"))
    (('AnalysisException', 'deterministic'), None)
    """
    for klass in type(exc).__mro__:
        treatment = PYSPARK_CLASSES.get(klass.__name__)
        if treatment is not None:
            return klass.__name__, treatment
    return None


def is_deterministic(exc: BaseException, cause: str) -> bool:
    """Will ``exc`` (root cause ``cause``) recur if the step runs again on the same data?

    Yes for an exception the step's own code raised on the driver (``KeyError``,
    ``TypeError``…, an unpicklable value), the PySpark error classes of
    :data:`PYSPARK_CLASSES` marked deterministic (analysis, parsing, arithmetic,
    API misuse such as ``PySparkValueError``), a Python error raised in the
    user's UDF on an executor, and SQL states of syntax, data and constraint
    errors (including SQLite's); no for lost executors, fetch failures, killed
    tasks, network and resource trouble, and falkirk's injected failures.

    >>> is_deterministic(KeyError("user"), "KeyError: 'user'")
    True
    >>> is_deterministic(RuntimeError("x"), "[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_3_0 not found!")
    False
    >>> is_deterministic(RuntimeError("x"), "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `usr` cannot be resolved. SQLSTATE: 42703")
    True
    """
    import pickle
    import sqlite3

    text = f"{cause}\n{exc}"
    if _TRANSIENT.search(cause) or _TRANSIENT.search(str(exc)[:2000]):
        return False
    known = pyspark_class(exc)
    if known is not None and known[1] != "by cause":
        return known[1] == "deterministic"
    name = type(exc).__name__
    if "AnalysisException" in name or "ParseException" in name or isinstance(exc, pickle.PicklingError):
        return True
    if isinstance(exc, sqlite3.Error):
        return not isinstance(exc, sqlite3.OperationalError) or bool(
            re.search(r"syntax error|no such (?:table|column)|has no column|already exists", str(exc))
        )
    if (
        known is None
        and isinstance(exc, _DRIVER_BUGS)
        and not type(exc).__module__.startswith(("py4j", "pyspark"))
    ):
        return True
    state = _sql_state(exc) or (m.group(1) if (m := _SQLSTATE.search(text)) else None)
    if state and state[:2] in _DETERMINISTIC_STATES:
        return True
    return _python_cause(str(exc)) is not None and "(in " in cause  # a Python error raised in the user's UDF


def _sql_state(exc: BaseException) -> str | None:
    """The SQLSTATE a PySpark error carries (``getSqlState()``), if any."""
    get = getattr(exc, "getSqlState", None)
    try:
        state = get() if callable(get) else None
    except Exception:  # a PySpark error built without an error class
        return None
    return state if isinstance(state, str) and len(state) >= 2 else None


def unreadable_input(cause: str, root_uri: str, inputs: Iterable[str]) -> str | None:
    """The input whose log file ``cause`` (a :func:`root_cause`) could not read, if it is one."""
    if not _UNREADABLE.search(cause):
        return None
    base = root_uri.rstrip("/")
    for name in inputs:
        for form in (f"{base}/input/{name}/", f"/input/{name}/"):
            if form in cause:
                return name
    return None


#: an executor's "not found" for a file, which the driver can check with its own client
_NOT_FOUND = re.compile(r"FILE_NOT_EXIST|PATH_NOT_FOUND|FileNotFoundException")


def missing_input_file(cause: str, name: str) -> str | None:
    """The file of input ``name`` (its path under the root) that ``cause`` (a :func:`root_cause`) says does
    not exist, if it says so.

    >>> missing_input_file("[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while reading file "
    ...     "s3a://b/soak/input/events/part-1/000000001587@epoch-146.fccea8d1-0.parquet. File does not exist.", "events")
    'input/events/part-1/000000001587@epoch-146.fccea8d1-0.parquet'
    >>> missing_input_file("java.io.FileNotFoundException: No such file or directory: "
    ...     "s3a://b/r/input/events/part-0/k%3D1/x.parquet: getFileStatus", "events")
    'input/events/part-0/k=1/x.parquet'
    >>> missing_input_file("[MALFORMED_RECORD] s3a://b/soak/input/events/part-1/x.parquet", "events") is None
    True
    """
    if not _NOT_FOUND.search(cause):
        return None
    m = re.search(rf"/(input/{re.escape(name)}/[^\s'\"`,;:()\[\]]+?)\.?(?=[\s'\"`,;:()\[\]]|$)", cause)
    return urllib.parse.unquote(m.group(1)) if m else None


def unreadable_item(cause: str, steps: Iterable[str]) -> tuple[str, str, int, str] | None:
    """``(step, kind, epoch, path under the root)`` of the stored item (a log, checkpoint or complete epoch of
    one of ``steps``) whose data file ``cause`` (a :func:`root_cause`) could not read, if it is one. Matched
    without the root's scheme: the executors may name it otherwise (``s3a://`` for the driver's ``s3://``)."""
    if not _UNREADABLE.search(cause):
        return None
    names = set(steps)
    for m in _ITEM_FILE.finditer(cause):
        if m.group(2) in names:
            return m.group(2), m.group(3), int(m.group(4)), m.group(1)
    return None
