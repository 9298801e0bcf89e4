"""The incremental monitor: low-watermarks kept up to date as checkpoints arrive (SPEC §6).

A :class:`Monitor` holds a dataflow's persisted checkpoint metadata and its
**low-watermarks** ``lw(p)``: SPEC §5 solved with every processor failed
(``solve_frontiers(df, failed="all")``). :meth:`Monitor.record` accepts a new
checkpoint, updates the watermarks incrementally and returns the
:class:`~falkirk.solver.monitor.reports.Changes` it allows (checkpoints,
logged messages and input to delete or acknowledge, output to commit).
:meth:`Monitor.plan_rollback` answers a failure. With a
:class:`~falkirk.solver.monitor.store.SQLiteStore` every acknowledged report is
durable and :meth:`Monitor.open` restarts with exactly that state.

External inputs are the processors without input edges; external outputs
are declared with ``outputs=``: stateful processors that take no checkpoints
of their own; when the external service has persisted everything sent at
times in ``f``, :meth:`Monitor.acknowledge_output` records ``f`` as their
checkpoint, and ``lw(p)`` is what is committed.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("src", "epoch", stateless=True, checkpoints=[Checkpoint(1)]),
...                Processor("sum", "epoch", logs=["out"], checkpoints=[Checkpoint(1)]),
...                Processor("sink", "epoch")],
...               [Edge("in", "src", "sum"), Edge("out", "sum", "sink")])
>>> m = Monitor(df, outputs=["sink"])
>>> m.record("sum", Checkpoint(3)).to_json()
{'watermarks': {}, 'logs': {}, 'inputs': {}, 'outputs': {}}
>>> m.record("src", Checkpoint(4)).to_json()["watermarks"]
{'src': 3, 'sum': 3}
>>> m.acknowledge_output("sink", 2).to_json()
{'watermarks': {'sink': 2}, 'logs': {'out': 2}, 'inputs': {}, 'outputs': {'sink': 2}}
>>> m.plan_rollback(["sum"]).to_json()["frontiers"]
{'src': 3, 'sum': 3, 'sink': 2}
>>> m.plan_rollback(["sum"], live={"sink": Checkpoint("top", notifications=3, delivered={"out": 3})}).actions
{'src': 'rollback', 'sum': 'restore', 'sink': 'keep'}

Why the incremental update is exact
-----------------------------------
Each report re-solves only ``R``: the reporting processor and every
processor whose watermark derivation passes through it (``Changes.examined``
counts the updates), not the graph. Why that gives the watermarks a full
solve would give is argued once, with the fixed point itself, in
:mod:`falkirk.solver.fixpoint` (item 5). ``_check`` compares the state with
a full re-solve; the tests call it after every step.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from falkirk.domains import Frontier
from falkirk.domains.encoding import encode_frontier
from falkirk.errors import MonitorError, UnknownNameError
from falkirk.solver.model import Checkpoint, Dataflow, ResolvedCheckpoint
from falkirk.solver.model.access import normalise_failed
from falkirk.solver.model.resolve import coerce
from falkirk.solver.monitor.codec import checkpoint_to_json
from falkirk.solver.monitor.reports import Changes, projected_checkpoints, resolve_next
from falkirk.solver.monitor.store import (
    BatchLostError,
    MemoryStore,
    MetadataStore,
    SQLiteStore,
    StoredState,
    with_checkpoints,
)
from falkirk.solver.monitor.tracker import TrackingSolver, monitor_view
from falkirk.solver.plan import RollbackPlan, solve_frontiers

__all__ = ["Monitor", "Changes"]


class Monitor:
    """Incrementally maintained low-watermarks of ``dataflow`` (see the module docstring).

    ``dataflow``'s processors list their already persisted checkpoints (their
    ``live`` metadata is ignored: pass it to :meth:`plan_rollback`).
    ``outputs`` names the external outputs. ``store`` receives every
    acknowledged report (default: a :class:`~falkirk.solver.monitor.store.MemoryStore`);
    use :meth:`create` / :meth:`open` for an SQLite database. Not thread-safe.
    """

    def __init__(
        self, dataflow: Dataflow, *, outputs: Iterable[str] = (), store: MetadataStore | None = None
    ) -> None:
        self._setup(dataflow, frozenset(outputs))
        self._store: MetadataStore = MemoryStore() if store is None else store
        self._store.create(StoredState(dataflow, self._outputs, dict(self._announced)))

    @classmethod
    def create(
        cls,
        dataflow: Dataflow,
        path: str | os.PathLike[str],
        *,
        outputs: Iterable[str] = (),
        synchronous: str = "FULL",
    ) -> Monitor:
        """A new monitor persisted in the SQLite database at ``path`` (refused if it holds one)."""
        store = SQLiteStore(path, synchronous=synchronous)
        try:
            return cls(dataflow, outputs=outputs, store=store)
        except BaseException:
            store.close()
            raise

    @classmethod
    def open(cls, source: str | os.PathLike[str] | MetadataStore, *, synchronous: str = "FULL") -> Monitor:
        """Restart the monitor stored at ``source`` (an SQLite path or a store) with its acknowledged
        state."""
        hint = "create one first (Monitor.create, or `falkirk monitor init`)"
        store: MetadataStore
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            if path != ":memory:" and not os.path.exists(path):
                raise MonitorError(f"no monitor database at {path!r}; {hint}")
            store = SQLiteStore(path, synchronous=synchronous)
        else:
            store = source
        owned = store is not source
        try:
            state = store.load()
            if state is None:
                raise MonitorError(f"{store!r} holds no monitor; {hint}")
            self = cls.__new__(cls)
            self._setup(state.dataflow, state.outputs)
            self._store = store
            if self._announced != state.watermarks:
                differ = sorted(p for p in self._announced if state.watermarks.get(p) != self._announced[p])
                raise MonitorError(
                    f"{store!r} is inconsistent: its stored watermarks of {differ} differ from the ones "
                    "its checkpoints give"
                )
        except BaseException:
            if owned:
                store.close()
            raise
        return self

    def _setup(self, df: Dataflow, outputs: frozenset[str]) -> None:
        for p in sorted(outputs):
            if p not in df.processors:
                raise UnknownNameError(f"outputs names unknown processor {p!r}")
            if df.processors[p].stateless:
                raise MonitorError(
                    f"external output {p!r} must be a stateful processor (SPEC §6), not stateless"
                )
        self._graph = df
        self._outputs = outputs
        self._inputs = frozenset(p for p in df.processors if not df.inputs[p] and p not in outputs)
        self._raw: dict[str, list[Checkpoint]] = {n: list(p.checkpoints) for n, p in df.processors.items()}
        self._last: dict[str, ResolvedCheckpoint] = {}
        self._projected: dict[str, dict[str, Checkpoint]] = {}
        for n in df.processors:
            self._last[n] = df.candidates(n, failed=True)[-1]
            proj: dict[str, Checkpoint] = {}
            for ck in self._raw[n]:
                proj = projected_checkpoints(df, n, proj, ck)
            self._projected[n] = proj
        self._view = monitor_view(df)
        self._solver = TrackingSolver(self._view)
        self._solver.run_queue()
        self._announced: dict[str, Frontier] = dict(self._solver.f)
        self._closed = False

    # -- reports ---------------------------------------------------------------------------
    def record(self, processor: str, checkpoint: Checkpoint) -> Changes:
        """Accept ``checkpoint``, just persisted by ``processor``; return what it allows.

        The frontier must strictly contain the processor's previous one and
        the metadata must be monotone (:class:`~falkirk.errors.MonitorError`
        otherwise, and nothing changes). The latest checkpoint reported again
        with identical metadata (an idle period, SPEC §5) is the same
        checkpoint: accepted, and nothing changes. The report is durable
        when this returns (inside a :meth:`batch`: when the batch exits).

        Cost: resolving the checkpoint (``O(edges of p)``), then a solve of
        the processors whose watermark derives from ``processor``
        (``Changes.examined`` updates), not of the graph; with an SQLite
        store, one commit (none inside a :meth:`batch`, which commits once).
        """
        name = self._name(processor)
        if name in self._outputs:
            raise MonitorError(
                f"processor {name!r} is an external output: report what the service persisted with acknowledge_output"
            )
        return self._add(name, checkpoint)

    def acknowledge_output(self, processor: str, frontier: Any) -> Changes:
        """The external service persisted everything output ``processor`` sent at times in ``frontier``."""
        name = self._name(processor)
        if name not in self._outputs:
            raise MonitorError(f"processor {name!r} is not an external output (declare it with outputs=)")
        return self._add(name, Checkpoint(frontier))

    def _add(self, name: str, ck: Checkpoint) -> Changes:
        self._usable()
        meta = resolve_next(self._graph, name, self._last[name], self._projected[name].values(), ck)
        if meta is self._last[name]:  # the latest checkpoint again (SPEC §5): one checkpoint, nothing changes
            return Changes.of(self._graph, {}, self._outputs, 0)
        solver, view = self._solver, self._view
        region = solver.region([name])
        saved = solver.save(region)
        view.push(name, meta)
        self._raw[name].append(ck)
        try:
            solver.reset(region)
            solver.run_queue(region)
            changes = self._changes(region, solver.examinations - saved.examinations)
            self._store.append(name, ck, changes.watermarks)
        except BaseException:
            solver.restore(saved)
            view.pop(name)
            self._raw[name].pop()
            raise
        self._announced.update(changes.watermarks)
        self._last[name] = meta
        self._projected[name] = projected_checkpoints(self._graph, name, self._projected[name], ck)
        return changes

    def _changes(self, names: Iterable[str], examined: int) -> Changes:
        raised: dict[str, Frontier] = {}
        for p in names:
            new, old = self._solver.f[p], self._announced[p]
            if new != old:
                if not old <= new:
                    raise MonitorError(
                        f"processor {p!r}: its low-watermark would fall from {encode_frontier(old)} to "
                        f"{encode_frontier(new)}; the metadata is not monotone (SPEC §5), report refused"
                    )
                raised[p] = new
        return Changes.of(self._graph, raised, self._outputs, examined)

    def discard(self, processor: str, frontiers: Iterable[Any]) -> int:
        """Forget checkpoints of ``processor`` that garbage collection deleted (SPEC §6); the number
        forgotten.

        A stateful processor may forget checkpoints strictly inside its
        announced low-watermark (the one at the watermark stays); a stateless
        one (or an input) every reported frontier but its latest, which
        alone bounds ``F(p)``. Refused (:class:`~falkirk.errors.MonitorError`,
        nothing changes) otherwise, and for processors with a recorded
        projection on an output edge, whose union rule (SPEC §3) would read
        the forgotten records.

        Nothing is re-solved: the low-watermarks stay the greatest consistent
        assignment (it is still available, and every constraint at it reads
        only the metadata of the kept checkpoints), so they do not change.
        The store forgets the checkpoints at once (``SQLiteStore``: one
        transaction, no rewrite); this monitor's solver keeps their resolved
        metadata until it is reopened, which is harmless (nothing below a
        watermark is ever chosen). Frontiers it does not hold are ignored.

        Cost: ``O(checkpoints of processor)`` plus one store transaction (inside a :meth:`batch`: part of its
        one).
        """
        self._usable()
        name = self._name(processor)
        df = self._graph
        dom = df.domains[name]
        drop = {coerce(dom, f, f"discard of {name!r}") for f in frontiers}
        raw = self._raw[name]
        gone = [ck for ck in raw if coerce(dom, ck.frontier, name) in drop]
        if not gone:
            return 0
        if any(df.bound[e].recorded for e in df.outputs[name]):
            raise MonitorError(
                f"processor {name!r} has a recorded projection on an output edge: its old "
                "checkpoints' records still bound φ below the watermark; they cannot be discarded"
            )
        if df.processors[name].stateless:
            latest = coerce(dom, raw[-1].frontier, name)
            bad = [ck for ck in gone if coerce(dom, ck.frontier, name) == latest]
            why = "its latest reported frontier bounds F(p)"
        else:
            lw = self._announced[name]
            bad = [
                ck
                for ck in gone
                if not (coerce(dom, ck.frontier, name) <= lw and coerce(dom, ck.frontier, name) != lw)
            ]
            why = f"only checkpoints strictly inside its low-watermark {encode_frontier(lw)} can go"
        if bad:
            raise MonitorError(
                f"processor {name!r}: checkpoint at {bad[0].frontier!r} cannot be discarded ({why})"
            )
        discard = getattr(self._store, "discard", None)
        if discard is not None:
            discard(name, [ck.frontier for ck in gone])
        self._raw[name] = [ck for ck in raw if not any(ck is g for g in gone)]
        return len(gone)

    @contextmanager
    def batch(self) -> Iterator[Monitor]:
        """Commit the reports and discards inside to the store together, once, when the outermost batch exits.

        ::

            with monitor.batch():  # one SQLite transaction
                monitor.record("a", Checkpoint(5))
                monitor.discard("b", [2])

        Every call inside behaves as outside — same checks, same
        :class:`Changes`, same watermarks; reads (``watermarks``,
        :meth:`plan_rollback`, :meth:`checkpoints`) see every report made so
        far, and so do the store's own reads (one SQLite connection, one
        transaction). Only the commits are deferred: with an
        :class:`~falkirk.solver.monitor.store.SQLiteStore` the batch is one
        transaction instead of one per call (every transaction writes each
        page it changes to the write-ahead log in full, however small the
        rows). A store without batches (e.g. the in-memory one) commits each
        call as before. Nested batches join the outermost one.

        Failures:

        * a call inside that fails (a refused report, a store error) changes
          nothing, in memory or in the store (an SQLite savepoint), as
          outside a batch;
        * an exception that leaves the batch still commits the calls that
          completed: each was acknowledged and is in the monitor's memory,
          so the store and the monitor agree (the exception propagates);
        * a crash before the commit loses the whole batch: the database
          holds the state before it, which :meth:`open` restarts from (each
          report is durable when the batch exits, not when the call returns);
        * if the commit fails, the store rolls the batch back and this
          monitor reloads its state from the store (the state before the
          batch) before the :class:`~falkirk.errors.MonitorError` propagates;
          if it cannot, it closes itself.
        """
        self._usable()
        begin = getattr(self._store, "batch", None)
        if begin is None:
            yield self
            return
        try:
            with begin():
                yield self
        except BatchLostError:
            if not self._closed:
                self._reload()
            raise

    def _reload(self) -> None:
        """The in-memory state again from the store (after a batch the store lost); closed if that fails."""
        try:
            state = self._store.load()
            if state is None:
                raise MonitorError(f"{self._store!r} holds no monitor")
            self._setup(state.dataflow, state.outputs)
        except BaseException:
            self.close()
            raise

    # -- failures ----------------------------------------------------------------------------
    def plan_rollback(
        self, failed: Iterable[str] | str, live: Mapping[str, Checkpoint] | None = None
    ) -> RollbackPlan:
        """The rollback plan after ``failed`` fail: every other processor gets a temporary ``⊤``.

        ``live[p]`` is the live metadata (at ``"top"``) of a processor that did
        not fail (safe defaults if absent). The plan is the one
        ``solve_frontiers`` gives on :meth:`dataflow` with that live metadata;
        the monitor's state does not change. Refused
        (:class:`~falkirk.errors.MonitorError`) if it would take a processor
        below its announced low-watermark.
        """
        self._usable()
        failed_set = normalise_failed(self._graph, failed)
        live = dict(live or {})
        for p in live:
            self._name(p)
            if p in failed_set:
                raise MonitorError(
                    f"live metadata given for {p!r}, which failed (a failed processor has no ⊤)"
                )
        plan = solve_frontiers(with_checkpoints(self._graph, self._raw, live), failed_set)
        below = {p: lw for p, lw in self._announced.items() if not lw <= plan.frontiers[p]}
        if below:
            p, lw = next(iter(below.items()))
            raise MonitorError(
                f"rollback plan refused: it takes {sorted(below)} below their announced low-watermarks "
                f"(e.g. {p!r}: {encode_frontier(plan.frontiers[p])}, watermark {encode_frontier(lw)}); "
                "state they need may already be deleted"
            )
        return plan

    # -- queries -----------------------------------------------------------------------------
    @property
    def watermarks(self) -> dict[str, Frontier]:
        """The announced low-watermark ``lw(p)`` of every processor."""
        return dict(self._announced)

    @property
    def notification_watermarks(self) -> dict[str, Frontier]:
        """The notification frontiers ``n(p)`` of the low-watermark solve."""
        return dict(self._solver.n)

    @property
    def inputs(self) -> frozenset[str]:
        """The external inputs: processors without input edges (other than outputs)."""
        return self._inputs

    @property
    def outputs(self) -> frozenset[str]:
        """The declared external outputs."""
        return self._outputs

    @property
    def store(self) -> MetadataStore:
        """Where acknowledged reports go."""
        return self._store

    def checkpoints(self, processor: str) -> tuple[Checkpoint, ...]:
        """The checkpoints ``processor`` reported, oldest first (initial ones included)."""
        return tuple(self._raw[self._name(processor)])

    def current(self) -> Changes:
        """Everything the current watermarks allow, as if announced at once."""
        return Changes.of(self._graph, self._announced, self._outputs)

    def dataflow(self, live: Mapping[str, Checkpoint] | None = None) -> Dataflow:
        """The graph with every checkpoint acknowledged so far (and ``live`` metadata, if given)."""
        return with_checkpoints(self._graph, self._raw, live)

    def snapshot(self) -> dict[str, Any]:
        """The acknowledged state as JSON: checkpoints per processor and watermarks."""
        df = self._graph
        return {
            "checkpoints": {p: [checkpoint_to_json(df, p, ck) for ck in cks] for p, cks in self._raw.items()},
            "watermarks": {p: encode_frontier(f) for p, f in self._announced.items()},
            "outputs": sorted(self._outputs),
        }

    def close(self) -> None:
        """Close the store; the monitor refuses further calls."""
        if not self._closed:
            self._closed = True
            self._store.close()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Monitor: {len(self._graph.processors)} processors, store {self._store!r}>"

    def _name(self, processor: str) -> str:
        if processor not in self._graph.processors:
            raise UnknownNameError(f"unknown processor {processor!r}")
        return processor

    def _usable(self) -> None:
        if self._closed:
            raise MonitorError("this monitor is closed; open it again with Monitor.open")

    def _check(self) -> None:
        """Verify the state against a full re-solve (``AssertionError`` if it differs)."""
        plan = solve_frontiers(self.dataflow(), "all")
        assert plan.frontiers == self._solver.f, "watermarks differ from a full re-solve"
        assert plan.notification_frontiers == self._solver.n, "n differs from a full re-solve"
        assert self._announced == self._solver.f, "announced watermarks out of date"
        s = self._solver
        for p, deps in s.deps.items():
            assert all(p in s.dependents[q] for q in deps), f"dependents index misses {p!r}"
        for q, users in s.dependents.items():
            assert all(q in s.deps[p] for p in users), f"dependents index has stale entries for {q!r}"
