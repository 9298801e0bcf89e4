"""Bulk constructors of a :class:`~falkirk.solver.model.Dataflow`: from arrays and from a networkx graph.

A scheduler that already holds its job graph gives it as it holds it:

* :func:`from_arrays` (``Dataflow.from_arrays``) — processor names, edges as
  index arrays ``src``/``dst``, per-processor and per-edge flags, and the
  checkpoints in CSR form (``ck_val[ck_ptr[i]:ck_ptr[i+1]]`` are processor
  ``i``'s checkpoint frontiers, ascending, in the domain's JSON encoding:
  epochs in the ``epoch`` domain). The arrays are checked at once (shapes,
  index ranges, CSR pointers), with errors naming the argument.
* :func:`from_networkx` (``Dataflow.from_networkx``) — a ``networkx``
  directed graph whose nodes are processor names and whose node and edge
  attributes are the fields of :class:`Processor` and :class:`Edge`.

Both are defined here once, signature and documentation: the class exposes
each as a classmethod (``from_arrays = classmethod(bulk.from_arrays)``),
whose ``cls`` is the class it is called on.

An epoch job whose checkpoints are integers forming valid chains (from
networkx: node attributes ``stateless``, ``checkpoints``, ``domain``
``"epoch"`` only; edge attributes ``name``, ``logged`` only) goes straight
into the dataflow's columns (:mod:`falkirk.solver.model.table`), with no
:class:`Processor`, :class:`Edge` or :class:`Checkpoint` made until one is
read. Anything else is turned into those values and given to the object
constructors, which validate it as always. Either way a dataflow built one
way equals one built another way (the same processors, edges and plans),
and the same mistakes raise the same errors. Edges are identity edges
unless a ``projection`` is given (networkx only).

Cost: ``O(V + E + checkpoints)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from falkirk.domains import Epoch, Identity
from falkirk.errors import ValidationError, did_you_mean
from falkirk.solver.model.arrays import JobColumns, epoch_dataflow, from_columns, networkx_loops, objects
from falkirk.solver.model.elements import Checkpoint, Edge, Processor
from falkirk.solver.model.table import Table, epoch_chains

if TYPE_CHECKING:
    from falkirk.solver.model.dataflow import Dataflow

__all__ = ["from_arrays", "from_networkx", "PROCESSOR_ATTRIBUTES", "EDGE_ATTRIBUTES"]

#: Node attributes :func:`from_networkx` reads (the :class:`Processor` fields but ``name``).
PROCESSOR_ATTRIBUTES = (
    "domain",
    "stateless",
    "logs",
    "checkpoints",
    "live",
    "arity",
    "notifications",
    "restartable",
)
_IDENTITY = Identity()  # the default projection, one value for every edge (it is immutable)

#: Edge attributes :func:`from_networkx` reads (``logged`` adds the edge to its sender's ``logs``).
EDGE_ATTRIBUTES = ("name", "projection", "logged")


def _flags(value: Any, size: int, what: str) -> Any:
    if value is None:
        return np.zeros(size, dtype=bool)
    arr = np.asarray(value)
    if arr.shape != (size,):
        raise ValidationError(f"{what} has shape {arr.shape}, expected ({size},)")
    return arr.astype(bool)


def _indices(value: Any, n: int, what: str, size: int | None = None) -> Any:
    arr = np.asarray(value)
    if arr.ndim != 1 or (size is not None and arr.shape[0] != size):
        want = "a 1-d array" if size is None else f"shape ({size},)"
        raise ValidationError(f"{what} has shape {arr.shape}, expected {want}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValidationError(f"{what} must hold integers, not {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        bad = int(arr[(arr < 0) | (arr >= n)][0])
        raise ValidationError(f"{what} holds {bad}, which is not a processor index (0..{n - 1})")
    return arr.astype(np.int64)


def from_arrays(
    cls: type[Dataflow],
    names: Sequence[str],
    src: Any,
    dst: Any,
    *,
    domain: Any = "epoch",
    edge_names: Sequence[str] | None = None,
    logged: Any = None,
    stateless: Any = None,
    ck_ptr: Any = None,
    ck_val: Any = None,
    notifications: bool = True,
    domain_of: Any = None,
    projection: Any = None,
    projection_of: Any = None,
    ck_ac: Any = None,
) -> Dataflow:
    """A dataflow from arrays: edge ``k`` is ``names[src[k]] → names[dst[k]]`` (identity by default).

    Called as ``Dataflow.from_arrays(names, src, dst, ...)`` (``cls`` is
    the class it is called on). ``logged[k]``: edge ``k`` is logged;
    ``stateless[i]``: processor ``i`` is stateless; its checkpoints are
    ``ck_val[ck_ptr[i]:ck_ptr[i + 1]]`` (ascending frontiers in the
    domain's encoding; epochs by default). Edges are named ``e0``,
    ``e1``, … unless ``edge_names`` is given. The result is the dataflow
    the object constructors give for the same content (see the module
    docstring). Cost: ``O(V + E + checkpoints)``.

    Iterative jobs (:mod:`falkirk.solver.model.arrays`): ``domain`` a
    sequence of domains with ``domain_of[i]`` the one of processor ``i``,
    ``projection`` a sequence with ``projection_of[k]`` the one of edge
    ``k``, and ``ck_val`` of shape ``(rows, d)``: per row a time of the
    processor's domain — a ``product``/``lexicographic`` checkpoint's
    minimal times of its complement (``before``), grouped by ``ck_ac``
    (default: one row per checkpoint), an epoch processor's epoch in column 0.

    In the ``epoch`` domain, with distinct names and integer checkpoint
    epochs forming valid chains, the dataflow is made from the arrays with
    no object per processor or edge (:func:`~falkirk.solver.model.arrays.epoch_dataflow`);
    anything else goes through the object constructors, which raise the
    errors they always raise.

    >>> import numpy as np
    >>> from falkirk.solver import Dataflow, solve_frontiers
    >>> df = Dataflow.from_arrays(["a", "b", "c"], src=np.array([0, 1]), dst=np.array([1, 2]),
    ...     logged=np.array([True, False]), stateless=np.array([False, False, True]),
    ...     ck_ptr=np.array([0, 1, 3, 3]), ck_val=np.array([3, 1, 5]))
    >>> df.edges["e1"], df.processors["a"].logs
    (Edge(name='e1', src='b', dst='c', projection=Identity()), frozenset({'e0'}))
    >>> solve_frontiers(df, failed=["a"]).to_json()["frontiers"]
    {'a': 3, 'b': 1, 'c': 1}
    >>> from falkirk.domains import Product
    >>> loop = Dataflow.from_arrays(["a", "b"], src=np.array([0]), dst=np.array([1]), logged=np.array([True]),
    ...     domain=["epoch", Product(2)], domain_of=np.array([0, 1]),
    ...     projection=["epoch_to_loop"], projection_of=np.array([0]),
    ...     ck_ptr=np.array([0, 1, 2]), ck_val=np.array([[3, 0], [2, 1], [3, 0]]), ck_ac=np.array([0, 1, 3]))
    >>> loop.processors["b"].checkpoints
    (Checkpoint(frontier={'before': [[2, 1], [3, 0]]}, notifications=None, delivered={}, discarded={}, projection={}, logged={}, state=None),)
    >>> solve_frontiers(loop, failed=["a"]).to_json()["frontiers"]
    {'a': 3, 'b': {'before': [[2, 1], [3, 0]]}}
    """
    names = list(names)
    n = len(names)
    if not all(isinstance(p, str) for p in names):
        bad = next(p for p in names if not isinstance(p, str))
        raise ValidationError(f"names must be strings, not {bad!r}")
    s = _indices(src, n, "src")
    d = _indices(dst, n, "dst", s.shape[0])
    m = s.shape[0]
    enames = None if edge_names is None else list(edge_names)
    if enames is not None and len(enames) != m:
        raise ValidationError(f"edge_names has {len(enames)} names for {m} edges")
    log = _flags(logged, m, "logged")
    less = _flags(stateless, n, "stateless")
    if (ck_ptr is None) != (ck_val is None):
        raise ValidationError("give both ck_ptr and ck_val (checkpoints in CSR form), or neither")
    if domain_of is not None or projection is not None or ck_ac is not None or np.ndim(ck_val) == 2:
        return _mixed(
            cls,
            names,
            s,
            d,
            enames,
            log,
            less,
            domain,
            domain_of,
            projection,
            projection_of,
            ck_ptr,
            ck_val,
            ck_ac,
            notifications,
        )
    raw: Any = []
    vals: Any = np.zeros(0, dtype=np.int64)  # the epochs as integers, or None when they are not all integers
    if ck_ptr is None:
        ptr = np.zeros(n + 1, dtype=np.int64)
    else:
        ptr = _indices(ck_ptr, 2**62, "ck_ptr", n + 1)
        if isinstance(ck_val, np.ndarray):
            raw, vals = ck_val.tolist(), ck_val if ck_val.dtype.kind in "iu" else None
        else:
            raw = [v.item() if isinstance(v, np.generic) else v for v in ck_val]
            small = all(type(v) is int and -(2**62) < v < 2**62 for v in raw)
            vals = np.array(raw, dtype=np.int64) if small else None
        if ptr[0] != 0 or ptr[-1] != len(raw) or (np.diff(ptr) < 0).any():
            raise ValidationError(
                f"ck_ptr must rise from 0 to len(ck_val) = {len(raw)} (CSR pointers), got {ptr[0]}..{ptr[-1]}"
            )
    if vals is not None:
        fast = _epoch_table(cls, names, s, d, enames, log, less, ptr, vals, domain, notifications)
        if fast is not None:
            return fast
    enames = [f"e{k}" for k in range(m)] if enames is None else enames
    sl, dl, logl, lessl, ptrl = s.tolist(), d.tolist(), log.tolist(), less.tolist(), ptr.tolist()
    valsl = raw
    logs: list[list[str]] = [[] for _ in range(n)]
    for k in range(m):
        if logl[k]:
            logs[sl[k]].append(enames[k])
    procs = [
        Processor(
            names[i],
            domain,
            stateless=lessl[i],
            logs=logs[i],
            checkpoints=[Checkpoint(v) for v in valsl[ptrl[i] : ptrl[i + 1]]],
        )
        for i in range(n)
    ]
    edges = [Edge(enames[k], names[sl[k]], names[dl[k]], _IDENTITY) for k in range(m)]
    return cls(procs, edges, notifications=notifications)


def _mixed(
    cls: type[Dataflow],
    names: list[str],
    src: Any,
    dst: Any,
    enames: list[str] | None,
    logged: Any,
    stateless: Any,
    domain: Any,
    domain_of: Any,
    projection: Any,
    projection_of: Any,
    ck_ptr: Any,
    ck_val: Any,
    ck_ac: Any,
    notifications: bool,
) -> Dataflow:
    """:func:`from_arrays` for several domains and projections, or tuple-domain checkpoints as rows."""
    n, m = len(names), src.shape[0]
    kinds = list(domain) if domain_of is not None else [domain]
    dcode = np.zeros(n, np.int64) if domain_of is None else _indices(domain_of, len(kinds), "domain_of", n)
    if projection_of is None:
        specs: list[Any] = [projection if projection is not None else _IDENTITY]
        pcode = np.zeros(m, dtype=np.int64)
    else:
        specs = list(projection)
        pcode = _indices(projection_of, len(specs), "projection_of", m)
    rows = np.zeros((0, 1), dtype=np.int64) if ck_val is None else np.asarray(ck_val)
    if rows.ndim == 1:
        rows = rows[:, None]
    if rows.ndim != 2 or (rows.size and not np.issubdtype(rows.dtype, np.integer)):
        raise ValidationError(
            f"ck_val must be integers of shape (rows,) or (rows, d), not {rows.dtype} {rows.shape}"
        )
    rows = rows.astype(np.int64)
    ac = np.arange(rows.shape[0] + 1, dtype=np.int64) if ck_ac is None else _indices(ck_ac, 2**62, "ck_ac")
    if ac.shape[0] < 1 or ac[0] != 0 or ac[-1] != rows.shape[0] or (np.diff(ac) < 0).any():
        raise ValidationError(f"ck_ac must rise from 0 to the {rows.shape[0]} rows of ck_val (CSR pointers)")
    cks = ac.shape[0] - 1
    ptr = np.zeros(n + 1, np.int64) if ck_ptr is None else _indices(ck_ptr, 2**62, "ck_ptr", n + 1)
    if ck_ptr is None and cks:
        raise ValidationError("give ck_ptr with ck_val (checkpoints in CSR form)")
    if ptr[0] != 0 or ptr[-1] != cks or (np.diff(ptr) < 0).any():
        raise ValidationError(
            f"ck_ptr must rise from 0 to the {cks} checkpoints (CSR pointers), got {ptr[0]}..{ptr[-1]}"
        )
    t = Table(names, src, dst, logged, stateless, edge_names=enames)
    distinct = len(t.index) == n and (
        enames is None or (len(set(enames)) == m and all(type(e) is str for e in enames))
    )
    cols = JobColumns(kinds, dcode, specs, pcode, ptr, rows, ac)
    made = from_columns(cls, t, cols, notifications) if distinct else None
    if made is not None:
        return made
    t = Table(names, src, dst, logged, stateless, edge_names=enames or [f"e{k}" for k in range(m)])
    procs, edges = objects(names, t, cols)
    return cls(procs, edges, notifications=notifications)


def _epoch_table(
    cls: type[Dataflow],
    names: list[str],
    src: Any,
    dst: Any,
    enames: list[str] | None,
    logged: Any,
    stateless: Any,
    ck_ptr: Any,
    ck_val: Any,
    domain: Any,
    notifications: bool,
) -> Dataflow | None:
    """The dataflow straight from the arrays, or ``None`` when the object constructors must decide."""
    if not (domain == "epoch" if isinstance(domain, str) else type(domain) is Epoch):
        return None
    vals = ck_val.astype(np.int64)  # integers (others: resolved and checked one by one)
    if not epoch_chains(ck_ptr, vals)[2].all():
        return None  # a chain that is not valid: the object constructors name the checkpoint
    index = {p: i for i, p in enumerate(names)}
    if len(index) != len(names):
        return None  # a name twice: reported as the object constructors report it
    if enames is not None and (
        len(set(enames)) != len(enames) or not all(isinstance(e, str) for e in enames)
    ):
        return None
    t = Table(names, src, dst, logged, stateless, index=index, edge_names=enames)
    return epoch_dataflow(cls, t, domain, ck_ptr, vals, notifications)


#: Node and edge attributes the array path of :func:`from_networkx` reads; any other sends it to the objects.
_PLAIN_NODE = frozenset({"stateless", "checkpoints", "domain"})
_PLAIN_EDGE = frozenset({"name", "logged"})


def _networkx_columns(cls: type[Dataflow], graph: Any, domain: Any, notifications: bool) -> Dataflow | None:
    """An epoch job of bare checkpoints read straight into arrays, or ``None`` (the objects decide)."""
    if not (domain == "epoch" if isinstance(domain, str) else type(domain) is Epoch):
        return None
    names: list[str] = []
    less: list[bool] = []
    counts: list[int] = []
    vals: list[int] = []
    for u, data in graph.nodes(data=True):
        if type(u) is not str or not data.keys() <= _PLAIN_NODE or data.get("domain", "epoch") != "epoch":
            return None
        cks = data.get("checkpoints", ())
        if not all(type(c) is int for c in cks):
            return None
        stateless = data.get("stateless", False)
        if type(stateless) is not bool:
            return None
        names.append(u)
        less.append(stateless)
        counts.append(len(cks))
        vals.extend(cks)
    index = {p: i for i, p in enumerate(names)}
    if len(index) != len(names):
        return None
    src: list[int] = []
    dst: list[int] = []
    enames: list[str] = []
    logged: list[bool] = []
    for u, v, data in graph.edges(data=True):
        if data and not data.keys() <= _PLAIN_EDGE:
            return None
        src.append(index[u])
        dst.append(index[v])
        enames.append(data.get("name", f"{u}->{v}"))
        logged.append(data.get("logged", False))
    ptr = np.zeros(len(names) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    if not all(type(e) is str for e in enames) or any(not -(2**62) < v < 2**62 for v in vals):
        return None
    if not all(type(x) is bool for x in logged):
        return None
    return _epoch_table(
        cls,
        names,
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        enames,
        np.array(logged, dtype=bool),
        np.array(less, dtype=bool),
        ptr,
        np.array(vals, dtype=np.int64),
        domain,
        notifications,
    )


#: Attributes that must be bools (a string such as ``"no"`` would read as true).
_BOOLS = {"stateless", "restartable", "logged"}


def _check_attributes(graph: Any) -> None:
    """Validate the graph's attributes as the scenario reader validates fields: unknown names (with a
    did-you-mean), bools that are not bools, ``live`` on a stateless node. ``x-`` names are annotations."""

    def check(data: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
        for key, value in data.items():
            if not isinstance(key, str) or key.startswith("x-"):
                continue
            if key not in allowed:
                raise ValidationError(
                    f"{where}: unknown attribute {key!r}{did_you_mean(key, allowed)}; known "
                    f"attributes: {', '.join(allowed)} (names starting with 'x-' are ignored)"
                )
            if key in _BOOLS and not isinstance(value, (bool, np.bool_)):
                raise ValidationError(f"{where}: attribute {key!r} must be True or False, got {value!r}")
            if key == "notifications" and value is not None and not isinstance(value, (bool, np.bool_)):
                raise ValidationError(
                    f"{where}: attribute 'notifications' must be True, False or None, got {value!r}"
                )

    for u, data in graph.nodes(data=True):
        check(data, PROCESSOR_ATTRIBUTES, f"node {u!r}")
        if data.get("stateless") and data.get("live") is not None:
            raise ValidationError(
                f"node {u!r}: a stateless processor takes no 'live' attribute (its live metadata is derived, SPEC §3); "
                "remove it, or declare the processor stateful"
            )
    for u, v, data in graph.edges(data=True):
        check(data, EDGE_ATTRIBUTES, f"edge {u!r} -> {v!r}")


def from_networkx(
    cls: type[Dataflow], graph: Any, *, domain: Any = "epoch", notifications: bool = True
) -> Dataflow:
    """A dataflow from a directed ``networkx`` graph: nodes are processors, edges are edges.

    Called as ``Dataflow.from_networkx(graph, ...)`` (``cls`` is the class
    it is called on). Node attributes are :class:`Processor` fields
    (``domain``, default ``domain``; ``stateless``, ``checkpoints`` as
    frontier encodings or :class:`Checkpoint` values, ``logs``, ``live``,
    ``arity``, ``notifications``, ``restartable``); edge attributes are
    ``name`` (default ``"u->v"``), ``projection`` (default identity) and
    ``logged``. See the module docstring.

    >>> import networkx as nx
    >>> from falkirk.solver import Dataflow, solve_frontiers
    >>> G = nx.DiGraph()
    >>> G.add_node("a", checkpoints=[3])
    >>> G.add_node("b", checkpoints=[1, 5])
    >>> G.add_edge("a", "b", logged=True)
    >>> solve_frontiers(Dataflow.from_networkx(G), failed=["a"]).to_json()["frontiers"]
    {'a': 3, 'b': 1}
    """
    if not graph.is_directed():
        raise ValidationError("from_networkx needs a directed graph (networkx.DiGraph)")
    fast = _networkx_columns(cls, graph, domain, notifications) or networkx_loops(
        cls, graph, domain, notifications
    )
    if fast is not None:  # the fast paths take only known attributes with bools where bools belong
        return fast
    _check_attributes(graph)
    logs: dict[Any, list[str]] = {u: [] for u in graph.nodes}
    edges = []
    for u, v, data in graph.edges(data=True):
        name = data.get("name", f"{u}->{v}")
        if data.get("logged", False):
            logs[u].append(name)
        edges.append(Edge(name, u, v, data.get("projection", _IDENTITY)))
    procs = []
    for u, data in graph.nodes(data=True):
        if not isinstance(u, str):
            raise ValidationError(f"node {u!r}: processor names must be strings")
        fields = {k: data[k] for k in PROCESSOR_ATTRIBUTES if k in data}
        fields.setdefault("domain", domain)
        fields["logs"] = [*fields.get("logs", ()), *logs[u]]
        fields["checkpoints"] = [
            c if isinstance(c, Checkpoint) else Checkpoint(c) for c in fields.get("checkpoints", ())
        ]
        procs.append(Processor(u, **fields))
    return cls(procs, edges, notifications=notifications)
