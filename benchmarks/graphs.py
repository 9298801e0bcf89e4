"""Graph families for the solver benchmarks (issue 9).

Every family returns a :class:`Graph`: a compact, array-based description of
a dataflow with checkpoints and failures. From it one can build

* a :class:`falkirk.solver.Dataflow` (:meth:`Graph.dataflow`) for the
  reference solvers — this is slow at 10^5 processors, see
  ``benchmarks/solver.py``, which measures it;
* a :class:`falkirk.solver.vectorised.problem.TotalProblem` (:meth:`Graph.problem`)
  directly from the arrays, without any per-processor Python objects, for
  the vectorised solver (epoch domain only).

Families: :func:`chain`, :func:`diamonds`, :func:`random_dag`, :func:`loops`
(cycles) and :func:`shuffle` (staged all-to-all). Every family takes the same
keyword options (:func:`_finish`): checkpoints per processor, the time domain
(``"epoch"`` or ``"sequence"``), the fraction of stateless processors and of
logged edges, the number of failed processors and a seed.
:func:`product_loops` (Naiad loops: an epoch pipeline whose loop bodies run in
``product(2)``, times ``(epoch, iteration)``, partially ordered) takes the
same options except the domain, which it fixes.

Processors are declared in construction order, which is topological for the
acyclic families: the most favourable order for the round-robin baseline.

>>> g = chain(5, seed=1)
>>> g.n, g.m, g.family
(5, 4, 'chain')
>>> df = g.dataflow()
>>> len(df.processors), len(df.edges)
(5, 4)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from falkirk.domains import Epoch, Frontier, Product
from falkirk.domains.projections import FunctionProjection
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor

__all__ = [
    "Graph",
    "chain",
    "diamonds",
    "random_dag",
    "loops",
    "shuffle",
    "product_loops",
    "FEEDBACK",
    "LOOP_EXIT",
    "FAMILIES",
    "PARTIAL_ORDER_FAMILIES",
    "make",
]

_EPOCH, _LOOP = Epoch(), Product(2)


# -- the projections of a Naiad loop besides epoch_to_loop (product(2) = (epoch, iteration)) --------
def _feedback(f: Frontier) -> Frontier:
    """The feedback edge: an event at ``(e, i)`` sends at ``(e, i + 1)``; ``φ(f)`` is ``↓(f + (0, 1))``.

    ``(e, j)`` is in the image iff ``(e, max(j - 1, 0))`` is in ``f``, so each
    element ``a`` of ``f``'s complement antichain moves up one iteration,
    except those at iteration 0.
    """
    if f.is_top:
        return f
    return Frontier.before(_LOOP, [a if a[1] == 0 else (a[0], a[1] + 1) for a in f.antichain])


def _feedback_residual(y: Frontier) -> Frontier:
    """The largest ``f`` whose feedback image is inside ``y``: ``{t : t + (0, 1) ∈ y}``."""
    if y.is_top:
        return y
    return Frontier.before(_LOOP, [(b[0], max(b[1] - 1, 0)) for b in y.antichain])


def _exit(f: Frontier) -> Frontier:
    """Leaving the loop: an event at ``(e, i)`` sends at epoch ``e``; ``φ(f)`` = the epochs with a time in ``f``."""
    if f.is_top:
        return Frontier.top(_EPOCH)
    firsts = [a[0] for a in f.antichain if a[1] == 0]
    return Frontier.before(_EPOCH, [min(firsts)]) if firsts else Frontier.top(_EPOCH)


def _exit_residual(y: Frontier) -> Frontier:
    """The largest loop frontier whose epochs are inside ``y``: every iteration of those epochs."""
    if y.is_top:
        return Frontier.top(_LOOP)
    return Frontier.before(_LOOP, [(y.antichain[0], 0)])


#: ``product(2) → product(2)``: the loop's feedback edge (the iteration advances by one).
FEEDBACK = FunctionProjection(_feedback, _feedback_residual, _LOOP, _LOOP, "feedback")
#: ``product(2) → epoch``: the loop's exit (the iteration is dropped).
LOOP_EXIT = FunctionProjection(_exit, _exit_residual, _LOOP, _EPOCH, "loop_exit")
#: Projection of each edge kind of a ``"loop"`` graph (``Graph.kind``).
_KINDS: tuple[Any, ...] = ("identity", "epoch_to_loop", FEEDBACK, LOOP_EXIT)


class _Lists(NamedTuple):
    """The graph's columns as Python lists, for :meth:`Graph.objects`; per-processor runs in CSR form.

    Kept flat (a few lists, not one per processor) so that the values
    :meth:`Graph.objects` times are not surrounded by scaffolding the
    garbage collector has to walk; the edges in and out of each processor
    are listed only for the sequence domain, which needs them.
    """

    names: list[str]
    stateless: list[bool]
    given: list[int]  # checkpoint epochs/instants of processor p: given[ck_ptr[p]:ck_ptr[p + 1]]
    ck_ptr: list[int]
    logs_of: list[str]  # names of the logged edges out of p: logs_of[logs_ptr[p]:logs_ptr[p + 1]]
    logs_ptr: list[int]
    out_order: list[int]  # edges out of p, ascending: out_order[out_ptr[p]:out_ptr[p + 1]]
    out_ptr: list[int]
    in_order: list[int]  # edges into p, ascending
    in_ptr: list[int]
    rate: list[int]

    def checkpoints(self, p: int) -> list[int]:
        return self.given[self.ck_ptr[p] : self.ck_ptr[p + 1]]

    def logs(self, p: int) -> list[str]:
        return self.logs_of[self.logs_ptr[p] : self.logs_ptr[p + 1]]

    def outs(self, p: int) -> list[int]:
        return self.out_order[self.out_ptr[p] : self.out_ptr[p + 1]]

    def ins(self, p: int) -> list[int]:
        return self.in_order[self.in_ptr[p] : self.in_ptr[p + 1]]


@dataclass(frozen=True)
class Graph:
    """A generated dataflow in array form (see the module docstring).

    ``ck_ptr``/``ck_val`` hold, in CSR form, each processor's checkpoints:
    epochs (epoch domain) or instants ``t >= 2`` (sequence domain, where
    edge ``e`` has carried ``rate[e] * t`` messages at instant ``t``; a
    checkpoint at ``t`` has received ``rate[e] * (t - 1)`` on every input
    edge and sent ``rate[e] * t`` on every output edge). For a stateless
    processor they are the complete frontiers it reported. ``horizon`` is the
    live instant (sequence) or the number of epochs.

    Domain ``"loop"`` (:func:`product_loops`): processors with ``inner`` set
    run in ``product(2)`` and the others in ``epoch``; ``kind`` gives each
    edge's projection (0 identity, 1 ``epoch_to_loop``, 2 :data:`FEEDBACK`,
    3 :data:`LOOP_EXIT`); an inner processor's checkpoint at epoch ``e``
    with ``ck_iter`` ``j`` has completed every epoch before ``e`` and the
    iterations before ``j`` of epoch ``e``: the frontier whose complement is
    generated by ``(e, j)`` and ``(e + 1, 0)`` (dropped when that is ``∅``).
    """

    family: str
    domain: str
    n: int
    src: np.ndarray
    dst: np.ndarray
    logged: np.ndarray
    stateless: np.ndarray
    failed: np.ndarray
    ck_ptr: np.ndarray
    ck_val: np.ndarray
    rate: np.ndarray
    horizon: int
    notifications: bool = True
    inner: np.ndarray | None = None
    kind: np.ndarray | None = None
    ck_iter: np.ndarray | None = None

    @property
    def m(self) -> int:
        """Number of edges."""
        return int(self.src.shape[0])

    def name(self, p: int) -> str:
        """Name of processor ``p``."""
        return f"p{p}"

    def failed_names(self) -> list[str]:
        """Names of the failed processors."""
        return [self.name(int(p)) for p in np.flatnonzero(self.failed)]

    def checkpoints_of(self, p: int) -> list[int]:
        """Checkpoint epochs/instants of processor ``p``."""
        return self.ck_val[self.ck_ptr[p] : self.ck_ptr[p + 1]].tolist()

    def dataflow(self, order: str = "topological") -> Dataflow:
        """The graph as a validated :class:`~falkirk.solver.Dataflow`.

        ``order`` is the declaration order of the processors: ``"topological"``
        (construction order), ``"reverse"`` or ``"random"`` (a fixed shuffle).
        The answer does not depend on it; the round robin's running time does.
        """
        procs, edges = self.objects(order)
        return Dataflow(procs, edges, notifications=self.notifications)

    def objects(
        self, order: str = "topological", names: list[str] | None = None
    ) -> tuple[list[Processor], list[Edge]]:
        """The :class:`~falkirk.solver.Processor` and :class:`~falkirk.solver.Edge` values :meth:`dataflow` declares.

        ``names`` are the processors' names when the caller made them
        already (as :meth:`from_arrays` takes them); the edges' ends and the
        processors reuse those strings, as a scheduler reusing its own names
        would. Every :class:`~falkirk.solver.Edge`, :class:`~falkirk.solver.Checkpoint`
        and :class:`~falkirk.solver.Processor` value is made here, with its
        edge names, from the arrays read once as Python lists; the names
        come from object arrays indexed by ``src``/``dst`` (no Python int per
        edge), and the logged edges of each processor from one stable sort.
        """
        if order not in ("topological", "reverse", "random"):
            raise ValueError(f"order must be 'topological', 'reverse' or 'random', not {order!r}")
        names = names if names is not None else [self.name(p) for p in range(self.n)]
        enames = [f"e{e}" for e in range(self.m)]
        # the strings themselves, picked by index arrays (object arrays: no int per edge)
        name_of, ename_of = np.array(names, dtype=object), np.array(enames, dtype=object)
        logged = np.flatnonzero(self.logged)  # ascending, and kept so per processor by the stable sort
        by_src = logged[np.argsort(self.src[logged], kind="stable")]
        logs_ptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.src[logged], minlength=self.n), out=logs_ptr[1:])
        sequence = self.domain == "sequence"
        lists = _Lists(
            names,
            self.stateless.tolist(),
            self.ck_val.tolist(),
            self.ck_ptr.tolist(),
            ename_of[by_src].tolist(),
            logs_ptr.tolist(),
            *(_by_processor(self.src, self.n) if sequence else ([], [])),
            *(_by_processor(self.dst, self.n) if sequence else ([], [])),
            self.rate.tolist() if sequence else [],
        )
        build = {"epoch": self._epoch_processor, "sequence": self._sequence_processor}.get(
            self.domain, self._loop_processor
        )
        declared = list(range(self.n))
        if order == "reverse":
            declared.reverse()
        elif order == "random":
            declared = np.random.default_rng(self.n).permutation(self.n).tolist()
        procs = [build(p, lists) for p in declared]
        if self.kind is not None:
            projs = [_KINDS[k] for k in self.kind.tolist()]
        else:
            projs = ["identity" if self.domain == "epoch" else "sequence"] * self.m
        srcs, dsts = name_of[self.src].tolist(), name_of[self.dst].tolist()
        edges = [Edge(e, s, d, proj) for e, s, d, proj in zip(enames, srcs, dsts, projs, strict=True)]
        return procs, edges

    def _epoch_processor(self, p: int, lists: _Lists) -> Processor:
        cks = [Checkpoint(c) for c in lists.checkpoints(p)]
        return Processor(lists.names[p], "epoch", stateless=lists.stateless[p], logs=lists.logs(p), checkpoints=cks)

    def _loop_processor(self, p: int, lists: _Lists) -> Processor:
        if self.inner is None or self.ck_iter is None or not self.inner[p]:
            return self._epoch_processor(p, lists)
        lo, hi = int(self.ck_ptr[p]), int(self.ck_ptr[p + 1])
        cks = [  # (0, 0) would be ∅, which is always implied
            Checkpoint(Frontier.before(_LOOP, [(e, j), (e + 1, 0)]))
            for e, j in zip(self.ck_val[lo:hi].tolist(), self.ck_iter[lo:hi].tolist(), strict=True)
            if e or j
        ]
        return Processor(
            lists.names[p],
            "product",
            arity=2,
            stateless=lists.stateless[p],
            logs=lists.logs(p),
            checkpoints=cks,
        )

    def _sequence_processor(self, p: int, lists: _Lists) -> Processor:
        rate, ins, outs = lists.rate, lists.ins(p), lists.outs(p)

        def frontier(t: int) -> dict[str, int]:
            if not ins:
                return {"@input": t}
            return {f"e{e}": rate[e] * (t - 1) for e in ins}

        def sent(t: int) -> dict[str, int]:
            return {f"e{e}": rate[e] * t for e in outs}

        stateless = lists.stateless[p]
        cks = [Checkpoint(frontier(t), projection=sent(t)) for t in lists.checkpoints(p)]
        live = None
        if ins and not stateless:
            live = Checkpoint("top", delivered={f"e{e}": rate[e] * self.horizon for e in ins})
        return Processor(
            lists.names[p], "sequence", stateless=stateless, logs=lists.logs(p), checkpoints=cks, live=live
        )

    def loop_arrays(self) -> dict[str, np.ndarray]:
        """A ``"loop"`` graph's checkpoints as ``from_arrays`` takes them: ``ck_ptr``, ``ck_val`` rows, ``ck_ac``.

        An inner processor's checkpoint ``(e, j)`` is the rows ``(e, j), (e + 1, 0)``
        (only ``(e, 0)`` when ``j`` is 0; dropped when it is ``(0, 0)``, i.e. ``∅``,
        as :meth:`objects` drops it); an epoch processor's epoch ``e`` is the row ``(e, 0)``.
        """
        assert self.inner is not None and self.ck_iter is not None
        owner = np.repeat(np.arange(self.n), np.diff(self.ck_ptr))
        e, j = self.ck_val, self.ck_iter
        inner = self.inner[owner]
        keep = ~inner | (e > 0) | (j > 0)
        owner, e, j, inner = owner[keep], e[keep], j[keep], inner[keep]
        two = inner & (j > 0)
        sizes = 1 + two
        first = np.stack([e, np.where(inner, j, 0)], axis=1)
        rows = np.zeros((int(sizes.sum()), 2), dtype=np.int64)
        ac = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
        np.cumsum(sizes, out=ac[1:])
        rows[ac[:-1]] = first
        rows[ac[:-1][two] + 1, 0] = e[two] + 1
        ptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=self.n), out=ptr[1:])
        return {"ck_ptr": ptr, "ck_val": rows, "ck_ac": ac}

    def from_arrays(self, names: list[str] | None = None, loop: dict[str, np.ndarray] | None = None) -> Dataflow:
        """The graph through ``Dataflow.from_arrays``: no object per processor or edge.

        ``names`` are the processors' names when the caller made them already;
        ``loop`` the checkpoints of a ``"loop"`` graph as rows
        (:meth:`loop_arrays`, made here when not given), whose processors are
        in ``epoch`` and ``product(2)`` and whose edges project by ``kind``.
        """
        names = names if names is not None else [self.name(p) for p in range(self.n)]
        options: dict[str, Any] = {"ck_ptr": self.ck_ptr, "ck_val": self.ck_val}
        if self.domain == "loop":
            assert self.inner is not None and self.kind is not None
            options = {
                "domain": [_EPOCH, _LOOP],
                "domain_of": self.inner.astype(np.int64),
                "projection": list(_KINDS),
                "projection_of": self.kind,
                **(loop if loop is not None else self.loop_arrays()),
            }
        return Dataflow.from_arrays(
            names,
            self.src,
            self.dst,
            logged=self.logged,
            stateless=self.stateless,
            notifications=self.notifications,
            **options,
        )

    def problem(self) -> Any:
        """The graph as a :class:`~falkirk.solver.vectorised.problem.TotalProblem` (epoch domain only)."""
        from falkirk.solver.vectorised.problem import TotalProblem

        if self.domain != "epoch":
            raise ValueError("only epoch-domain graphs have a direct array form")
        return TotalProblem.from_epochs(
            src=self.src,
            dst=self.dst,
            logged=self.logged,
            stateless=self.stateless,
            failed=self.failed,
            ck_ptr=self.ck_ptr,
            ck_val=self.ck_val,
            notifications=self.notifications,
        )


def _by_processor(ends: np.ndarray, n: int) -> tuple[list[int], list[int]]:
    """The edges ``e`` with ``ends[e] == p``, ascending, for every ``p`` in turn, and where each ``p``'s run starts (CSR)."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=n), out=ptr[1:])
    return np.argsort(ends, kind="stable").tolist(), ptr.tolist()


