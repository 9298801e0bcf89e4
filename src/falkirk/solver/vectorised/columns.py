"""A Dataflow of plain epoch processors as arrays, built once and solved without resolving it.

When every processor of a :class:`~falkirk.solver.model.Dataflow` is in the
``epoch`` domain, restartable and *plain* (its checkpoints give only their
frontiers, its edges are identity edges: :mod:`falkirk.solver.model.plain`),
its rank problem is :meth:`TotalProblem.from_epochs
<falkirk.solver.vectorised.problem.TotalProblem.from_epochs>` of a few
arrays. :func:`epoch_columns` builds those arrays on the first solve and
keeps them on the dataflow, so later solves (other failures) reuse them;
:func:`solve_columns` solves one set of failures. No checkpoint is resolved
and no per-checkpoint frontier is made: the answer is the same as the
general conversion's (:mod:`falkirk.solver.vectorised.build`), which
resolves every processor first.

Cost: :func:`epoch_columns` ``O(V + E + checkpoints)`` once;
:func:`solve_columns` the engine's cost plus ``O(V)`` to name the answer.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])], [Edge("ab", "a", "b")])
>>> f, n, work = solve_columns(df, frozenset({"a"}))
>>> dict(f)
{'a': Frontier(epoch, 3), 'b': Frontier(epoch, 1)}
>>> f.encoded()
{'a': 3, 'b': 1}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from falkirk.domains import Epoch, Frontier
from falkirk.domains.encoding import encode_frontier
from falkirk.solver.model import Dataflow
from falkirk.solver.vectorised.engine import solve_total
from falkirk.solver.vectorised.problem import Array, TotalProblem

__all__ = ["EpochColumns", "RankFrontiers", "epoch_columns", "solve_columns"]


@dataclass
class EpochColumns:
    """The arrays of :meth:`TotalProblem.from_epochs` but ``failed``, and the processors' names."""

    names: list[str]
    index: dict[str, int]
    src: Array
    dst: Array
    logged: Array
    stateless: Array
    notes: Array
    ck_ptr: Array
    ck_val: Array
    domain: Epoch

    def problem(self, failed: frozenset[str]) -> TotalProblem:
        """The rank problem when the processors ``failed`` have failed."""
        mask = np.zeros(len(self.names), dtype=bool)
        if failed:
            mask[[self.index[p] for p in failed]] = True
        return TotalProblem.from_epochs(
            src=self.src,
            dst=self.dst,
            logged=self.logged,
            stateless=self.stateless,
            failed=mask,
            ck_ptr=self.ck_ptr,
            ck_val=self.ck_val,
            notifications=self.notes,
            names=self.names,
        )


def epoch_columns(df: Dataflow) -> EpochColumns | None:
    """The array form of ``df`` (kept on it), or ``None`` when it is not all plain epoch processors."""
    built: EpochColumns | None = df.table.derived("epoch_columns", lambda: _build(df))
    return built


def _build(df: Dataflow) -> EpochColumns | None:
    t = df.table
    if not t.epoch_plain:
        return None
    return EpochColumns(
        names=t.names,
        index=t.index,
        src=t.src,
        dst=t.dst,
        logged=t.logged,
        stateless=t.stateless,
        notes=t.notifications,
        ck_ptr=t.ck_ptr,
        ck_val=t.ck_val,
        domain=df.domains[t.names[0]],  # type: ignore[arg-type]
    )


class RankFrontiers(Mapping[str, Frontier]):
    """A processor → frontier mapping kept as one array of epochs, decoded on read.

    ``ranks[i]`` is processor ``names[i]``'s frontier as an epoch bound
    (``Frontier(domain, (r,))``; ``top_rank`` is ``⊤``). Reading one value
    makes at most one :class:`~falkirk.domains.Frontier` per distinct rank;
    :meth:`encoded` gives the JSON encodings of all of them without making
    any. Cost: ``O(1)`` per read, ``O(V)`` for :meth:`encoded`.
    """

    def __init__(
        self, names: list[str], index: dict[str, int], ranks: Array, top_rank: int, domain: Epoch
    ) -> None:
        self.names, self.index, self.ranks, self.top_rank, self.domain = names, index, ranks, top_rank, domain
        self._made: dict[int, Frontier] = {}

    def frontier(self, r: int) -> Frontier:
        """The frontier of rank ``r``."""
        out = self._made.get(r)
        if out is None:
            out = Frontier.top(self.domain) if r == self.top_rank else Frontier(self.domain, (r,))
            self._made[r] = out
        return out

    def tops(self, ranks: Array) -> Array:
        """Which of ``ranks`` stand for ``⊤`` (an array of booleans)."""
        return ranks == self.top_rank

    def empties(self, ranks: Array) -> Array:
        """Which of ``ranks`` stand for ``∅``."""
        return ranks == 0

    def __getitem__(self, name: str) -> Frontier:
        return self.frontier(int(self.ranks[self.index[name]]))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RankFrontiers) and other.names == self.names and other.domain == self.domain:
            mine = np.where(self.ranks == self.top_rank, -1, self.ranks)
            theirs = np.where(other.ranks == other.top_rank, -1, other.ranks)
            return bool(np.array_equal(mine, theirs))
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> dict[str, Frontier]:
        """A plain ``dict`` of every frontier."""
        return dict(self.items())

    def encoded_ranks(self) -> dict[int, Any]:
        """The JSON encoding of every distinct rank."""
        return {r: encode_frontier(self.frontier(r)) for r in np.unique(self.ranks).tolist()}

    def encoded(self) -> dict[str, Any]:
        """Every processor's frontier in its JSON encoding (SPEC §9), in declaration order."""
        enc = self.encoded_ranks()
        return dict(zip(self.names, map(enc.__getitem__, self.ranks.tolist()), strict=True))

    def __repr__(self) -> str:
        return f"<RankFrontiers of {len(self.names)} processors>"


def solve_columns(df: Dataflow, failed: frozenset[str]) -> tuple[RankFrontiers, RankFrontiers, int] | None:
    """``f``, ``n`` (by processor name, decoded on read) and the work done, or ``None`` when ``df`` has no
    array form."""
    cols = epoch_columns(df)
    if cols is None:
        return None
    prob = cols.problem(failed)
    sol = solve_total(prob)
    f = RankFrontiers(cols.names, cols.index, sol.f, prob.top, cols.domain)
    n = RankFrontiers(cols.names, cols.index, sol.n, prob.top, cols.domain)
    n._made = f._made  # the same frontier values
    return f, n, sol.evaluations
