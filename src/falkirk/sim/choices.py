"""The decisions a random simulator case is drawn from, and the policy an operator allows.

* :class:`Chooser` — where a generator's decisions come from (integers,
  choices, booleans; smaller and earlier are simpler, so cases shrink);
  :class:`RandomChooser` draws them from a seeded ``random.Random``, and
  ``falkirk.testing.sim_strategies`` from hypothesis;
* :func:`policy_for` — a random policy among those an operator allows.

Both the case generator (:mod:`falkirk.sim.cases`) and the recovery schemes
(:mod:`falkirk.sim.schemes`) build on these; this module imports neither.

>>> from falkirk.sim.operators import Sum
>>> type(policy_for(RandomChooser(0), Sum(), ["e1"])).__name__ in ("Lazy", "Eager", "HistoryLog", "Never")
True
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from falkirk.sim.operators import Operator
from falkirk.sim.policies import Batch, Eager, Ephemeral, HistoryLog, Lazy, Never, Policy, WrongLog

__all__ = ["Chooser", "RandomChooser", "policy_for"]

T = TypeVar("T")


class Chooser:
    """Where the generator's decisions come from (override the three methods)."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``lo..hi`` (inclusive); smaller is simpler."""
        raise NotImplementedError

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options``; earlier is simpler."""
        return options[self.integer(0, len(options) - 1)]

    def boolean(self) -> bool:
        """``False`` is simpler."""
        return bool(self.integer(0, 1))


class RandomChooser(Chooser):
    """Decisions from ``random.Random(seed)``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


def policy_for(
    c: Chooser, op: Operator, outputs: Sequence[str], *, stateless_ok: bool = True, broken: bool = False
) -> Policy:
    """A policy ``op`` allows, with random ``every`` and logging of ``outputs``.

    ``broken``: stateless operators may also get :class:`~falkirk.sim.policies.WrongLog`.
    """
    logs = [e for e in outputs if c.integer(0, 2) == 2]
    every = c.integer(1, 3)
    kinds: list[str] = ["Lazy", "Eager", "HistoryLog", "Never"]
    if op.stateless and stateless_ok:
        kinds = ["Ephemeral", "Batch"] + kinds + (["WrongLog"] if broken else [])
    kind = c.choice(kinds)
    if kind == "WrongLog":
        return WrongLog(claims=outputs)
    if kind == "Ephemeral":
        return Ephemeral(logs=logs, every=every)
    if kind == "Batch":
        return Batch(every=every)
    if kind == "Lazy":
        return Lazy(logs=logs, every=every)
    if kind == "Eager":
        return Eager(logs=logs)
    if kind == "HistoryLog":
        return HistoryLog(logs=logs, every=every)
    return Never(logs=logs)
