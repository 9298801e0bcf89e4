"""Restarting a pipeline whose definition changed: what falkirk accepts, and why it refuses the rest.

``ROOT/pipeline.json`` records the shape of the pipeline that wrote the root
(:meth:`Pipeline.describe <falkirk.spark.Pipeline.describe>`): inputs and
their schemas, steps with their inputs, regimes and a fingerprint of their
code. A pipeline started on that root is compared with it by :func:`changes`:

==============================================  ==============================================
change                                          outcome
==============================================  ==============================================
a new step or output (reading existing nodes)   accepted: it starts at ``∅`` and the restart's
                                                rollback plan backfills it from logged or
                                                replayable data; refused (nothing changed) when
                                                that data was already garbage-collected
a removed **output** (no step reads it)         accepted: its epochs under ``output/<name>`` and its
                                                manifests are kept, or deleted with
                                                ``Pipeline(removed_outputs={name: "delete"})``
``every`` of a Lazy step, ``log=True→False``    accepted, from the next epoch on
``incremental`` on or off, ``snapshot_every``   accepted, from the next epoch on (a full
                                                checkpoint is a snapshot; deltas already
                                                written stay restorable until collected)
``differential`` on or off                      accepted, from the next delta on
new **nullable** input columns at the end       accepted: earlier records read them as ``NULL``
a step's code changed: its function, or a       refused, naming what changed, unless
helper, class, closure variable or constant     ``Pipeline(code_changes=…)`` says ``"keep"``
of the user's code it reaches                   (keep its state and outputs) or an epoch ``E``
(:mod:`~falkirk.spark.pipeline.declare.         (roll it and everything downstream back to
fingerprint` says what is followed)             ``E``: epochs after ``E`` are recomputed)
anything else (another removed step, other      refused, naming the step or input and the change
inputs,
a regime's kind, key, ``changes``,
``append``, ``log=False→True``, …)
==============================================  ==============================================

``pipeline.json`` is rewritten only after the restart's recovery succeeded,
so a refused change leaves the root as it was.

>>> old = {"inputs": {"ev": {"schema": "u BIGINT", "partitions": 1, "key": None}},
...        "steps": {"s": {"inputs": ["ev"], "regime": {"kind": "lazy", "log": False, "every": 2}}}}
>>> new = {"inputs": {"ev": {"schema": "u BIGINT, tag STRING", "partitions": 1, "key": None}},
...        "steps": {"s": {"inputs": ["ev"], "regime": {"kind": "lazy", "log": False, "every": 3}},
...                  "out": {"inputs": ["s"], "regime": {"kind": "output", "log": False}}}}
>>> for c in changes(old, new).accepted: print(c)
input 'ev': new nullable column(s) tag (earlier records read them as NULL)
step 's': every 2 → 3 (from the next epoch)
step 'out' is new: it starts at ∅ and is backfilled from logged or replayable data
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from attrs import frozen

from falkirk.spark.errors import PipelineError
from falkirk.spark.pipeline.declare.fingerprint import STEP, describe_differences, fingerprint

__all__ = ["fingerprint", "changes", "Changes"]


@frozen
class Changes:
    """The accepted differences between the recorded and the new pipeline, and the code-changed steps."""

    accepted: tuple[str, ...]
    #: steps whose function changed, with the user's choice (``"keep"`` or an epoch to roll back to)
    code: Mapping[str, str | int]
    #: steps that are new in this pipeline (they start at ``∅``)
    new_steps: tuple[str, ...] = ()
    #: outputs the new pipeline no longer has
    removed_outputs: tuple[str, ...] = ()
    #: the recorded description differs in what needs no note (e.g. it predates ``code_deps``): rewrite it
    record: bool = False

    def __bool__(self) -> bool:
        return bool(self.accepted or self.code)


def _columns(ddl: str) -> list[tuple[str, str, bool]] | None:
    from falkirk.spark.pipeline.store.records import parse_schema

    try:
        return [(f.name, str(f.type), f.nullable) for f in parse_schema(ddl).fields]
    except PipelineError:
        return None


def changes(
    theirs: Mapping[str, Any],
    mine: Mapping[str, Any],
    *,
    code_changes: Mapping[str, str | int] | None = None,
    where: str = "the root",
    persisted: Callable[[str], bool] | None = None,
) -> Changes:
    """Compare the recorded description ``theirs`` with ``mine``; the accepted changes, or PipelineError.

    ``persisted(step)``: whether the root holds a checkpoint of ``step``'s
    state (``None``: assume it does). A keyed step's ``key`` (and
    ``max_parallelism``) may change only while nothing of its state was
    persisted — a typo that failed the first epoch must not lock the root.
    """
    code_changes = dict(code_changes or {})

    def refuse(what: str) -> PipelineError:
        return PipelineError(f"{where} holds a different pipeline ({what}); use a new root or delete it")

    accepted: list[str] = []
    old_in, new_in = theirs.get("inputs", {}), mine.get("inputs", {})
    for name in sorted(set(old_in) | set(new_in)):
        if name not in new_in:
            raise refuse(f"input {name!r} is missing here")
        if name not in old_in:
            raise refuse(f"input {name!r} is new: it has no records for the epochs already run")
        a, b = old_in[name], new_in[name]
        if a == b:
            continue
        if {k: v for k, v in a.items() if k != "schema"} != {k: v for k, v in b.items() if k != "schema"}:
            raise refuse(f"input {name!r} was {a}, now {b}: its partitions and key cannot change")
        before, after = _columns(a["schema"]), _columns(b["schema"])
        if before is None or after is None or after[: len(before)] != before:
            raise refuse(
                f"input {name!r}: schema was {a['schema']!r}, now {b['schema']!r}; only new nullable "
                "columns at the end can be added"
            )
        extra = after[len(before) :]
        if not all(nullable for _, _, nullable in extra):
            raise refuse(
                f"input {name!r}: new column(s) {', '.join(n for n, _, nl in extra if not nl)} are NOT NULL, "
                "but the records already logged have no value for them"
            )
        accepted.append(
            f"input {name!r}: new nullable column(s) {', '.join(n for n, _, _ in extra)} "
            "(earlier records read them as NULL)"
        )
    old_steps, new_steps = theirs.get("steps", {}), mine.get("steps", {})
    code: dict[str, str | int] = {}
    new: list[str] = []
    removed: list[str] = []
    for name in old_steps:
        if name in new_steps:
            continue
        if old_steps[name].get("regime", {}).get("kind") != "output":
            raise refuse(f"step {name!r} is missing here")
        if any(name in s.get("inputs", ()) for s in new_steps.values()):
            raise refuse(f"output {name!r} is missing here, but a step reads it")
        removed.append(name)
        accepted.append(
            f"output {name!r} was removed: its epochs under output/{name} and its manifests stay "
            f"(Pipeline(removed_outputs={{{name!r}: 'delete'}}) deletes them)"
        )
    for name, b in new_steps.items():
        if name not in old_steps:
            accepted.append(
                f"step {name!r} is new: it starts at ∅ and is backfilled from logged or replayable data"
            )
            new.append(name)
            continue
        a = old_steps[name]
        if a.get("inputs") != b.get("inputs"):
            raise refuse(f"step {name!r}: its inputs were {a.get('inputs')}, now {b.get('inputs')}")
        ra, rb = dict(a.get("regime", {})), dict(b.get("regime", {}))
        if ra != rb:
            if ra.get("kind") != rb.get("kind"):
                raise refuse(f"step {name!r}: its regime was {ra.get('kind')}, now {rb.get('kind')}")
            for key in sorted(set(ra) | set(rb)):
                if ra.get(key) == rb.get(key):
                    continue
                if key == "every":
                    accepted.append(
                        f"step {name!r}: every {ra.get(key)} → {rb.get(key)} (from the next epoch)"
                    )
                elif key == "incremental":
                    accepted.append(
                        f"step {name!r}: incremental {bool(ra.get(key))} → {bool(rb.get(key))} "
                        + (
                            "(from the next epoch each epoch writes a delta; the checkpoint it restores is the first "
                            "snapshot)"
                            if rb.get(key)
                            else "(from the next epoch full checkpoints again; the deltas "
                            "already written stay restorable until collected)"
                        )
                    )
                elif key == "snapshot_every":
                    if ra.get("incremental") and rb.get("incremental"):
                        accepted.append(
                            f"step {name!r}: snapshot_every {ra.get(key)} → {rb.get(key)} (from its next "
                            "snapshot)"
                        )
                elif key == "differential":
                    accepted.append(
                        f"step {name!r}: differential {bool(ra.get(key))} → {bool(rb.get(key))} (from its next "
                        "delta; the deltas already written stay restorable)"
                    )
                elif key == "log" and ra.get(key) and not rb.get(key):
                    accepted.append(
                        f"step {name!r}: log True → False (its consumers recompute instead of replaying, "
                        "from the next epoch)"
                    )
                elif key == "log":
                    raise refuse(
                        f"step {name!r}: log False → True would make earlier epochs replayable from a log "
                        "that was never written; declare it on a new root"
                    )
                elif key == "changes":
                    raise refuse(
                        f"step {name!r}: changes {bool(ra.get(key))} → {bool(rb.get(key))} would read what its "
                        "function returns as "
                        + ("only the keys it changed" if rb.get(key) else "the whole state")
                        + "; declare it on a new root"
                    )
                elif key in ("key", "max_parallelism") and persisted is not None and not persisted(name):
                    accepted.append(
                        f"step {name!r}: {key} {ra.get(key)!r} → {rb.get(key)!r} (no checkpoint of its "
                        "state was ever written: it starts from ∅ with the new one)"
                    )
                elif key in ("key", "max_parallelism"):
                    raise refuse(
                        f"step {name!r} was {json.dumps(ra, sort_keys=True)}, now "
                        f"{json.dumps(rb, sort_keys=True)}: its {key} cannot change once its state was "
                        "checkpointed (the checkpoints are partitioned by it)"
                    )
                else:
                    raise refuse(
                        f"step {name!r} was {json.dumps(ra, sort_keys=True)}, now {json.dumps(rb, sort_keys=True)}: "
                        f"its {key} cannot change on a running pipeline"
                    )
        what = _code_changed(a, b)
        if what is not None:
            choice = code_changes.get(name)
            if choice is None:
                raise PipelineError(
                    f"step {name!r}: its code changed since {where} was written ({'; '.join(what)}); choose what "
                    f"happens to what it already computed: Pipeline(..., code_changes={{{name!r}: 'keep'}}) keeps its "
                    f"state and outputs, code_changes={{{name!r}: EPOCH}} rolls it and everything downstream back "
                    "to EPOCH"
                )
            if choice != "keep" and (isinstance(choice, bool) or not isinstance(choice, int) or choice < -1):
                raise PipelineError(f"code_changes[{name!r}]={choice!r}: expected 'keep' or an epoch >= -1")
            code[name] = choice
            accepted.append(
                f"step {name!r}: function changed; "
                + (
                    "its state and outputs are kept"
                    if choice == "keep"
                    else f"it and everything downstream roll back to epoch {choice}"
                )
            )
    return Changes(tuple(accepted), code, tuple(new), tuple(removed), record=True)


def _code_changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str] | None:
    """What changed in a step's code between the recorded description ``a`` and ``b`` (``None``: nothing).

    ``code`` is the function's own fingerprint (every root has it);
    ``code_deps`` the fingerprints of what it reaches in the user's code
    (:func:`~falkirk.spark.pipeline.declare.fingerprint.dependencies`),
    compared where both descriptions have them (a root written before they
    were recorded gets them at its next start).
    """
    deps_a, deps_b = a.get("code_deps"), b.get("code_deps")
    what = (
        describe_differences(deps_a, deps_b) if isinstance(deps_a, dict) and isinstance(deps_b, dict) else []
    )
    own = a.get("code") is not None and b.get("code") is not None and a["code"] != b["code"]
    if own and not what:
        what = [f"{STEP} changed"]
    return what or None
