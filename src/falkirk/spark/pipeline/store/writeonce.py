"""Write-once publishing: a name is created once, by the store itself, or the publish fails.

What :meth:`Root.publish <falkirk.spark.pipeline.store.rootfs.Root.publish>`
relies on, per kind of root:

* a local or NFS-like filesystem: a **hard link** from a temporary file
  (:func:`~falkirk.spark.pipeline.store.localdisk.write_temp`) to the name
  — the kernel's create-if-absent — then the directory flushed, so a
  published file survives a power loss (with ``fsync``); a filesystem
  without hard links is refused, never published to unsafely;
* an object store: its **conditional create** (S3 and Azure
  ``If-None-Match: *``, GCS ``ifGenerationMatch=0``), retried on S3's
  ``409 ConditionalRequestConflict``. :func:`check_write_once` first asks
  the store, once per process and bucket, to refuse a second create of a
  probe object: a server that ignores the condition is refused;
* HDFS through pyarrow has neither (Arrow's rename replaces): refused.

A name taken is one :class:`~falkirk.spark.errors.AlreadyPublishedError`
(a ``FileExistsError``), whatever the store answered
(:func:`~falkirk.spark.pipeline.store.connectors.refusal`).

>>> from falkirk.spark.pipeline.store.rootfs import Root
>>> r = Root("memory://falkirk-doc/writeonce")
>>> r.publish("a.json", b"1")
>>> r.publish("a.json", b"2")
Traceback (most recent call last):
...
falkirk.spark.errors.AlreadyPublishedError: memory://falkirk-doc/writeonce/a.json is already published
"""

from __future__ import annotations

import errno
import os
import posixpath
import uuid
from typing import TYPE_CHECKING

from falkirk.spark.errors import AlreadyPublishedError, StorageError
from falkirk.spark.pipeline.store.connectors import CONDITIONAL_CREATE, refusal
from falkirk.spark.pipeline.store.fscalls import FsCalls, first_line
from falkirk.spark.pipeline.store.localdisk import write_temp

if TYPE_CHECKING:
    from falkirk.spark.pipeline.store.rootfs import Root

__all__ = ["publish", "check_write_once"]

#: Object stores whose conditional create this process has seen refuse a second writer (fs token, bucket).
_WRITE_ONCE_SEEN: set[tuple[str, str]] = set()


def publish(root: Root, calls: FsCalls, rel: str, data: bytes) -> None:
    """Write ``data`` to ``root``'s ``rel`` once; :class:`~falkirk.spark.errors.AlreadyPublishedError` if it
    exists."""
    if root.local:
        _publish_local(root, calls, rel, data)
        return
    check_write_once(root, calls)
    for attempt in range(3):
        try:
            calls("publish", rel, "pipe_file", root.full(rel), data, mode="create")
            return
        except (FileExistsError, StorageError) as exc:
            answer = refusal(exc)
            if answer == "exists":
                raise AlreadyPublishedError(root.describe(rel)) from None
            if answer != "conflict" or attempt == 2:
                raise


def _publish_local(root: Root, calls: FsCalls, rel: str, data: bytes) -> None:
    try:
        tmp = write_temp(root.full(rel), data, fsync=root.fsync)
    except OSError as exc:
        raise calls.failure("publish", rel, exc) from exc
    try:
        os.link(tmp, root.full(rel))
    except FileExistsError:
        raise AlreadyPublishedError(root.describe(rel)) from None
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EXDEV):
            raise StorageError(
                f"root {root.uri}: cannot publish {root.describe(rel)} write-once: this filesystem refuses hard "
                f"links ({first_line(exc)}), falkirk's atomic create-if-absent; falkirk does not publish "
                "manifests unsafely (use a filesystem with hard links, or an object store)"
            ) from exc
        raise calls.failure("publish", rel, exc) from exc
    finally:
        os.unlink(tmp)
    # the new name is an entry of its directory: durable before we return
    root.sync_dir(posixpath.dirname(rel))


def check_write_once(root: Root, calls: FsCalls) -> None:
    """Refuse (:class:`~falkirk.spark.errors.StorageError`) a root on which :func:`publish` cannot be
    write-once.

    HDFS through pyarrow has no create-if-absent and its rename replaces;
    an object store is asked once per process and bucket: a probe object
    created twice with the conditional create must be refused the second
    time (some S3-compatible servers ignore ``If-None-Match``).
    """
    if root.protocol == "hdfs":
        raise StorageError(
            f"root {root.uri}: falkirk cannot publish write-once on HDFS from the driver: pyarrow's HDFS client "
            "has no create-if-absent and its rename replaces an existing file, so two drivers could overwrite "
            "each other's manifests; falkirk refuses to run rather than publish unsafely (use an object store "
            "root, or a local mount of the cluster filesystem that supports hard links)"
        )
    if not root.object_store:
        return
    key = (str(getattr(root.fs, "_fs_token", id(root.fs))), root.path.split("/", 1)[0])
    if key in _WRITE_ONCE_SEEN:
        return
    probe = f".falkirk-write-once-probe-{uuid.uuid4().hex}"
    try:
        calls("probe the conditional create of", probe, "pipe_file", root.full(probe), b"1", mode="create")
        try:
            calls(
                "probe the conditional create of", probe, "pipe_file", root.full(probe), b"2", mode="create"
            )
        except (FileExistsError, StorageError) as exc:
            if refusal(exc) != "exists":
                raise
        else:
            raise StorageError(
                f"root {root.uri}: the store accepted a second conditional create ({CONDITIONAL_CREATE[root.protocol]}) "
                "of the same object: it does not enforce write-once, so two drivers could overwrite each "
                "other's manifests; falkirk refuses to run rather than publish unsafely (use a store that "
                "honours conditional writes)"
            )
    finally:
        try:
            calls("delete", probe, "rm", root.full(probe))
        except FileNotFoundError:
            pass
    _WRITE_ONCE_SEEN.add(key)
