"""The dataflow model: processors, edges, checkpoint metadata (SPEC §2–§3).

Value objects are frozen; a :class:`Dataflow` validates them at construction
and resolves every omitted field to its safe default (SPEC §9), so the solver
only ever sees complete, monotone, chain-ordered metadata.

Frontier-valued fields accept a :class:`~falkirk.domains.Frontier` or the
domain's JSON encoding (``2`` for epoch 2, ``{"e1": 3}`` for sequence counts,
``"top"``, ``"empty"``…).

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow(
...     [Processor("src", "epoch", stateless=True),
...      Processor("sum", "epoch", logs=["e2"],
...                checkpoints=[Checkpoint(2, notifications=2, delivered={"e1": 2})]),
...      Processor("sink", "epoch", checkpoints=[Checkpoint(1, delivered={"e2": 1})],
...                live=Checkpoint("top", delivered={"e2": 4}))],
...     [Edge("e1", "src", "sum"), Edge("e2", "sum", "sink")])
>>> [str(m.frontier) for m in df.candidates("sink", failed=False)]
['Frontier(epoch, empty)', 'Frontier(epoch, 1)', 'Frontier(epoch, top)']
"""

from collections.abc import Callable, Iterable
from collections.abc import Sequence as PySequence
from typing import Any

from falkirk.domains import BUILTIN, INPUT_EDGE, REGISTRY, Domain, Sequence, make_domain
from falkirk.domains.projections import BoundProjection, projection_from_spec
from falkirk.errors import FalkirkError, UnknownNameError, ValidationError
from falkirk.solver.model.bulk import from_arrays, from_networkx
from falkirk.solver.model.elements import Checkpoint, Edge, Meta, Processor, ResolvedCheckpoint
from falkirk.solver.model.plain import plain_chain
from falkirk.solver.model.resolve import Resolved, resolve_processor

__all__ = ["Checkpoint", "Processor", "Edge", "Dataflow", "ResolvedCheckpoint", "Meta"]


class _OnDemand(dict[str, Resolved]):
    """A dict whose missing entries are computed by ``make(key)`` on first access (and kept)."""

    def __init__(self, make: Callable[[str], Resolved]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: str) -> Resolved:
        value = self[key] = self._make(key)
        return value


