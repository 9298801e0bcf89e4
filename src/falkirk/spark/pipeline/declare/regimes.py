"""Checkpoint regimes of pipeline steps (SPEC §8), as small declarations.

==================  =================================  ============================  ==========
regime              the step function                  persisted per epoch           ``F(p)``
==================  =================================  ============================  ==========
:class:`Ephemeral`  ``fn(**inputs, epoch) -> df``      its complete frontier         stateless
:class:`Batch`      ``fn(**inputs, epoch) -> df``      its output (the log: a        stateless
                                                       firewall) + complete frontier
:class:`Lazy`       ``fn(**inputs, state, epoch)       its state every ``every``     chain
                    -> (df, state)``                   epochs (Parquet)
:class:`Eager`      as Lazy; or with ``database``:     every epoch: its state, or    chain
                    ``fn(**inputs, db, epoch)``        one SQLite transaction that
                                                       records the epoch
:class:`Output`     ``fn(**inputs, epoch) -> df``      the epoch's partition of the  acknowledged
                    (optional: default passes its      external output (overwrite)   epochs
                    single input through)
==================  =================================  ============================  ==========

Any regime may also log its output (``log=True``); :class:`Batch` always does.

>>> Lazy(every=3).checkpoints_at(5), Lazy(every=3).checkpoints_at(6)
(True, False)
>>> Batch().logs, Ephemeral().stateless, Eager(database="stats.sqlite", tables={"stats": "epoch"}).kind
(True, True, 'eager')
>>> Lazy(every=2, key="user", partitions=3).describe()
{'kind': 'lazy', 'log': False, 'key': 'user', 'max_parallelism': 16, 'every': 2}
>>> Lazy(every=3, key="user", incremental=True).checkpoints_at(1)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from attrs import field, frozen

from falkirk.spark.errors import PipelineError

__all__ = ["Regime", "Keyed", "Ephemeral", "Batch", "Lazy", "Eager", "Output", "from_description"]


def _positive(instance: object, attribute: Any, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PipelineError(f"{type(instance).__name__}: {attribute.name}={value!r} must be an integer >= 1")


def _tables(value: Mapping[str, str] | None) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()
    ):
        raise PipelineError(
            f"Eager: tables={value!r} must map table names to their epoch column ({{'name': 'epoch_column'}})"
        )
    return dict(value)


def _path(value: Any) -> Any:
    """A ``pathlib.Path`` (any ``os.PathLike``) given as a database becomes its string."""
    import os

    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _name(instance: object, attribute: Any, value: str | None) -> None:
    if value is not None and not (isinstance(value, str) and value):
        raise PipelineError(
            f"{type(instance).__name__}: {attribute.name}={value!r} must be a non-empty string"
        )


def _flag(instance: object, attribute: Any, value: bool) -> None:
    if not isinstance(value, bool):
        raise PipelineError(f"{type(instance).__name__}: {attribute.name}={value!r} must be True or False")


@frozen
class Regime:
    """Base of the regimes: what a step persists and how it comes back after a failure.

    Every argument is keyword-only (``Lazy(3)`` is a ``TypeError``; write
    ``Lazy(every=3)``) and checked when the regime is built.
    """

    log: bool = field(default=False, validator=_flag, kw_only=True)

    #: name used in reports and pipeline.json
    kind: ClassVar[str] = "regime"
    #: the solver treats the step as stateless (SPEC §3)
    stateless: ClassVar[bool] = False

    @property
    def takes_state(self) -> bool:
        """Whether the step function receives and returns a state DataFrame."""
        return False

    @property
    def logs(self) -> bool:
        """Whether the step's output is logged (its output edges count as logged)."""
        return self.log

    def checkpoints_at(self, epoch: int) -> bool:
        """Whether a checkpoint is taken after ``epoch`` (stateful regimes)."""
        return False

    def describe(self) -> dict[str, Any]:
        """A JSON description (for ``pipeline.json`` and reports)."""
        return {"kind": self.kind, "log": self.logs}


@frozen
class Ephemeral(Regime):
    """Stateless: recomputes from its inputs; reports its complete frontier after each epoch."""

    kind: ClassVar[str] = "ephemeral"
    stateless: ClassVar[bool] = True


@frozen
class Batch(Regime):
    """Restarts each epoch from empty state and logs its output (a firewall for rollbacks)."""

    log: bool = field(default=True, validator=_flag, kw_only=True)
    kind: ClassVar[str] = "batch"
    stateless: ClassVar[bool] = True

    def __attrs_post_init__(self) -> None:
        if not self.log:
            raise PipelineError("Batch: the batch regime always logs its output (log=False is not allowed)")


def _optional_positive(instance: object, attribute: Any, value: int | None) -> None:
    if value is not None:
        _positive(instance, attribute, value)


