"""Edge projections (SPEC §2, §7): translating frontiers from sender to receiver.

For an edge ``e = (p → q)``, ``φ_e`` maps a frontier of ``T_p`` to one of
``T_q``: p never sends on ``e`` a message with a time in ``φ_e(f)`` because
of an event outside ``f``. A projection is declared unbound (``Identity()``,
``EpochToLoop()``…) and bound to an edge's domains with :meth:`bind`, which
rejects mismatched domains with :class:`~falkirk.errors.ProjectionError`.

Two kinds:

* **functional** projections compute ``φ_e(f)`` for any ``f``
  (:meth:`BoundProjection.apply`), and may have a **residual**
  ``φ⁺(Y)``: the largest frontier whose projection is inside ``Y``;
* **recorded** projections (``sequence``, ``epoch_to_sequence``,
  ``recorded``) are known only at the frontiers where the sender recorded
  them (its checkpoints); the solver combines the records (SPEC §3).

>>> from falkirk.domains import Epoch, Product, Frontier
>>> b = EpochToLoop().bind(Epoch(), Product(2), "e")
>>> f = b.apply(Epoch().frontier(2))
>>> (2, 99) in f, (3, 0) in f
(True, False)
>>> b.residual(Frontier.below(Product(2), (1, 5)))
Frontier(epoch, 0)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from attrs import field, frozen

from falkirk.domains.base import Domain
from falkirk.domains.epoch import Epoch
from falkirk.domains.frontier import Frontier
from falkirk.domains.lexicographic import Lexicographic
from falkirk.domains.product import Product
from falkirk.domains.sequence import Sequence
from falkirk.errors import ProjectionError

__all__ = [
    "Projection",
    "BoundProjection",
    "Identity",
    "EpochToLoop",
    "SequenceCount",
    "EpochToSequence",
    "SequenceToEpoch",
    "Recorded",
    "FunctionProjection",
    "PROJECTIONS",
    "projection_from_spec",
]


class BoundProjection:
    """A projection bound to an edge's source and target domains."""

    __slots__ = ("spec", "source", "target", "edge")  # one per edge: kept small (subclasses may add fields)
    recorded: bool = False
    has_residual: bool = False

    def __init__(self, spec: Projection, source: Domain, target: Domain, edge: str) -> None:
        self.spec, self.source, self.target, self.edge = spec, source, target, edge

    def apply(self, f: Frontier) -> Frontier:
        """``φ_e(f)`` (functional projections only)."""
        raise ProjectionError(
            f"edge {self.edge!r}: projection {self.spec.name!r} is recorded per checkpoint, "
            "it cannot be applied to an arbitrary frontier"
        )

    def residual(self, y: Frontier) -> Frontier | None:
        """Largest ``f`` with ``φ_e(f) ⊆ y``, or ``None`` when there is none."""
        return None

    def discarded(self, f: Frontier) -> Frontier:
        """The exact image: times of every message sent because of events in ``f``.

        This is what stands in for ``D_e(f)`` on an unlogged edge (SPEC §2: there
        ``φ_e`` must be exact). It equals :meth:`apply` for projections whose
        sender sends at the time of the causing event; a projection that can send
        "into the future" (``sequence_to_epoch`` windows) overrides it.
        """
        return self.apply(f)

    def discarded_residual(self, y: Frontier) -> Frontier | None:
        """Largest ``f`` with ``discarded(f) ⊆ y`` (``None`` when there is none)."""
        return self.residual(y)

    def __repr__(self) -> str:
        return f"<{self.spec.name} {self.source} -> {self.target} on {self.edge!r}>"


class Projection(Protocol):
    """An unbound projection: a name and a way to bind it to an edge."""

    @property
    def name(self) -> str: ...

    def bind(self, source: Domain, target: Domain, edge: str) -> BoundProjection: ...

    def to_json(self) -> Any: ...


def _mismatch(p: Projection, source: Domain, target: Domain, edge: str, need: str) -> ProjectionError:
    return ProjectionError(f"edge {edge!r}: projection {p.name!r} cannot map {source} to {target} ({need})")


# -- identity -----------------------------------------------------------------
class _BoundIdentity(BoundProjection):
    __slots__ = ()
    has_residual = True

    def apply(self, f: Frontier) -> Frontier:
        return f

    def residual(self, y: Frontier) -> Frontier | None:
        return y


@frozen
class Identity:
    """``φ(f) = f`` between equal domains (same family and arity)."""

    @property
    def name(self) -> str:
        return "identity"

    def bind(self, source: Domain, target: Domain, edge: str) -> BoundProjection:
        if isinstance(source, Sequence) or isinstance(target, Sequence):
            raise _mismatch(self, source, target, edge, "sequence numbers are per edge: use 'sequence'")
        if source is not target and source != target:
            raise _mismatch(self, source, target, edge, "identity needs the same domain at both ends")
        return _BoundIdentity(self, source, target, edge)

    def to_json(self) -> Any:
        return "identity"


