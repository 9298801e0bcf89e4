"""What a recovery *scheme* is: a named rule that gives every simulated processor its policy.

A scheme (Quokka's lineage recovery, Flink's unaligned checkpoints, DBSP's
input logging …) is not one policy but a way of choosing one for each
processor of a graph. :class:`Scheme` captures that as a function from a
node's role to a :class:`~falkirk.sim.policies.Policy`, plus the case
options under which the scheme applies (a scheme that cannot express loops
says ``loops=False``). :func:`falkirk.sim.cases.build_case` takes a
``scheme=`` and the fuzzer a ``--scheme``; the default, :data:`FALKIRK`, is
falkirk's own mix of per-processor policies.

>>> from falkirk.sim.cases import RandomChooser, build_case, check_case
>>> case = build_case(RandomChooser(3), scheme=FALKIRK)
>>> check_case(case).ok
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from attrs import field, frozen

from falkirk.sim.choices import Chooser, policy_for
from falkirk.sim.operators import Operator, Output, Source
from falkirk.sim.policies import Batch, Commit, Ephemeral, Policy

__all__ = ["Role", "Scheme", "FALKIRK", "falkirk_policy"]


@frozen
class Role:
    """Where a processor sits: its name, operator, output edges, domain, and what it may be.

    ``stateless_ok`` is false where a stateless policy cannot be expressed
    (a processor leaving a loop or feeding a sequence domain, SPEC §3).
    ``final_ok`` is false where an output may not commit finally
    (``Commit(final=True)``: a non-deterministic operator upstream, or the
    case does not draw final outputs).
    """

    name: str
    op: Operator
    outputs: tuple[str, ...]
    domain: str = "epoch"
    stateless_ok: bool = True
    final_ok: bool = False

    @property
    def is_source(self) -> bool:
        """The processor reads external input."""
        return isinstance(self.op, Source)

    @property
    def is_output(self) -> bool:
        """The processor hands records to an external service."""
        return isinstance(self.op, Output)


def _options(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


@frozen
class Scheme:
    """A named recovery scheme: ``policy(chooser, role)`` gives each processor's policy.

    ``case_options`` restrict :func:`~falkirk.sim.cases.build_case` to the
    graphs the scheme handles (e.g. ``{"loops": False}``).
    """

    name: str
    title: str
    policy: Callable[[Chooser, Role], Policy]
    case_options: dict[str, Any] = field(factory=dict, converter=_options)

    def describe(self) -> str:
        """``name: title``."""
        return f"{self.name}: {self.title}"


def falkirk_policy(c: Chooser, role: Role, *, broken: bool = False) -> Policy:
    """falkirk's own mix: any policy the operator allows, chosen at random per processor."""
    if role.is_output:
        every = c.integer(1, 2)
        return Commit(every=every, final=role.final_ok and c.boolean())
    if role.is_source:
        return c.choice([Ephemeral(every=c.integer(1, 2)), Batch()])
    return policy_for(c, role.op, role.outputs, stateless_ok=role.stateless_ok, broken=broken)


#: falkirk's mixed per-processor policies (the default scheme).
FALKIRK = Scheme("falkirk", "falkirk's mixed per-processor policies", falkirk_policy)
