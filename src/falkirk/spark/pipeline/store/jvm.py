"""Objects made once per JVM, not every epoch: each saves py4j calls a run would otherwise repeat.

A column expression such as a keyed state's key group (``pmod(xxhash64(key),
n)``) costs a py4j call per function it applies, and a handle on Spark's
status store three; rebuilt every epoch they are a good part of falkirk's
own calls per epoch (``benchmarks/README.md``, issue 53). :func:`once`
keeps each for as long as the objects it was made from live:

* with no ``owner``, for the Py4J gateway, that is the driver's JVM: column
  expressions (classic PySpark's ``Column`` wraps a JVM column, which no
  session owns; in Spark 4 a column is a node turned into an expression at
  each use, so a kept aliased column still names a new attribute in every
  plan: ``tests/spark/pipeline/store/test_jvm.py``);
* with an ``owner`` (a ``SparkContext``), for that owner: a handle on its
  status store or tracker is made again for the next context.

What ``pyspark.sql.functions`` builds depends on whether the process runs
Spark Connect (its columns are plain Python) or classic Spark, and a
process can hold a gateway either way (an in-process Connect server starts
one): the memo is kept per gateway *and* per kind of API.

A JVM class reached through the gateway's view attribute by attribute
(``jvm.org.apache.spark.sql.SparkSession``) costs a py4j call per name, and
each package along the way is first tried as a class: the JVM searches
every jar of its class path and builds a ``ClassNotFoundException`` for
``org``, ``org.apache``, ... — about 1.1 ms of CPU for that one handle, 0.17
ms once kept (``benchmarks/README.md``, "Where YSB's steady CPU goes", per
thread). :func:`jclass` looks a class up by its whole name, once.

>>> once(("doc", 1), lambda: object()) is once(("doc", 1), lambda: object())
True
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["jclass", "once"]

T = TypeVar("T")

_lock = threading.Lock()
#: the most values the memo keeps (keys can carry a step's schema — a delta's columns — or a partition count: a
#: process that declares many pipelines would otherwise keep every one's for ever); the oldest made go first
LIMIT = 512
#: the gateway the memo belongs to, and the memo: key -> (owner, value)
_memo: tuple[Any, dict[Hashable, tuple[Any, Any]]] = (None, {})


def _gateway() -> Any:
    """The JVM the memo belongs to, and the kind of API (Connect or classic) its columns were built with."""
    try:
        from pyspark import SparkContext
        from pyspark.sql.utils import is_remote
    except ImportError:  # pragma: no cover - falkirk.spark needs pyspark
        return None
    return (SparkContext._gateway, is_remote())


def once(key: Hashable, make: Callable[[], T], *, owner: Any = None) -> T:
    """``make()``, made once for ``key`` as long as the JVM (the Py4J gateway), the kind of API and ``owner``
    stay the same.

    ``owner`` is compared by identity; a value made for another owner is
    made again. Two threads may both make a missing value; one is kept. At
    most :data:`LIMIT` values are kept, the oldest made dropped first.
    """
    global _memo
    gateway = _gateway()
    with _lock:
        if _memo[0] != gateway:  # another JVM, or another kind of API
            _memo = (gateway, {})
        memo = _memo[1]
        got = memo.get(key)
    if got is not None and got[0] is owner:
        return got[1]
    value = make()
    with _lock:
        memo.pop(key, None)  # made again (another owner): the newest now
        memo[key] = (owner, value)
        while len(memo) > LIMIT:
            del memo[next(iter(memo))]
    return value


def jclass(jvm: Any, name: str) -> Any:
    """The py4j handle on JVM class ``name`` (its whole name, e.g. ``"scala.Option"``; an object's class ends in
    ``$``), looked up in one call and kept (:func:`once`): not the attribute-by-attribute walk of
    ``jvm.scala.Option``, a call per package that the JVM first tries, and fails, to load as a class."""
    return once(("jclass", name), lambda: getattr(jvm, name))
