"""DBSP's three fault-tolerance approaches (seed 003) as falkirk schemes.

DBSP runs a deterministic circuit step by step; every step feeds one batch
of logged input (Kafka ``input[h]`` topics, plus an ``input-step`` record of
what each worker fed) and commits that step's output in a transaction. The
seed describes three ways to survive a crash. In falkirk terms (SPEC §8), a
step is an epoch, and every approach keeps the input log and commits output:

=====================  ==================================  =========================================
scheme                 DBSP                                falkirk
=====================  ==================================  =========================================
``dbsp-input-log``     replay all input from the start     every operator :class:`Never`,
                                                           ``F(p) = {∅}``: any failure of an operator
                                                           rolls everything back to ``∅``; the low-
                                                           watermark stays ``∅``, so input is never
                                                           acknowledged (the log grows without bound)
``dbsp-checkpoint-     snapshots + deltas, restore from    :class:`SnapshotDelta`: at settled
delta``                the latest (or an older) snapshot   frontiers, a delta from the previous record
                       and apply the later deltas          (``Operator.get_delta``) and now and then a
                                                           snapshot; restore = snapshot +
                                                           ``apply_delta`` of the deltas after it
``dbsp-persistent``    state in a transactional store,     :class:`Transactional`: every processor
                       committed in coordinated steps      commits the same steps (every ``period``-th
                                                           epoch and the last), writing its changed
                                                           state; restore opens the committed version
=====================  ==================================  =========================================

Common to all three: sources are :class:`InputLog` (stateless; their
reported frontier is the durable ``input-step`` log) and outputs are
:class:`StepCommit`, which keeps the seed's invariant — *the output of a step
is committed only after the step's input record is committed by every
worker* — by waiting for (flushing) every source's input-step record before
it commits, and checks it at every commit (:func:`check_input_logged`
raises :class:`InputLogInvariantViolated`). ``StepCommit(wait=False)`` is
deliberately broken, so that tests can see the check catch it.

>>> from falkirk.sim.cases import RandomChooser, build_case, check_case
>>> case = build_case(RandomChooser(2), scheme=DBSP_CHECKPOINT_DELTA)
>>> sorted({type(n.policy).__name__ for n in case.graph.nodes.values()})
['InputLog', 'SnapshotDelta', 'StepCommit']
>>> check_case(case).ok
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from attrs import field, frozen

from falkirk.domains import Epoch, Frontier, Product
from falkirk.errors import ValidationError
from falkirk.sim.external import ProtocolViolation
from falkirk.sim.operators import Operator
from falkirk.sim.policies import Commit, Ephemeral, Never, Policy
from falkirk.sim.schemes.base import Role, Scheme
from falkirk.sim.state import Proc, Record, Store, nbytes

if TYPE_CHECKING:
    from falkirk.sim.choices import Chooser
    from falkirk.sim.engine import Simulation

__all__ = [
    "InputLog",
    "StepCommit",
    "InputLogInvariantViolated",
    "check_input_logged",
    "SnapshotDelta",
    "Transactional",
    "StateEntry",
    "rebuild",
    "commit_steps",
    "DBSP_INPUT_LOG",
    "DBSP_CHECKPOINT_DELTA",
    "DBSP_PERSISTENT",
]


def _positive(instance: object, attribute: Any, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(
            f"{type(instance).__name__}: {attribute.name}={value!r} must be an integer >= 1"
        )


# -- input logging ------------------------------------------------------------------------
class InputLogInvariantViolated(ProtocolViolation):
    """An output committed a step whose ``input-step`` record some source had not made durable."""


@frozen
class InputLog(Ephemeral):
    """A source: its reported frontier is DBSP's ``input-step`` log (durable every ``every`` advances)."""


def _read(sim: Simulation, source: str) -> Frontier:
    """The epochs ``source`` has read (fed to the circuit) so far."""
    p = sim.procs[source]
    return Frontier.below(p.domain, p.next_read or 0)


def _unlogged(sim: Simulation, commit: Frontier) -> list[tuple[str, Frontier, Frontier | None]]:
    """``(source, needed, logged)`` for every source whose input-step log lacks input ``commit`` needs.

    A commit of epochs needs the steps it commits that the source has fed;
    a commit in another domain needs every step fed so far (conservative).
    """
    out = []
    for src in sim.inputs:
        need = _read(sim, src)
        if isinstance(commit.domain, Epoch):
            need = need & commit
        logged = sim.procs[src].store.reported
        if not need.is_empty and (logged is None or not need <= logged):
            out.append((src, need, logged))
    return out