# -- shared finishing -------------------------------------------------------------
def _finish(
    family: str,
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    rng: np.random.Generator,
    *,
    checkpoints: tuple[int, int] = (1, 10),
    domain: str = "epoch",
    stateless: float = 0.2,
    logged: float = 0.3,
    failures: int = 1,
    horizon: int | None = None,
    notifications: bool = True,
) -> Graph:
    """Draw the per-processor and per-edge attributes of a family."""
    if domain not in ("epoch", "sequence"):
        raise ValueError(f"domain must be 'epoch' or 'sequence', not {domain!r}")
    lo, hi = checkpoints
    if not 1 <= lo <= hi:
        raise ValueError(f"checkpoints must be a range 1 <= lo <= hi, not {checkpoints!r}")
    horizon = horizon if horizon is not None else max(4 * hi, 64)
    first = 0 if domain == "epoch" else 2
    # iid draws: the first counts[i] columns of row i are its checkpoints (duplicates dropped)
    counts = rng.integers(lo, hi + 1, size=n)
    big = np.iinfo(np.int64).max
    rows = rng.integers(first, horizon, size=(n, hi))
    rows[np.arange(hi)[None, :] >= counts[:, None]] = big
    rows.sort(axis=1)
    rows[:, 1:][rows[:, 1:] == rows[:, :-1]] = big
    rows.sort(axis=1)
    keep = rows != big
    ck_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=ck_ptr[1:])
    ck_val = rows[keep]
    m = src.shape[0]
    failed = np.zeros(n, dtype=bool)
    if failures:
        failed[rng.choice(n, size=min(failures, n), replace=False)] = True
    return Graph(
        family=family,
        domain=domain,
        n=n,
        src=src.astype(np.int64),
        dst=dst.astype(np.int64),
        logged=rng.random(m) < logged,
        stateless=rng.random(n) < stateless,
        failed=failed,
        ck_ptr=ck_ptr,
        ck_val=ck_val,
        rate=rng.integers(1, 4, size=m),
        horizon=horizon,
        notifications=notifications,
    )