# -- epoch -> loop ------------------------------------------------------------
class _BoundEpochToLoop(BoundProjection):
    has_residual = True

    def apply(self, f: Frontier) -> Frontier:
        if f.is_top:
            return Frontier.top(self.target)
        pad = (0,) * (self.target.arity - 1)  # type: ignore[attr-defined]
        return Frontier(self.target, ((f.antichain[0],) + pad,))

    def residual(self, y: Frontier) -> Frontier | None:
        if y.is_top:
            return Frontier.top(self.source)
        return Frontier(self.source, (min(a[0] for a in y.antichain),))


@frozen
class EpochToLoop:
    """``↓e ↦ ↓(e, ∞, …)``: entering a loop, epoch ``e`` becomes all its iterations."""

    @property
    def name(self) -> str:
        return "epoch_to_loop"

    def bind(self, source: Domain, target: Domain, edge: str) -> BoundProjection:
        if not isinstance(source, Epoch) or not isinstance(target, (Product, Lexicographic)):
            raise _mismatch(self, source, target, edge, "it maps epoch to product(k) or lexicographic(k)")
        if target.arity < 2:
            raise _mismatch(self, source, target, edge, "the loop domain needs arity >= 2")
        return _BoundEpochToLoop(self, source, target, edge)

    def to_json(self) -> Any:
        return "epoch_to_loop"


# -- recorded projections -----------------------------------------------------
class _BoundRecorded(BoundProjection):
    recorded = True


@frozen
class SequenceCount:
    """Recorded: ``φ_e(f)`` = the first ``n_e(f)`` messages p had sent on ``e`` in state ``f``."""

    @property
    def name(self) -> str:
        return "sequence"

    def bind(self, source: Domain, target: Domain, edge: str) -> BoundProjection:
        if not isinstance(target, Sequence) or edge not in target.edges:
            raise _mismatch(
                self, source, target, edge, f"the receiver must be a sequence domain with edge {edge!r}"
            )
        return _BoundRecorded(self, source, target, edge)

    def to_json(self) -> Any:
        return "sequence"


@frozen
class EpochToSequence:
    """Recorded: messages sent up to the end of epoch ``e`` (p forwards epoch ``e`` after ``e-1``)."""

    @property
    def name(self) -> str:
        return "epoch_to_sequence"

    def bind(self, source: Domain, target: Domain, edge: str) -> BoundProjection:
        if not isinstance(source, Epoch) or not isinstance(target, Sequence) or edge not in target.edges:
            raise _mismatch(
                self, source, target, edge, f"it maps epoch to a sequence domain with edge {edge!r}"
            )
        return _BoundRecorded(self, source, target, edge)

    def to_json(self) -> Any:
        return "epoch_to_sequence"


@frozen
class Recorded:
    """Recorded between any domains: the sender records ``φ_e`` at each checkpoint."""

    @property
    def name(self) -> str:
        return "recorded"

    def bind(self, source: Domain, target: Domain, edge: str) -> BoundProjection:
        return _BoundRecorded(self, source, target, edge)

    def to_json(self) -> Any:
        return "recorded"


# -- sequence -> epoch windows --------------------------------------------------
class _BoundSequenceToEpoch(BoundProjection):
    def __init__(self, spec: SequenceToEpoch, source: Sequence, target: Domain, edge: str) -> None:
        super().__init__(spec, source, target, edge)
        cuts = []
        for k, c in enumerate(spec.cuts):
            if isinstance(c, int) and not isinstance(c, bool):
                if len(source.edges) != 1:
                    raise _mismatch(spec, source, target, edge, f"cut {k} must give a count per edge")
                c = {source.edges[0]: c}
            try:
                cuts.append(source.frontier(c))
            except Exception as exc:
                raise ProjectionError(f"edge {edge!r}: cut {k} of sequence_to_epoch: {exc}") from None
            if k and not cuts[k - 1] <= cuts[k]:
                raise ProjectionError(f"edge {edge!r}: sequence_to_epoch cuts must grow, cut {k} does not")
        self.cuts = cuts
        self.has_residual = True  # of the exact image (discarded_residual), for any edge count

    def apply(self, f: Frontier) -> Frontier:
        if f.is_top:
            return Frontier.top(self.target)
        k = -1
        for i, cut in enumerate(self.cuts):
            if not cut <= f:
                break
            k = i
        return self.target.frontier(k)  # type: ignore[attr-defined]

    def residual(self, y: Frontier) -> Frontier | None:
        if len(self.source.edges) != 1:  # type: ignore[attr-defined]
            return None
        if y.is_top:
            return Frontier.top(self.source)
        k = self.target.last(y) + 1  # type: ignore[attr-defined]  # first epoch outside y
        if k >= len(self.cuts):
            return None
        (edge,) = self.source.edges  # type: ignore[attr-defined]
        n = self.source.count(self.cuts[k], edge)  # type: ignore[attr-defined]
        return self.source.frontier({edge: max(n - 1, 0)})  # type: ignore[attr-defined]

    def discarded(self, f: Frontier) -> Frontier:
        # A message read into f may fall in an epoch that is not complete in f:
        # the exact image holds every epoch that has a message in f.
        if f.is_top:
            return Frontier.top(self.target)
        for k, cut in enumerate(self.cuts):
            if f <= cut:
                prev = self.cuts[k - 1] if k else Frontier.empty(self.source)
                return self.target.frontier(k - 1 if f <= prev else k)  # type: ignore[attr-defined]
        return Frontier.top(self.target)  # messages beyond the last cut: epochs not yet known

    def discarded_residual(self, y: Frontier) -> Frontier | None:
        # discarded(f) ⊆ ↓k exactly when every message of f lies in epochs <= k.
        if y.is_top:
            return Frontier.top(self.source)
        k = self.target.last(y)  # type: ignore[attr-defined]
        if k < 0:
            return Frontier.empty(self.source)
        return self.cuts[min(k, len(self.cuts) - 1)] if self.cuts else Frontier.empty(self.source)


