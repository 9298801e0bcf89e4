"""The pipeline root as shared storage reached by URI: one interface for every byte under it.

A pipeline root is where the executors (Spark, through Hadoop's
``FileSystem``) and the driver (falkirk, through `fsspec
<https://filesystem-spec.readthedocs.io>`_) read and write the same files.
It may be a plain path (``/mnt/shared/p1``; made absolute, Spark sees
``file:///mnt/shared/p1``) or a URI whose scheme :data:`SCHEMES` maps to an
fsspec protocol and the driver-side package it needs: ``file://``,
``s3a://`` (s3fs), ``gs://`` (gcsfs), ``abfss://``/``wasbs://`` (adlfs),
``hdfs://`` (pyarrow with libhdfs), ``memory://`` (tests; Spark cannot use it).
Any other scheme is a :class:`~falkirk.spark.errors.StorageError` naming it;
a missing connector is one naming the package; an unreachable filesystem
fails when the :class:`Root` is made, before anything is written. Never a
local folder named after a URI.

Why fsspec and not Hadoop's ``FileSystem`` through py4j: a Spark Connect
client has no JVM, and the driver's own I/O (manifests, cuts, metadata) is
small. The semantics falkirk relies on, stated once (``docs/storage.md`` has
the table per store and each store's configuration):

* :meth:`Root.publish` is **write-once by the store itself**: a hard link on
  a local or NFS-like filesystem; the conditional create of S3 (``If-None-Match:
  *``), GCS (``ifGenerationMatch=0``) and Azure (``If-None-Match: *``), checked
  once per process and bucket (a server ignoring it is refused). A name taken
  is one :class:`~falkirk.spark.errors.AlreadyPublishedError` (a
  ``FileExistsError``), whatever the store answered. HDFS through pyarrow has
  neither (Arrow's rename replaces): publishing there is refused. Locally
  the published name's directory is flushed before ``publish`` returns, so
  a published file survives a power loss (with ``fsync``).
* :meth:`Root.replace` overwrites atomically (rename locally, then the
  directory flushed; one ``put`` on object stores), for files that may change
  such as ``pipeline.json``.
* :meth:`Root.sync_file` / :meth:`Root.sync_dir` make files written by
  others (Spark's executors) durable: exactly the files named and the
  directories whose entries changed (``docs/storage.md`` says why that
  suffices).
* **No stale reads**: object stores are opened with fsspec's listing cache
  off, so listings, ``info`` and verifications see other writers' changes.
  **Directory markers** (``dir/`` objects) are never entries or files.
* **Every failure is a** :class:`~falkirk.spark.errors.StorageError` naming
  the root, the operation and the cause, within ``timeout`` seconds per
  object-store operation; ``FileNotFoundError`` stays an answer. A missing
  bucket is an error naming it: falkirk never creates buckets.
* :meth:`Root.checksum` is the store's own (ETag, MD5, CRC32C from ``info``)
  where it has one, else SHA-256 computed by the driver.

``storage_options`` go to the fsspec filesystem as they are (``endpoint_url``,
``key``/``secret``…); without them the connector reads its environment.

This module is the interface; the work is done by one module per role:
:mod:`~falkirk.spark.pipeline.store.schemes` (which URI reaches which
filesystem, opening it), :mod:`~falkirk.spark.pipeline.store.connectors`
(each connector's options and dialect), :mod:`~falkirk.spark.pipeline.store.fscalls`
(every call bounded by the timeout, failures as ``StorageError``),
:mod:`~falkirk.spark.pipeline.store.writeonce` (publishing write-once) and
:mod:`~falkirk.spark.pipeline.store.localdisk` (the local-path fast paths:
temporary files, renames, ``fsync``).

>>> r = Root("memory://falkirk-doc/root")
>>> r.uri, r.local
('memory://falkirk-doc/root', False)
>>> r.publish("manifests/a.json", b'{"x": 1}')
>>> r.read_bytes("manifests/a.json"), r.exists("manifests/a.json"), r.listdir("manifests")
(b'{"x": 1}', True, ['a.json'])
>>> r.publish("manifests/a.json", b'{"x": 2}')
Traceback (most recent call last):
...
falkirk.spark.errors.AlreadyPublishedError: memory://falkirk-doc/root/manifests/a.json is already published
>>> Root("ftp://example.org/x")
Traceback (most recent call last):
...
falkirk.spark.errors.StorageError: root 'ftp://example.org/x': scheme 'ftp' is not supported (use a path, file://, hdfs://, s3a://, abfss://, gs:// or memory://)
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from falkirk.spark.errors import StorageError
from falkirk.spark.pipeline.store import localdisk, writeonce
from falkirk.spark.pipeline.store.connectors import CONDITIONAL_CREATE, store_errors
from falkirk.spark.pipeline.store.fscalls import DEFAULT_TIMEOUT, FsCalls
from falkirk.spark.pipeline.store.schemes import SCHEMES, check_bucket, open_filesystem, refused_options

__all__ = ["Root", "SCHEMES", "DEFAULT_TIMEOUT", "metadata_cache"]

#: ``info()`` fields holding a content checksum, by filesystem.
_CHECKSUM_FIELDS = ("ETag", "etag", "md5Hash", "crc32c", "content_md5", "md5")


class Root:
    """The storage under one pipeline root (see the module docstring).

    ``uri`` is what Spark is given (a plain path becomes ``file://`` + its
    absolute path); ``fs``/``path`` are the driver's fsspec filesystem and
    the root's path in it. All methods take paths *relative* to the root.
    ``fsync``: local files are flushed to disk before they are published.
    ``storage_options``: keyword arguments of the fsspec filesystem
    (``docs/storage.md`` shows S3, GCS and Azure). ``timeout``: seconds one
    operation on an object store may take before it fails as a
    :class:`~falkirk.spark.errors.StorageError`.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = True,
        storage_options: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        text = os.fspath(root)
        self.fsync = fsync
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise StorageError(f"root {text!r}: timeout={timeout!r} must be a positive number of seconds")
        self.timeout = float(timeout)
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        #: directories whose own entry (in their parent) this Root made durable (sync_dir)
        self._dirs = localdisk.DurableDirs()
        self.uri, self.protocol, self.path, self.fs = open_filesystem(text, self.storage_options)
        self.local = self.protocol == "file"
        self.object_store = self.protocol in CONDITIONAL_CREATE
        #: every call to the filesystem (timeouts, errors): handed to the root's modules, never made elsewhere
        self._calls = FsCalls(self.fs, self.describe, self.timeout)
        if self.object_store:
            try:
                # the first request: the client is made
                check_bucket(self._calls, self.uri, self.protocol, self.path)
            except TypeError as exc:
                raise refused_options(self.uri, self.protocol, self.storage_options, exc) from None
        else:
            try:
                self._calls("create the root directory", "", "makedirs", self.path, exist_ok=True)
            except (FileNotFoundError, FileExistsError, NotADirectoryError) as exc:
                raise self._calls.failure("create the root directory", "", exc) from None

    # -- names ------------------------------------------------------------------------------
    def full(self, rel: str = "") -> str:
        """The driver-side (fsspec) path of ``rel``."""
        return posixpath.join(self.path, rel) if rel else self.path

    def spark_uri(self, rel: str = "") -> str:
        """The URI Spark reads and writes for ``rel``."""
        return f"{self.uri}/{rel}" if rel else self.uri

    def describe(self, rel: str = "") -> str:
        """``rel`` as a user would name it (in errors)."""
        return self.spark_uri(rel)

    def local_path(self, rel: str = "") -> Path | None:
        """``rel`` as a local path when the root is on a local (or mounted) filesystem, else ``None``."""
        return Path(self.full(rel)) if self.local else None

    # -- reading ------------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists."""
        return bool(self._calls("check", rel, "exists", self.full(rel)))

    def isdir(self, rel: str) -> bool:
        """Whether ``rel`` is a directory."""
        return bool(self._calls("check", rel, "isdir", self.full(rel)))

    def listdir(self, rel: str = "") -> list[str]:
        """The names directly inside directory ``rel`` (``[]`` if it does not exist), sorted; no directory
        markers."""
        base = self.full(rel)
        try:
            entries = self._calls("list", rel, "ls", base, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        itself = self.fs._strip_protocol(base).rstrip("/")
        names = {
            posixpath.basename(plain)
            for plain in (self.fs._strip_protocol(str(e)).rstrip("/") for e in entries)
            # an object store's marker ``dir/`` lists as the directory itself
            if plain and plain != itself
        }
        return sorted(names)

    def walk_files(self, rel: str) -> Iterator[tuple[str, int]]:
        """Every file under ``rel`` as ``(path relative to rel, size)``, sorted by path; no directory
        markers (one :meth:`files` listing)."""
        prefix = rel.strip("/") + "/" if rel.strip("/") else ""
        for path, info in sorted(self.files(rel).items()):
            yield (
                path[len(prefix) :] if path.startswith(prefix) else posixpath.basename(path),
                int(info.get("size") or 0),
            )

    def files(self, rel: str) -> dict[str, dict[str, Any]]:
        """Every file under ``rel``, keyed by its path relative to the root, with the filesystem's description
        (size, and an object store's ETag): one listing (an object store's: a request per 1,000 files)."""
        base = self.full(rel)
        try:
            found = self._calls("list", rel, "find", base, detail=True)
        except FileNotFoundError:
            return {}
        strip = self.fs._strip_protocol(self.full()).rstrip("/") + "/"
        out = {}
        for name, info in found.items():
            plain = self.fs._strip_protocol(name)
            # ``dir/`` markers are not files
            if info.get("type", "file") == "file" and not str(name).endswith("/") and plain.startswith(strip):
                out[plain[len(strip) :]] = dict(info)
        return out

    #: files one :meth:`read_many` call asks for at once (each call is bounded by the root's timeout)
    READ_BATCH = 256

    def read_many(self, rels: list[str]) -> dict[str, bytes | FileNotFoundError]:
        """The contents of files ``rels`` (an object store's read concurrently); an absent file maps to a
        ``FileNotFoundError``; any other failure to read one is the store's (``StorageError``), as in
        :meth:`read_bytes`."""
        out: dict[str, bytes | FileNotFoundError] = {}
        for i in range(0, len(rels), self.READ_BATCH):
            chunk = rels[i : i + self.READ_BATCH]
            by_path = {self.fs._strip_protocol(self.full(r)): r for r in chunk}
            got = self._calls("read", chunk[0], "cat", list(by_path), on_error="return")
            if not isinstance(got, dict):  # one path: fsspec answers with its bytes
                got = {next(iter(by_path)): got}
            for path, rel in by_path.items():
                value = got.get(path, FileNotFoundError(rel))
                if isinstance(value, Exception) and not isinstance(value, FileNotFoundError):
                    raise self._calls.failure("read", rel, value) from value
                out[rel] = value
        return out

    #: bytes of a Parquet file's tail read to find its footer (a larger footer takes a second read)
    TAIL = 64 * 1024

    def parquet_rows(self, files: Mapping[str, int]) -> dict[str, int | str | None]:
        """The rows each Parquet file of ``files`` (relative path → size) holds, from its footer alone: one
        ranged read of its tail (an object store's concurrently), a second one for a footer larger than
        :attr:`TAIL`. A file that is gone or is not a whole Parquet file maps to what is wrong with it (a
        sentence); one whose footer is encrypted (``PARE``) to ``None``: its rows cannot be read here."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        rels = list(files)
        out: dict[str, int | str | None] = {}
        for i in range(0, len(rels), self.READ_BATCH):
            chunk = rels[i : i + self.READ_BATCH]
            starts = [max(0, files[r] - self.TAIL) for r in chunk]
            got = self._calls(
                "read",
                chunk[0],
                "cat_ranges",
                [self.full(r) for r in chunk],
                starts,
                [files[r] for r in chunk],
                on_error="return",
            )
            for rel, start, tail in zip(chunk, starts, got, strict=True):
                size = files[rel]
                if isinstance(tail, FileNotFoundError):
                    out[rel] = "is gone"
                    continue
                if isinstance(tail, Exception):
                    raise self._calls.failure("read", rel, tail) from tail
                if len(tail) >= 12 and tail[-4:] == b"PARE" and len(tail) == size - start:
                    out[rel] = None
                    continue
                if len(tail) < 12 or tail[-4:] != b"PAR1" or len(tail) != size - start:
                    out[rel] = f"is not a whole Parquet file ({size} bytes listed, no footer at its end)"
                    continue
                need = int.from_bytes(tail[-8:-4], "little") + 8
                if need > size:
                    out[rel] = f"has a footer longer than the file ({need} bytes of {size})"
                    continue
                try:
                    if need > len(tail):
                        tail = self._calls(
                            "read", rel, "cat_file", self.full(rel), start=size - need, end=size
                        )
                    out[rel] = pq.read_metadata(pa.BufferReader(tail)).num_rows
                except FileNotFoundError:
                    out[rel] = "is gone"
                except (OSError, ValueError, pa.ArrowException) as exc:  # ArrowInvalid is a ValueError
                    if isinstance(exc, StorageError):
                        raise
                    out[rel] = f"has an unreadable footer ({type(exc).__name__}: {exc})"
        return out

    def read_bytes(self, rel: str) -> bytes:
        """The contents of file ``rel`` (``FileNotFoundError`` if absent)."""
        data: bytes = self._calls("read", rel, "cat_file", self.full(rel))
        return data

    def info(self, rel: str) -> dict[str, Any]:
        """The filesystem's description of ``rel`` (``FileNotFoundError`` if absent)."""
        return dict(self._calls("look up", rel, "info", self.full(rel)))

    def size(self, rel: str = "") -> int:
        """Bytes under ``rel`` (0 if it does not exist)."""
        return sum(s for _, s in self.walk_files(rel))

    def checksum(self, rel: str, info: dict[str, Any] | None = None) -> str:
        """A content checksum of file ``rel``: the filesystem's own (``etag:…``) or SHA-256 (``sha256:…``)."""
        info = info if info is not None else self.info(rel)
        for key in _CHECKSUM_FIELDS:
            value = info.get(key)
            if value:
                return f"{key.lower()}:{str(value).strip(chr(34))}"
        h = hashlib.sha256()
        try:
            with self.fs.open(self.full(rel), "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        except FileNotFoundError:
            raise
        except store_errors() as exc:
            raise self._calls.failure("checksum", rel, exc) from exc
        return f"sha256:{h.hexdigest()}"

    # -- writing -------------------------------------------------------------------------------
    def makedirs(self, rel: str) -> None:
        """Create directory ``rel`` (and its parents); a no-op on object stores (which never create
        buckets)."""
        if not self.object_store:
            self._calls("create directory", rel, "makedirs", self.full(rel), exist_ok=True)

    def write_new(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel``, a new file in a directory no manifest names yet (a data file: made durable
        when the data is described, :meth:`sync_file`), whole or not at all as a reader listing the directory
        sees it: on a local root written under a hidden name and renamed (an object appears whole anyway)."""
        if self.local:
            localdisk.replace(self._calls, self.full(rel), rel, data, fsync=False)
            return
        self._calls("write", rel, "pipe_file", self.full(rel), data)

    def replace(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` atomically, replacing what is there (durable when this returns, with
        ``fsync``)."""
        if self.local:
            localdisk.replace(self._calls, self.full(rel), rel, data, fsync=self.fsync)
            self.sync_dir(posixpath.dirname(rel))  # the rename is an entry of the directory
            return
        self._calls("write", rel, "pipe_file", self.full(rel), data)

    def publish(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` once; :class:`~falkirk.spark.errors.AlreadyPublishedError` if ``rel``
        exists.

        By the store's own create-if-absent (see the module docstring and
        :mod:`~falkirk.spark.pipeline.store.writeonce`): two writers racing
        for one name get exactly one success.
        """
        writeonce.publish(self, self._calls, rel, data)

    def check_write_once(self) -> None:
        """Refuse (:class:`~falkirk.spark.errors.StorageError`) a store on which :meth:`publish` cannot be
        write-once.

        HDFS, and an object store that ignores the conditional create (asked
        once per process and bucket): :func:`~falkirk.spark.pipeline.store.writeonce.check_write_once`.
        """
        writeonce.check_write_once(self, self._calls)

    def delete(self, rel: str, *, recursive: bool = False) -> None:
        """Delete ``rel`` (a directory only with ``recursive``); nothing if it does not exist."""
        try:
            self._calls("delete", rel, "rm", self.full(rel), recursive=recursive)
        except FileNotFoundError:
            pass
        if recursive:  # a directory made again later needs its entry flushed again
            self._dirs.forget(rel)

    def sync_file(self, rel: str, *, checksum: bool, fsync: bool | None = None) -> str:
        """Make file ``rel`` durable (``fsync``, local roots) and return its checksum (``""`` unless asked).

        One open of the file: on a local root the SHA-256 is computed from
        the bytes read for it (the page cache right after the write) and the
        same descriptor is flushed
        (:func:`~falkirk.spark.pipeline.store.localdisk.sync_file`);
        elsewhere files are durable on close and the checksum is the
        filesystem's own when it reports one (:meth:`checksum`).
        """
        fsync = self.fsync if fsync is None else fsync
        if not self.local:
            return self.checksum(rel) if checksum else ""
        return localdisk.sync_file(self.full(rel), checksum=checksum, fsync=fsync)

    def sync_dir(self, rel: str, subdirs: Iterable[str] = (), *, created: bool = False) -> None:
        """Make the entries of directory ``rel`` durable (local roots with ``fsync``; elsewhere a no-op).

        Flushes ``rel``'s ``subdirs`` (relative to it), ``rel`` itself and, for
        ``rel`` and each ancestor whose own entry this :class:`Root` has not
        made durable yet, the directory holding it (``created``: ``rel`` is
        new, so its parent's entry is flushed even if an earlier ``rel`` of
        that name was). Files are flushed by :meth:`sync_file`; a directory
        is flushed only when its entries changed.
        """
        if not (self.local and self.fsync):
            return
        self._dirs.sync(self._calls, self.full, rel, subdirs, created=created)

    def __repr__(self) -> str:
        return f"Root({self.uri!r})"


def metadata_cache(root: Root) -> Path:
    """Where the monitor's SQLite database lives for ``root``.

    It is a cache: a starting executor rebuilds it from the manifests under
    the root (the source of truth), so a driver restarted on another machine
    with only the root URI resumes correctly. On a local (or mounted) root it
    is ``root/meta.sqlite`` (``falkirk monitor --db`` reads it there); for any
    other root, a per-root directory under ``$FALKIRK_CACHE`` (default: the
    system's temporary directory).
    """
    local = root.local_path("meta.sqlite")
    if local is not None:
        return local
    import tempfile

    base = Path(os.environ.get("FALKIRK_CACHE") or Path(tempfile.gettempdir()) / "falkirk-cache")
    where = base / hashlib.sha256(root.uri.encode()).hexdigest()[:16]
    where.mkdir(parents=True, exist_ok=True)
    return where / "meta.sqlite"
