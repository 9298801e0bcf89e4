"""A dataflow's columns: processors, edges and plain checkpoint chains as arrays (SPEC §2–§3).

A :class:`~falkirk.solver.model.Dataflow` keeps one :class:`Table`:

* processor names, interned once (``names``, ``index``);
* edges as two index arrays ``src``/``dst`` (edge ``k`` runs from
  ``names[src[k]]`` to ``names[dst[k]]``) with their names (or the implied
  ``e0``, ``e1``…), and whether each is logged;
* per processor whether it is stateless, restartable, and *plain*: an
  ``epoch`` processor whose checkpoints give only their frontiers, with no
  live metadata and no recorded output projection (:mod:`falkirk.solver.model.deferred`).
  The distinct checkpoint epochs of the plain processors are kept in CSR
  form, ``ck_val[ck_ptr[i]:ck_ptr[i + 1]]``, and the antichains of plain
  ``product(k)``/``lexicographic(k)`` processors per domain in ``tuples``
  (:class:`~falkirk.solver.model.orders.TupleChains`); those processors are
  resolved only when their metadata are read.

* per edge, its *binding group* (:mod:`falkirk.solver.model.binding`): edges
  with the same projection between the same two domains bind alike and
  share one bound projection, ``sample[sample_of[k]]``; whether the
  projection is recorded (``recorded``) or recorded or with a residual
  (``residual``).

When every processor is plain and restartable (:attr:`Table.epoch_plain`),
the vectorised solver reads these arrays as they are
(:mod:`falkirk.solver.vectorised.columns`). The edges into and out of each
processor (:meth:`Table.incoming`, :meth:`Table.outgoing`) are sorted once,
on first use; arrays a fast path derives from the table are kept by
:meth:`Table.derived`.

The table is filled while its dataflow is built (:mod:`~falkirk.solver.model.dataflow`,
:mod:`~falkirk.solver.model.binding`, :mod:`~falkirk.solver.model.arrays`)
and only read after that, through ``Dataflow.table``.

Cost: ``O(V + E + checkpoints)`` to build; :func:`epoch_chains` checks every
plain chain with a few array operations.

>>> import numpy as np
>>> t = Table(["a", "b"], np.array([0]), np.array([1]), np.array([True]), np.zeros(2, bool))
>>> t.edge_name(0), t.outgoing(0), t.incoming(1)
('e0', [0], [0])
>>> ptr, val, ok = epoch_chains(np.array([0, 3, 5]), np.array([1, 1, 4, 2, 1]))
>>> ptr.tolist(), val.tolist(), ok.tolist()
([0, 2, 2], [1, 4], [True, False])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from falkirk.domains.projections import BoundProjection

__all__ = ["Table", "epoch_chains", "Array"]

Array = Any  # a numpy array


class Table:
    """The arrays of a dataflow (see the module docstring). Arrays are ``int64`` indices and ``bool``
    flags."""

    # the binding groups (set_groups); a dataflow made by model.arrays.epoch_dataflow, whose edges are all
    # the identity in one domain, has none
    residual: Array  # per edge: its projection is recorded or has a residual
    recorded: Array  # per edge: its projection is recorded
    sample: list[BoundProjection]  # one bound projection per group of edges that bind alike
    sample_of: Array  # per edge: its group

    def __init__(
        self,
        names: list[str],
        src: Array,
        dst: Array,
        logged: Array,
        stateless: Array,
        *,
        index: dict[str, int] | None = None,
        edge_names: Sequence[str] | None = None,
    ) -> None:
        self.names = names
        self.index = index if index is not None else {p: i for i, p in enumerate(names)}
        self.src = src
        self.dst = dst
        self.logged = logged
        self.stateless = stateless
        self._edge_names = edge_names
        self._edge_index: dict[str, int] | None = None
        n = len(names)
        self.restartable: Array = np.ones(n, dtype=bool)
        self.notifications: Array = np.ones(n, dtype=bool)  # per processor: receives notifications
        self.plain: Array = np.zeros(n, dtype=bool)
        self.ck_ptr: Array = np.zeros(n + 1, dtype=np.int64)
        self.ck_val: Array = np.zeros(0, dtype=np.int64)
        # every processor plain, restartable and in the one epoch domain, identity edges
        self.epoch_plain = False
        # plain product/lexicographic chains by domain (falkirk.solver.model.orders), pointers over every
        # processor
        self.tuples: dict[Any, Any] = {}
        # every processor plain and restartable, in epoch/product/lexicographic domains, with prefix
        # checkpoints
        self.lex_plain = False
        self._in: tuple[Array, Array] | None = None
        self._out: tuple[Array, Array] | None = None
        self._derived: dict[str, Any] = {}

    @property
    def n(self) -> int:
        """Number of processors."""
        return len(self.names)

    @property
    def m(self) -> int:
        """Number of edges."""
        return int(self.src.shape[0])

    # -- edge names -------------------------------------------------------------
    def edge_name(self, k: int) -> str:
        """The name of edge ``k``."""
        return f"e{k}" if self._edge_names is None else self._edge_names[k]

    def edge_names(self) -> Sequence[str]:
        """Every edge's name, in declaration order (the implied names are made on first call)."""
        if self._edge_names is None:
            self._edge_names = [f"e{k}" for k in range(self.m)]
        return self._edge_names

    def edge_index(self) -> dict[str, int]:
        """Edge name → position, built on first call."""
        if self._edge_index is None:
            self._edge_index = {e: k for k, e in enumerate(self.edge_names())}
        return self._edge_index

    # -- adjacency --------------------------------------------------------------
    @staticmethod
    def _csr(ends: Array, n: int) -> tuple[Array, Array]:
        order = np.argsort(ends, kind="stable")
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(ends, minlength=n), out=ptr[1:])
        return order, ptr

    def incoming(self, i: int) -> list[int]:
        """The edges into processor ``i``, in declaration order."""
        if self._in is None:
            self._in = self._csr(self.dst, self.n)
        order, ptr = self._in
        return order[ptr[i] : ptr[i + 1]].tolist()

    def outgoing(self, i: int) -> list[int]:
        """The edges out of processor ``i``, in declaration order."""
        if self._out is None:
            self._out = self._csr(self.src, self.n)
        order, ptr = self._out
        return order[ptr[i] : ptr[i + 1]].tolist()

    def set_plain(self, plain: Array, ck_ptr: Array, ck_val: Array, epoch_plain: bool) -> None:
        """Record which processors are plain and their distinct checkpoint epochs (CSR)."""
        self.plain, self.ck_ptr, self.ck_val, self.epoch_plain = plain, ck_ptr, ck_val, epoch_plain

    def set_groups(
        self, residual: Array, recorded: Array, sample: list[BoundProjection], sample_of: Array
    ) -> None:
        """Record the edges' binding groups (see the module docstring)."""
        self.residual, self.recorded, self.sample, self.sample_of = residual, recorded, sample, sample_of

    def derived(self, key: str, build: Callable[[], Any]) -> Any:
        """What ``build()`` returns, built on the first call with ``key`` and kept (``None`` too).

        The fast paths keep here the arrays they derive from the table
        (:func:`~falkirk.solver.vectorised.columns.epoch_columns`,
        :func:`~falkirk.solver.vectorised.loops.loop_columns`); a ``build``
        that raises keeps nothing.
        """
        cache = self._derived
        if key not in cache:
            cache[key] = build()
        return cache[key]

    def epochs(self, i: int) -> list[int]:
        """The distinct checkpoint epochs of plain processor ``i``, ascending."""
        return self.ck_val[self.ck_ptr[i] : self.ck_ptr[i + 1]].tolist()

    def _check(self) -> None:
        """Internal consistency (for tests): shapes, index ranges, CSR pointers, chains."""
        n, m = self.n, self.m
        assert len(self.index) == n and all(self.index[p] == i for i, p in enumerate(self.names))
        assert self.dst.shape == (m,) and self.logged.shape == (m,) and self.stateless.shape == (n,)
        assert m == 0 or (
            0 <= self.src.min() and self.src.max() < n and 0 <= self.dst.min() and self.dst.max() < n
        )
        assert (
            self.ck_ptr.shape == (n + 1,) and self.ck_ptr[0] == 0 and self.ck_ptr[-1] == self.ck_val.shape[0]
        )
        assert (np.diff(self.ck_ptr) >= 0).all()
        assert not (np.diff(self.ck_ptr) > 0)[~self.plain].any(), "only plain processors have CSR chains"
        for chains in self.tuples.values():
            assert chains.ptr.shape == (n + 1,) and not (np.diff(chains.ptr) > 0)[~self.plain].any()
            assert chains.ac[-1] == chains.rows.shape[0] and chains.bound.shape[0] == chains.ac.shape[0] - 1
        ptr, _, ok = epoch_chains(self.ck_ptr, self.ck_val)
        assert ok.all() and (ptr == self.ck_ptr).all(), "plain chains are valid and hold no repeats"


