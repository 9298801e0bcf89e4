"""The advisor's search: the assignment of regimes with the least predicted total cost.

Young's/Daly's ``k* = √(2·C/(λ_s·w))`` per stateful step is the start; with at
most :data:`EXHAUSTIVE` steps that have a choice, every pattern of their
structural choices (which steps log, which keyed steps are incremental) is
evaluated with Young's spacings, and the best patterns are polished by
coordinate descent over every choice; beyond, coordinate descent from the
current assignment and from Young's. The current assignment is always a
candidate, so the advice is never predicted worse than it. Every assignment
is priced by the cost model (:class:`~falkirk.spark.pipeline.plan.advisor.Model`).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping

import numpy as np

from falkirk.spark.pipeline.declare.regimes import Keyed, Lazy, Regime
from falkirk.spark.pipeline.plan.advisor import Evaluation, Model

__all__ = ["search", "EXHAUSTIVE"]

#: At most this many steps with a choice: every structural pattern is evaluated.
EXHAUSTIVE = 8
#: Coordinate descent prices the trials of at most this many steps in one closure call (see :func:`search`).
AHEAD = 8
#: Coordinate-descent passes at most (each pass tries every choice of every step once).
PASSES = 4


def _objective(
    model: Model, ev: Evaluation, rate: float, budget: float | None, penalty: float = 0.0
) -> np.ndarray:
    """The predicted total, plus ``penalty`` per (step, failure kind) of a domino (the search removes dominoes
    one by one before it compares costs); ``inf`` over the storage budget."""
    total = ev.steady + ev.expected(rate)
    if penalty:
        total = total + penalty * ev.domino.sum(axis=(0, 2))
    return np.where(ev.steady_bytes <= budget, total, np.inf) if budget is not None else total


def search(
    model: Model,
    rate: float,
    *,
    storage_budget: float | None = None,
    accepted_only: bool = False,
    allow_domino: bool = False,
) -> tuple[dict[str, Regime], list[tuple[float, float]], str]:
    """The assignment with the least predicted total (see the module docstring; unless ``allow_domino``, among
    those that set off no domino, :meth:`Model.price`); the (steady, expected recovery) points of every
    assignment evaluated; the search used, in words."""
    steps = list(model.pipeline.steps)
    choices = {n: model.choices(n, rate, accepted_only=accepted_only) for n in steps}
    current = {n: choices[n][0] for n in steps}
    points: list[tuple[float, float]] = []
    cache: dict[tuple[str, ...], float] = {}
    # unless dominoes are allowed, each (step, kind) of one costs far more than any assignment's total: a
    # finite price, so that coordinate descent removes them one at a time, then compares costs
    penalty = 0.0
    if not allow_domino:
        first = model.evaluate([current])
        penalty = 1e3 * (1.0 + abs(float((first.steady + first.expected(rate))[0])))

    reprs: dict[int, str] = {}
    keep = [c for n in steps for c in choices[n]]  # alive during the search: their ids stay theirs
    getters = [operator.itemgetter(n) for n in steps]

    # regimes with a database hold a dict: not hashable
    def ident(a: Mapping[str, Regime]) -> tuple[str, ...]:
        out = []
        for get in getters:
            r = get(a)
            key = reprs.get(id(r))
            out.append(key if key is not None else reprs.setdefault(id(r), repr(r)))
        return tuple(out)

    def run(assignments: list[dict[str, Regime]]) -> np.ndarray:
        keys = [ident(a) for a in assignments]
        todo = {k: a for k, a in zip(keys, assignments, strict=True) if k not in cache}
        pending = list(todo.items())
        for lo in range(0, len(pending), 64):
            chunk = pending[lo : lo + 64]
            ev = model.evaluate([a for _, a in chunk])
            values = _objective(model, ev, rate, storage_budget, penalty)
            for (k, _), v, s, r in zip(chunk, values, ev.steady, ev.expected(rate), strict=True):
                cache[k] = float(v)
                points.append((float(s), float(r)))
        return np.array([cache[k] for k in keys])

    movable = [n for n in steps if len(choices[n]) > 1]

    def descend(start: dict[str, Regime], passes: int) -> dict[str, Regime]:
        best, value = dict(start), float(run([start])[0])
        for _ in range(passes):
            moved = False
            # One closure call per step is mostly numpy's per-call overhead, so the trials of the next `ahead`
            # steps are priced together on the guess that `best` stays; a move wastes the guesses after it
            # (they are priced again from the new best). The steps visited and the values compared are the
            # same as one step at a time: only how many go to one call changes.
            priced, ahead = 0, 1
            for j, n in enumerate(movable):
                if j >= priced:
                    run([{**best, m: c} for m in movable[j : j + ahead] for c in choices[m]])
                    priced, ahead = j + ahead, min(2 * ahead, AHEAD)
                trial = [{**best, n: c} for c in choices[n]]
                values = run(trial)
                i = int(np.argmin(values))  # the first of equals: deterministic
                if values[i] < value - 1e-12 * max(1.0, abs(value)):
                    best, value, moved = trial[i], float(values[i]), True
                    priced, ahead = j + 1, 1
            if not moved:
                break
        return best

    def young_spacing(n: str, regime: Regime) -> Regime:
        """The choice like ``regime`` (logging, kind) whose spacing is nearest Young's ``k*``."""
        if not isinstance(regime, Lazy) or regime.incremental:
            return regime
        k = model.young(n, rate)
        like = [c for c in choices[n] if isinstance(c, Lazy) and not c.incremental and c.logs == regime.logs]
        return min(
            like, key=lambda c: (abs(math.log(c.every / k)) if k > 0 else c.every, c.every), default=regime
        )

    young = {n: young_spacing(n, r) for n, r in current.items()}
    variable = [n for n in steps if len(choices[n]) > 1]
    if len(variable) <= EXHAUSTIVE:
        starts, passes = [current, young], PASSES
        structural = {
            n: list(
                dict.fromkeys((c.logs, isinstance(c, Keyed) and c.incremental, type(c)) for c in choices[n])
            )
            for n in variable
        }
        patterns = [
            dict(zip(variable, combo, strict=True)) for combo in itertools.product(*structural.values())
        ]
        trial = []
        for pattern in patterns:
            a = dict(young)
            for n, key in pattern.items():
                fit = [
                    c for c in choices[n] if (c.logs, isinstance(c, Keyed) and c.incremental, type(c)) == key
                ]
                a[n] = young_spacing(n, fit[0]) if fit else a[n]
                a[n] = a[n] if a[n] in choices[n] else fit[0]
            trial.append(a)
        values = run(trial)
        starts += [trial[int(i)] for i in np.argsort(values, kind="stable")[:3]]
        how = (
            f"every pattern of logging/incremental choices of the {len(variable)} step(s) with a choice "
            f"({len(patterns)}) at Young's spacings, the best 3 polished by coordinate descent"
        )
    else:
        starts, passes = [young], PASSES
        how = (
            f"coordinate descent over each step's choices ({len(variable)} steps with a choice; {passes} passes "
            "at most) from Young's spacings"
        )
    finals = [descend(s, passes) for s in starts]
    del keep
    values = run(finals + [current])
    best = finals[int(np.argmin(values))] if values.min() < values[-1] else current
    return best, points, how
