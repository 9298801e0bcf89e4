"""Random valid dataflows: the :func:`dataflows` strategy.

Every generated :class:`~falkirk.solver.Dataflow` is valid input for the
solver (SPEC §3, §5): one domain family per dataflow (``"loop"`` mixes
epoch processors feeding a ``product(2)`` loop through ``epoch_to_loop``),
random edges (cycles and self-loops allowed unless ``cycles=False``), and for every processor a
strictly increasing chain of checkpoint frontiers with metadata that is
monotone along the chain:

* ``N_p`` and ``M_e`` are either left to their safe defaults or drawn as
  cumulative joins of small random frontiers, cut down to the checkpoint's
  frontier (a processor only delivers times inside ``f``);
* ``D_e`` is the default (``φ_e(f)``, or ``∅`` on logged edges) or an
  arbitrary monotone chain (e.g. a processor sending "into the future");
* recorded projections (``sequence`` edges, and ``recorded`` edges when
  ``recorded`` draws ``True``) get a monotone chain of records;
* live metadata at ``⊤`` contains the last checkpoint's (or is the default).

Stateless processors get a chain of reported complete frontiers and, on
recorded edges, projection records at some of them. Sequence-domain
metadata on edge ``e`` only ever mentions edge ``e``'s count.

>>> from hypothesis import find
>>> df = find(dataflows(domains=["epoch"], cycles=False), lambda df: len(df.edges) >= 2)
>>> names = list(df.processors)  # without cycles, edges run from earlier to later processors
>>> all(names.index(e.src) < names.index(e.dst) for e in df.edges.values())
True
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from collections.abc import Sequence as Seq
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from falkirk.domains import (
    INPUT_EDGE,
    Domain,
    Epoch,
    EpochToLoop,
    Frontier,
    Identity,
    Lexicographic,
    Product,
    Recorded,
    Sequence,
    SequenceCount,
)
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
from falkirk.testing._args import bool_strategy, check_domain_argument, check_sizes
from falkirk.testing._times import times

__all__ = ["dataflows", "DEFAULT_FAMILIES"]

#: The domain families :func:`dataflows` draws from by default.
DEFAULT_FAMILIES: tuple[str, ...] = ("epoch", "sequence", "product", "lexicographic", "loop")

_BY_NAME: dict[str, Domain] = {"epoch": Epoch(), "product": Product(2), "lexicographic": Lexicographic(2)}


def _family(spec: Any) -> Domain | str:
    """A domain for a ``domains`` entry, or the name of a mixed family (``sequence``, ``loop``)."""
    if spec in ("sequence", "loop"):
        return str(spec)
    if isinstance(spec, str):
        if spec not in _BY_NAME:
            raise InvalidArgument(
                f"domains: unknown family {spec!r}; use one of {list(DEFAULT_FAMILIES)} or a domain instance"
            )
        return _BY_NAME[spec]
    if isinstance(spec, Sequence):
        raise InvalidArgument("domains: pass the string 'sequence' (a processor's edges come from the graph)")
    dom = check_domain_argument(spec, "domains entry")
    times(dom)  # raises InvalidArgument when no time strategy is known
    return dom


def small_times(domain: Domain) -> list[Any] | None:
    """A deliberately small set of times of a built-in domain (``None`` for other domains).

    Small ranges make generated metadata collide and interact.
    """
    if isinstance(domain, Epoch):
        return list(range(6))
    if isinstance(domain, (Product, Lexicographic)):
        return list(itertools.product(range(3), repeat=domain.arity))
    if isinstance(domain, Sequence):
        return [(e, s) for e in domain.edges for s in range(1, 5)]
    return None


_SMALL: dict[tuple[Any, bool], SearchStrategy[Frontier]] = {}


def _small(domain: Domain, top: bool = False) -> SearchStrategy[Frontier]:
    """Cached :func:`_small_frontiers` (building strategies is slow)."""
    key = (domain, top)
    if key not in _SMALL:
        _SMALL[key] = _small_frontiers(domain, top)
    return _SMALL[key]


def _small_frontiers(domain: Domain, top: bool) -> SearchStrategy[Frontier]:
    """``∅``, ``↓t``, ``below(t)`` (and ``⊤`` if ``top``), cached.

    For the built-in domains this is one ``sampled_from`` over the distinct
    frontiers of :func:`small_times` (one choice per frontier: generation is
    the bulk of a property's cost), ``∅`` first so that examples shrink
    towards it. Chains are cumulative joins of these, so richer antichains
    appear too.
    """
    empty = Frontier.empty(domain)
    ts = small_times(domain)
    if ts is not None:
        found = [empty]
        for t in ts:
            for f in (Frontier.upto(domain, (t,)), Frontier.below(domain, t)):
                if f not in found:
                    found.append(f)
        if top:
            found.append(Frontier.top(domain))
        return st.sampled_from(found)
    drawn = times(domain)
    options = [
        st.just(empty),
        drawn.map(lambda t: Frontier.upto(domain, (t,))),
        drawn.map(lambda t: Frontier.below(domain, t)),
    ]
    if top:
        options.append(st.just(Frontier.top(domain)))
    return st.one_of(options)


_BOOLS = st.booleans()


def _chain(draw: DrawFn, domain: Domain, k: int) -> list[Frontier]:
    """A strictly increasing chain of at most ``k`` frontiers strictly between ``∅`` and ``⊤``."""
    out: list[Frontier] = []
    acc = Frontier.empty(domain)
    for _ in range(k):
        acc = acc | draw(_small(domain))
        if acc.is_top:
            break
        if not acc.is_empty and (not out or acc != out[-1]):
            out.append(acc)
    return out


def _monotone(draw: DrawFn, domain: Domain, bounds: Seq[Frontier | None], edge: str | None) -> list[Frontier]:
    """One value per entry of ``bounds``, increasing, each cut down to its bound (``None``: none)."""
    out = []
    acc = Frontier.empty(domain)
    for bound in bounds:
        acc = acc | draw(_small(domain, bound is None))
        v = acc if bound is None else acc & bound
        if edge is not None and isinstance(domain, Sequence):
            v = domain.restrict(v, edge)
        out.append(v)
    return out


def _field(
    draw: DrawFn,
    domain: Domain,
    chain: list[Frontier],
    edge: str | None,
    *,
    bounded: bool,
    top_default: bool = True,
) -> tuple[list[Any], Any]:
    """Values of one metadata field at each checkpoint and at ``⊤`` (``None`` = safe default).

    The live value may be left to its default only when that default is ``⊤``.
    """
    n = len(chain)
    if not draw(_BOOLS):
        return [None] * n, None
    bounds: list[Frontier | None] = list(chain) if bounded else [None] * n
    values = _monotone(draw, domain, bounds + [None], edge)
    live = values[-1] if not top_default or draw(_BOOLS) else None
    return values[:-1], live


@lru_cache(maxsize=128)
def _edge_lists(n: int, cycles: bool, limit: int) -> SearchStrategy[list[tuple[int, int]]]:
    """Lists of distinct edges ``(i, j)`` between ``n`` processors (cached per size)."""
    pairs = [(i, j) for i in range(n) for j in range(n) if cycles or i < j]
    if not pairs or not limit:
        return st.just([])
    # deduplicated after drawing: unique=True makes hypothesis reject many draws
    return st.lists(st.sampled_from(pairs), max_size=limit).map(lambda xs: list(dict.fromkeys(xs)))


@st.composite
def _dataflows(
    draw: DrawFn,
    families: tuple[Domain | str, ...],
    min_size: int,
    max_size: int,
    max_edges: int | None,
    max_inputs: int | None,
    cycles: bool,
    stateless: SearchStrategy[bool],
    logs: SearchStrategy[bool],
    recorded: SearchStrategy[bool],
    notifications: SearchStrategy[bool],
    max_checkpoints: int,
) -> Dataflow:
    n = draw(st.integers(min_size, max_size))
    names = [f"p{i}" for i in range(n)]
    family = draw(st.sampled_from(families))
    limit = 2 * n if max_edges is None else max_edges
    chosen = draw(_edge_lists(n, cycles, limit))
    if family == "loop":  # p0..p{m-1} count epochs, the rest are a product(2) loop nothing leaves
        m = draw(st.integers(0, n))
        loop = {names[i]: _BY_NAME["epoch"] if i < m else _BY_NAME["product"] for i in range(n)}
        chosen = [(i, j) for i, j in chosen if i < m or j >= m]
    if max_inputs is not None:
        indegree = [0] * n
        kept = []
        for i, j in chosen:
            if indegree[j] < max_inputs:
                indegree[j] += 1
                kept.append((i, j))
        chosen = kept
    edges = [Edge(f"e{k}", names[i], names[j]) for k, (i, j) in enumerate(chosen)]
    inputs: dict[str, list[str]] = {p: [] for p in names}
    outputs: dict[str, list[str]] = {p: [] for p in names}
    for e in edges:
        inputs[e.dst].append(e.name)
        outputs[e.src].append(e.name)
    domains: dict[str, Domain]
    if family == "sequence":
        domains = {p: Sequence(inputs[p] or [INPUT_EDGE]) for p in names}
    elif family == "loop":
        domains = loop
    else:
        assert not isinstance(family, str)
        domains = dict.fromkeys(names, family)
    rec: dict[str, bool] = {}
    final_edges = []
    for e in edges:
        rec[e.name] = family == "sequence" or draw(recorded)
        final_edges.append(
            Edge(e.name, e.src, e.dst, _projection(domains[e.src], domains[e.dst], rec[e.name]))
        )
    system_notes = family != "sequence" and draw(notifications)
    edge_dst = {e.name: e.dst for e in edges}
    processors = [
        _processor(
            draw,
            p,
            domains,
            inputs[p],
            outputs[p],
            edge_dst,
            rec,
            stateless,
            logs,
            system_notes,
            max_checkpoints,
        )
        for p in names
    ]
    return Dataflow(processors, final_edges, notifications=system_notes)


def _projection(source: Domain, target: Domain, recorded: bool) -> Any:
    if isinstance(target, Sequence):
        return SequenceCount()
    if recorded:
        return Recorded()
    return Identity() if source == target else EpochToLoop()


def _processor(
    draw: DrawFn,
    name: str,
    domains: dict[str, Domain],
    ins: list[str],
    outs: list[str],
    edge_dst: dict[str, str],
    rec: dict[str, bool],
    stateless_s: SearchStrategy[bool],
    logs_s: SearchStrategy[bool],
    notes: bool,
    max_checkpoints: int,
) -> Processor:
    dom = domains[name]
    is_stateless = draw(stateless_s)
    logged = [e for e in outs if draw(logs_s)]
    chain = _chain(draw, dom, draw(st.integers(0, max_checkpoints)))
    k = len(chain)
    proj: dict[str, list[Any]] = {}
    for e in outs:
        if rec[e]:
            tgt = domains[edge_dst[e]]
            proj[e] = _monotone(draw, tgt, [None] * k, e)
    if is_stateless:
        cks = []
        for i, f in enumerate(chain):
            given = {e: v[i] for e, v in proj.items() if draw(_BOOLS)}
            cks.append(Checkpoint(f, projection=given))
        return Processor(name, dom, stateless=True, logs=logged, checkpoints=cks)
    fields: dict[tuple[str, str | None], tuple[list[Any], Any]] = {}
    if notes:
        fields["notifications", None] = _field(draw, dom, chain, None, bounded=True)
    for e in ins:
        fields["delivered", e] = _field(draw, dom, chain, e, bounded=True)
    for e in outs:
        tgt = domains[edge_dst[e]]
        fields["discarded", e] = _field(draw, tgt, chain, e, bounded=False, top_default=e not in logged)
    cks = [
        Checkpoint(f, **_kwargs(fields, i), projection={e: v[i] for e, v in proj.items()})
        for i, f in enumerate(chain)
    ]
    live_kw = _kwargs(fields, None)
    live = Checkpoint("top", **live_kw) if any(live_kw.values()) else None
    return Processor(name, dom, logs=logged, checkpoints=cks, live=live)


def _kwargs(fields: dict[tuple[str, str | None], tuple[list[Any], Any]], i: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"notifications": None, "delivered": {}, "discarded": {}}
    for (kind, e), (values, live) in fields.items():
        v = live if i is None else values[i]
        if v is None:
            continue
        if kind == "notifications":
            out[kind] = v
        else:
            out[kind][e] = v
    return out


def dataflows(
    *,
    domains: Iterable[Any] = DEFAULT_FAMILIES,
    min_size: int = 1,
    max_size: int = 6,
    max_edges: int | None = None,
    max_inputs: int | None = None,
    cycles: bool = True,
    stateless: bool | SearchStrategy[bool] = _BOOLS,
    logs: bool | SearchStrategy[bool] = _BOOLS,
    recorded: bool | SearchStrategy[bool] = _BOOLS,
    notifications: bool | SearchStrategy[bool] = _BOOLS,
    max_checkpoints: int = 4,
) -> SearchStrategy[Dataflow]:
    """Valid dataflows of ``min_size..max_size`` processors (see the module docstring).

    Parameters
    ----------
    domains
        Domain families to draw from, one per dataflow: ``"epoch"``,
        ``"sequence"`` (each processor's edges from the graph),
        ``"product"``/``"lexicographic"`` (arity 2), ``"loop"`` (epoch
        processors, then a ``product(2)`` loop fed by ``epoch_to_loop``
        edges), or domain instances with a registered time strategy.
    max_edges
        At most this many edges (default ``2 * size``); at most one edge per
        ordered pair of processors.
    max_inputs
        At most this many input edges per processor (``1`` makes every
        sequence domain totally ordered).
    cycles
        Allow cycles and self-loops (otherwise edges go from earlier to later processors).
    stateless, logs, recorded, notifications
        Booleans or strategies of booleans, drawn per processor
        (``stateless``), per output edge (``logs``: the sender logs it;
        ``recorded``: a ``recorded`` projection instead of ``identity``,
        outside sequence domains) and per dataflow (``notifications``: the
        system has notifications; never in sequence domains).
    max_checkpoints
        Checkpoints per processor (besides the implied ``∅``).
    """
    fams = tuple(_family(d) for d in _as_list(domains))
    check_sizes(min_size, max_size, low=1)
    check_sizes(0, max_edges)
    check_sizes(0, max_inputs)
    check_sizes(0, max_checkpoints)
    if not isinstance(cycles, bool):
        raise InvalidArgument(f"cycles={cycles!r} must be a bool")
    return _dataflows(
        fams,
        min_size,
        max_size,
        max_edges,
        max_inputs,
        cycles,
        bool_strategy(stateless, "stateless"),
        bool_strategy(logs, "logs"),
        bool_strategy(recorded, "recorded"),
        bool_strategy(notifications, "notifications"),
        max_checkpoints,
    )


def _as_list(domains: Any) -> list[Any]:
    if isinstance(domains, (str, bytes)) or not isinstance(domains, Iterable):
        raise InvalidArgument(f"domains={domains!r} must be a list of families or domains, e.g. ['epoch']")
    out = list(domains)
    if not out:
        raise InvalidArgument("domains=[] names no family to draw from")
    return out