def epoch_chains(ptr: Array, val: Array) -> tuple[Array, Array, Array]:
    """Plain epoch chains checked and deduplicated, all at once.

    Segment ``i`` (``val[ptr[i]:ptr[i+1]]``) is one processor's checkpoint
    epochs as given. It is ``ok`` when its epochs are ``≥ 0`` and never
    decrease; a repeat of the epoch before is the same checkpoint again (an
    idle period, SPEC §5) and is dropped. Returns the CSR of the distinct
    epochs of the ``ok`` segments (the others left empty) and ``ok``.
    """
    n = ptr.shape[0] - 1
    val = np.asarray(val, dtype=np.int64)
    counts = np.diff(ptr)
    seg = np.repeat(np.arange(n), counts)
    start = np.zeros(val.shape[0], dtype=bool)
    start[ptr[:-1][counts > 0]] = True
    prev = np.empty_like(val)
    prev[1:] = val[:-1]
    prev[start] = -1  # the chain starts at ∅
    bad = val < prev
    bad |= val < 0
    ok = np.ones(n, dtype=bool)
    ok[seg[bad]] = False
    keep = (val != prev) & ok[seg]
    kept = np.bincount(seg[keep], minlength=n)
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(kept, out=out_ptr[1:])
    return out_ptr, val[keep], ok
