"""A driver's start: recover what the root holds, then record what changed in the pipeline since it was
written.

:func:`recover_root` is the restart's recovery ("everything failed",
planned from the manifests), holding code-changed steps to the epochs
``code_changes`` names; a change that needs data the root no longer has is
refused with the earliest epoch that would work. :func:`record_changes`
then writes the new ``pipeline.json`` and notes each accepted change (only
after that recovery worked, so a refused change leaves the root as it was).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from falkirk.spark.errors import RecoveryError

if TYPE_CHECKING:
    from falkirk.spark.pipeline.declare.evolution import Changes
    from falkirk.spark.pipeline.run.journal import Startup
    from falkirk.spark.pipeline.run.recovery import Rollback
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["recover_root", "record_changes"]


def recover_root(rollback: Rollback, evolution: Changes, startup: Startup) -> None:
    """The restart's recovery; :class:`RecoveryError` saying what the changed pipeline needs where it cannot
    run."""
    order = rollback.order
    limits = {n: int(e) for n, e in evolution.code.items() if e != "keep"}
    try:
        rollback.recover(
            set(order),
            "driver (re)start: every step resumes from what the root holds",
            restart=True,
            limits=limits,
            startup=startup,
        )
    except RecoveryError as exc:
        needs = (
            [f"its new step(s) {', '.join(evolution.new_steps)} start at ∅"] if evolution.new_steps else []
        )
        needs += [
            f"code_changes={{{n!r}: {e}}} redoes {n} and everything downstream from epoch {e + 1}"
            for n, e in limits.items()
        ]
        if not needs:
            raise
        if limits:
            earliest = rollback.earliest_limits(set(order), limits)
            needs += [
                f"the earliest epoch code_changes can name for {n} here is {e} "
                f"(code_changes={{{n!r}: {e}}}: the old code's epochs up to {e} stand)"
                for n, e in earliest.items()
            ]
            needs += [
                f"no epoch code_changes can name for {n} has its data here: code_changes={{{n!r}: 'keep'}} "
                "keeps what the old code computed"
                for n in limits
                if n not in earliest
            ]
        raise RecoveryError(
            f"{exc}; that is data the changed pipeline needs ({'; '.join(needs)}): the root still holds the "
            "previous pipeline, which resumes as it was (or start the changed one on a new root)"
        ) from exc


def record_changes(
    rollback: Rollback, evolution: Changes, storage: Storage, say: Callable[[str], None]
) -> None:
    """After the restart recovered: record the pipeline (``pipeline.json``), note its accepted changes, delete
    the files of removed outputs the pipeline asks to delete."""
    if not (evolution or evolution.record):
        return
    pipeline, journal = rollback.pipeline, rollback.state.journal
    pipeline.write_root()
    for change in evolution.accepted:
        journal.note(f"pipeline changed: {change}")
        say(f"pipeline changed: {change}")
    for name in evolution.removed_outputs:
        if pipeline.removed_outputs.get(name) == "delete":
            for where in (f"manifests/{name}", f"output/{name}", f"journal/{name}"):
                storage.fs.delete(where, recursive=True)
            journal.note(f"removed output {name!r}: its files were deleted (removed_outputs)")
