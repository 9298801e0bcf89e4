"""Garbage under the root: data directories that no manifest names, found and deleted.

A data directory (``data/<step>/<kind>/<epoch>-<id>/``) is written before
its manifest is published (:mod:`~falkirk.spark.pipeline.store.storage`);
a driver that crashed in between, or a step that wrote an item again,
leaves one that no manifest names. :func:`sweep_orphans` lists the data
directories, reads the manifests that can name one (:func:`referenced`:
those of the same step and kind, the only place :meth:`Storage.put
<falkirk.spark.pipeline.store.storage.Storage.put>` accepts) and deletes
the others: run it at start-up.
During a run, :meth:`Storage.sweep_unpublished
<falkirk.spark.pipeline.store.storage.Storage.sweep_unpublished>` deletes
what this driver wrote and did not publish, without reading any manifest.
:class:`~falkirk.spark.pipeline.store.storage.Storage` exposes both
functions as methods (``storage.sweep_orphans()``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["referenced", "sweep_orphans"]


def _data(storage: Storage, steps: Iterable[str] | None = None) -> dict[tuple[str, str], list[str]]:
    """The data directories under the root (of ``steps``, or all), by (step, kind): one listing."""
    names = list(steps) if steps is not None else storage.fs.listdir("data")
    return {
        (step, kind): storage.fs.listdir(f"data/{step}/{kind}")
        for step in names
        for kind in storage.fs.listdir(f"data/{step}")
    }


def referenced(storage: Storage, kinds: Collection[tuple[str, str]] | None = None) -> set[str]:
    """Data directories named by the manifests of ``kinds`` — (step, kind) pairs; by default those that have
    a ``data/<step>/<kind>`` directory.

    A manifest's data is under its own step and kind (:meth:`Storage.put
    <falkirk.spark.pipeline.store.storage.Storage.put>` refuses any other ``data/`` location), so the
    manifests of other kinds cannot name one and are not read: an output's, kept for ever and naming
    ``output/...``, made the S3 soak's restarts grow with the outputs' history when every manifest was read.
    Those read are read together (:meth:`Root.read_many
    <falkirk.spark.pipeline.store.rootfs.Root.read_many>`: concurrently on an object store)."""
    if kinds is None:
        kinds = set(_data(storage))
    names = [
        f"manifests/{step}/{kind}/{name}"
        for step, kind in sorted(kinds)
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

    Which directories hold files comes from one listing of every file under
    each step's data (a request per 1,000 files on an object store), not a
    look into each directory. On a filesystem with directories (local,
    HDFS) an empty one is deleted without being counted. On an object
    store a directory is only a name
    prefix, and one that holds nothing is left alone: some servers keep
    listing such a name after its last object went (SeaweedFS does, for
    every item garbage-collected), and looking into and deleting each of
    them at every start made the S3 soak's restarts grow by ~0.06 s per
    epoch of history.

    Reads the manifests of every (step, kind) that has data: run it at start-up (a crashed driver's
    leftovers); during a run,
    :meth:`~falkirk.spark.pipeline.store.storage.Storage.sweep_unpublished` finds the same directories without
    reading anything.
    """
    # the data directories are listed before the manifests are: a directory listed here whose manifest was
    # published before the manifests are listed is seen as named (a concurrent driver's newer ones are not)
    found = _data(storage, steps)
    held = {
        "/".join(rel.split("/")[:4])
        for step in sorted({step for step, _ in found})
        for rel in storage.fs.files(f"data/{step}")
    }
    refs = referenced(storage, found)
    removed = 0
    for (step, kind), items in found.items():
        for item in items:
            rel = f"data/{step}/{kind}/{item}"
            if rel in refs:
                continue
            if rel in held:
                storage.fs.delete(rel, recursive=True)
                removed += 1
            elif not storage.fs.object_store and storage.fs.isdir(rel):
                storage.fs.delete(rel, recursive=True)
    return removed
