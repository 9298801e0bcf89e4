"""The regime advisor: each step's regime chosen from measured costs and the exact rollback closure.

The cost model (``docs/advisor.md``), per epoch and in the unit of the
:class:`~falkirk.spark.pipeline.plan.costs.Costs` (CPU or wall seconds):

* **steady cost** of an assignment of regimes: every node's compute, plus
  ``log_write`` for each step that logs its output, plus ``state_write / k``
  for a stateful step checkpointing every ``k`` epochs (``Eager``: 1;
  ``incremental=True``: ``delta_write + state_write / snapshot_every``);
  bytes alike;
* **recovery cost** of one failure: what the plan falkirk's solver picks
  would redo (``(done - frontier) × recompute`` per node), restore
  (``state_read`` per restored stateful step) and replay (``log_read`` of the
  sender per logged epoch a rolled-back receiver reads again, including the
  epoch ``e + 1`` a failed step had in memory only: the running step's input,
  and with a driver every queue), averaged over
  the moments of the failure. A failure strikes while a step runs epoch
  ``e + 1`` (steps run epoch by epoch in the pipeline's order, so the steps
  before it have completed ``e + 1``, it and the later ones ``e``): a step's
  own failure while it runs; a driver's (every node fails) or a group's at a
  moment uniform in time, so each step is the running one with its share of
  the epoch's compute. ``e`` goes over a :data:`PERIOD`-long cycle of every
  checkpoint spacing, so each phase counts once. A driver failure also pays
  ``Costs.restart``, a new driver's cold start; the running step's
  unfinished work is lost under every assignment alike and not priced;
* **total** = steady + ``failure_rate`` × the mean recovery over the failure
  kinds (``failure_rate``: failures per epoch).

The closure of every (assignment, failure, moment) comes from
:func:`~falkirk.spark.pipeline.plan.closure.frontiers` (SPEC §5 on epoch
frontiers, vectorised; tested against the :class:`Planner`); the current
and the advised assignments are re-priced with the planner itself when that
takes at most :data:`EXACT_SOLVES` solves.

The search over assignments is :mod:`~falkirk.spark.pipeline.plan.search`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from attrs import evolve, frozen

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.regimes import Eager, Keyed, Lazy, Output, Regime
from falkirk.spark.pipeline.plan.closure import TOP, Graph, frontiers, last_checkpoint, reference_frontiers
from falkirk.spark.pipeline.plan.costs import Costs

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.definition import Definition

__all__ = [
    "Model",
    "Evaluation",
    "failure_kinds",
    "LADDER",
    "PERIOD",
    "EXACT_SOLVES",
    "OBJECTIVES",
]

#: Checkpoint spacings the advisor chooses from (every one divides :data:`PERIOD`).
LADDER = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)
#: The cycle of failure moments: any spacing in :data:`LADDER` repeats within it.
PERIOD = 60
#: The final figures come from the planner itself when they take at most this many solves.
EXACT_SOLVES = 600
#: What the advice minimises.
OBJECTIVES = ("cpu", "wall")
#: Columns (failure kind × moment) the search prices at most: beyond, each kind's moments are a sample of the
#: cycle.
SEARCH_COLUMNS = 240


def failure_kinds(pipeline: Definition, failures: str | Sequence[Any]) -> list[tuple[str, ...]]:
    """The failure kinds ``failures`` names: ``"each-step"`` (each step alone), ``"driver"`` (every node), or
    a list of step names, ``"driver"`` and tuples of step names failing together."""
    if isinstance(failures, str):
        failures = [failures]
    kinds: list[tuple[str, ...]] = []
    for item in failures:
        if item == "each-step":
            kinds += [(n,) for n in pipeline.steps]
        elif item == "driver":
            kinds.append(("all",))
        else:
            names = (item,) if isinstance(item, str) else tuple(item)
            for n in names:
                if n not in pipeline.steps:
                    raise PipelineError(
                        f"advise: failures names {n!r}, which is not a step of this pipeline "
                        f"(steps: {', '.join(pipeline.steps)}; or 'each-step', 'driver')"
                    )
            if not names:
                raise PipelineError("advise: failures holds an empty group of steps")
            kinds.append(tuple(sorted(set(names), key=pipeline.order.index)))
    if not kinds:
        raise PipelineError("advise: failures names no failure ('each-step', 'driver' or step names)")
    return list(dict.fromkeys(kinds))


def spacing(regime: Regime) -> int:
    """The closure's checkpoint spacing of ``regime``: 0 stateless, 1 every epoch, ``k`` for
    ``Lazy(every=k)``."""
    if regime.stateless:
        return 0
    if isinstance(regime, Lazy) and not regime.incremental:
        return regime.every
    return 1


@frozen
class Evaluation:
    """Costs of ``A`` assignments: steady (A,), steady bytes (A,), recovery per failure kind (A, K) and per
    node and kind (N, A, K), steady cost and bytes per node (N, A); ``domino`` (N, A, K): the failed stateful
    steps a failure of the kind pushes back past where it would leave them if every step logged
    (:meth:`Model.price`)."""

    steady: np.ndarray
    steady_bytes: np.ndarray
    recovery: np.ndarray
    node_recovery: np.ndarray
    node_steady: np.ndarray
    node_bytes: np.ndarray
    domino: np.ndarray

    def expected(self, rate: float) -> np.ndarray:
        """Expected recovery per epoch: ``rate`` × the mean over the failure kinds."""
        return rate * self.recovery.mean(axis=1)

    def pick(self, index: Sequence[int]) -> Evaluation:
        """The evaluation of the assignments at ``index`` (in that order)."""
        i = list(index)
        return Evaluation(
            self.steady[i],
            self.steady_bytes[i],
            self.recovery[i],
            self.node_recovery[:, i],
            self.node_steady[:, i],
            self.node_bytes[:, i],
            self.domino[:, i],
        )

    @property
    def dominoes(self) -> np.ndarray:
        """(A,): whether some failure of some kind sets off a domino under the assignment."""
        return np.asarray(self.domino.any(axis=(0, 2)))


class Model:
    """A pipeline, its costs and failure kinds, priced for many assignments at once (see the module
    docstring)."""

    def __init__(
        self,
        pipeline: Definition,
        costs: Costs,
        kinds: Sequence[tuple[str, ...]],
        *,
        period: int = PERIOD,
        max_columns: int | None = None,
        moments: Sequence[int | tuple[int, str | None]] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.graph = Graph.of(pipeline)
        self.kinds = list(kinds)
        self.period = period
        self._prices(costs)
        #: per kind, the steps a failure of it can strike during, with their weights (:meth:`running`)
        self.strikes = [self.running(k) for k in self.kinds]
        #: the moments (epochs after the warm-up) each failure kind is tried at: the whole cycle, or with
        #: ``max_columns`` an evenly spread sample of it (:attr:`sampled`)
        self.phases = list(range(period))
        width = sum(len(s) for s in self.strikes)
        if max_columns is not None and width * period > max_columns:
            count = max(2, max_columns // width)
            self.phases = sorted({round(i * period / count) for i in range(count)})
        self.sampled = len(self.phases) < period
        #: the epochs after which each kind fails (``moments``: those; else a warm-up cycle, then the phases);
        #: a moment ``(e, step)`` names the step running epoch ``e + 1`` when it strikes, ``(e, None)`` a
        #: failure between epochs ``e`` and ``e + 1`` (what ``STEP@e:after`` injects)
        self.moments = list(moments) if moments is not None else [period + p for p in self.phases]
        self._columns()

    def _prices(self, costs: Costs) -> None:
        """The per-node arrays of ``costs`` (completed: every field measured or estimated)."""
        pipeline, names = self.pipeline, self.graph.names
        self.costs = c = costs.complete(names)
        self.compute = np.array([c[n].compute for n in names])
        #: a driver failure's fixed cost: a new driver's first epoch beyond a steady one
        #: (:attr:`Costs.restart`)
        self.restart = float(c.restart)
        self.recompute = np.array(
            [c[n].recompute if c[n].recompute is not None else c[n].compute for n in names]
        )
        self.log_write = np.array([c[n].log_write or 0.0 for n in names])
        self.log_bytes = np.array([c[n].log_bytes or 0.0 for n in names])
        self.log_read = np.array(
            [
                (c[n].log_read or 0.0)
                if n not in pipeline.inputs or "log_read" not in c[n].estimated
                else c[n].compute
                for n in names
            ]
        )
        self.state_write = np.array([c[n].state_write or 0.0 for n in names])
        self.state_bytes = np.array([c[n].state_bytes or 0.0 for n in names])
        self.state_read = np.array([c[n].state_read or 0.0 for n in names])
        self.delta_write = np.array(
            [c[n].delta_write if c[n].delta_write is not None else np.nan for n in names]
        )
        self.delta_bytes = np.array([c[n].delta_bytes or 0.0 for n in names])
        self.delta_read = np.array([c[n].delta_read or 0.0 for n in names])
        # an output's write is its compute; a stateless node checkpoints nothing
        for i, n in enumerate(names):
            if n in pipeline.inputs or pipeline.stateless(n) or isinstance(pipeline.steps[n].regime, Output):
                self.state_write[i] = self.state_bytes[i] = self.state_read[i] = 0.0

    def priced_with(self, costs: Costs) -> Model:
        """This model (its failures, moments and their weights) priced with other ``costs`` of the same
        pipeline: a draw of :attr:`Costs.replicates` (:meth:`evaluate_draws`)."""
        other = copy.copy(self)
        other._prices(costs)
        return other

    def evaluate_draws(
        self, assignments: Sequence[Mapping[str, Regime]], *, exact: bool = False
    ) -> tuple[Evaluation, list[Evaluation]]:
        """:meth:`evaluate`, and the same assignments priced with each of the costs' :attr:`~Costs.replicates`
        (the same frontiers: a draw moves the prices, not the plans)."""
        logs, every, incr = self.arrays(assignments)
        f = self._exact(assignments) if exact else frontiers(self.graph, logs, every, self.failed, self.done)
        snap, domino = self.snapshot(assignments), self.dominoes(f, logs, every)
        point = self.price(f, logs, every, incr, snap, domino=domino)
        draws = [
            self.priced_with(r).price(f, logs, every, incr, snap, domino=domino)
            for r in self.costs.replicates
        ]
        return point, draws

    def running(self, kind: tuple[str, ...]) -> list[tuple[int, float]]:
        """``(index, weight)`` of the steps a failure of ``kind`` can strike while they run epoch ``e + 1``.

        Steps run epoch by epoch in :attr:`graph` order, so the steps before the running one have done ``e +
        1``. A step's own failure strikes while it runs; a driver's, or a group's, at a moment uniform in
        time: each step is the running one with its share of the epoch's compute (equal shares where nothing
        is measured).
        """
        order = {name: i for i, name in enumerate(self.graph.names)}
        if len(kind) == 1 and kind[0] != "all":
            return [(order[kind[0]], 1.0)]
        total = float(self.compute.sum())
        n = len(self.graph.names)
        if total <= 0:
            return [(i, 1.0 / n) for i in range(n)]
        return [(i, float(w) / total) for i, w in enumerate(self.compute) if w > 0]

    def _columns(self) -> None:
        """``failed``/``done`` (N, M) for every (kind, moment, running step), each column's kind and
        weight."""
        n = len(self.graph.names)
        order = {name: i for i, name in enumerate(self.graph.names)}
        failed, done, kind, weight, taken, unrelated = [], [], [], [], [], []
        for k, names in enumerate(self.kinds):
            lost = np.ones(n, bool) if names == ("all",) else np.isin(np.arange(n), [order[s] for s in names])
            apart = ~self._related(lost)
            for at in self.moments:
                if isinstance(at, tuple):  # (e, step): while step runs e + 1; (e, None): between e and e + 1
                    at, step = at
                    if step is not None and step not in order:
                        raise PipelineError(f"advise: moment ({at}, {step!r}) names no step of this pipeline")
                    strikes = [(0 if step is None else order[step], 1.0)]
                else:
                    strikes = self.strikes[k]
                for j, w in strikes:
                    failed.append(lost)
                    unrelated.append(apart)
                    done.append(np.where(np.arange(n) < j, at + 1, at))
                    kind.append(k)
                    weight.append(w / len(self.moments))
                    # the epoch e + 1 sent to a failed step that had not done it was in memory only: the
                    # running step had taken it, and a driver's failure loses every queue (what a restart
                    # reads again)
                    taken.append(lost & ((np.arange(n) == j) | (names == ("all",))))
        self.failed = np.array(failed).T
        #: (N, M): the nodes neither failed nor above or below a failed one (another branch)
        self.unrelated = np.array(unrelated).T
        self.done = np.array(done).T
        #: (N, M): the failed steps whose input of epoch e + 1 was lost with them (read again from a log, if
        #: kept)
        self.taken = np.array(taken).T
        self.kind_of = np.array(kind)
        self.weight = np.array(weight)
        #: (M, K): column m's share of its kind's weight (a kind's mean over its columns is one product)
        self.shares = np.zeros((len(weight), len(self.kinds)))
        for k in range(len(self.kinds)):
            mine = self.kind_of == k
            self.shares[mine, k] = self.weight[mine] / self.weight[mine].sum()

    def _related(self, lost: np.ndarray) -> np.ndarray:
        """The nodes ``lost`` (N,) marks, and every node above or below one of them."""
        out = lost.copy()
        for step in (self.graph.succs, self.graph.preds):
            todo = [int(i) for i in np.flatnonzero(lost)]
            seen = set(todo)
            while todo:
                for m in step[todo.pop()]:
                    if m not in seen:
                        seen.add(m)
                        out[m] = True
                        todo.append(m)
        return out

    # -- assignments ------------------------------------------------------------------------
    def arrays(
        self, assignments: Sequence[Mapping[str, Regime]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``logs``, ``every``, ``incremental`` (N, A) of assignments (regimes by step; inputs always log)."""
        names = self.graph.names
        logs = np.zeros((len(names), len(assignments)), bool)
        every = np.zeros((len(names), len(assignments)), np.int64)
        incr = np.zeros((len(names), len(assignments)), bool)
        for a, regimes in enumerate(assignments):
            for i, n in enumerate(names):
                if n in self.pipeline.inputs:
                    logs[i, a] = True
                    continue
                r = regimes[n]
                logs[i, a], every[i, a] = r.logs, spacing(r)
                incr[i, a] = isinstance(r, Keyed) and r.incremental
        return logs, every, incr

    def snapshot(self, assignments: Sequence[Mapping[str, Regime]]) -> np.ndarray:
        """Snapshot spacing (N, A) of incremental state (1 elsewhere)."""
        names = self.graph.names
        out = np.ones((len(names), len(assignments)))
        for a, regimes in enumerate(assignments):
            for i, n in enumerate(names):
                r = regimes.get(n)
                if isinstance(r, Keyed):
                    out[i, a] = r.snapshot_spacing
        return out

    def evaluate(self, assignments: Sequence[Mapping[str, Regime]], *, exact: bool = False) -> Evaluation:
        """Price ``assignments`` (each a regime per step): closure by :func:`frontiers`, or the planner
        (``exact``)."""
        logs, every, incr = self.arrays(assignments)
        f = self._exact(assignments) if exact else frontiers(self.graph, logs, every, self.failed, self.done)
        return self.price(
            f, logs, every, incr, self.snapshot(assignments), domino=self.dominoes(f, logs, every)
        )

    def dominoes(self, f: np.ndarray, logs: np.ndarray, every: np.ndarray) -> np.ndarray:
        """(N, A, M): the dominoes of frontiers ``f`` (see :meth:`price`).

        Where a failure leaves its own branch — the related nodes' frontiers
        with every other branch left out of the closure (``frontiers(...,
        mute=...)``) — is at or above the failed steps' own restore points, so
        a node of another branch at or above its checkpoint for those is no
        domino, and the second closure runs only for the (assignment, column)
        pairs where one is below it.
        """
        out = np.zeros(f.shape, bool)
        # ⊤ is not below
        cand = self.unrelated[:, None, :] & (every > 0)[:, :, None] & (f < self.done[:, None, :])
        if not cand.any():
            return out
        floor = np.full(f.shape[1:], np.iinfo(np.int64).max)  # (A, M): the failed steps' own restore points
        for k in np.unique(self.kind_of[cand.any(axis=(0, 1))]):
            cols = np.flatnonzero(self.kind_of == k)
            rows = np.flatnonzero(self.failed[:, cols[0]])
            own = last_checkpoint(self.done[np.ix_(rows, cols)][:, None, :], every[rows][:, :, None])
            floor[:, cols] = own.min(axis=0)
        n, a, m = np.nonzero(cand)
        below = f[n, a, m] < last_checkpoint(np.minimum(floor[a, m], self.done[n, m]), every[n, a])
        if not below.any():
            return out
        n, a, m = n[below], a[below], m[below]
        rows, cols = np.unique(a), np.unique(m)
        alone = frontiers(
            self.graph,
            logs[:, rows],
            every[:, rows],
            self.failed[:, cols],
            self.done[:, cols],
            mute=self.unrelated[:, cols],
        )
        related = ~self.unrelated[:, None, cols]
        sent = np.where(related & (alone != TOP), alone, np.iinfo(np.int64).max).min(axis=0)  # (A', M')
        ai, mi = np.searchsorted(rows, a), np.searchsorted(cols, m)
        out[n, a, m] = f[n, a, m] < last_checkpoint(np.minimum(sent[ai, mi], self.done[n, m]), every[n, a])
        return out

    def _exact(self, assignments: Sequence[Mapping[str, Regime]]) -> np.ndarray:
        names = self.graph.names
        out = np.empty((len(names), len(assignments), self.failed.shape[1]), np.int64)
        for a, regimes in enumerate(assignments):
            pipe = self.pipeline.with_regimes({n: r for n, r in regimes.items() if n in self.pipeline.steps})
            for m in range(self.failed.shape[1]):
                kind = self.kinds[self.kind_of[m]]
                done = {n: int(self.done[i, m]) for i, n in enumerate(names)}
                fr = reference_frontiers(pipe, list(kind), done)
                out[:, a, m] = [fr[n] for n in names]
        return out

    def price(
        self,
        f: np.ndarray,
        logs: np.ndarray,
        every: np.ndarray,
        incr: np.ndarray,
        snap: np.ndarray,
        *,
        domino: np.ndarray | None = None,
    ) -> Evaluation:
        """Costs of frontiers ``f`` (N, A, M) under the assignments' ``logs``/``every``/``incremental``.

        ``domino`` (N, A, M), from :meth:`dominoes`, marks the **dominoes**: a failure that rolls a stateful
        step on another branch — neither above nor below a failed step — back past the checkpoint it restores
        to send again from where the failure, alone, leaves its own branch. The rollback went out through an
        unlogged step the branches share, came back to the failed branch, and out again, where their
        checkpoints fall on different epochs: it stops only at a checkpoint they all share, up to the least
        common multiple of their spacings back — at empty early in a run. A branch dragged back once, to its
        checkpoint at or below where the failed branch goes back to, is priced but no domino.
        """
        done = self.done[:, None, :]
        kept = f == TOP
        fr = np.where(kept, done, f)
        pushed = domino if domino is not None else np.zeros(f.shape, bool)
        redo = np.maximum(done - fr, 0) * self.recompute[:, None, None]
        stateful = (every > 0)[:, :, None]
        restored = stateful & ~kept & (fr >= 0) & (self.failed[:, None, :] | (fr < done))
        deltas = np.where(incr, (snap - 1) / 2, 0.0)[:, :, None] * self.delta_read[:, None, None]
        restore = np.where(restored, self.state_read[:, None, None] + deltas, 0.0)
        replay = np.zeros_like(redo)
        # what a receiver must read again up to, where its sender still has it
        upto = done + self.taken[:, None, :]
        for q, ps in enumerate(self.graph.preds):  # each receiver's senders at once: (P, A, M)
            if not ps:
                continue
            p = list(ps)
            hi = np.minimum(fr[p], upto[q])
            epochs = np.where(kept[q] | ~logs[p][:, :, None], 0, np.maximum(hi - fr[q], 0))
            replay[q] = np.tensordot(self.log_read[p], epochs, axes=1)
        node = redo + restore + replay  # (N, A, M)
        per_kind = node @ self.shares  # (N, A, K): each kind's weighted mean over its columns
        restart = np.array([self.restart if names == ("all",) else 0.0 for names in self.kinds])
        steady_node = self.compute[:, None] + np.where(logs, self.log_write[:, None], 0.0)
        ev = np.maximum(every, 1)
        ckpt = np.where(
            incr,
            np.nan_to_num(self.delta_write)[:, None] + self.state_write[:, None] / snap,
            self.state_write[:, None] / ev,
        )
        steady_node = steady_node + np.where(every > 0, ckpt, 0.0)
        bytes_node = np.where(logs, self.log_bytes[:, None], 0.0) + np.where(
            every > 0,
            np.where(
                incr,
                self.delta_bytes[:, None] + self.state_bytes[:, None] / snap,
                self.state_bytes[:, None] / ev,
            ),
            0.0,
        )
        for i, n in enumerate(self.graph.names):  # an input's log is written whatever the regimes
            if n in self.pipeline.inputs:
                steady_node[i] = self.compute[i]
                bytes_node[i] = 0.0
        domino = (pushed.astype(np.float64) @ (self.shares > 0)) > 0  # (N, A, K): any column of the kind
        return Evaluation(
            steady_node.sum(axis=0),
            bytes_node.sum(axis=0),
            per_kind.sum(axis=0) + restart,
            per_kind,
            steady_node,
            bytes_node,
            domino,
        )

    # -- choices ------------------------------------------------------------------------------
    def young(self, name: str, rate: float) -> float:
        """Young's ``k* = √(2·C/(λ_s·w))`` for stateful ``name``: ``C`` its checkpoint cost, ``λ_s`` the rate
        of the failures that lose it, ``w`` its compute plus that of the stateless steps its unlogged output
        feeds."""
        i = self.graph.names.index(name)
        lam = rate * sum(1 for k in self.kinds if k == ("all",) or name in k) / len(self.kinds)
        w, todo, seen = self.compute[i], [i], {i}
        while todo:
            p = todo.pop()
            if self.pipeline.logs(self.graph.names[p]):
                continue
            for q in self.graph.succs[p]:
                if q not in seen and self.graph.stateless[q]:
                    seen.add(q)
                    w += self.compute[q]
                    todo.append(q)
        if lam <= 0 or w <= 0:
            return float(LADDER[-1])
        return math.sqrt(2 * self.state_write[i] / (lam * w)) if self.state_write[i] > 0 else 1.0

    def choices(self, name: str, rate: float, *, accepted_only: bool) -> list[Regime]:
        """The regimes the advisor considers for step ``name`` (its current one first)."""
        r = self.pipeline.steps[name].regime
        out: list[Regime] = [r]
        if isinstance(r, Output):
            return out
        logs = [r.log] if accepted_only and not r.log else [False, True]
        if r.stateless:
            return out + [evolve(r, log=x) for x in logs if x != r.log and r.kind != "batch"]
        if isinstance(r, Eager) and r.database is not None:
            return out + [evolve(r, log=x) for x in logs if x != r.log]
        assert isinstance(r, Keyed)
        k = self.young(name, rate)
        near = {min(LADDER, key=lambda v: (abs(math.log(v / k)) if k > 0 else v, v))}
        near |= {v for v in LADDER if k / 2 <= v <= 2 * k}
        if isinstance(r, Lazy):
            near |= {r.every} & set(LADDER)
        near.add(1)
        # differential deltas need incremental ones: the plain choices drop both, the incremental keep the declared
        plain = evolve(r, incremental=False, snapshot_every=None, differential=False) if r.incremental else r
        for x in logs:
            if isinstance(r, Lazy) or not accepted_only:
                base = (
                    Lazy(
                        log=x,
                        key=r.key,
                        partitions=r.partitions,
                        max_parallelism=r.max_parallelism,
                        replicas=r.replicas,
                        changes=r.changes,
                        append=r.append,
                    )
                    if isinstance(r, Eager)
                    else evolve(plain, log=x)
                )
                assert isinstance(base, Lazy)
                out += [evolve(base, every=v) for v in sorted(near)]
            if isinstance(r, Eager):
                out.append(evolve(plain, log=x))
            if r.key is not None and not math.isnan(self.delta_write[self.graph.names.index(name)]):
                out.append(evolve(r, log=x, incremental=True))
        unique: list[Regime] = []
        for c in out:
            if c not in unique:
                unique.append(c)
        return unique


def regimes_of(pipeline: Definition) -> dict[str, Regime]:
    """Every step's declared regime."""
    return {n: s.regime for n, s in pipeline.steps.items()}


def exact_solves(model: Model, assignments: Iterable[Any]) -> int:
    """How many planner solves pricing ``assignments`` exactly takes."""
    return len(list(assignments)) * model.failed.shape[1]
