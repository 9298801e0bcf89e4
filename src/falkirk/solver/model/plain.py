"""Processors whose checkpoints are bare frontiers, checked without resolving them (SPEC §3, §9).

Most processors of a large job report only *where* they checkpointed: every
checkpoint gives its frontier and nothing else, the live metadata are the
defaults, and every output edge is an identity edge. In a totally ordered
domain every resolved field of such a checkpoint is then its frontier, the
empty frontier or ``⊤`` (SPEC §9's safe defaults), so the chain is valid
exactly when the frontiers, leaving out repeats of the one before, strictly
increase; monotonicity follows. :func:`plain_chain` checks that much and
nothing more, so :class:`~falkirk.solver.model.Dataflow` can resolve such a
processor only when something reads its metadata
(:func:`~falkirk.solver.model.resolve.resolve_processor`, the same code and
result as before). Whatever it does not accept — other fields, other
projections, a partial order, an invalid chain — is resolved at once, which
raises the same errors as ever.

Epoch, ``product`` and ``lexicographic`` processors are checked in bulk, as
columns, by :mod:`falkirk.solver.model.deferred` (which also accepts
functional output projections); :func:`plain_chain` serves the other
totally ordered domains (user domains) one processor at a time.

Cost: ``O(k + edges of p)`` for ``k`` checkpoints, one comparison each, and
no frontier objects for epoch checkpoints given as integers.

>>> from falkirk.solver.model import Checkpoint, Dataflow, Processor
>>> df = Dataflow([Processor("a", "epoch", checkpoints=[Checkpoint(1), Checkpoint(1), Checkpoint(4)])], [])
>>> plain_chain(df, "a")
[1, 4]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from falkirk.domains import Epoch, Frontier, Identity, Sequence
from falkirk.errors import FalkirkError
from falkirk.solver.model.elements import Checkpoint
from falkirk.solver.model.resolve import coerce

if TYPE_CHECKING:
    from falkirk.solver.model.dataflow import Dataflow

__all__ = ["plain_chain", "is_plain"]


def is_plain(ck: Any) -> bool:
    """Whether ``ck`` is a :class:`Checkpoint` that gives its frontier and nothing else."""
    return (
        type(ck) is Checkpoint
        and ck.notifications is None
        and ck.state is None
        and not ck.delivered
        and not ck.discarded
        and not ck.projection
        and not ck.logged
    )


def plain_chain(df: Dataflow, name: str) -> list[Any] | None:
    """The distinct checkpoint keys of processor ``name``, ascending, or ``None``.

    ``None`` unless the processor's chain is valid and its metadata are all
    defaults (see the module docstring); the keys are epochs in the
    ``epoch`` domain and frontiers otherwise. ``None`` never means invalid,
    only "resolve it to find out".
    """
    p = df.processors[name]
    dom = df.domains[name]
    if p.live is not None or not dom.is_total or isinstance(dom, Sequence):
        return None
    for e in df.outputs[name]:
        b = df.bound[e]
        if b.recorded or type(b.spec) is not Identity:
            return None
    if type(dom) is Epoch:
        return _epochs(p.checkpoints)
    keys: list[Frontier] = []
    try:
        for ck in p.checkpoints:
            if not is_plain(ck):
                return None
            f = coerce(dom, ck.frontier, "")
            if not f.antichain:
                return None  # ⊤ is refused
            if keys and f == keys[-1]:
                continue  # the same checkpoint again: one checkpoint
            if not (Frontier.empty(dom) if not keys else keys[-1]) < f:
                return None  # ∅ again, or not increasing: refused by the full resolution
            keys.append(f)
    except FalkirkError:
        return None
    return keys


def _epochs(checkpoints: tuple[Checkpoint, ...]) -> list[Any] | None:
    out: list[int] = []
    last = -1  # ∅
    for ck in checkpoints:
        if not is_plain(ck):
            return None
        k = ck.frontier
        if type(k) is not int:
            return None  # a Frontier, "top", "empty"…: the full resolution decides
        if k == last and out:
            continue
        if k <= last:
            return None
        out.append(k)
        last = k
    return out
