"""Local-path fast paths of a root: temporary files, atomic renames, and what ``fsync`` makes durable.

On a local (or mounted) root, :class:`~falkirk.spark.pipeline.store.rootfs.Root`
writes through the operating system instead of fsspec:

* :func:`write_temp` writes a new file beside its target (flushed to disk
  with ``fsync``) — what :func:`replace` renames over the target and
  :mod:`~falkirk.spark.pipeline.store.writeonce` hard-links to it;
* :func:`sync_file` flushes one file and computes its SHA-256 from the
  same read (the page cache right after the write);
* :class:`DurableDirs` flushes directories whose entries changed, and
  remembers which directories' own entries (in their parents) are
  durable already, so a directory is flushed only when needed
  (``docs/storage.md`` says why that suffices).

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> tmp = write_temp(os.path.join(d, "a.json"), b"{}", fsync=False)
>>> os.path.basename(tmp).startswith(".a.json."), open(tmp, "rb").read()
(True, b'{}')
>>> sync_file(tmp, checksum=True, fsync=False)[:7]
'sha256:'
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.fscalls import FsCalls

__all__ = ["write_temp", "replace", "sync_file", "DurableDirs"]


def write_temp(target: str, data: bytes, *, fsync: bool) -> str:
    """``data`` in a new temporary file beside ``target`` (its directory made if needed); the file's path."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = posixpath.join(os.path.dirname(target), f".{posixpath.basename(target)}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
    return tmp


def replace(calls: FsCalls, target: str, rel: str, data: bytes, *, fsync: bool) -> None:
    """Write ``data`` to ``target`` (the local path of ``rel``) by a rename over it: atomic, never half
    written.

    The directory holding ``target`` is the caller's to flush (the rename is one of its entries).
    """
    try:
        os.replace(write_temp(target, data, fsync=fsync), target)
    except OSError as exc:
        raise calls.failure("write", rel, exc) from exc


def sync_file(path: str, *, checksum: bool, fsync: bool) -> str:
    """Flush file ``path`` (``fsync``) and return its SHA-256 (``sha256:…``; ``""`` unless ``checksum``): one
    open."""
    if not (checksum or fsync):
        return ""
    fd = os.open(path, os.O_RDONLY)
    try:
        digest = ""
        if checksum:
            h = hashlib.sha256()
            for chunk in iter(lambda: os.read(fd, 1 << 20), b""):
                h.update(chunk)
            digest = f"sha256:{h.hexdigest()}"
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return digest


class DurableDirs:
    """The directories of one root whose own entry (in their parent) it has made durable, and the flushing."""

    #: directories remembered at most: forgetting one only costs flushing its parent again, and every output
    #: epoch adds one (``output/<name>/epoch=E``), so a long run would otherwise grow the set without end
    LIMIT = 4096

    def __init__(self) -> None:
        #: directories (relative to the root) whose entry in their parent is durable
        self.done: set[str] = set()

    def sync(
        self,
        calls: FsCalls,
        full: Callable[[str], str],
        rel: str,
        subdirs: Iterable[str] = (),
        *,
        created: bool = False,
    ) -> None:
        """Flush ``rel``'s ``subdirs``, ``rel``, and the parents of ``rel`` and of ancestors not yet durable.

        ``full(rel)`` is the local path of ``rel``; ``created``: ``rel`` is
        new, so its parent's entry is flushed even if an earlier ``rel`` of
        that name was. See :meth:`Root.sync_dir <falkirk.spark.pipeline.store.rootfs.Root.sync_dir>`.
        """
        flush = [posixpath.join(rel, d) for d in sorted(set(subdirs)) if d] + [rel]
        reached = []
        d = rel
        while d and (created or d not in self.done):  # d's entry in its parent may not be durable yet
            created = False
            reached.append(d)
            d = posixpath.dirname(d)
            flush.append(d)
        for each in dict.fromkeys(flush):
            try:
                fd = os.open(full(each), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise calls.failure("flush", each, exc) from exc
        if len(self.done) + len(reached) > self.LIMIT:
            self.done.clear()
        self.done.update(reached)

    def forget(self, rel: str) -> None:
        """Directory ``rel`` was deleted: it and the directories under it, made again later, need flushing
        again."""
        if self.done:
            self.done = {d for d in self.done if d != rel and not d.startswith(rel + "/")}
