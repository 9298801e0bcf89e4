"""Readable, runnable Python source for a dataflow, for failing property tests.

``dataflow_source(df)`` prints the constructor calls that rebuild ``df``
(frontiers written in their SPEC §9 encodings), so a counterexample found by
hypothesis can be pasted into a test.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(3)]),
...                Processor("b", "epoch")], [Edge("ab", "a", "b")])
>>> print(dataflow_source(df))
Dataflow([
    Processor('a', Epoch(), logs=['ab'], checkpoints=[Checkpoint(3)]),
    Processor('b', Epoch()),
], [
    Edge('ab', 'a', 'b', Identity()),
])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from falkirk.domains import Frontier
from falkirk.solver import Checkpoint, Dataflow

__all__ = ["dataflow_source"]


def _enc(value: Any) -> str:
    if isinstance(value, Frontier):
        enc = getattr(value.domain, "encode", None)
        return repr(enc(value)) if enc is not None else repr(value)
    return repr(value)


def _map(m: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k!r}: {_enc(v)}" for k, v in m.items()) + "}"


def _checkpoint(ck: Checkpoint) -> str:
    parts = [_enc(ck.frontier)]
    if ck.notifications is not None:
        parts.append(f"notifications={_enc(ck.notifications)}")
    for name in ("delivered", "discarded", "projection", "logged"):
        value = getattr(ck, name)
        if value:
            parts.append(f"{name}={_map(value)}")
    if ck.state is not None:
        parts.append(f"state={ck.state!r}")
    return f"Checkpoint({', '.join(parts)})"


def dataflow_source(df: Dataflow) -> str:
    """Python source that rebuilds ``df`` (see the module docstring)."""
    lines = ["Dataflow(["]
    for p in df.processors.values():
        parts = [repr(p.name), repr(df.domains[p.name])]
        if p.stateless:
            parts.append("stateless=True")
        if p.logs:
            parts.append(f"logs={sorted(p.logs)!r}")
        if p.checkpoints:
            parts.append("checkpoints=[" + ", ".join(_checkpoint(c) for c in p.checkpoints) + "]")
        if p.live is not None:
            parts.append(f"live={_checkpoint(p.live)}")
        if p.notifications is not None:
            parts.append(f"notifications={p.notifications!r}")
        if not p.restartable:
            parts.append("restartable=False")
        lines.append(f"    Processor({', '.join(parts)}),")
    lines.append("], [")
    for e in df.edges.values():
        lines.append(f"    Edge({e.name!r}, {e.src!r}, {e.dst!r}, {e.projection!r}),")
    tail = "]" if df.system_notifications else "], notifications=False"
    lines.append(tail + ")")
    return "\n".join(lines)