def check_input_logged(sim: Simulation, output: str, commit: Frontier) -> None:
    """Raise :class:`InputLogInvariantViolated` unless every source logged the input ``commit`` needs."""
    for src, need, logged in _unlogged(sim, commit):
        raise InputLogInvariantViolated(
            f"output {output!r} commits {commit!r}, but source {src!r} has made its input-step "
            f"log durable only up to {logged!r} (it has fed {need!r} to those steps)"
        )


@frozen
class StepCommit(Commit):
    """DBSP's output transaction: commit a step's output only once its input-step records are durable.

    ``wait=False`` is BROKEN on purpose: it commits without waiting (the
    check still runs and catches it).
    """

    wait: bool = True

    def persist_points(self, sim: Simulation, proc: Proc, settled: Frontier) -> list[Frontier]:
        from falkirk.sim.persistence import persist

        if self.wait:  # "block until our own write or writes to input-step commit"
            for src, _, _ in _unlogged(sim, settled):
                persist(sim, sim.procs[src], sim.settled[src])
        check_input_logged(sim, proc.name, settled)
        return [settled]

    def describe(self) -> str:
        return super().describe() if self.wait else "StepCommit(wait=False)"


# -- state records: snapshots, deltas, committed versions --------------------------------
_NONE = object()


class StateEntry:
    """One persisted state record of :class:`SnapshotDelta` or :class:`Transactional`.

    ``delta`` is the change from ``base`` (the previous entry; ``None``: the
    initial state); ``snapshot`` is a full snapshot written with it (or
    absent). ``written`` is what went to storage. ``version`` is a
    materialised snapshot: for :class:`Transactional` the store's committed
    version (durable), for :class:`SnapshotDelta` only a cache of the latest.
    """

    __slots__ = ("seq", "base_seq", "base", "delta", "snapshot", "version")

    def __init__(
        self,
        seq: int,
        base: StateEntry | None,
        delta: Any,
        *,
        snapshot: Any = _NONE,
        version: Any = _NONE,
        chain: bool = True,
    ) -> None:
        self.seq, self.delta, self.snapshot, self.version = seq, delta, snapshot, version
        self.base_seq = None if base is None else base.seq
        self.base = base if chain else None

    @property
    def has_snapshot(self) -> bool:
        return self.snapshot is not _NONE

    @property
    def written(self) -> tuple[Any, ...]:
        """What this record wrote: base sequence number, delta, and the snapshot if any."""
        return (self.base_seq, self.delta) + ((self.snapshot,) if self.has_snapshot else ())

    def __repr__(self) -> str:
        return f"StateEntry(seq={self.seq}, snapshot={self.has_snapshot})"


def rebuild(op: Operator, entry: StateEntry | None, *, older: int = 0) -> Any:
    """The snapshot at ``entry``: the latest snapshot at or before it, plus the deltas after that.

    ``older=k`` starts from the ``k``-th snapshot before the latest instead
    (DBSP: deltas apply from the latest or an older snapshot); if fewer are
    kept, from the oldest kept one, or from the initial state.
    """
    deltas, e = [], entry
    while e is not None:
        if e.has_snapshot:
            if older == 0 or e.base is None:  # the requested snapshot, or the oldest kept
                break
            older -= 1
        deltas.append(e.delta)
        e = e.base
    state = e.snapshot if e is not None else None
    for d in reversed(deltas):
        state = op.apply_delta(state, d)
    return state


def _latest(store: Store) -> StateEntry | None:
    return store.records[-1].state if store.records else None


def _materialised(op: Operator, entry: StateEntry | None) -> Any:
    if entry is None:
        return None
    return entry.version if entry.version is not _NONE else rebuild(op, entry)


@frozen
class SnapshotDelta(Policy):
    """DBSP checkpoint + deltas: a delta every ``every`` settled advances, a snapshot now and then.

    A snapshot is written with the delta when ``snapshot_every`` records
    have passed since the last one or the deltas already logged since then
    outweigh a snapshot ("if the state log grows too big"). ``keep_snapshots`` bounds
    how far back restores may start (older deltas are dropped).
    """

    persists: ClassVar[str | None] = "delta"
    snapshot_every: int = field(default=4, validator=_positive)
    keep_snapshots: int = field(default=2, validator=_positive)

    def save_state(self, op: Operator, store: Store, frontier: Frontier) -> StateEntry:
        prev = _latest(store)
        base = _materialised(op, prev)
        delta = op.get_delta(base, frontier)
        new = op.apply_delta(base, delta)
        entry = StateEntry(1 if prev is None else prev.seq + 1, prev, delta, version=new)
        if prev is not None:
            prev.version = _NONE  # only the latest keeps its materialised cache
        since, size, e = 0, 0, prev
        while e is not None and not e.has_snapshot:
            since, size, e = since + 1, size + nbytes(e.delta), e.base
        if since + 1 >= self.snapshot_every or size > nbytes(new):
            entry.snapshot = new
            self._forget(entry)
        return entry

    def _forget(self, entry: StateEntry) -> None:
        """Cut the chain behind the ``keep_snapshots``-th snapshot (its older deltas are deleted)."""
        kept = 0
        e_: StateEntry | None = entry
        while e_ is not None:
            e = e_
            if e.has_snapshot:
                kept += 1
                if kept == self.keep_snapshots:
                    e.base = None
                    return
            e_ = e.base

    def load_state(self, op: Operator, record: Record) -> Any:
        return rebuild(op, record.state)

    def describe(self) -> str:
        return _describe(self, every=1, snapshot_every=4, keep_snapshots=2)


