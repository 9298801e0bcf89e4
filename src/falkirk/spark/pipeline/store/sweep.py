"""Garbage under the root: data directories that no manifest names, found and deleted.

A data directory (``data/<step>/<kind>/<epoch>-<id>/``) is written before
its manifest is published (:mod:`~falkirk.spark.pipeline.store.storage`);
a driver that crashed in between, or a step that wrote an item again,
leaves one that no manifest names. :func:`sweep_orphans` reads every
manifest (:func:`referenced`) and deletes the others: run it at start-up.
During a run, :meth:`Storage.sweep_unpublished
<falkirk.spark.pipeline.store.storage.Storage.sweep_unpublished>` deletes
what this driver wrote and did not publish, without reading any manifest.
:class:`~falkirk.spark.pipeline.store.storage.Storage` exposes both
functions as methods (``storage.sweep_orphans()``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["referenced", "sweep_orphans"]


def referenced(storage: Storage) -> set[str]:
    """Data directories named by a manifest.

    The manifests are read together (:meth:`Root.read_many
    <falkirk.spark.pipeline.store.rootfs.Root.read_many>`: concurrently on an object store). An output's
    manifests are never collected, so there are two more per epoch of a run with two outputs: read one
    request after another, they made the S3 soak's restarts grow by ~0.07 s per epoch of history (~28 s of
    a restart at epoch 231)."""
    # a manifest's data is under data/<its step>/<its kind>/ (Storage.put refuses any other data/ location), so
    # only the kinds that have such a directory can name one: an output's manifests (output/...) are not read
    have = {
        (step, kind) for step in storage.fs.listdir("data") for kind in storage.fs.listdir(f"data/{step}")
    }
    names = [
        f"manifests/{step}/{kind}/{name}"
        for step in storage.fs.listdir("manifests")
        for kind in storage.fs.listdir(f"manifests/{step}")
        if (step, kind) in have
        for name in storage.fs.listdir(f"manifests/{step}/{kind}")
    ]
    refs = set()
    for raw in storage.fs.read_many(names).values():
        if isinstance(raw, FileNotFoundError):  # removed meanwhile
            continue
        try:
            loc = json.loads(raw).get("location")
        except (ValueError, AttributeError):  # unreadable: names nothing
            continue
        if loc:
            refs.add(loc)
    return refs


def sweep_orphans(storage: Storage, steps: Iterable[str] | None = None) -> int:
    """Delete data directories no manifest names (left by a crash or replaced); how many held files.

    Empty ones are deleted without being counted: on an object store a
    directory is only a name prefix, which some servers keep listing for
    a moment after its last object went.

    Reads every manifest under the root: run it at start-up (a crashed driver's leftovers); during a run,
    :meth:`~falkirk.spark.pipeline.store.storage.Storage.sweep_unpublished` finds the same directories without
    reading anything.
    """
    refs = referenced(storage)
    removed = 0
    names = list(steps) if steps is not None else storage.fs.listdir("data")
    for step in names:
        for kind in storage.fs.listdir(f"data/{step}"):
            for item in storage.fs.listdir(f"data/{step}/{kind}"):
                rel = f"data/{step}/{kind}/{item}"
                if rel in refs:
                    continue
                held = next(iter(storage.fs.walk_files(rel)), None) is not None
                if held or storage.fs.isdir(rel):
                    storage.fs.delete(rel, recursive=True)
                    removed += held
    return removed
