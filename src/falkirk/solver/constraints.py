"""The consistency constraints C1–C4 of SPEC §4, stated once (SPEC §3–§5).

For an edge ``e = (p → q)`` and an assignment of frontiers ``f`` and
notification frontiers ``n``:

* **C1 available**: ``f(p) ∈ F(p)`` (:meth:`View.available
  <falkirk.solver.model.access.View.available>`);
* **C2 discarded**: ``D_e(f(p)) ⊆ f(q)``;
* **C3 delivered**: ``M_e(f(q)) ⊆ φ_e(f(p))``, ``φ_e`` as ``q`` sees it
  (in a sequence domain: edge ``e``'s count alone, :func:`sent`);
* **C4 notifications**: ``n(p) ⊆ f(p)``, ``n(q) ⊆ φ_e(n(p))`` and
  ``N_p(f(p)) ⊆ n(p)``.

Each is a pair ``(left, right)`` that holds when ``left ⊆ right``:
:func:`c2`, :func:`c3`, :func:`c4_edge`, :func:`c4_notified` (for any
frontiers, through a :class:`~falkirk.solver.model.access.View`; what
:func:`~falkirk.solver.check_consistent` reports). The drivers of SPEC §5
(the reference round-robin, the worklist, the monitor's tracker) lower
``f(p)`` with the same constraints, read at a candidate of a stateful
processor's chain (:func:`first_violation`, :func:`last_holding`, in the
order C4, C2 by output edge, C3 by input edge that every driver's
explanations follow) or, for a stateless processor, as the symbolic bounds
of SPEC §3 (:func:`lower_stateless`: the best frontier under ``f ⊆ X`` is
``current ∩ X``; C2's ``X`` is the residual ``φ_e⁺(f(q))``).
:func:`cannot_roll_back` is the one error for a processor that runs out of
candidates. Why iterating these constraints reaches the unique greatest
consistent assignment is argued once, in :mod:`falkirk.solver.fixpoint`.

Cost: every function here is one or a few frontier comparisons (``O(1)``
in total domains, the antichains' sizes otherwise), except
:func:`last_holding` (``O(log k)`` comparisons over a chain of ``k``) and
:func:`first_violation` (``O(edges of p)``).

>>> from falkirk.domains import Frontier
>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> from falkirk.solver.model.access import View
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])], [Edge("ab", "a", "b")])
>>> view, ep = View(df, frozenset({"a"})), df.domains["a"]
>>> left, right = c3(view, "ab", {"a": ep.frontier(3), "b": Frontier.top(ep)})
>>> str(left), str(right), left <= right
('Frontier(epoch, top)', 'Frontier(epoch, 3)', False)
>>> m = df.candidates("b", failed=True)[-1]  # b's checkpoint at 1
>>> first_violation(m, None, [], [("ab", "a", right)]), first_violation(m, None, [], [("ab", "a", ep.frontier(0))])
(None, ('C3', 'ab', 'a'))
>>> err = cannot_roll_back("b", "its lowest available frontier 2", violated(("C3", "ab", "a")))
>>> isinstance(err, SolverError), str(err).endswith("2 violates C3 on ab and it is not restartable (∅ ∉ F(p))")
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from falkirk.domains import Frontier
from falkirk.errors import SolverError
from falkirk.solver.model import ResolvedCheckpoint
from falkirk.solver.model.access import View

__all__ = [
    "Why",
    "FIELDS",
    "cannot_roll_back",
    "violated",
    "sent",
    "c2",
    "c3",
    "c4_edge",
    "c4_notified",
    "first_violation",
    "last_holding",
    "lower_stateless",
]

#: A violated constraint at a candidate: ``(constraint, edge, neighbour)`` (``None`` for C4's own bound).
Why = tuple[str, str | None, str | None]

#: The metadata field of a stateful candidate each chain constraint reads: ``N_p``, ``D_e``, ``M_e``.
FIELDS: Mapping[str, str] = {"C4": "notifications", "C2": "discarded", "C3": "delivered"}


def violated(why: Why) -> str:
    """``why`` as words: ``"C3 on ab"``, ``"C4"``."""
    return f"{why[0]} on {why[1]}" if why[1] else why[0]


def cannot_roll_back(processor: str, lowest: str, violated: str) -> SolverError:
    """The error for ``processor`` whose ``lowest`` candidate still violates ``violated`` and has no ``∅``."""
    return SolverError(
        f"processor {processor!r} cannot roll back far enough: {lowest} violates {violated} and it is "
        "not restartable (∅ ∉ F(p))"
    )


# -- the constraints at any frontiers (through a View) ---------------------------------------------


def sent(view: View, receiver: str, edge: str, sender: str, f: Frontier) -> Frontier:
    """``φ_edge(f)`` for ``sender`` at ``f``, as ``receiver`` sees it (C3's and C4's bound)."""
    return view.incoming(receiver, edge, view.projection(sender, edge, f))


def c2(view: View, edge: str, f: Mapping[str, Frontier]) -> tuple[Frontier, Frontier]:
    """C2 on ``edge = (p → q)``: ``(D_e(f(p)), f(q))``; it holds when the first is inside the second."""
    e = view.df.edges[edge]
    return view.discarded(e.src, edge, f[e.src]), f[e.dst]


def c3(view: View, edge: str, f: Mapping[str, Frontier]) -> tuple[Frontier, Frontier]:
    """C3 on ``edge = (p → q)``: ``(M_e(f(q)), φ_e(f(p)))``."""
    e = view.df.edges[edge]
    return view.delivered(e.dst, edge, f[e.dst]), sent(view, e.dst, edge, e.src, f[e.src])


def c4_edge(view: View, edge: str, n: Mapping[str, Frontier]) -> tuple[Frontier, Frontier]:
    """C4 on ``edge = (p → q)``: ``(n(q), φ_e(n(p)))``."""
    e = view.df.edges[edge]
    return n[e.dst], sent(view, e.dst, edge, e.src, n[e.src])


def c4_notified(view: View, p: str, f: Frontier, n: Frontier) -> tuple[Frontier, Frontier]:
    """C4 at ``p``: ``(N_p(f(p)), n(p))`` (the third part, ``n(p) ⊆ f(p)``, compares ``n`` and ``f``
    directly)."""
    return view.notifications(p, f), n


# -- the constraints at a candidate of a chain (stateful processors) --------------------------------


def first_violation(
    m: ResolvedCheckpoint,
    notifications: Frontier | None,
    outs: Iterable[tuple[str, str, Frontier]],
    ins: Iterable[tuple[str, str, Frontier]],
) -> Why | None:
    """The first constraint the candidate ``m`` violates, or ``None``.

    ``notifications`` is ``n(p)`` (``None``: p receives none); ``outs`` lists
    ``(e, q, f(q))`` per output edge (C2), ``ins`` ``(e, u, φ_e(f(u)))`` per
    input edge (C3, :func:`sent`). Checked in that order: C4, C2, C3.
    """
    if notifications is not None and not m.notifications <= notifications:
        return ("C4", None, None)
    for e, q, fq in outs:
        if not m.discarded[e] <= fq:
            return ("C2", e, q)
    for e, u, bound in ins:
        if not m.delivered[e] <= bound:
            return ("C3", e, u)
    return None


def last_holding(
    cands: Sequence[ResolvedCheckpoint],
    constraint: str,
    edge: str | None,
    limit: Frontier,
    hi: int,
    subset: Callable[[Frontier, Frontier], bool] = Frontier.issubset,
) -> int:
    """The largest ``j <= hi`` at which ``constraint`` holds for ``cands[j]`` against ``limit``; ``-1`` if
    none.

    ``constraint`` is ``"C4"`` (``N_p ⊆ n(p)``), ``"C2"`` (``D_edge ⊆ f(q)``) or
    ``"C3"`` (``M_edge ⊆ φ``). Metadata are monotone along the chain, so the
    candidates where it holds are a prefix: a binary search finds its end
    (one comparison when ``cands[hi]`` holds). ``subset`` is ``⊆`` (a faster
    one for total domains may be passed).
    """
    fld = FIELDS[constraint]

    def ok(j: int) -> bool:
        value = getattr(cands[j], fld)
        return subset(value if edge is None else value[edge], limit)

    if ok(hi):
        return hi
    lo, hi = 0, hi - 1  # answer in [lo - 1, hi]
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid + 1
        else:
            hi = mid - 1
    return hi


# -- the constraints as symbolic bounds (stateless processors, SPEC §3) ------------------------------


def lower_stateless(
    current: Frontier,
    notifications: Frontier | None,
    outs: Iterable[tuple[str, str, Frontier]],
    ins: Iterable[tuple[str, str, Frontier]],
    note: Callable[[str, Frontier, Frontier, str | None, str | None], None],
) -> Frontier:
    """The best frontier of a stateless processor below ``current``: ``current ∩ X`` for every bound ``f ⊆
    X``.

    ``notifications`` is ``n(p)`` (C4; ``None`` when p receives none);
    ``outs`` lists ``(e, q, φ_e⁺(f(q)))`` for each output edge p does not log
    (C2: the residual, :meth:`~falkirk.solver.model.access.View.residual`); ``ins``
    lists ``(e, u, φ_e(f(u)))`` for each input edge (C3: ``M_e(f) = f``).
    Every bound that lowers the frontier is reported as ``note(constraint,
    before, after, edge, neighbour)``, in that order.
    """
    cur = current
    if notifications is not None:
        nxt = cur & notifications
        if nxt != cur:
            note("C4", cur, nxt, None, None)
            cur = nxt
    for constraint, bounds in (("C2", outs), ("C3", ins)):
        for e, nb, bound in bounds:
            nxt = cur & bound
            if nxt != cur:
                note(constraint, cur, nxt, e, nb)
                cur = nxt
    return cur
