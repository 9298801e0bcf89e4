"""Operators: the user code a simulated processor runs, and their state API.

An operator handles **events**: a message (``on_message``), a notification
that a time is complete (``on_notify``, only for times it asked for with
``ctx.notify_at``), or — for sources — a batch of external input
(``on_read``). It sends with ``ctx.send(payload, port=...)`` at the time of
the event; the edge transforms that time (:mod:`falkirk.sim.transforms`).

The state API follows the DBSP seed's ``get_state``/``set_state``, made
selective (paper §2.3): ``get_state(f)`` is the state after exactly the
events with times in the frontier ``f``; ``set_state`` restores it;
``discard_outside(f)`` drops the effect of events outside ``f`` in place
(what a processor that did not fail does when it rolls back, SPEC §6) and
returns ``False`` if it cannot. :class:`Operator` implements all three for
state kept in ``self.parts``, a dict from time to that time's state — the
shape of the paper's Figure 3 operators (Select, Sum, Buffer).

Class attributes declare what an operator is:

* ``stateless`` — keeps no state between times (may keep some *within* a
  time until its notification); it can use the ephemeral and batch policies;
* ``partitioned`` — its state is partitioned by time, so it may roll back
  selectively and take messages out of order (SPEC §2 re-ordering rule);
* ``deterministic`` — its output per time is a function of its input per
  time; otherwise it draws choices with ``ctx.choose`` (see
  :mod:`falkirk.sim.oracle`);
* ``notifications`` — whether it ever asks for notifications;
* ``ordered`` — it sends the output of epoch ``e`` only after that of every
  earlier epoch, so it may number its messages for a ``sequence`` processor.

>>> from falkirk.sim.operators import Sum
>>> op = Sum()
>>> op.parts = {1: 5, 2: 7}
>>> from falkirk.domains import Epoch
>>> op.get_state(Epoch().frontier(1))
{1: 5}
>>> op.discard_outside(Epoch().frontier(1)), op.parts
(True, {1: 5})
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Protocol

from falkirk.domains import Frontier

__all__ = [
    "Context",
    "Operator",
    "Source",
    "Map",
    "Filter",
    "Sum",
    "Buffer",
    "RunningTotal",
    "Halve",
    "Salt",
    "Chooser",
    "Output",
    "Sequencer",
    "Scan",
    "state_delta",
    "apply_state_delta",
]


def state_delta(base: Any, new: Any) -> Any:
    """The delta from snapshot ``base`` to snapshot ``new`` (``None`` is the initial state).

    Dict snapshots (time-partitioned ``parts``) give ``("patch", changed,
    removed)``: only the entries that changed; anything else is replaced
    whole, ``("replace", new)``. :func:`apply_state_delta` inverts it.

    >>> d = state_delta({0: 3, 1: 4}, {1: 5, 2: 6})
    >>> d
    ('patch', {1: 5, 2: 6}, (0,))
    >>> apply_state_delta({0: 3, 1: 4}, d)
    {1: 5, 2: 6}
    >>> apply_state_delta(7, state_delta(7, (8, [1])))
    (8, [1])
    """
    if isinstance(new, dict) and (base is None or isinstance(base, dict)):
        old = base or {}
        changed = {k: copy.deepcopy(v) for k, v in new.items() if k not in old or old[k] != v}
        return ("patch", changed, tuple(k for k in old if k not in new))
    return ("replace", copy.deepcopy(new))


def apply_state_delta(base: Any, delta: Any) -> Any:
    """``base`` with a :func:`state_delta` applied (a new snapshot; ``base`` is not modified)."""
    if delta[0] == "replace":
        return copy.deepcopy(delta[1])
    _, changed, removed = delta
    out = {k: v for k, v in (base or {}).items() if k not in removed}
    out.update(copy.deepcopy(changed))
    return out


class Context(Protocol):
    """What an operator may do while it handles one event."""

    @property
    def time(self) -> Any:
        """The time of the event being handled (in the processor's domain)."""
        ...

    def send(self, payload: Any, port: str = "out") -> None:
        """Send ``payload`` on every output edge attached to ``port``."""
        ...

    def notify_at(self) -> None:
        """Ask to be notified when the current time is complete."""
        ...

    def le(self, a: Any, b: Any) -> bool:
        """The processor domain's order."""
        ...

    def choose(self, label: str, n: int) -> int:
        """A non-deterministic choice in ``range(n)``, one per (time, label) (see the oracle)."""
        ...


class Operator:
    """Base class: time-partitioned state in ``self.parts`` (see the module docstring)."""

    stateless: bool = False
    partitioned: bool = True
    deterministic: bool = True
    notifications: bool = False
    ordered: bool = False  # sends epoch by epoch, in order (may feed a sequence edge)
    ports: tuple[str, ...] = ("out",)

    def __init__(self) -> None:
        self.parts: dict[Any, Any] = {}

    def open_part(self, ctx: Context, initial: Callable[[], Any]) -> None:
        """Create the part of ``ctx.time`` (``initial()``) on its first event, asking for its notification."""
        if ctx.time not in self.parts:
            self.parts[ctx.time] = initial()
            ctx.notify_at()

    # -- events ------------------------------------------------------------------
    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        """Handle a message on input edge ``edge`` at ``ctx.time``."""
        raise NotImplementedError(f"{type(self).__name__} does not take messages")

    def on_notify(self, ctx: Context) -> None:
        """Handle the notification that ``ctx.time`` is complete."""

    def on_read(self, ctx: Context, records: list[Any]) -> None:
        """Handle a batch of external input at epoch ``ctx.time`` (sources only)."""
        raise NotImplementedError(f"{type(self).__name__} is not a source")

    # -- state API ---------------------------------------------------------------
    def get_state(self, frontier: Frontier) -> Any:
        """Snapshot of the state after exactly the events with times in ``frontier``."""
        return {t: copy.deepcopy(v) for t, v in self.parts.items() if t in frontier}

    def set_state(self, snapshot: Any) -> None:
        """Restore a snapshot taken by :meth:`get_state`."""
        self.parts = copy.deepcopy(snapshot) if snapshot is not None else {}

    def discard_outside(self, frontier: Frontier) -> bool:
        """Drop the state of times outside ``frontier``; ``False`` if that is impossible."""
        self.parts = {t: v for t, v in self.parts.items() if t in frontier}
        return True

    def get_delta(self, base: Any, frontier: Frontier) -> Any:
        """DBSP's ``get_delta``: the change from the snapshot ``base`` to ``get_state(frontier)``.

        ``base`` is a snapshot :meth:`get_state` returned (``None``: the
        initial state). The default derives the delta from the two snapshots
        (:func:`state_delta`); an operator with a cheaper one may override it.
        """
        return state_delta(base, self.get_state(frontier))

    def apply_delta(self, base: Any, delta: Any) -> Any:
        """DBSP's ``apply_delta`` on snapshots: ``base`` with ``delta`` applied (for :meth:`set_state`)."""
        return apply_state_delta(base, delta)

    def fresh(self) -> Operator:
        """A new instance in the initial state (the prototype is never run)."""
        new = copy.deepcopy(self)
        new.parts = {}
        return new

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if k != "parts")
        return f"{type(self).__name__}({args})"


