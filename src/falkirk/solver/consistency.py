"""Checking a proposed assignment of frontiers against C1–C4 (SPEC §4).

For schedulers that pick frontiers their own way. The constraints are the
ones of :mod:`falkirk.solver.constraints`, read at the given frontiers;
this module only words the violations.

>>> from falkirk.solver import Dataflow, Edge, Processor, Checkpoint, check_consistent
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch", checkpoints=[Checkpoint(1)])],
...               [Edge("ab", "a", "b")])
>>> [v.constraint for v in check_consistent(df, {"a": 3, "b": "top"}, failed=["a"])]
['C3', 'C4']
>>> check_consistent(df, {"a": 3, "b": "top"}, failed=["a"])[0]
Violation(constraint='C3', processor='b', edge='ab', message="b keeps messages on 'ab' up to top, beyond φ(f(a)) = 3")
>>> check_consistent(df, {"a": 3, "b": 1}, failed=["a"])
[]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from attrs import frozen

from falkirk.domains import Frontier
from falkirk.errors import UnknownNameError
from falkirk.solver.constraints import c2, c3, c4_edge, c4_notified
from falkirk.solver.model import Dataflow
from falkirk.solver.model.access import View, normalise_failed
from falkirk.solver.model.resolve import coerce

__all__ = ["Violation", "check_consistent", "greatest_notification_frontiers"]


@frozen
class Violation:
    """One violated constraint: which, where, and a readable message."""

    constraint: str
    processor: str
    edge: str | None
    message: str


def _enc(f: Frontier) -> str:
    from falkirk.domains.encoding import encode_frontier

    return str(encode_frontier(f))


def greatest_notification_frontiers(view: View, f: Mapping[str, Frontier]) -> dict[str, Frontier]:
    """The largest ``n`` with ``n(p) ⊆ f(p)`` and ``n(q) ⊆ φ_e(n(p))`` on every edge."""
    df = view.df
    n = dict(f)
    changed = True
    while changed:
        changed = False
        for q in df.processors:
            new = n[q]
            for e in df.inputs[q]:
                new = new & c4_edge(view, e, n)[1]
            if new != n[q]:
                n[q] = new
                changed = True
    return n


def check_consistent(
    dataflow: Dataflow,
    frontiers: Mapping[str, Any],
    *,
    failed: Iterable[str] | str = (),
    notification_frontiers: Mapping[str, Any] | None = None,
) -> list[Violation]:
    """Every violated constraint of the assignment ``frontiers`` (empty when consistent).

    ``frontiers`` maps every processor to a frontier (or its encoding). When
    ``notification_frontiers`` is omitted, C4 is checked with the largest
    notification frontiers the assignment allows, i.e. it asks whether *some*
    ``n`` makes the assignment consistent.

    Cost: ``O(V + E)`` constraint checks, plus, without
    ``notification_frontiers``, the fixed point that finds the largest ``n``.
    """
    view = View(dataflow, normalise_failed(dataflow, failed))
    missing = sorted(set(dataflow.processors) - set(frontiers))
    extra = sorted(set(frontiers) - set(dataflow.processors))
    if missing or extra:
        raise UnknownNameError(f"frontiers must name every processor: missing {missing}, unknown {extra}")
    f = {p: coerce(dataflow.domains[p], v, f"frontiers[{p!r}]") for p, v in frontiers.items()}
    out: list[Violation] = []
    for p in dataflow.processors:
        if not view.available(p, f[p]):
            out.append(Violation("C1", p, None, f"{p} at {_enc(f[p])} is not an available frontier"))
    if out:
        return out
    if notification_frontiers is None:
        n = greatest_notification_frontiers(view, f)
    else:
        n = {
            p: coerce(dataflow.domains[p], v, f"notification_frontiers[{p!r}]")
            for p, v in notification_frontiers.items()
        }
    for e, edge in dataflow.edges.items():
        p, q = edge.src, edge.dst
        d, fq = c2(view, e, f)
        if not d <= fq:
            out.append(
                Violation(
                    "C2",
                    p,
                    e,
                    f"{p} discarded messages on {e!r} up to {_enc(d)}, beyond f({q}) = {_enc(fq)}",
                )
            )
        m, phi = c3(view, e, f)
        if not m <= phi:
            out.append(
                Violation(
                    "C3", q, e, f"{q} keeps messages on {e!r} up to {_enc(m)}, beyond φ(f({p})) = {_enc(phi)}"
                )
            )
        if notification_frontiers is not None:
            nq, bound = c4_edge(view, e, n)
            if not nq <= bound:
                out.append(
                    Violation("C4", q, e, f"n({q}) = {_enc(nq)} is not inside φ(n({p})) = {_enc(bound)}")
                )
    for p in dataflow.processors:
        if notification_frontiers is not None and not n[p] <= f[p]:
            out.append(Violation("C4", p, None, f"n({p}) = {_enc(n[p])} is not inside f({p}) = {_enc(f[p])}"))
        notes, np_ = c4_notified(view, p, f[p], n[p])
        if not notes <= np_:
            out.append(
                Violation(
                    "C4",
                    p,
                    None,
                    f"{p} delivered notifications up to {_enc(notes)}, beyond n({p}) = {_enc(np_)}",
                )
            )
    return out
