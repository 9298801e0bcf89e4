"""How edges transform times, and what that means for progress and projections.

The simulator's processors live in one of two time domains: ``"epoch"``
(:class:`~falkirk.domains.Epoch`) or ``"loop"`` (``product(2)``: Naiad's
``(epoch, iteration)``). A processor sends at the time of the event it is
handling; the edge then transforms that time into the receiver's domain:

============  ===============  ================  ===============================
transform     sender → receiver  time             falkirk projection ``φ_e``
============  ===============  ================  ===============================
``identity``  same domain      ``t ↦ t``         :class:`~falkirk.domains.Identity`
``enter``     epoch → loop     ``e ↦ (e, 0)``    :class:`~falkirk.domains.EpochToLoop`
``feedback``  loop → loop      ``(e,i) ↦ (e,i+1)``  :data:`LOOP_FEEDBACK` (exact, with residual)
``leave``     loop → epoch     ``(e,i) ↦ e``     :data:`LOOP_EXIT` (safe; not exact)
``sequence``  epoch/sequence   the ``n``-th       :class:`~falkirk.domains.EpochToSequence` /
              → sequence       message is         :class:`~falkirk.domains.SequenceCount`
                               ``(edge, n)``      (recorded at each checkpoint)
============  ===============  ================  ===============================

A ``"sequence"`` processor (SPEC §7) has one time per message it receives;
its domain is :class:`~falkirk.domains.Sequence` over its input edges, and
the simulator numbers the messages of each such edge itself.

A **summary** (timely dataflow's path summary) is the composition of the
transforms along a path; it maps a time at the start of the path to the least
time it can produce at the end (processors send at their own time or later).
It is ``("epoch",)`` into an epoch processor, or ``("loop", keep, add)``
into a loop processor: ``i' = (i if keep else 0) + add``.

>>> from falkirk.domains import Epoch, Product
>>> FEEDBACK.apply((3, 1)), LEAVE.apply((3, 1)), ENTER.apply(3)
((3, 2), 3, (3, 0))
>>> s = compose(identity_summary("epoch"), ENTER)      # entering a loop...
>>> s = compose(s, FEEDBACK)                           # ...and going round once
>>> s, apply_summary(s, 4)
(('loop', False, 1), (4, 1))
>>> LOOP_FEEDBACK.bind(Product(2), Product(2), "fb").apply(Frontier.below(Product(2), (0, 3)))
Frontier(product(2), before=[(0, 4)])
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from falkirk.domains import (
    Epoch,
    EpochToLoop,
    EpochToSequence,
    Frontier,
    FunctionProjection,
    Identity,
    Product,
    SequenceCount,
)
from falkirk.domains.base import Domain
from falkirk.errors import ValidationError

__all__ = [
    "Transform",
    "IDENTITY",
    "ENTER",
    "FEEDBACK",
    "LEAVE",
    "SEQUENCE",
    "TRANSFORMS",
    "KINDS",
    "domain_of",
    "LOOP_FEEDBACK",
    "LOOP_EXIT",
    "Summary",
    "identity_summary",
    "compose",
    "apply_summary",
    "summary_le",
]

#: The simulator's domain kinds and their falkirk domains.
KINDS: dict[str, Domain] = {"epoch": Epoch(), "loop": Product(2)}

Summary = tuple[Any, ...]


def domain_of(kind: str) -> Domain:
    """The falkirk domain of a processor kind (``"epoch"`` or ``"loop"``; not ``"sequence"``)."""
    try:
        return KINDS[kind]
    except KeyError:
        raise ValidationError(
            f"unknown simulator domain {kind!r}; use 'epoch', 'loop' or 'sequence'"
        ) from None


# -- loop projections -------------------------------------------------------------
_LOOP = Product(2)
_EPOCH = Epoch()


def _feedback(f: Frontier) -> Frontier:
    """``φ(f) = f ∪ {(e, i+1) : (e, i) ∈ f}``: exact for the feedback edge, and ``φ(∅) = ∅``."""
    if f.is_top:
        return f
    anti = [(a, b + 1) for a, b in f.antichain] + [(a, 0) for a, b in f.antichain if b == 0]
    return Frontier.before(_LOOP, anti)


def _feedback_residual(y: Frontier) -> Frontier:
    """Largest ``f`` with ``_feedback(f) ⊆ y``: ``y ∩ {t : t + (0, 1) ∈ y}``."""
    if y.is_top:
        return y
    return Frontier.before(_LOOP, [(a, max(b - 1, 0)) for a, b in y.antichain])


def _exit(f: Frontier) -> Frontier:
    """``φ(f)`` = the epochs whose every iteration is in ``f`` (safe for leaving a loop)."""
    if f.is_top:
        return Frontier.top(_EPOCH)
    return Frontier(_EPOCH, (min(a for a, _ in f.antichain),))


def _exit_residual(y: Frontier) -> Frontier:
    """The largest *whole-epoch* frontier whose projection is inside ``y``.

    Safe (``_exit(result) ⊆ y``); there is no largest frontier in general
    (every ``before((0, k))`` projects to ``∅``), which is why a stateless
    processor may not leave a loop on an edge it does not log.
    """
    if y.is_top:
        return Frontier.top(_LOOP)
    return Frontier.below(_LOOP, (y.antichain[0], 0))


#: Projection of a feedback edge ``(e, i) ↦ (e, i + 1)``.
LOOP_FEEDBACK = FunctionProjection(_feedback, _feedback_residual, _LOOP, _LOOP, "loop_feedback")
#: Projection of an edge leaving a loop ``(e, i) ↦ e``.
LOOP_EXIT = FunctionProjection(_exit, _exit_residual, _LOOP, _EPOCH, "loop_exit")


# -- transforms -------------------------------------------------------------------
@frozen
class Transform:
    """An edge's time transform: its name, the domain kinds it joins, and its projection."""

    name: str
    source: str | None  # None: any kind (identity)
    target: str | None

    def apply(self, t: Any) -> Any:
        """The receiver's time of a message sent at sender time ``t`` (not for ``sequence``)."""
        if self.name == "enter":
            return (t, 0)
        if self.name == "feedback":
            return (t[0], t[1] + 1)
        if self.name == "leave":
            return t[0]
        return t

    def projection(self, src_kind: str = "epoch") -> Any:
        """The falkirk projection that describes this edge."""
        if self.name == "sequence":
            return EpochToSequence() if src_kind == "epoch" else SequenceCount()
        return {
            "identity": Identity(),
            "enter": EpochToLoop(),
            "feedback": LOOP_FEEDBACK,
            "leave": LOOP_EXIT,
        }[self.name]

    def check(self, edge: str, src_kind: str, dst_kind: str) -> None:
        """Reject an edge whose endpoint domains do not fit the transform."""
        if self.name == "sequence" or "sequence" in (src_kind, dst_kind):
            if self.name != "sequence" or dst_kind != "sequence" or src_kind == "loop":
                raise ValidationError(
                    f"edge {edge!r}: sequence processors receive only on 'sequence' edges, from epoch "
                    f"or sequence processors, and send only to sequence processors ({src_kind} to "
                    f"{dst_kind} with {self.name!r})"
                )
            return
        want_src = self.source or dst_kind
        want_dst = self.target or src_kind
        if (src_kind, dst_kind) != (want_src, want_dst) or (self.source is None and src_kind != dst_kind):
            raise ValidationError(
                f"edge {edge!r}: transform {self.name!r} joins a {want_src} processor to a "
                f"{want_dst} processor, not {src_kind} to {dst_kind}"
            )


