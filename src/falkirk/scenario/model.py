"""The :class:`Scenario` value: a dataflow plus the processors that failed.

>>> from falkirk.solver import Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch"), Processor("b", "epoch")], [Edge("ab", "a", "b")])
>>> s = Scenario(df, failed=["a"])
>>> s.failed, s.notifications
(frozenset({'a'}), True)
>>> s.solve().actions
{'a': 'restart', 'b': 'rollback'}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from attrs import cmp_using, field, frozen

from falkirk.errors import UnknownNameError
from falkirk.solver import Dataflow, RollbackPlan, solve_frontiers
from falkirk.solver.dispatch import Strategy

__all__ = ["Scenario"]


def _failed(value: Iterable[str] | str) -> frozenset[str] | Literal["all"]:
    if value == "all":
        return "all"
    if isinstance(value, str):
        return frozenset([value])
    return frozenset(value)


def _same_dataflow(a: Dataflow, b: Dataflow) -> bool:
    return (
        a is b
        or list(a.processors.values()) == list(b.processors.values())
        and list(a.edges.values()) == list(b.edges.values())
        and a.system_notifications == b.system_notifications
    )


@frozen
class Scenario:
    """A dataflow, its checkpoint metadata and the failures to recover from (SPEC §9).

    ``failed`` is a frozenset of processor names, or ``"all"`` to ask for
    low-watermarks (SPEC §6). Two scenarios are equal when they declare the
    same processors, edges, failures and notification convention.
    """

    dataflow: Dataflow = field(eq=cmp_using(eq=_same_dataflow), hash=False)
    failed: frozenset[str] | Literal["all"] = field(default=frozenset(), converter=_failed)

    def __attrs_post_init__(self) -> None:
        if self.failed != "all":
            unknown = [n for n in sorted(self.failed) if n not in self.dataflow.processors]
            if unknown:
                raise UnknownNameError(f"failed names unknown processor(s) {unknown}")

    @property
    def notifications(self) -> bool:
        """Whether the system has notifications (``False`` for ``"notifications": false``)."""
        return bool(self.dataflow.system_notifications)

    @property
    def failed_names(self) -> list[str]:
        """The failed processors, in declaration order (every one for ``"all"``)."""
        names = self.dataflow.processors
        return [n for n in names if self.failed == "all" or n in self.failed]

    def solve(self, *, strategy: Strategy = "auto") -> RollbackPlan:
        """The rollback plan: :func:`falkirk.solver.solve_frontiers` on this scenario (same ``strategy``)."""
        return solve_frontiers(self.dataflow, self.failed, strategy=strategy)
