"""The dataflow's value objects: :class:`Processor`, :class:`Edge`, :class:`Checkpoint` and the resolved
:class:`ResolvedCheckpoint` (SPEC §2–§3).

Each class keeps its ``attrs`` fields (equality, hashing, ``repr``,
``attrs.evolve``, ``attrs.fields``, pickling, frozen instances) but has a
hand-written ``__init__`` that stores the fields through the slots'
descriptors and runs a mapping converter only on a mapping that was given: callers
make these values by the million (one :class:`Edge` per edge), and the
generated ``__init__`` costs about a third more per value (a bound
``object.__setattr__`` per field, the converters run on every default).
A field added to one of them goes into its ``__init__`` too; the tests
compare each ``__init__`` with the one ``attrs`` generates (``__attrs_init__``).

They sit below :mod:`falkirk.solver.model.resolve` (which fills in :class:`ResolvedCheckpoint`)
and :mod:`falkirk.solver.model` (whose :class:`~falkirk.solver.model.Dataflow`
validates them), so the solver's modules import in one direction.

>>> from falkirk.solver.model.elements import Processor
>>> Processor("src", "epoch", stateless=True).stateless
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from attrs import NOTHING, field, fields, frozen

from falkirk.domains import Domain, Frontier
from falkirk.domains.projections import Identity

__all__ = ["Checkpoint", "Processor", "Edge", "ResolvedCheckpoint", "Meta", "EMPTY_MAPPING"]


class _Empty(dict):
    """The one empty mapping every checkpoint field left out shares (read-only, equal to ``{}``)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a checkpoint's metadata are read-only")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (_empty, ())


def _empty() -> _Empty:
    return EMPTY_MAPPING


#: The read-only empty mapping every left-out :class:`Checkpoint` field shares (equal to ``{}``);
#: compare a field with it by identity to learn that the field was left out.
EMPTY_MAPPING = _Empty()


def _frozen_map(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value) if value else EMPTY_MAPPING


def _names(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _checkpoints(value: Iterable[Checkpoint]) -> tuple[Checkpoint, ...]:
    return tuple(value)


def _setters(cls: type) -> tuple[Any, ...]:
    """The slot descriptors' ``__set__`` of ``cls``'s fields, in field order (they bypass the frozen
    ``__setattr__``)."""
    return tuple(cls.__dict__[a.name].__set__ for a in fields(cls))


@frozen(init=False)
class Checkpoint:
    """Metadata persisted for one available frontier ``f`` (paper Table 1).

    ``notifications`` is ``N_p(f)``; ``delivered[e]`` is ``M_e(f)`` per input
    edge; ``discarded[e]`` is ``D_e(f)`` and ``projection[e]`` is ``φ_e(f)``
    per output edge; ``logged[e]`` is an opaque reference to ``L_e(f)``;
    ``state`` an opaque handle to ``S_p(f)``. ``None``/missing means the safe
    default. As ``live`` metadata of a processor, ``frontier`` is ``"top"``.
    """

    frontier: Any
    notifications: Any = None
    delivered: Mapping[str, Any] = field(default=EMPTY_MAPPING, converter=_frozen_map)
    discarded: Mapping[str, Any] = field(default=EMPTY_MAPPING, converter=_frozen_map)
    projection: Mapping[str, Any] = field(default=EMPTY_MAPPING, converter=_frozen_map)
    logged: Mapping[str, Any] = field(default=EMPTY_MAPPING, converter=_frozen_map)
    state: Any = None

    def __init__(
        self,
        frontier: Any,
        notifications: Any = None,
        delivered: Mapping[str, Any] | None = EMPTY_MAPPING,
        discarded: Mapping[str, Any] | None = EMPTY_MAPPING,
        projection: Mapping[str, Any] | None = EMPTY_MAPPING,
        logged: Mapping[str, Any] | None = EMPTY_MAPPING,
        state: Any = None,
    ) -> None:
        _ck_frontier(self, frontier)
        _ck_notifications(self, notifications)
        _ck_delivered(self, delivered if delivered is EMPTY_MAPPING else _frozen_map(delivered))
        _ck_discarded(self, discarded if discarded is EMPTY_MAPPING else _frozen_map(discarded))
        _ck_projection(self, projection if projection is EMPTY_MAPPING else _frozen_map(projection))
        _ck_logged(self, logged if logged is EMPTY_MAPPING else _frozen_map(logged))
        _ck_state(self, state)


_ck_frontier, _ck_notifications, _ck_delivered, _ck_discarded, _ck_projection, _ck_logged, _ck_state = (
    _setters(Checkpoint)
)


@frozen(init=False)
class Processor:
    """A processor: name, domain, regime and its checkpoints.

    ``domain`` is a domain object or a registry name (``arity`` for tuple
    domains; a ``"sequence"`` domain takes its edges from the graph).
    ``stateless`` processors keep no state between times; their
    ``checkpoints`` are the complete frontiers they reported. ``logs`` names
    the output edges whose messages are logged. ``live`` is the metadata at
    ``⊤`` used while the processor has not failed (safe defaults if omitted).
    ``notifications=False`` declares that it receives none (``N = ∅``).
    ``restartable=False`` means ``∅ ∉ F(p)``: it must never need to restart.
    """

    name: str
    domain: Domain | str
    stateless: bool = False
    logs: frozenset[str] = field(factory=frozenset, converter=_names)
    checkpoints: tuple[Checkpoint, ...] = field(factory=tuple, converter=_checkpoints)
    live: Checkpoint | None = None
    arity: int | None = None
    notifications: bool | None = None
    restartable: bool = True

    def __init__(
        self,
        name: str,
        domain: Domain | str,
        stateless: bool = False,
        logs: Iterable[str] = (),
        checkpoints: Iterable[Checkpoint] = (),
        live: Checkpoint | None = None,
        arity: int | None = None,
        notifications: bool | None = None,
        restartable: bool = True,
    ) -> None:
        _p_name(self, name)
        _p_domain(self, domain)
        _p_stateless(self, stateless)
        _p_logs(self, _names(logs))
        _p_checkpoints(self, _checkpoints(checkpoints))
        _p_live(self, live)
        _p_arity(self, arity)
        _p_notifications(self, notifications)
        _p_restartable(self, restartable)


(
    _p_name,
    _p_domain,
    _p_stateless,
    _p_logs,
    _p_checkpoints,
    _p_live,
    _p_arity,
    _p_notifications,
    _p_restartable,
) = _setters(Processor)


@frozen(init=False)
class Edge:
    """An edge ``src → dst`` whose messages carry times of ``dst``'s domain."""

    name: str
    src: str
    dst: str
    projection: Any = field(factory=Identity)

    def __init__(self, name: str, src: str, dst: str, projection: Any = NOTHING) -> None:
        _e_name(self, name)
        _e_src(self, src)
        _e_dst(self, dst)
        _e_projection(self, Identity() if projection is NOTHING else projection)


_e_name, _e_src, _e_dst, _e_projection = _setters(Edge)


@frozen
class ResolvedCheckpoint:
    """Resolved metadata of one available frontier (every field filled in)."""

    frontier: Frontier
    notifications: Frontier
    delivered: Mapping[str, Frontier]
    discarded: Mapping[str, Frontier]
    projection: Mapping[str, Frontier]
    logged: Mapping[str, Any]
    state: Any
    recorded: frozenset[str]  # output edges whose projection was given explicitly


#: The earlier name of :class:`ResolvedCheckpoint`, kept importable.
Meta = ResolvedCheckpoint