# -- persistent state ------------------------------------------------------------------------
def commit_steps(epochs: int, period: int) -> list[int]:
    """The steps a :class:`Transactional` store commits: every ``period``-th epoch, and the last.

    >>> commit_steps(5, 2)
    [1, 3, 4]
    """
    return [k for k in range(epochs) if (k + 1) % period == 0 or k == epochs - 1]


def _step(domain: Any, k: int) -> Frontier:
    """Steps ``0..k`` in ``domain`` (epochs, or every loop iteration of those epochs)."""
    return Frontier.before(domain, [k + 1] if isinstance(domain, Epoch) else [(k + 1, 0)])


@frozen
class Transactional(Policy):
    """DBSP persistent state: every processor commits the same steps to a transactional store.

    Steps ``commit_steps(epochs, period)`` are committed, each as soon as it
    is settled at the processor, writing the changed state (its write set);
    a restore opens the committed version, re-running nothing. Processors in
    a ``sequence`` domain have no steps and commit at every settled advance.
    """

    persists: ClassVar[str | None] = "delta"
    period: int = field(default=1, validator=_positive)

    def persist_points(self, sim: Simulation, proc: Proc, settled: Frontier) -> list[Frontier]:
        dom = proc.domain
        if not isinstance(dom, (Epoch, Product)):  # a sequence domain has no steps
            return [settled]
        last = proc.store.last_frontier(dom)
        points = [_step(dom, k) for k in commit_steps(sim.graph.epochs, self.period)]
        return [f for f in points if last < f and f <= settled]

    def save_state(self, op: Operator, store: Store, frontier: Frontier) -> StateEntry:
        prev = _latest(store)
        base = None if prev is None else prev.version
        delta = op.get_delta(base, frontier)
        version = op.apply_delta(base, delta)
        return StateEntry(1 if prev is None else prev.seq + 1, prev, delta, version=version, chain=False)

    def load_state(self, op: Operator, record: Record) -> Any:
        return record.state.version

    def describe(self) -> str:
        return _describe(self, every=1, period=1)


def _describe(policy: Policy, **defaults: Any) -> str:
    """``Name(field=value, ...)`` for the fields that differ from ``defaults``."""
    parts = [f"{k}={getattr(policy, k)}" for k, v in defaults.items() if getattr(policy, k) != v]
    return f"{type(policy).__name__}({', '.join(parts)})"


# -- the schemes ---------------------------------------------------------------------------
def _common(c: Chooser, role: Role) -> Policy | None:
    if role.is_output:
        return StepCommit()
    if role.is_source:
        return InputLog(every=c.integer(1, 2))
    return None


def input_log_policy(c: Chooser, role: Role) -> Policy:
    """Input logging: sources log their input steps, outputs commit, every other processor ``Never``."""
    return _common(c, role) or Never()


def checkpoint_delta_policy(c: Chooser, role: Role) -> Policy:
    """Checkpoint + deltas for every processor that is not a source or an output."""
    return _common(c, role) or SnapshotDelta(every=c.integer(1, 3), snapshot_every=c.integer(1, 4))


def persistent_policy(c: Chooser, role: Role) -> Policy:
    """Persistent state: every processor that is not a source or an output commits the same steps."""
    return _common(c, role) or Transactional(period=c.integer(1, 2))


#: DBSP input logging: replay every input from the start, ``F(p) = {∅}`` (seed 003).
DBSP_INPUT_LOG = Scheme(
    "dbsp-input-log",
    "DBSP input logging: replay all input from the start (seed 003)",
    input_log_policy,
)
#: DBSP checkpoint + deltas: snapshots and state deltas via get/set_state, get/apply_delta (seed 003).
DBSP_CHECKPOINT_DELTA = Scheme(
    "dbsp-checkpoint-delta",
    "DBSP checkpoint + deltas: snapshots plus state deltas (seed 003)",
    checkpoint_delta_policy,
)
#: DBSP persistent state: a transactional store committed in coordinated steps (seed 003).
DBSP_PERSISTENT = Scheme(
    "dbsp-persistent",
    "DBSP persistent state: a transactional store committed in coordinated steps (seed 003)",
    persistent_policy,
)
