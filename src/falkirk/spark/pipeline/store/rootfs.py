"""The pipeline root as shared storage reached by URI: one interface for every byte under it.

A pipeline root is where the executors (Spark, through Hadoop's
``FileSystem``) and the driver (falkirk, through `fsspec
<https://filesystem-spec.readthedocs.io>`_) read and write the same files.
It may be a plain path (``/mnt/shared/p1``; made absolute, Spark sees
``file:///mnt/shared/p1``) or a URI:

=================  ===================  ================================
root               driver (fsspec)      needs (driver side)
=================  ===================  ================================
``/path``          ``file``             nothing
``file:///path``   ``file``             nothing
``hdfs://nn:8020`` ``hdfs`` (pyarrow)   libhdfs + ``HADOOP_HOME``
``s3a://bucket``   ``s3``               ``s3fs``
``abfss://c@a…``   ``abfs``             ``adlfs``
``gs://bucket``    ``gcs``              ``gcsfs``
``memory://``      ``memory``           nothing (tests; Spark cannot use it)
=================  ===================  ================================

Any other scheme is a :class:`~falkirk.spark.errors.StorageError` naming it;
a missing connector is one naming the package; an unreachable filesystem
fails when the :class:`Root` is made, before anything is written. Never a
local folder named after a URI.

Why fsspec and not Hadoop's ``FileSystem`` through py4j: a Spark Connect
client has no JVM, and the driver's own I/O (manifests, cuts, metadata) is
small; fsspec is the layer pandas, pyarrow and Dask use for the same URIs.
The semantics falkirk relies on are stated here once:

* :meth:`Root.publish` is **write-once**: on a local or NFS-like filesystem
  a temporary file is flushed and hard-linked into place (atomic, fails if
  the name exists), then its directory is flushed, so a published file
  survives a power loss once ``publish`` returns; elsewhere (object
  stores, HDFS) it is create-if-absent and one ``put`` (an object appears
  whole or not at all).
* :meth:`Root.replace` overwrites atomically (rename on local disks, then
  the directory flushed; a single ``put`` on object stores) — for files
  that may change, such as ``pipeline.json``.
* :meth:`Root.sync_file` / :meth:`Root.sync_dir` make files written by
  others (Spark's executors) durable: exactly the files named and the
  directories whose entries changed (``docs/storage.md`` says why that
  suffices).
* :meth:`Root.checksum` is the filesystem's own content checksum where it
  has one (object stores' ETag, MD5 or CRC32C, read from ``info``), so
  verifying does not read the bytes through the driver; on a local or HDFS
  root the driver computes SHA-256.

>>> r = Root("memory://falkirk-doc/root")
>>> r.uri, r.local
('memory://falkirk-doc/root', False)
>>> r.publish("manifests/a.json", b'{"x": 1}')
>>> r.read_bytes("manifests/a.json"), r.exists("manifests/a.json"), r.listdir("manifests")
(b'{"x": 1}', True, ['a.json'])
>>> r.publish("manifests/a.json", b'{"x": 2}')
Traceback (most recent call last):
...
FileExistsError: memory://falkirk-doc/root/manifests/a.json is already published
>>> Root("ftp://example.org/x")
Traceback (most recent call last):
...
falkirk.spark.errors.StorageError: root 'ftp://example.org/x': scheme 'ftp' is not supported (use a path, file://, hdfs://, s3a://, abfss://, gs:// or memory://)
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from falkirk.spark.errors import StorageError

__all__ = ["Root", "SCHEMES", "metadata_cache"]

#: URI scheme → (fsspec protocol, the package that provides it).
SCHEMES: dict[str, tuple[str, str]] = {
    "file": ("file", "fsspec"),
    "hdfs": ("hdfs", "pyarrow (with libhdfs and HADOOP_HOME)"),
    "viewfs": ("hdfs", "pyarrow (with libhdfs and HADOOP_HOME)"),
    "s3": ("s3", "s3fs"),
    "s3a": ("s3", "s3fs"),
    "s3n": ("s3", "s3fs"),
    "abfs": ("abfs", "adlfs"),
    "abfss": ("abfs", "adlfs"),
    "wasb": ("abfs", "adlfs"),
    "wasbs": ("abfs", "adlfs"),
    "gs": ("gcs", "gcsfs"),
    "memory": ("memory", "fsspec"),
}

#: ``info()`` fields holding a content checksum, by filesystem.
_CHECKSUM_FIELDS = ("ETag", "etag", "md5Hash", "crc32c", "content_md5", "md5")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class Root:
    """The storage under one pipeline root (see the module docstring).

    ``uri`` is what Spark is given (a plain path becomes ``file://`` + its
    absolute path); ``fs``/``path`` are the driver's fsspec filesystem and
    the root's path in it. All methods take paths *relative* to the root.
    ``fsync``: local files are flushed to disk before they are published.
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        import fsspec
        from fsspec.core import split_protocol

        text = os.fspath(root)
        self.fsync = fsync
        #: directories whose own entry (in their parent) this Root made durable (sync_dir)
        self._durable: set[str] = set()
        scheme, rest = split_protocol(text)
        if scheme is None or len(scheme) == 1:  # a plain path (or a Windows drive letter)
            absolute = os.path.abspath(text)
            self.uri = Path(absolute).as_uri()
            self.protocol = "file"
            self.path = absolute
        else:
            scheme = scheme.lower()
            if scheme not in SCHEMES:
                raise StorageError(
                    f"root {text!r}: scheme {scheme!r} is not supported (use a path, file://, hdfs://, s3a://, "
                    "abfss://, gs:// or memory://)"
                )
            self.protocol, _ = SCHEMES[scheme]
            self.uri = text.rstrip("/")
            self.path = ""
        self.local = self.protocol == "file"
        package = SCHEMES.get(self.protocol if scheme is None else scheme, ("", "fsspec"))[1]
        try:
            if self.protocol == "hdfs":
                from fsspec.utils import infer_storage_options

                opts = infer_storage_options(text)
                self.fs = fsspec.filesystem("hdfs", host=opts.get("host", "default"), port=opts.get("port", 0))
                self.path = opts["path"].rstrip("/") or "/"
            else:
                self.fs = fsspec.filesystem(self.protocol)
                if not self.path:
                    mapped = f"{self.protocol}://{rest}" if scheme not in ("file", self.protocol) else text
                    self.path = self.fs._strip_protocol(mapped).rstrip("/") or "/"
        except ImportError as exc:
            raise StorageError(
                f"root {text!r}: the driver needs {package} to reach {scheme}:// storage "
                f"(pip install {package.split()[0]}); {_first_line(exc)}"
            ) from None
        except (OSError, ValueError) as exc:
            raise StorageError(f"root {text!r}: cannot reach the filesystem from the driver: {_first_line(exc)}") from None
        try:
            self.fs.makedirs(self.path, exist_ok=True)
        except (OSError, ValueError) as exc:
            raise StorageError(f"root {text!r}: cannot create the root directory: {_first_line(exc)}") from None

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
        return bool(self.fs.exists(self.full(rel)))

    def isdir(self, rel: str) -> bool:
        """Whether ``rel`` is a directory."""
        return bool(self.fs.isdir(self.full(rel)))

    def listdir(self, rel: str = "") -> list[str]:
        """The names directly inside directory ``rel`` (``[]`` if it does not exist), sorted."""
        try:
            entries = self.fs.ls(self.full(rel), detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(posixpath.basename(str(e).rstrip("/")) for e in entries)

    def walk_files(self, rel: str) -> Iterator[tuple[str, int]]:
        """Every file under ``rel`` as ``(path relative to rel, size)``, sorted by path."""
        base = self.full(rel)
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return
        strip = self.fs._strip_protocol(base).rstrip("/") + "/"
        for name in sorted(found):
            info = found[name]
            if info.get("type", "file") != "file":
                continue
            plain = self.fs._strip_protocol(name)
            yield (plain[len(strip):] if plain.startswith(strip) else posixpath.basename(plain)), int(info.get("size") or 0)

    def read_bytes(self, rel: str) -> bytes:
        """The contents of file ``rel`` (``FileNotFoundError`` if absent)."""
        with self.fs.open(self.full(rel), "rb") as fh:
            data: bytes = fh.read()
        return data

    def info(self, rel: str) -> dict[str, Any]:
        """The filesystem's description of ``rel`` (``FileNotFoundError`` if absent)."""
        return dict(self.fs.info(self.full(rel)))

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
        with self.fs.open(self.full(rel), "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return f"sha256:{h.hexdigest()}"

    # -- writing -------------------------------------------------------------------------------
    def makedirs(self, rel: str) -> None:
        """Create directory ``rel`` (and its parents); a no-op on object stores."""
        self.fs.makedirs(self.full(rel), exist_ok=True)

    def _local_temp(self, rel: str, data: bytes) -> str:
        target = self.full(rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = posixpath.join(os.path.dirname(target), f".{posixpath.basename(target)}.{uuid.uuid4().hex[:8]}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
        return tmp

    def replace(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` atomically, replacing what is there (durable when this returns, with ``fsync``)."""
        if self.local:
            os.replace(self._local_temp(rel, data), self.full(rel))
            self.sync_dir(posixpath.dirname(rel))  # the rename is an entry of the directory
            return
        self.fs.pipe_file(self.full(rel), data)

    def publish(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` once: ``FileExistsError`` if ``rel`` already exists (see the module docstring)."""
        if self.local:
            tmp = self._local_temp(rel, data)
            try:
                os.link(tmp, self.full(rel))
            except FileExistsError:
                raise FileExistsError(f"{self.describe(rel)} is already published") from None
            finally:
                os.unlink(tmp)
            self.sync_dir(posixpath.dirname(rel))  # the new name is an entry of its directory: durable before we return
            return
        if self.fs.exists(self.full(rel)):
            raise FileExistsError(f"{self.describe(rel)} is already published")
        self.fs.pipe_file(self.full(rel), data)

    def delete(self, rel: str, *, recursive: bool = False) -> None:
        """Delete ``rel`` (a directory only with ``recursive``); nothing if it does not exist."""
        try:
            self.fs.rm(self.full(rel), recursive=recursive)
        except FileNotFoundError:
            pass
        if recursive and self._durable:  # a directory made again later needs its entry flushed again
            self._durable = {d for d in self._durable if d != rel and not d.startswith(rel + "/")}

    def sync_file(self, rel: str, *, checksum: bool, fsync: bool | None = None) -> str:
        """Make file ``rel`` durable (``fsync``, local roots) and return its checksum (``""`` unless asked).

        One open of the file: on a local root the SHA-256 is computed from
        the bytes read for it (the page cache right after the write) and the
        same descriptor is flushed; elsewhere files are durable on close and
        the checksum is the filesystem's own when it reports one
        (:meth:`checksum`).
        """
        fsync = self.fsync if fsync is None else fsync
        if not self.local:
            return self.checksum(rel) if checksum else ""
        if not (checksum or fsync):
            return ""
        fd = os.open(self.full(rel), os.O_RDONLY)
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
        flush = [posixpath.join(rel, d) for d in sorted(set(subdirs)) if d] + [rel]
        reached = []
        d = rel
        while d and (created or d not in self._durable):  # d's entry in its parent may not be durable yet
            created = False
            reached.append(d)
            d = posixpath.dirname(d)
            flush.append(d)
        for each in dict.fromkeys(flush):
            fd = os.open(self.full(each), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._durable.update(reached)

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
