"""Flink's unaligned checkpoints (seed 001, FLIP-76) as a falkirk scheme: ``flink-unaligned``.

An unaligned checkpoint lets the barrier overtake the buffered records, so
the checkpoint of a task holds its operator state **and** the in-flight
records of its channels (input buffers and output buffers). In falkirk
terms (SPEC §8, "unaligned checkpoint"):

==============================  ==============================================
Flink                           falkirk
==============================  ==============================================
operator snapshot at barrier    ``S_p(f)`` at a settled frontier (``Lazy``,
                                ``Eager``), ``N``/``M_e`` recorded with it
in-flight channel data          every output edge is **logged** (``logs="*"``):
                                ``L_e(f(p))`` minus what ``f(q)`` consumed is
                                exactly the data between the two barriers
sequence numbers of buffers     ``sequence`` domains and projections where the
                                graph has them (the simulator's sequence tail)
replayable source (offsets)     :class:`~falkirk.sim.policies.Batch`: a
                                stateless source that logs what it emitted
two-phase-commit sink           :class:`~falkirk.sim.policies.Commit`
restored data first             SPEC §6 reset: the queue of ``e`` becomes the
                                kept messages, then ``L_e(f(p))`` outside
                                ``f(q)``; new input is appended after them
==============================  ==============================================

Because every edge is logged, ``D_e = ∅``: C2 never forces a receiver back
because of its sender, and a failure rolls back only the failed tasks and
what C3 drags along — the point of unaligned checkpoints (no alignment, no
global rollback of healthy tasks is *needed*; Flink still restarts the
region, falkirk shows the smaller rollback is enough).

The scheme applies to graphs **without loops** (``case_options``): Flink's
unaligned checkpoints are not available for iterations (a feedback edge's
in-flight data would have to be logged forever; the seed only treats acyclic
exchanges), while sequence-numbered tails and non-deterministic operators
are fine — logged in-flight data is replayed verbatim, so a re-executed
sender is never asked to reproduce it. Rescaling on recovery (key groups,
forward channels, FLINK-38267) is modelled separately in
:mod:`falkirk.sim.rescale`, since the simulator has no parallel instances.

>>> from falkirk.sim.cases import RandomChooser, build_case, check_case
>>> case = build_case(RandomChooser(4), scheme=FLINK_UNALIGNED)
>>> sorted({type(n.policy).__name__ for n in case.graph.nodes.values()})
['Batch', 'Commit', 'Lazy']
>>> all(n.policy.logs == "*" for n in case.graph.nodes.values() if type(n.policy).__name__ != "Commit")
True
>>> check_case(case).ok
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from falkirk.sim.policies import Batch, Commit, Eager, Lazy, Policy
from falkirk.sim.schemes.base import Role, Scheme

if TYPE_CHECKING:
    from falkirk.sim.choices import Chooser

__all__ = ["FLINK_UNALIGNED", "flink_unaligned_policy"]


def flink_unaligned_policy(c: Chooser, role: Role) -> Policy:
    """Snapshots with all in-flight data logged; replayable sources; a committing sink.

    >>> from falkirk.sim.cases import RandomChooser
    >>> from falkirk.sim.operators import Sum
    >>> flink_unaligned_policy(RandomChooser(0), Role("sum", Sum(), ("e1",))).logs
    '*'
    """
    if role.is_output:
        return Commit(every=c.integer(1, 2))
    if role.is_source:
        return Batch(every=c.integer(1, 2))
    if c.boolean():
        return Eager(logs="*")
    return Lazy(logs="*", every=c.integer(1, 3))


#: Flink unaligned checkpoints (seed 001): snapshots plus logged in-flight data, no loops.
FLINK_UNALIGNED = Scheme(
    "flink-unaligned",
    "Flink unaligned checkpoints: snapshots plus in-flight channel data (seed 001, FLIP-76)",
    flink_unaligned_policy,
    case_options={"loops": False},
)