@frozen
class Keyed(Regime):
    """A stateful regime whose DataFrame state may be **keyed** (:mod:`falkirk.spark.pipeline.store.keyed`).

    ``key``: the state's key column; ``partitions``: how many partitions the
    state is kept and checkpointed in (by key-group range, at most
    ``max_parallelism``, the number of key groups). ``partitions`` is a
    deployment choice, not part of the pipeline's shape: a restarted
    pipeline may change it, and its checkpoints are then redistributed by
    key group (rescaling on recovery).

    ``incremental=True`` (keyed state only): every epoch is a checkpoint that
    writes only the rows of the keys added, changed or removed since the
    epoch before (a **delta**, :mod:`falkirk.spark.pipeline.store.delta`),
    and a full **snapshot** every ``snapshot_every`` (default 10) epochs; a
    restore reads the last snapshot and its deltas in order.

    ``changes=True`` (keyed state only): the step returns, as its new state,
    only the **changes** — for every key it adds or changes, every row the key
    has now; for a key it removes, one row with the key and a boolean column
    ``_deleted`` true — and keys it does not name keep their rows. The
    ``state`` it is given is still the whole state. falkirk keeps the state
    as a base and the changes since (compacted into the base once they pass a
    tenth of it), so an epoch costs the changes, not the state; with
    ``incremental=True`` each delta is the changes as returned (no comparison
    of two states). It pays when few keys change per epoch.

    ``differential=True`` (with ``incremental=True`` and ``changes=True``):
    each delta holds every change since the last snapshot (a differential
    backup: per key the newest rows, a tombstone for a removed key), not the
    epoch's own, so a restore reads the snapshot and one delta, as written,
    and resolves no key — at 10^7 keys and 1 % changed per epoch 1.15× a
    full checkpoint's restore against 1.45–1.56× — for rewriting the changes
    since the snapshot every epoch: a delta grows to the snapshot spacing
    times the epoch's changes (there 20–35 % more CPU per epoch).
    The changes are compacted into the base at every snapshot; where the
    base is not the snapshot (changes compacted into a new base between
    snapshots, at high churn) the deltas are the epoch's own until the next
    snapshot.

    ``append=True`` (state without ``key``): the state only grows — the step
    returns, as its new state, only the **rows to append** (``None`` for
    none), and the ``state`` it is given is still every row appended so far.
    falkirk keeps the state as the parts appended, each made by one job
    over its rows (where a state returned whole is copied whole every
    epoch; the parts already checkpointed are made into one once more than
    32 are held), and a checkpoint writes only the rows appended since the
    one before, chained to it (a restore reads the chain's files in one
    scan; a full checkpoint every :attr:`APPEND_CHAIN` checkpoints bounds
    the chain). It is meant for a history kept whole (all the events seen,
    for a computation over all of them every few epochs).

    ``replicas`` (default 2): copies of the state's blocks kept on different
    executors between checkpoints (on a cluster; one on a ``local`` master),
    so that the state survives a lost executor without a rollback, at
    ``replicas`` times its memory; ``replicas=1`` for memory-bound jobs.
    Like ``partitions`` it is a deployment choice.
    """

    key: str | None = field(default=None, validator=_name, kw_only=True)
    partitions: int | None = field(default=None, validator=_optional_positive, kw_only=True)
    max_parallelism: int = field(default=16, validator=_positive, kw_only=True)
    incremental: bool = field(default=False, validator=_flag, kw_only=True)
    snapshot_every: int | None = field(default=None, validator=_optional_positive, kw_only=True)
    replicas: int = field(default=2, validator=_positive, kw_only=True)
    changes: bool = field(default=False, validator=_flag, kw_only=True)
    differential: bool = field(default=False, validator=_flag, kw_only=True)
    append: bool = field(default=False, validator=_flag, kw_only=True)

    #: checkpoints of an ``append=True`` state chained to the last full one before the next is full again
    APPEND_CHAIN: ClassVar[int] = 32
    #: snapshot spacing of incremental state when ``snapshot_every`` is not given
    SNAPSHOT_EVERY: ClassVar[int] = 10

    def __attrs_post_init__(self) -> None:
        if self.key is None and self.partitions is not None:
            raise PipelineError(f"{type(self).__name__}: partitions= needs key= (the state's key column)")
        if self.partitions is not None and self.partitions > self.max_parallelism:
            raise PipelineError(
                f"{type(self).__name__}: partitions={self.partitions} exceeds max_parallelism={self.max_parallelism}"
            )
        if self.incremental and self.key is None:
            raise PipelineError(
                f"{type(self).__name__}: incremental=True needs key= (deltas are the rows of the "
                "keys that changed)"
            )
        if self.changes and self.key is None:
            raise PipelineError(
                f"{type(self).__name__}: changes=True needs key= (the changes a step returns replace the rows of "
                "the keys they name)"
            )
        if self.differential and not (self.incremental and self.changes):
            raise PipelineError(
                f"{type(self).__name__}: differential=True needs incremental=True and changes=True (each delta is "
                "the changes since the snapshot that the step's state keeps in memory)"
            )
        if self.append and (self.key is not None or self.incremental or self.changes):
            raise PipelineError(
                f"{type(self).__name__}: append=True keeps the state as the rows appended, unkeyed; it does not "
                "combine with key=, incremental= or changes= (a keyed state whose rows change needs those)"
            )
        if self.snapshot_every is not None and not self.incremental:
            raise PipelineError(
                f"{type(self).__name__}: snapshot_every={self.snapshot_every} needs incremental=True"
            )

    @property
    def parallelism(self) -> int:
        """The number of partitions of the keyed state (2 when not given)."""
        return self.partitions or 2

    @property
    def snapshot_spacing(self) -> int:
        """Epochs from one full snapshot of incremental state to the next (``snapshot_every``, default 10)."""
        return self.snapshot_every or self.SNAPSHOT_EVERY

    def describe(self) -> dict[str, Any]:
        keyed = {"key": self.key, "max_parallelism": self.max_parallelism} if self.key else {}
        if self.incremental:
            keyed.update(incremental=True, snapshot_every=self.snapshot_spacing)
        if self.changes:
            keyed.update(changes=True)
        if self.differential:
            keyed.update(differential=True)
        if self.append:
            keyed.update(append=True)
        return {**super().describe(), **keyed}


