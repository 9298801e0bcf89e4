"""The peer: Structured Streaming formulations taken from the matrix's modules, and failures injected into them.

The scale benchmark writes no streaming query of its own for the keyed workloads or the flagship: it runs
the matrix's (:mod:`benchmarks.spark_matrix`), so that a stronger formulation landing there (native
streaming aggregation, a state table under ``foreachBatch``, ``transformWithState``) is measured here at
every size without a change. :func:`keyed_forms` lists the keyed formulations this checkout has, and
:func:`strongest` picks, per workload and churn, the first of :data:`PREFERENCE` that is available and
computes the workload exactly (:func:`exact`); ``--stream-form W=FORM`` chooses another. The choice is
recorded with every point (``stream_form``, ``stream_module``).

Failures are injected the same way into every formulation (:class:`Injected`): the query's
``foreachBatch`` function gets the batch's DataFrame — the stateful operator's output — behind a Python
filter that, in batch ``at``, SIGKILLs the driver (``kill``: its Python process and its JVM) or raises in
every task attempt (``fail``: Spark gives up on the job, the query stops with the exception and is
restarted in the same SparkSession on the same checkpoint). The filter runs in the stateful operator's
tasks, before the state store commits the batch's version.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: keyed formulations, strongest first (the ones this checkout lacks are skipped)
PREFERENCE = ("native", "merge", "tws-rows", "tws", "pandas-state")


def keyed_module() -> Any:
    """The matrix's module holding the keyed streaming queries (``keyed_streaming`` once the strongest
    formulations landed, else ``w2_w3``)."""
    try:
        from ..spark_matrix import keyed_streaming as module  # type: ignore[attr-defined]
    except ImportError:
        from ..spark_matrix import w2_w3 as module
    return module


def keyed_forms() -> tuple[str, ...]:
    """The keyed formulations the matrix's ``StreamingKeyed`` offers here."""
    module = keyed_module()
    return tuple(getattr(module, "FORMS", ("pandas-state",)))


def exact(form: str, workload: str, churn: float) -> bool:
    """Whether formulation ``form`` computes ``workload`` at ``churn`` exactly.

    W3 decays *every* key each epoch; the per-key state functions (``pandas-state``, ``tws``) see only the keys of
    the batch, which is every key only at churn 1. ``native`` has no W3 (no built-in aggregate is that fold);
    ``merge`` is W3's only.

    >>> exact("pandas-state", "W3", 0.2), exact("merge", "W3", 0.2), exact("native", "W2", 0.01)
    (False, True, True)
    """
    if form == "native":
        return workload == "W2"
    if form == "merge":
        return workload == "W3"
    return workload == "W2" or churn >= 1.0


def strongest(workload: str, churn: float, override: str | None = None) -> str | None:
    """The formulation to measure: ``override`` if given, else the first of :data:`PREFERENCE` available here and
    exact for the point (``None``: no formulation here computes it)."""
    have = keyed_forms()
    if override is not None:
        if override not in have:
            raise SystemExit(f"stream form {override!r} is not in this checkout (here: {', '.join(have)})")
        return override
    return next((f for f in PREFERENCE if f in have and exact(f, workload, churn)), None)


def keyed_stream(spark: Any, input_dir: Path, base: Path, workload: str, form: str) -> Any:
    """The matrix's ``StreamingKeyed`` query in formulation ``form``, with no failure of its own."""
    cls = keyed_module().StreamingKeyed
    extra = {"form": form} if "form" in inspect.signature(cls).parameters else {}
    if not extra and form != "pandas-state":
        raise SystemExit(f"this checkout's StreamingKeyed has only pandas-state, not {form!r}")
    return cls(spark, input_dir, base, workload, **extra)


def injecting_filter(kind: str, marker: str, victims: tuple[int, ...]) -> Callable[[Any], Any]:
    """``wrap(df)``: ``df`` behind a Python filter that kills the driver (``kind="kill"``, once: ``marker``) or
    raises in every task attempt (``kind="fail"``). Built here so that cloudpickle ships the function by value."""

    def wrap(df: Any) -> Any:
        from pyspark.sql import functions as F
        from pyspark.sql.types import BooleanType

        def hit(_):  # type: ignore[no-untyped-def]  # no hints: PySpark would infer a pandas UDF
            import os as _os
            import signal as _signal

            if kind == "kill":
                if not _os.path.exists(marker):
                    open(marker, "w").close()
                    for pid in victims:
                        _os.kill(pid, _signal.SIGKILL)
                return True
            raise RuntimeError("injected failure inside the stateful step (every attempt)")

        return df.where(F.udf(hit, BooleanType(), useArrow=False).asNondeterministic()(F.lit(1)))

    return wrap


class Injected:
    """Runs a streaming query object ``query`` (the matrix's: ``.spark``, ``.query()``, ``.written``, and its
    ``foreachBatch`` method ``batch_attr``) with one injected failure in batch ``at``: ``kind`` ``kill`` or
    ``fail`` (see the module docstring), or none (``at=None``).

    ``failed_at``: the (wall, CPU) stamp taken when the failed query's exception reached the driver (``fail``).
    ``progress``: every batch's progress, with ``attempt`` (0 for the failed query, 1 after its restart)."""

    def __init__(self, query: Any, *, at: int | None = None, kind: str = "fail", batch_attr: str = "batch",
                 stamp: Callable[[], tuple[float, float]] | None = None) -> None:
        self.query, self.at, self.kind, self.stamp = query, at, kind, stamp
        self.failed_at: tuple[float, float] | None = None
        self.progress: list[dict[str, Any]] = []
        self._fired = False
        if at is None:
            return
        spark = query.spark
        jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        wrap = injecting_filter(kind, str(Path(query.base) / "killed"), (os.getpid(), jvm))
        inner = getattr(query, batch_attr)

        def batch(df: Any, batch_id: int) -> None:
            if batch_id == at and not self._fired:
                self._fired = kind == "fail"  # a kill fires once by its marker (a new driver finds it)
                df = wrap(df)
            inner(df, batch_id)

        setattr(query, batch_attr, batch)

    def run(self) -> None:
        """The query to the end of its input; restarted once, in the same session, if the injected failure stopped it."""
        from pyspark.errors import StreamingQueryException

        from falkirk.spark.pipeline.run.session import SMALL_DATA, sql_conf

        from ..spark_vs_streaming import STREAMING_CONF

        q = self.query
        q.written.scan(count=False)
        with sql_conf(q.spark, {**STREAMING_CONF, **SMALL_DATA}):
            for attempt in range(2):
                running = q.query().start()
                try:
                    running.awaitTermination()
                except StreamingQueryException:
                    if attempt or not self._fired:
                        raise
                    self.failed_at = self.stamp() if self.stamp is not None else (time.perf_counter(), 0.0)
                    self.progress += [{**json.loads(p.json), "attempt": 0} for p in running.recentProgress]
                    continue
                self.progress += [{**json.loads(p.json), "attempt": attempt} for p in running.recentProgress]
                break
        q.written.scan()