IDENTITY = Transform("identity", None, None)
ENTER = Transform("enter", "epoch", "loop")
FEEDBACK = Transform("feedback", "loop", "loop")
LEAVE = Transform("leave", "loop", "epoch")
SEQUENCE = Transform("sequence", None, "sequence")
TRANSFORMS: dict[str, Transform] = {t.name: t for t in (IDENTITY, ENTER, FEEDBACK, LEAVE, SEQUENCE)}


# -- summaries ----------------------------------------------------------------------
def identity_summary(kind: str) -> Summary:
    """The summary of the empty path at a processor of ``kind``."""
    return ("epoch",) if kind == "epoch" else ("loop", True, 0)


def compose(s: Summary, t: Transform) -> Summary:
    """The summary of a path ``s`` followed by an edge with transform ``t``."""
    if t.name == "enter":
        return ("loop", False, 0)
    if t.name == "leave":
        return ("epoch",)
    if t.name == "feedback":
        return ("loop", s[1], s[2] + 1)
    return s


def apply_summary(s: Summary, t: Any) -> Any:
    """The least time a path with summary ``s`` can produce from time ``t``."""
    if s[0] == "epoch":
        return t if isinstance(t, int) else t[0]
    if isinstance(t, int):
        return (t, s[2])
    return (t[0], (t[1] if s[1] else 0) + s[2])


def summary_le(a: Summary, b: Summary) -> bool:
    """Whether ``a`` produces no later times than ``b`` from every start time."""
    if a[0] == "epoch":
        return True
    if a[1] and not b[1]:
        return False
    return bool(a[2] <= b[2])
