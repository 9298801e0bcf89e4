"""Accepting one new checkpoint into a running monitor, and what the monitor reports back.

:func:`resolve_next` validates and resolves a checkpoint reported after the
ones a processor already has, in time independent of how many it has (the
SPEC §3 union rule for recorded projections only needs, per edge, the
latest earlier checkpoint that recorded one). :class:`Changes` is the value
:meth:`~falkirk.solver.Monitor.record` returns.

>>> from falkirk.solver import Checkpoint, Dataflow, Edge, Processor
>>> df = Dataflow([Processor("a", "epoch", checkpoints=[Checkpoint(3)])], [])
>>> last = df.candidates("a", failed=True)[-1]
>>> resolve_next(df, "a", last, [], Checkpoint(5)).frontier
Frontier(epoch, 5)
>>> resolve_next(df, "a", last, [], Checkpoint(2))
Traceback (most recent call last):
...
falkirk.errors.MonitorError: processor 'a': checkpoint at 2 is out of order: it does not strictly contain the latest one, 3; report checkpoints in increasing order
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from attrs import field, frozen

from falkirk.domains import Frontier
from falkirk.domains.encoding import encode_frontier
from falkirk.errors import FalkirkError, MonitorError
from falkirk.solver.model import Checkpoint, Dataflow, ResolvedCheckpoint
from falkirk.solver.model.resolve import (
    check_monotone,
    coerce,
    differing_fields,
    resolve_checkpoint,
    same_frontier_message,
)

__all__ = ["Changes", "resolve_next", "projected_checkpoints"]


@frozen
class Changes:
    """What one acknowledged report allows (every frontier is the new low-watermark's consequence).

    * ``watermarks``: processors whose low-watermark ``lw(p)`` rose, with the
      new value: p may delete its checkpoints strictly inside it, keeping the
      one at ``lw(p)``;
    * ``logs``: per logged edge ``e = (u → q)`` whose receiver's watermark
      rose, ``lw(q)``: u may delete logged messages of ``e`` with times in it;
    * ``inputs``: per external input (processor without input edges),
      ``lw(p)``: input batches at times in it may be acknowledged to the source;
    * ``outputs``: per external output, ``lw(p)``: output at times in it is
      committed (it will never be retracted or produced differently);
    * ``examined``: processor updates the incremental solve took (work done,
      not part of equality).
    """

    watermarks: Mapping[str, Frontier]
    logs: Mapping[str, Frontier] = field(factory=dict)
    inputs: Mapping[str, Frontier] = field(factory=dict)
    outputs: Mapping[str, Frontier] = field(factory=dict)
    examined: int = field(default=0, eq=False)

    @classmethod
    def of(
        cls,
        dataflow: Dataflow,
        watermarks: Mapping[str, Frontier],
        outputs: Iterable[str] = (),
        examined: int = 0,
    ) -> Changes:
        """What ``watermarks`` (new values for some processors of ``dataflow``) allow.

        >>> from falkirk.solver import Dataflow, Edge, Processor
        >>> df = Dataflow([Processor("a", "epoch", logs=["ab"]), Processor("b", "epoch")], [Edge("ab", "a", "b")])
        >>> Changes.of(df, {"a": df.domains["a"].frontier(3), "b": df.domains["b"].frontier(1)}, ["b"]).to_json()
        {'watermarks': {'a': 3, 'b': 1}, 'logs': {'ab': 1}, 'inputs': {'a': 3}, 'outputs': {'b': 1}}
        """
        outs = frozenset(outputs)
        df = dataflow
        return cls(
            dict(watermarks),
            {
                e: f
                for q, f in watermarks.items()
                for e in df.inputs[q]
                if e in df.processors[df.edges[e].src].logs
            },
            {p: f for p, f in watermarks.items() if not df.inputs[p] and p not in outs},
            {p: f for p, f in watermarks.items() if p in outs},
            examined,
        )

    def __bool__(self) -> bool:
        return bool(self.watermarks)

    def to_json(self) -> dict[str, Any]:
        """The changes with frontiers in their canonical JSON encoding (SPEC §9)."""
        return {
            k: {n: encode_frontier(f) for n, f in getattr(self, k).items()}
            for k in ("watermarks", "logs", "inputs", "outputs")
        }


def resolve_next(
    df: Dataflow, name: str, last: ResolvedCheckpoint, projected: Iterable[Checkpoint], ck: Checkpoint
) -> ResolvedCheckpoint:
    """Resolve ``ck``, reported by ``name`` after the checkpoint resolved as ``last``.

    ``projected`` holds the earlier checkpoints of ``name`` that recorded a
    projection on an edge whose projection is recorded (the latest per edge
    suffices). Raises :class:`~falkirk.errors.MonitorError` naming the
    processor when ``ck`` is out of order, not monotone, or malformed. A
    report at the frontier of ``last`` with the same (resolved) metadata is
    that checkpoint again (an idle period, SPEC §5): ``last`` itself is
    returned and the caller records nothing. With other metadata it is
    refused, and the message points at the source edge that output produced
    without new input needs.
    """
    if not isinstance(ck, Checkpoint):
        raise MonitorError(f"processor {name!r}: expected a Checkpoint, got {ck!r}")
    where = f"processor {name!r}"
    try:
        f = coerce(df.domains[name], ck.frontier, f"{where}: checkpoint frontier")
        if f.is_top:
            raise MonitorError(
                f"{where}: a checkpoint at 'top' is the live state, not a persisted checkpoint"
            )
        same = last.frontier == f and not f.is_empty
        if not same and not (last.frontier <= f and last.frontier != f):
            raise MonitorError(
                f"{where}: checkpoint at {encode_frontier(f)} is out of order: it does not strictly contain "
                f"the latest one, {encode_frontier(last.frontier)}; report checkpoints in increasing order"
            )
        records = (*{id(c): c for c in projected}.values(), ck)
        meta = resolve_checkpoint(
            df, name, ck, f, f"{where}, checkpoint at {encode_frontier(f)}", live=False, records=records
        )
        if same:
            fields = differing_fields(last, meta)
            if not fields:
                return last  # the same checkpoint again: one checkpoint (SPEC §5)
            subject = f"{where}: checkpoint at {encode_frontier(f)} is out of order: it"
            raise MonitorError(same_frontier_message(subject, "the latest one", fields))
        check_monotone(name, [last, meta], ["", "reported checkpoint"])
    except MonitorError:
        raise
    except FalkirkError as exc:
        msg = str(exc)
        raise MonitorError(msg if repr(name) in msg else f"{where}: checkpoint rejected: {msg}") from None
    return meta


def projected_checkpoints(
    df: Dataflow, name: str, previous: Mapping[str, Checkpoint], ck: Checkpoint
) -> dict[str, Checkpoint]:
    """``previous`` updated with ``ck`` for every recorded-projection edge it records."""
    out = dict(previous)
    for e in ck.projection:
        if e in df.bound and df.bound[e].recorded:
            out[e] = ck
    return out
