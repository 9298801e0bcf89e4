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

from collections import ChainMap
from collections.abc import Iterable, Mapping
from typing import Any, cast

from attrs import evolve, field, frozen

from falkirk.domains import Frontier
from falkirk.errors import FalkirkError, MonitorError
from falkirk.solver.model import Checkpoint, Dataflow, Meta
from falkirk.solver.plan import encode_frontier
from falkirk.solver.resolve import _check_monotone, _meta, coerce

__all__ = ["Changes", "resolve_next", "check_functional_projections", "projected_checkpoints"]


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


class _Overlay:
    """``df`` seen with one processor replaced (what :func:`_meta` reads)."""

    def __init__(self, df: Dataflow, name: str, proc: Any) -> None:
        self._df = df
        self.processors = ChainMap({name: proc}, df.processors)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._df, attr)


def resolve_next(
    df: Dataflow, name: str, last: Meta, projected: Iterable[Checkpoint], ck: Checkpoint
) -> Meta:
    """Resolve ``ck``, reported by ``name`` after the checkpoint resolved as ``last``.

    ``projected`` holds the earlier checkpoints of ``name`` that recorded a
    projection on an edge whose projection is recorded (the latest per edge
    suffices). Raises :class:`~falkirk.errors.MonitorError` naming the
    processor when ``ck`` is out of order, not monotone, or malformed.
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
        if not (last.frontier <= f and last.frontier != f):
            raise MonitorError(
                f"{where}: checkpoint at {encode_frontier(f)} is out of order: it does not strictly contain "
                f"the latest one, {encode_frontier(last.frontier)}; report checkpoints in increasing order"
            )
        proc = evolve(df.processors[name], checkpoints=(*{id(c): c for c in projected}.values(), ck))
        overlay = cast(Dataflow, _Overlay(df, name, proc))
        meta = _meta(overlay, name, ck, f, f"{where}, checkpoint at {encode_frontier(f)}", live=False)
        _check_monotone(name, [last, meta])
    except MonitorError:
        raise
    except FalkirkError as exc:
        msg = str(exc)
        raise MonitorError(msg if repr(name) in msg else f"{where}: checkpoint rejected: {msg}") from None
    check_functional_projections(df, name, [meta])
    return meta


def check_functional_projections(df: Dataflow, name: str, metas: Iterable[Meta]) -> None:
    """Refuse a recorded ``projection`` that differs from the edge's projection function.

    The monitor needs ``φ_e`` monotone over all frontiers (SPEC §5: that is
    what makes the answer unique and garbage collection sound); a value
    recorded at one checkpoint, different from the function used at every
    other frontier, breaks that. Use a recorded projection for such edges.
    """
    if df.processors[name].stateless:
        return  # the solver applies the function to stateless processors regardless
    for m in metas:
        for e in m.recorded:
            b = df.bound[e]
            if not b.recorded and m.projection[e] != b.apply(m.frontier):
                raise MonitorError(
                    f"processor {name!r}, checkpoint at {encode_frontier(m.frontier)}: projection[{e!r}] = "
                    f"{encode_frontier(m.projection[e])} differs from the edge's projection "
                    f"{b.spec.name!r} ({encode_frontier(b.apply(m.frontier))}); the monitor needs φ monotone "
                    "over all frontiers: omit it, or declare the edge's projection 'recorded'"
                )


def projected_checkpoints(
    df: Dataflow, name: str, previous: Mapping[str, Checkpoint], ck: Checkpoint
) -> dict[str, Checkpoint]:
    """``previous`` updated with ``ck`` for every recorded-projection edge it records."""
    out = dict(previous)
    for e in ck.projection:
        if e in df.bound and df.bound[e].recorded:
            out[e] = ck
    return out
