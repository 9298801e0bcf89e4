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
from dataclasses import dataclass
from typing import Any

import numpy as np

from falkirk.solver import Checkpoint, Dataflow, Edge, Processor

__all__ = ["Graph", "chain", "diamonds", "random_dag", "loops", "shuffle", "FAMILIES", "make"]


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
        return [int(x) for x in self.ck_val[self.ck_ptr[p] : self.ck_ptr[p + 1]]]

    def dataflow(self, order: str = "topological") -> Dataflow:
        """The graph as a validated :class:`~falkirk.solver.Dataflow`.

        ``order`` is the declaration order of the processors: ``"topological"``
        (construction order), ``"reverse"`` or ``"random"`` (a fixed shuffle).
        The answer does not depend on it; the round robin's running time does.
        """
        procs, edges = self.objects(order)
        return Dataflow(procs, edges, notifications=self.notifications)

    def objects(self, order: str = "topological") -> tuple[list[Processor], list[Edge]]:
        """The :class:`~falkirk.solver.Processor` and :class:`~falkirk.solver.Edge` values :meth:`dataflow` declares."""
        outs: list[list[int]] = [[] for _ in range(self.n)]
        ins: list[list[int]] = [[] for _ in range(self.n)]
        for e, (s, d) in enumerate(zip(self.src.tolist(), self.dst.tolist(), strict=True)):
            outs[s].append(e)
            ins[d].append(e)
        build = self._epoch_processor if self.domain == "epoch" else self._sequence_processor
        if order not in ("topological", "reverse", "random"):
            raise ValueError(f"order must be 'topological', 'reverse' or 'random', not {order!r}")
        declared = list(range(self.n))
        if order == "reverse":
            declared.reverse()
        elif order == "random":
            declared = np.random.default_rng(self.n).permutation(self.n).tolist()
        procs = [build(p, ins[p], outs[p]) for p in declared]
        proj = "identity" if self.domain == "epoch" else "sequence"
        edges = [
            Edge(f"e{e}", self.name(s), self.name(d), proj)
            for e, (s, d) in enumerate(zip(self.src.tolist(), self.dst.tolist(), strict=True))
        ]
        return procs, edges

    def _logs(self, outs: list[int]) -> list[str]:
        return [f"e{e}" for e in outs if self.logged[e]]

    def _epoch_processor(self, p: int, ins: list[int], outs: list[int]) -> Processor:
        cks = [Checkpoint(c) for c in self.checkpoints_of(p)]
        return Processor(
            self.name(p), "epoch", stateless=bool(self.stateless[p]), logs=self._logs(outs), checkpoints=cks
        )

    def _sequence_processor(self, p: int, ins: list[int], outs: list[int]) -> Processor:
        rate = self.rate.tolist()

        def frontier(t: int) -> dict[str, int]:
            if not ins:
                return {"@input": t}
            return {f"e{e}": rate[e] * (t - 1) for e in ins}

        def sent(t: int) -> dict[str, int]:
            return {f"e{e}": rate[e] * t for e in outs}

        stateless = bool(self.stateless[p])
        cks = [Checkpoint(frontier(t), projection=sent(t)) for t in self.checkpoints_of(p)]
        live = None
        if ins and not stateless:
            live = Checkpoint("top", delivered={f"e{e}": rate[e] * self.horizon for e in ins})
        return Processor(
            self.name(p), "sequence", stateless=stateless, logs=self._logs(outs), checkpoints=cks, live=live
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


#: The families by name, each ``f(n, seed=..., **options) -> Graph``.
FAMILIES: dict[str, Callable[..., Graph]] = {
    "chain": chain,
    "diamonds": diamonds,
    "random_dag": random_dag,
    "loops": loops,
    "shuffle": shuffle,
}


def make(family: str, n: int, **options: Any) -> Graph:
    """The graph of family ``family`` with about ``n`` processors.

    >>> make("shuffle", 8, width=4).m
    16
    """
    try:
        build = FAMILIES[family]
    except KeyError:
        raise ValueError(f"unknown family {family!r}; known: {sorted(FAMILIES)}") from None
    return build(n, **options)