class Source(Operator):
    """Reads one batch of external input per epoch and forwards every record."""

    stateless = True

    def on_read(self, ctx: Context, records: list[Any]) -> None:
        for r in records:
            ctx.send(r)


class Map(Operator):
    """Select: ``x ↦ (x * mul + add) mod m`` (stateless)."""

    stateless = True

    def __init__(self, mul: int = 1, add: int = 0, mod: int = 97) -> None:
        super().__init__()
        self.mul, self.add, self.mod = mul, add, mod

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        ctx.send((payload * self.mul + self.add) % self.mod)


class Filter(Operator):
    """Keeps ``x`` with ``x % mod != drop`` (stateless)."""

    stateless = True

    def __init__(self, mod: int = 3, drop: int = 0) -> None:
        super().__init__()
        self.mod, self.drop = mod, drop

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        if payload % self.mod != self.drop:
            ctx.send(payload)


class Sum(Operator):
    """Figure 3's Sum: a sum per time, sent and forgotten when the time is complete."""

    notifications = True

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        self.open_part(ctx, int)
        self.parts[ctx.time] += payload

    def on_notify(self, ctx: Context) -> None:
        ctx.send(self.parts.pop(ctx.time))


class Buffer(Operator):
    """Figure 3's Buffer: keeps every message; on completion of ``t`` sends the total up to ``t``."""

    notifications = True

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        self.open_part(ctx, list)
        self.parts[ctx.time].append(payload)

    def on_notify(self, ctx: Context) -> None:
        t = ctx.time
        ctx.send(sum(sum(v) for s, v in self.parts.items() if ctx.le(s, t)))


