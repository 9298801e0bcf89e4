"""Metadata of a processor at any frontier, for a given set of failed processors.

The solver, :func:`~falkirk.solver.check_consistent` and the brute-force
reference all read ``N``, ``M_e``, ``D_e`` and ``φ_e`` through this one
accessor, so the derived metadata of stateless processors (SPEC §3) and the
projection rules for frontiers outside ``F(p)`` live in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from falkirk.domains import Frontier
from falkirk.errors import SolverError, UnknownNameError
from falkirk.solver.model.dataflow import Dataflow
from falkirk.solver.model.elements import ResolvedCheckpoint
from falkirk.solver.model.resolve import delivered_default, edge_view

__all__ = ["View", "normalise_failed"]


def normalise_failed(df: Dataflow, failed: Iterable[str] | str) -> frozenset[str]:
    """``failed`` as a set of names; ``"all"`` means every processor."""
    if failed == "all":
        return frozenset(df.processors)
    if isinstance(failed, str):
        failed = [failed]
    out = frozenset(failed)
    unknown = sorted(out - set(df.processors))
    if unknown:
        raise UnknownNameError(f"failed names unknown processor(s) {unknown}")
    return out


class Lazy(dict[str, Any]):
    """A dict whose missing entries are computed by ``make(key)`` on first access (and kept)."""

    def __init__(self, make: Callable[[str], Any]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: str) -> Any:
        value = self[key] = self._make(key)
        return value


class View:
    """``F(p)`` and metadata of every processor of ``df`` given ``failed``.

    ``F(p)`` is resolved on first use (``lazy=True``), so a solve that only
    touches the part of a large graph that rolls back does not pay for the
    rest; ``lazy=False`` resolves every processor at once (for callers that
    iterate over :attr:`cands`).

    For incremental drivers (the monitor): :meth:`push` grows ``F(p)`` by a
    new checkpoint and :meth:`pop` withdraws it; ``indexed=True`` finds
    ``φ_e`` at a frontier of a stateful processor's chain by a dictionary
    lookup instead of a scan (``O(1)`` instead of ``O(k)`` for ``k``
    checkpoints).
    """

    def __init__(
        self, df: Dataflow, failed: frozenset[str], *, lazy: bool = True, indexed: bool = False
    ) -> None:
        self.df = df
        self.failed = failed
        self.cands: dict[str, list[ResolvedCheckpoint]] = Lazy(self._candidates)
        self.recorded: dict[str, dict[str, list[ResolvedCheckpoint]]] = Lazy(self._recorded)
        if not lazy:
            for name, p in df.processors.items():
                self.cands[name]
                if p.stateless:
                    self.recorded[name]
        self._index: dict[str, dict[Frontier, ResolvedCheckpoint]] | None = None
        if indexed:
            self._index = Lazy(lambda name: {m.frontier: m for m in self.cands[name]})

    # -- growing F(p) -------------------------------------------------------------
    def push(self, name: str, meta: ResolvedCheckpoint) -> None:
        """Append ``meta`` (strictly above the current chain) to ``F(name)``: a new checkpoint."""
        self.cands[name].append(meta)
        if self._index is not None and name in self._index:
            self._index[name][meta.frontier] = meta
        if name in self.recorded:
            for e, metas in self.recorded[name].items():
                if e in meta.recorded:
                    metas.append(meta)

    def pop(self, name: str) -> None:
        """Withdraw the last :meth:`push` on ``name``."""
        meta = self.cands[name].pop()
        if self._index is not None and name in self._index:
            del self._index[name][meta.frontier]
        if name in self.recorded:
            for metas in self.recorded[name].values():
                if metas and metas[-1] is meta:
                    metas.pop()

    def _candidates(self, name: str) -> list[ResolvedCheckpoint]:
        p = self.df.processors[name]
        cands = self.df.candidates(name, failed=name in self.failed)
        return cands if p.restartable else cands[1:]

    def _recorded(self, name: str) -> dict[str, list[ResolvedCheckpoint]]:
        if not self.df.processors[name].stateless:
            raise KeyError(name)
        cands = self.cands[name]
        empty = Frontier.empty(self.df.domains[name])  # once, not once per candidate and edge
        return {
            e: [m for m in cands if m.frontier == empty or e in m.recorded or m.frontier.is_top]
            for e in self.df.outputs[name]
        }

    # -- F(p) ---------------------------------------------------------------------
    def is_stateless(self, name: str) -> bool:
        return self.df.processors[name].stateless

    def initial(self, name: str) -> Frontier:
        """``max F(p)``: ``⊤`` unless failed; a failed stateless processor starts at ``c``."""
        if name not in self.failed:  # ⊤, without resolving F(p)
            return self.df.live_meta(name).frontier
        cands = self.cands[name]
        if not cands:
            raise SolverError(
                f"processor {name!r} has no available frontier: it is not restartable "
                "(∅ ∉ F(p)) and has no checkpoint"
            )
        return cands[-1].frontier

    def available(self, name: str, f: Frontier) -> bool:
        """C1: ``f ∈ F(p)``."""
        if self.is_stateless(name):
            return f <= self.initial(name)
        return any(m.frontier == f for m in self.cands[name])

    # -- metadata at a frontier ---------------------------------------------------
    def meta(self, name: str, f: Frontier) -> ResolvedCheckpoint | None:
        """Resolved metadata of a stateful processor at ``f ∈ F(p)`` (``None`` if absent)."""
        for m in self.cands[name]:
            if m.frontier == f:
                return m
        return None

    def notifications(self, name: str, f: Frontier) -> Frontier:
        """``N_p(f)``."""
        if self.is_stateless(name):
            return f if self.df.receives_notifications[name] else Frontier.empty(f.domain)
        return self._stateful(name, f).notifications

    def delivered(self, name: str, edge: str, f: Frontier) -> Frontier:
        """``M_e(f)`` for input edge ``edge``."""
        if self.is_stateless(name):
            return delivered_default(self.df.domains[name], f, edge)
        return self._stateful(name, f).delivered[edge]

    def discarded(self, name: str, edge: str, f: Frontier) -> Frontier:
        """``D_e(f)`` for output edge ``edge``."""
        if self.is_stateless(name):
            if edge in self.df.processors[name].logs:
                return Frontier.empty(self.df.bound[edge].target)
            b = self.df.bound[edge]
            if f.is_top:
                image = Frontier.top(b.target)
            elif b.recorded:
                image = self._recorded_discarded(name, edge, f)
            else:
                image = b.discarded(f)
            return delivered_default(b.target, image, edge)
        return self._stateful(name, f).discarded[edge]

    def _recorded_discarded(self, name: str, edge: str, f: Frontier) -> Frontier:
        """Exact ``D_e(f)`` of a stateless sender on a recorded edge: ``φ_e`` at the
        smallest record containing ``f`` (everything sent because of events in
        ``f`` is inside it); ``⊤`` when no record contains ``f``. The union rule
        of SPEC §3 would under-count between two records."""
        for m in self.recorded[name][edge]:
            if f <= m.frontier:
                return m.projection[edge]
        return Frontier.top(self.df.bound[edge].target)

    def projection(self, name: str, edge: str, f: Frontier) -> Frontier:
        """``φ_e(f)`` at any frontier ``f`` of the sender (SPEC §3's rule outside ``F(p)``)."""
        b = self.df.bound[edge]
        if f.is_top:
            return Frontier.top(b.target)
        if self._index is not None and not self.is_stateless(name):
            m = self._index[name].get(f)
            if m is not None:
                return m.projection[edge]
        if not self.is_stateless(name):
            best = None
            for m in self.cands[name]:
                if m.frontier <= f:
                    best = m
                else:
                    break
            if best is not None and best.frontier == f:
                return best.projection[edge]
            if not b.recorded:
                return b.apply(f)
            return best.projection[edge] if best is not None else Frontier.empty(b.target)
        if not b.recorded:
            return b.apply(f)
        out = Frontier.empty(b.target)
        for m in self.recorded[name][edge]:
            if m.frontier <= f:
                out = m.projection[edge]
        return out

    def residual(self, name: str, edge: str, y: Frontier) -> Frontier:
        """Largest frontier of stateless ``name`` whose ``φ_edge`` is inside ``y``."""
        b = self.df.bound[edge]
        if not b.recorded:
            r = b.discarded_residual(y) if b.has_residual else None
            if r is None:
                raise SolverError(
                    f"processor {name!r}: edge {edge!r} is not logged and its projection "
                    f"{b.spec.name!r} has no residual at {y!r}; log the edge or give the "
                    "processor checkpoints"
                )
            return r
        best = Frontier.empty(self.df.domains[name])
        for m in self.recorded[name][edge]:
            if m.projection[edge] <= y:
                best = m.frontier
        return best

    def incoming(self, name: str, edge: str, phi: Frontier) -> Frontier:
        """What ``φ_e(·)`` bounds for receiver ``name``: itself, or that edge's count alone."""
        return edge_view(self.df.domains[name], phi, edge)

    def _stateful(self, name: str, f: Frontier) -> ResolvedCheckpoint:
        m = self.meta(name, f)
        if m is None:
            raise SolverError(f"processor {name!r}: {f!r} is not one of its available frontiers")
        return m