@frozen
class Lazy(Keyed):
    """Stateful; checkpoints its state (Parquet) after epochs ``every-1, 2*every-1, …``.

    With ``incremental=True`` every epoch is a (delta) checkpoint, so the step
    restores to the epoch before a failure; ``every`` is kept (it applies
    again if ``incremental`` is turned off on a restart).
    """

    every: int = field(default=1, validator=_positive, kw_only=True)
    kind: ClassVar[str] = "lazy"

    @property
    def takes_state(self) -> bool:
        return True

    def checkpoints_at(self, epoch: int) -> bool:
        return self.incremental or (epoch + 1) % self.every == 0

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "every": self.every}


@frozen
class Eager(Keyed):
    """Stateful; checkpoints after every epoch.

    With ``database`` (a path, relative to the pipeline root unless
    absolute) the step's state is an SQLite database: the function gets
    ``db`` (an ``sqlite3.Connection`` inside an open transaction), writes
    rows tagged with the epoch into ``tables`` (table name → epoch column),
    and the executor commits them in the same transaction as the epoch it
    covers, so a replay never duplicates rows. Without ``database`` the state
    is a DataFrame, as for :class:`Lazy`.
    """

    database: str | None = field(default=None, converter=_path, validator=_name, kw_only=True)
    tables: dict[str, str] = field(factory=dict, converter=_tables, kw_only=True)
    kind: ClassVar[str] = "eager"

    @property
    def takes_state(self) -> bool:
        return self.database is None

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.database is None and self.tables:
            raise PipelineError(
                f"Eager: tables={dict(self.tables)!r} needs database= (the SQLite file those tables live in); "
                "without a database the step's state is a DataFrame and tables= does not apply"
            )
        if self.database is not None and not self.tables:
            raise PipelineError(
                "Eager: with a database, name the tables it writes (tables={'name': 'epoch_column'})"
            )
        if self.database is not None and self.append:
            raise PipelineError(
                "Eager: a database step's state is its database; append= applies to DataFrame state"
            )
        if self.database is not None and self.key is not None:
            raise PipelineError(
                "Eager: a database step's state is its database; key= applies to DataFrame state"
            )

    def checkpoints_at(self, epoch: int) -> bool:
        return True

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "database": self.database, "tables": dict(self.tables)}


@frozen
class Output(Regime):
    """External output: each epoch's result is written once to ``output/<step>/epoch=<e>`` and acknowledged.

    A committed (acknowledged) epoch is final: a recovery never rewrites it.
    When a rollback makes an upstream step re-execute epochs the output has
    committed, the re-sent results are discarded; only a damaged epoch (its
    files no longer match its manifest) is written again, and
    ``Pipeline(code_changes=...)`` rewrites what the user asked to redo.
    """

    kind: ClassVar[str] = "output"


def from_description(step: str, d: Mapping[str, Any]) -> Regime:
    """The regime :meth:`Regime.describe` described (as stored in ``pipeline.json``).

    >>> from_description("cc", Lazy(every=2, key="user").describe())
    Lazy(log=False, key='user', partitions=None, max_parallelism=16, incremental=False, snapshot_every=None, replicas=2, changes=False, differential=False, append=False, every=2)
    >>> from_description("cc", Lazy(key="user", incremental=True).describe()).snapshot_spacing
    10
    """
    kinds: dict[str, type[Regime]] = {c.kind: c for c in (Ephemeral, Batch, Lazy, Eager, Output)}
    kind = d.get("kind")
    if kind not in kinds:
        raise PipelineError(f"step {step!r}: unknown regime kind {kind!r} in the pipeline description")
    args = {k: v for k, v in d.items() if k != "kind"}
    try:
        return kinds[kind](**args)
    except TypeError as exc:
        raise PipelineError(
            f"step {step!r}: regime description {dict(d)} does not fit {kind}: {exc}"
        ) from None
