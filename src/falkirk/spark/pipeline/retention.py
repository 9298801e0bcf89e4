"""How much garbage collection keeps beyond the low-watermarks: :class:`Retain`.

Without retention, garbage collection keeps exactly what a rollback to the
*latest* checkpoints needs (SPEC §6): each step's checkpoint at its
low-watermark, the logs and the input after it. If that checkpoint then
turns out corrupt or deleted, no older one is left and the input before it
is gone — the pipeline is lost.

``Retain(checkpoints=r)`` collects instead below the **retained
low-watermarks**: the low-watermarks solved as if every stateful step had
lost its ``r - 1`` newest checkpoints. By monotonicity of the solution
(adding checkpoints never lowers it), any loss of at most ``r - 1`` of the
newest checkpoints of every step still leaves a consistent rollback whose
checkpoints, logs and input garbage collection kept. ``r = 1`` is the plain
low-watermark; the default keeps one older checkpoint (``r = 2``), so a step
may hold more than ``r`` checkpoints when its neighbours checkpoint less
often. ``Retain(epochs=k)`` additionally keeps ``k`` more epochs of every
input log.

>>> Retain.of(3), Retain.of(None)
(Retain(checkpoints=3, epochs=0), Retain(checkpoints=2, epochs=0))
>>> Retain(checkpoints=0)
Traceback (most recent call last):
...
falkirk.spark.errors.PipelineError: Retain: checkpoints=0 must be an integer >= 1
>>> needed_retention({"cc": [3]}, {"cc": [1, 5]})
{'cc': 3}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attrs import field, frozen

from falkirk.spark.errors import PipelineError

__all__ = ["Retain", "needed_retention"]


def _at_least(low: int) -> Any:
    def check(instance: object, attribute: Any, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise PipelineError(f"Retain: {attribute.name}={value!r} must be an integer >= {low}")

    return check


@frozen
class Retain:
    """What garbage collection keeps beyond the low-watermarks (see the module docstring).

    ``checkpoints``: survive the loss of the ``checkpoints - 1`` newest
    checkpoints of every step (default 2); ``epochs``: epochs of every input
    log kept beyond what that needs (default 0).
    """

    checkpoints: int = field(default=2, validator=_at_least(1))
    epochs: int = field(default=0, validator=_at_least(0), kw_only=True)

    @classmethod
    def of(cls, value: int | Retain | None) -> Retain:
        """``value`` as a :class:`Retain` (an int is a number of checkpoints; ``None`` the default)."""
        if value is None:
            return cls()
        if isinstance(value, Retain):
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise PipelineError(f"retain={value!r}: expected a number of checkpoints (int >= 1) or a Retain(...)")
        return cls(value)

    def __str__(self) -> str:
        return f"Retain(checkpoints={self.checkpoints}" + (f", epochs={self.epochs})" if self.epochs else ")")


def needed_retention(dropped: Mapping[str, Sequence[int]], available: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """Per step, the ``Retain(checkpoints=…)`` that survives losing the ``dropped`` checkpoint epochs.

    ``available`` holds the step's checkpoints that are still usable. A lost
    checkpoint that is the ``k``-th newest needs ``k + 1``.
    """
    out = {}
    for step, lost in dropped.items():
        if not lost:
            continue
        every = sorted(set(lost) | set(available.get(step, ())))
        out[step] = max(sum(1 for c in every if c >= e) for e in lost) + 1
    return out