# -- the families -------------------------------------------------------------------
def chain(n: int, *, seed: int = 0, **options: Any) -> Graph:
    """``p0 → p1 → … → p(n-1)``."""
    rng = np.random.default_rng(seed)
    idx = np.arange(n - 1)
    return _finish("chain", n, idx, idx + 1, rng, **options)


def diamonds(n: int, *, seed: int = 0, **options: Any) -> Graph:
    """A series of fork-join diamonds ``a → b, a → c, b → d, c → d`` (``d`` is the next ``a``).

    ``n`` is rounded down to ``1 + 3k``.
    """
    rng = np.random.default_rng(seed)
    k = max((n - 1) // 3, 1)
    a = 3 * np.arange(k)
    b, c, d = a + 1, a + 2, a + 3
    src = np.stack([a, a, b, c], axis=1).ravel()
    dst = np.stack([b, c, d, d], axis=1).ravel()
    return _finish("diamonds", 3 * k + 1, src, dst, rng, **options)


def random_dag(n: int, *, degree: int = 4, window: int | None = None, seed: int = 0, **options: Any) -> Graph:
    """Each processor ``i > 0`` reads from up to ``degree`` random earlier ones among the last ``window``.

    About ``n * degree`` edges; ``window`` (default ``8 * degree``) bounds how
    far back an edge reaches, and with it the depth of rollback propagation.
    """
    rng = np.random.default_rng(seed)
    window = window if window is not None else 8 * degree
    dst = np.repeat(np.arange(1, n), degree)
    back = rng.integers(1, window + 1, size=dst.shape[0])
    src = dst - np.minimum(back, dst)
    pairs = np.unique(np.stack([src, dst], axis=1), axis=0)
    return _finish("random_dag", n, pairs[:, 0], pairs[:, 1], rng, **options)


def loops(n: int, *, length: int = 8, seed: int = 0, **options: Any) -> Graph:
    """A chain whose consecutive blocks of ``length`` processors each close a cycle (feedback edge)."""
    rng = np.random.default_rng(seed)
    idx = np.arange(n - 1)
    starts = np.arange(0, n - length + 1, length)
    src = np.concatenate([idx, starts + length - 1])
    dst = np.concatenate([idx + 1, starts])
    return _finish("loops", n, src, dst, rng, **options)


def shuffle(n: int, *, width: int = 32, seed: int = 0, **options: Any) -> Graph:
    """Stages of ``width`` tasks, every task of a stage feeding every task of the next.

    ``n`` is rounded down to a multiple of ``width`` (at least two stages);
    there are ``(stages - 1) * width**2`` edges.
    """
    rng = np.random.default_rng(seed)
    stages = max(n // width, 2)
    base = np.arange(stages - 1)[:, None, None] * width
    i = np.arange(width)
    src = (base + i[None, :, None] + 0 * i[None, None, :]).ravel()
    dst = (base + width + i[None, None, :] + 0 * i[None, :, None]).ravel()
    return _finish("shuffle", stages * width, src, dst, rng, **options)


def product_loops(
    n: int, *, length: int = 8, between: int = 2, iterations: int = 4, seed: int = 0, **options: Any
) -> Graph:
    """Naiad loops: ``between`` epoch processors, then a loop body of ``length`` ``product(2)`` processors, repeated.

    Each block is an epoch chain whose last processor enters the loop
    (``epoch_to_loop``); the body is a chain closed by a :data:`FEEDBACK`
    edge, and its last processor leaves the loop (:data:`LOOP_EXIT`) into
    the next block. A body processor's checkpoints are at ``(epoch,
    iteration)`` frontiers, iterations drawn below ``iterations``. ``n`` is
    rounded down to a multiple of ``between + length`` (at least one block).
    Options as for every family, except ``domain``.

    >>> g = product_loops(20, length=3, between=2)
    >>> g.n, g.m, g.kind.tolist().count(1), g.kind.tolist().count(3)
    (20, 23, 4, 3)
    """
    if length < 1 or between < 1 or iterations < 1:
        raise ValueError("length, between and iterations must be at least 1")
    if "domain" in options:
        raise ValueError("product_loops fixes the domains (epoch outside the loops, product(2) inside)")
    rng = np.random.default_rng(seed)
    size = between + length
    k = max(n // size, 1)
    base = np.arange(k)[:, None] * size
    src, dst, kind = [], [], []

    def add(s: np.ndarray, d: np.ndarray, what: int) -> None:
        src.append(s.ravel())
        dst.append(d.ravel())
        kind.append(np.full(s.size, what))

    e = base + np.arange(between - 1)[None, :]
    add(e, e + 1, 0)  # the epoch chain
    add(base + between - 1, base + between, 1)  # into the loop
    b = base + between + np.arange(length - 1)[None, :]
    add(b, b + 1, 0)  # the loop body
    add(base + size - 1, base + between, 2)  # feedback
    add(base[:-1] + size - 1, base[:-1] + size, 3)  # out of the loop, into the next block
    g = _finish("product_loops", k * size, np.concatenate(src), np.concatenate(dst), rng, **options)
    inner = (np.arange(k * size) % size) >= between
    return replace(
        g,
        domain="loop",
        inner=inner,
        kind=np.concatenate(kind).astype(np.int64),
        ck_iter=np.asarray(rng.integers(0, iterations, size=g.ck_val.shape[0])),
    )


#: The families by name, each ``f(n, seed=..., **options) -> Graph``, in either domain.
FAMILIES: dict[str, Callable[..., Graph]] = {
    "chain": chain,
    "diamonds": diamonds,
    "random_dag": random_dag,
    "loops": loops,
    "shuffle": shuffle,
}
#: The families whose domains are fixed and partially ordered (no ``domain`` option, no array form).
PARTIAL_ORDER_FAMILIES: dict[str, Callable[..., Graph]] = {"product_loops": product_loops}


def make(family: str, n: int, **options: Any) -> Graph:
    """The graph of family ``family`` with about ``n`` processors.

    >>> make("shuffle", 8, width=4).m
    16
    """
    build = FAMILIES.get(family) or PARTIAL_ORDER_FAMILIES.get(family)
    if build is None:
        known = sorted(FAMILIES) + sorted(PARTIAL_ORDER_FAMILIES)
        raise ValueError(f"unknown family {family!r}; known: {known}")
    return build(n, **options)