class Dataflow:
    """A validated dataflow graph with resolved checkpoint metadata.

    Raises :class:`~falkirk.errors.ValidationError` (or a subclass) naming
    the processor, edge or field when the input is not well formed.

    Cost: ``O(V + E)``, plus resolving every processor's ``k`` checkpoints,
    ``O(k · edges of p)`` (and ``O(k)`` more per recorded edge a checkpoint
    leaves to the union rule). A processor whose checkpoints give only
    their frontiers, in a totally ordered domain with identity output edges
    (:mod:`falkirk.solver.model.plain`), costs ``O(k)`` here and is
    resolved when its metadata are first read; :attr:`plain` holds its
    checkpoint keys (epochs in the ``epoch`` domain).
    """

    def __init__(
        self, processors: Iterable[Processor], edges: Iterable[Edge], *, notifications: bool = True
    ) -> None:
        self.processors: dict[str, Processor] = {}
        for p in processors:
            if not isinstance(p, Processor):
                raise ValidationError(f"expected a Processor, got {p!r}")
            if p.name in self.processors:
                raise ValidationError(f"processor {p.name!r} is declared twice")
            self.processors[p.name] = p
        self.edges: dict[str, Edge] = {}
        self.inputs: dict[str, list[str]] = {n: [] for n in self.processors}
        self.outputs: dict[str, list[str]] = {n: [] for n in self.processors}
        procs, declared, outputs, inputs = self.processors, self.edges, self.outputs, self.inputs
        for e in edges:
            name, src, dst = e.name, e.src, e.dst
            if name in declared:
                raise ValidationError(f"edge {name!r} is declared twice")
            if src not in procs:
                raise UnknownNameError(f"edge {name!r}: src {src!r} is not a declared processor")
            if dst not in procs:
                raise UnknownNameError(f"edge {name!r}: dst {dst!r} is not a declared processor")
            declared[name] = e
            outputs[src].append(name)
            inputs[dst].append(name)
        self.system_notifications = notifications
        self._made: dict[tuple[str, int | None], Domain] = {}
        self.domains: dict[str, Domain] = {n: self._domain(p) for n, p in self.processors.items()}
        self.bound: dict[str, BoundProjection] = {}
        named: dict[str, Any] = {}  # projections given by name, made once (they are immutable values)
        for e in self.edges.values():
            spec = e.projection
            try:
                if not hasattr(spec, "bind"):
                    if type(spec) is str:
                        if spec not in named:
                            named[spec] = projection_from_spec(spec)
                        spec = named[spec]
                    else:
                        spec = projection_from_spec(spec)
                self.bound[e.name] = spec.bind(self.domains[e.src], self.domains[e.dst], e.name)
            except FalkirkError as exc:
                msg = str(exc)
                raise type(exc)(msg if e.name in msg else f"edge {e.name!r}: {msg}") from None
        for p in self.processors.values():
            unknown = sorted(set(p.logs) - set(self.outputs[p.name]))
            if unknown:
                raise UnknownNameError(
                    f"processor {p.name!r}: logs {unknown}, which are not its output edges"
                )
            if p.stateless:
                for out in self.outputs[p.name]:
                    b = self.bound[out]
                    if out not in p.logs and not b.recorded and not b.has_residual:
                        raise ValidationError(
                            f"processor {p.name!r}: stateless, but edge {out!r} is not logged and its "
                            f"projection {b.spec.name!r} has no residual (SPEC §3); log the edge or "
                            "make the processor stateful"
                        )
        self.receives_notifications: dict[str, bool] = {
            n: self._notifications(p) for n, p in self.processors.items()
        }
        # plain chains (falkirk.solver.model.plain) are resolved on first use, the rest now
        self._resolved: dict[str, Resolved] = _OnDemand(self._resolve)
        self.plain: dict[str, list[Any]] = {}
        for n in self.processors:
            keys = plain_chain(self, n)
            if keys is None:
                self._resolved[n]
            else:
                self.plain[n] = keys
        self._columns: Any = None  # the array form, built by the vectorised solver once

    def _resolve(self, name: str) -> Resolved:
        return resolve_processor(self, name)

    # -- bulk constructors ------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        names: PySequence[str],
        src: Any,
        dst: Any,
        *,
        domain: Any = "epoch",
        edge_names: PySequence[str] | None = None,
        logged: Any = None,
        stateless: Any = None,
        ck_ptr: Any = None,
        ck_val: Any = None,
        notifications: bool = True,
    ) -> "Dataflow":
        """A dataflow from arrays: edge ``k`` is ``names[src[k]] → names[dst[k]]`` (identity).

        ``logged[k]``: edge ``k`` is logged; ``stateless[i]``: processor
        ``i`` is stateless; its checkpoints are
        ``ck_val[ck_ptr[i]:ck_ptr[i + 1]]`` (ascending frontiers in the
        domain's encoding; epochs by default). Edges are named ``e0``,
        ``e1``, … unless ``edge_names`` is given. The result is the
        dataflow the object constructors give for the same content; see
        :mod:`falkirk.solver.model.bulk`. Cost: ``O(V + E + checkpoints)``.

        >>> import numpy as np
        >>> from falkirk.solver import Dataflow, solve_frontiers
        >>> df = Dataflow.from_arrays(["a", "b", "c"], src=np.array([0, 1]), dst=np.array([1, 2]),
        ...     logged=np.array([True, False]), stateless=np.array([False, False, True]),
        ...     ck_ptr=np.array([0, 1, 3, 3]), ck_val=np.array([3, 1, 5]))
        >>> df.edges["e1"], df.processors["a"].logs
        (Edge(name='e1', src='b', dst='c', projection=Identity()), frozenset({'e0'}))
        >>> solve_frontiers(df, failed=["a"]).to_json()["frontiers"]
        {'a': 3, 'b': 1, 'c': 1}
        """
        return from_arrays(
            cls,
            names,
            src,
            dst,
            domain=domain,
            edge_names=edge_names,
            logged=logged,
            stateless=stateless,
            ck_ptr=ck_ptr,
            ck_val=ck_val,
            notifications=notifications,
        )

    @classmethod
    def from_networkx(cls, graph: Any, *, domain: Any = "epoch", notifications: bool = True) -> "Dataflow":
        """A dataflow from a directed ``networkx`` graph: nodes are processors, edges are edges.

        Node attributes are :class:`Processor` fields (``domain``, default
        ``domain``; ``stateless``, ``checkpoints`` as frontier encodings or
        :class:`Checkpoint` values, ``logs``, ``live``, ``arity``,
        ``notifications``, ``restartable``); edge attributes are ``name``
        (default ``"u->v"``), ``projection`` (default identity) and
        ``logged``. See :mod:`falkirk.solver.model.bulk`.

        >>> import networkx as nx
        >>> from falkirk.solver import Dataflow, solve_frontiers
        >>> G = nx.DiGraph()
        >>> G.add_node("a", checkpoints=[3])
        >>> G.add_node("b", checkpoints=[1, 5])
        >>> G.add_edge("a", "b", logged=True)
        >>> solve_frontiers(Dataflow.from_networkx(G), failed=["a"]).to_json()["frontiers"]
        {'a': 3, 'b': 1}
        """
        return from_networkx(cls, graph, domain=domain, notifications=notifications)

    # -- construction helpers ---------------------------------------------------
    def _domain(self, p: Processor) -> Domain:
        if not isinstance(p.domain, str):
            if isinstance(p.domain, Sequence):
                self._check_sequence_edges(p, p.domain)
            return p.domain
        options: dict[str, Any] = {}
        if p.domain == "sequence":
            options["edges"] = self.inputs[p.name] or [INPUT_EDGE]
        elif p.domain in ("product", "lexicographic"):
            if p.arity is None:
                raise ValidationError(f"processor {p.name!r}: domain {p.domain!r} needs an arity")
            options["arity"] = p.arity
        elif p.arity is not None:
            options["arity"] = p.arity
        # a built-in family other than sequence gives equal, immutable domains: make each once
        key = (
            (p.domain, p.arity)
            if p.domain != "sequence" and REGISTRY.get(p.domain) is BUILTIN.get(p.domain)
            else None
        )
        if key is not None and key in self._made:
            return self._made[key]
        try:
            dom = make_domain(p.domain, **options)
        except FalkirkError as exc:
            raise type(exc)(f"processor {p.name!r}: {exc}") from None
        if key is not None:
            self._made[key] = dom
        return dom

    def _check_sequence_edges(self, p: Processor, dom: Sequence) -> None:
        want = tuple(sorted(self.inputs[p.name] or [INPUT_EDGE]))
        if dom.edges != want:
            raise ValidationError(
                f"processor {p.name!r}: its sequence domain has edges {list(dom.edges)} "
                f"but its input edges are {list(want)}"
            )

    def _notifications(self, p: Processor) -> bool:
        if isinstance(self.domains[p.name], Sequence):
            return False
        if p.notifications is not None:
            return p.notifications
        return self.system_notifications

    # -- queries ----------------------------------------------------------------
    def processor(self, name: str) -> Processor:
        """The processor called ``name`` (``UnknownNameError`` otherwise)."""
        try:
            return self.processors[name]
        except KeyError:
            raise UnknownNameError(f"unknown processor {name!r}") from None

    def candidates(self, name: str, *, failed: bool) -> list[ResolvedCheckpoint]:
        """``F(p)`` of a stateful processor, ascending (a chain), resolved.

        For a stateless processor: its recorded frontiers (``∅``, reported
        complete frontiers, and ``⊤`` when it has not failed).
        """
        res = self._resolved[self.processor(name).name]
        out = list(res.chain)
        if not failed:
            out.append(res.live)
        return out

    def empty_meta(self, name: str) -> ResolvedCheckpoint:
        """The resolved metadata at ``∅``."""
        return self._resolved[name].chain[0]

    def live_meta(self, name: str) -> ResolvedCheckpoint:
        """The resolved metadata at ``⊤`` (live history of a processor that has not failed)."""
        return self._resolved[name].live

    def topological_names(self) -> list[str]:
        """Processor names in declaration order (deterministic iteration order)."""
        return list(self.processors)

    def __repr__(self) -> str:
        return f"<Dataflow: {len(self.processors)} processors, {len(self.edges)} edges>"