@frozen
class SequenceToEpoch:
    """Windows: epoch ``k`` is complete once the sender's frontier holds ``cuts[k]``.

    ``cuts[k]`` is the count per input edge (or a bare count for a single edge)
    at the end of epoch ``k``; ``φ(f)`` holds the epochs whose every message is in ``f``.
    """

    cuts: tuple[Any, ...] = field(converter=tuple)

    @property
    def name(self) -> str:
        return "sequence_to_epoch"

    def bind(self, source: Domain, target: Domain, edge: str) -> BoundProjection:
        if not isinstance(source, Sequence) or not isinstance(target, Epoch):
            raise _mismatch(self, source, target, edge, "it maps a sequence domain to epoch")
        return _BoundSequenceToEpoch(self, source, target, edge)

    def to_json(self) -> Any:
        return {"kind": "sequence_to_epoch", "cuts": list(self.cuts)}


# -- user functions -------------------------------------------------------------
class _BoundFunction(BoundProjection):
    def __init__(self, spec: FunctionProjection, source: Domain, target: Domain, edge: str) -> None:
        super().__init__(spec, source, target, edge)
        self.has_residual = spec.residual_fn is not None

    def apply(self, f: Frontier) -> Frontier:
        out = self.spec.fn(f)  # type: ignore[attr-defined]
        if not isinstance(out, Frontier) or out.domain != self.target:
            raise ProjectionError(
                f"edge {self.edge!r}: projection {self.spec.name!r} returned {out!r}, not a frontier of {self.target}"
            )
        return out

    def residual(self, y: Frontier) -> Frontier | None:
        r = self.spec.residual_fn  # type: ignore[attr-defined]
        return None if r is None else r(y)


@frozen
class FunctionProjection:
    """A user projection: ``fn(frontier) -> frontier``, monotone, optionally with its residual.

    ``source``/``target`` (domains or ``None`` for any) are checked when bound.
    """

    fn: Callable[[Frontier], Frontier]
    residual_fn: Callable[[Frontier], Frontier] | None = None
    source: Domain | None = None
    target: Domain | None = None
    label: str = "function"

    @property
    def name(self) -> str:
        return self.label

    def bind(self, source: Domain, target: Domain, edge: str) -> BoundProjection:
        if (self.source is not None and self.source != source) or (
            self.target is not None and self.target != target
        ):
            raise _mismatch(self, source, target, edge, f"it maps {self.source} to {self.target}")
        return _BoundFunction(self, source, target, edge)

    def to_json(self) -> Any:
        raise ProjectionError(f"projection {self.label!r} is a Python function and has no JSON form")


#: Scenario names of the built-in projections.
PROJECTIONS: dict[str, Callable[..., Projection]] = {
    "identity": Identity,
    "epoch_to_loop": EpochToLoop,
    "sequence": SequenceCount,
    "epoch_to_sequence": EpochToSequence,
    "sequence_to_epoch": SequenceToEpoch,
    "recorded": Recorded,
}


def projection_from_spec(spec: Any) -> Projection:
    """A projection from its scenario form: a name, or ``{"kind": name, **options}``.

    >>> projection_from_spec({"kind": "sequence_to_epoch", "cuts": [3, 5]})
    SequenceToEpoch(cuts=(3, 5))
    """
    if isinstance(spec, str):
        kind, options = spec, {}
    elif isinstance(spec, Mapping) and isinstance(spec.get("kind"), str):
        kind, options = spec["kind"], {k: v for k, v in spec.items() if k != "kind"}
    else:
        raise ProjectionError(f"a projection is a name or {{'kind': name, ...}}, not {spec!r}")
    if kind not in PROJECTIONS:
        raise ProjectionError(f"unknown projection {kind!r}; known: {sorted(PROJECTIONS)}")
    try:
        return PROJECTIONS[kind](**options)
    except TypeError:
        raise ProjectionError(f"projection {kind!r} does not take options {sorted(options)}") from None