class RunningTotal(Operator):
    """A running total folded in notification order (epoch domain only).

    Its total is not partitioned by time, so it rolls back by restoring a
    checkpoint, never by discarding in place, and takes messages in FIFO order.
    """

    partitioned = False
    notifications = True

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.folded: list[Any] = []

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        self.open_part(ctx, int)
        self.parts[ctx.time] += payload

    def on_notify(self, ctx: Context) -> None:
        self.total += self.parts.pop(ctx.time)
        self.folded.append(ctx.time)
        ctx.send(self.total)

    def get_state(self, frontier: Frontier) -> Any:
        if not all(t in frontier for t in self.folded):
            raise ValueError(f"RunningTotal cannot snapshot {frontier!r}: it folded {self.folded}")
        return (self.total, list(self.folded), super().get_state(frontier))

    def set_state(self, snapshot: Any) -> None:
        self.total, self.folded, parts = snapshot if snapshot is not None else (0, [], None)
        self.folded = list(self.folded)
        super().set_state(parts)

    def discard_outside(self, frontier: Frontier) -> bool:
        if not all(t in frontier for t in self.folded):
            return False
        return super().discard_outside(frontier)

    def fresh(self) -> Operator:
        new = RunningTotal()
        return new


class Halve(Operator):
    """A loop body: forwards ``x`` on ``out`` and, while ``x > 1``, sends ``x // 2`` round the loop."""

    stateless = True
    ports = ("out", "loop")

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        ctx.send(payload, "out")
        if payload > 1:
            ctx.send(payload // 2, "loop")


class Salt(Operator):
    """Non-deterministic: adds a salt drawn once per time (kept until the time completes)."""

    stateless = True
    deterministic = False
    notifications = True

    def __init__(self, choices: int = 3) -> None:
        super().__init__()
        self.choices = choices

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        self.open_part(ctx, lambda: ctx.choose("salt", self.choices))
        ctx.send(payload + self.parts[ctx.time])

    def on_notify(self, ctx: Context) -> None:
        del self.parts[ctx.time]


class Chooser(Operator):
    """Non-deterministic: on completion of a time, chooses whether to send the count it saw."""

    deterministic = False
    notifications = True

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        self.open_part(ctx, int)
        self.parts[ctx.time] += 1

    def on_notify(self, ctx: Context) -> None:
        n = self.parts.pop(ctx.time)
        if ctx.choose("send", 2):
            ctx.send(n)


class Output(Operator):
    """External output: keeps the records of each time until the output commits them.

    A commit acts on the completeness of the times it commits, so it counts as
    their notification (``notifications = True``, SPEC §4 C4).
    """

    ports = ()
    notifications = True

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        self.parts.setdefault(ctx.time, []).append(payload)


class Sequencer(Operator):
    """Bridges epochs to sequence numbers: buffers each epoch, sends it sorted once complete."""

    notifications = True
    ordered = True

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        self.open_part(ctx, list)
        self.parts[ctx.time].append(payload)

    def on_notify(self, ctx: Context) -> None:
        for x in sorted(self.parts.pop(ctx.time)):
            ctx.send(x)


class Scan(Operator):
    """A running sum over a message sequence: sends the total after every message.

    Its state is not partitioned by time; in the ``sequence`` domain every
    message is its own time and checkpoints are prefixes of the history.
    """

    partitioned = False

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def on_message(self, ctx: Context, edge: str, payload: Any) -> None:
        self.total += payload
        ctx.send(self.total)

    def get_state(self, frontier: Frontier) -> Any:
        return self.total

    def set_state(self, snapshot: Any) -> None:
        self.total = snapshot or 0

    def discard_outside(self, frontier: Frontier) -> bool:
        return False

    def fresh(self) -> Operator:
        return Scan()
