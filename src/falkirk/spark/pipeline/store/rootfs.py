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

import errno
import hashlib
import os
import posixpath
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from falkirk.errors import FalkirkError
from falkirk.spark.errors import AlreadyPublishedError, StorageError
from falkirk.spark.pipeline.store.connectors import (
    CONDITIONAL_CREATE,
    connector_options,
    refusal,
    store_errors,
)

__all__ = ["Root", "SCHEMES", "DEFAULT_TIMEOUT", "metadata_cache"]

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

#: Seconds one storage operation may take on an object store before it is a StorageError.
DEFAULT_TIMEOUT = 60.0

#: ``info()`` fields holding a content checksum, by filesystem.
_CHECKSUM_FIELDS = ("ETag", "etag", "md5Hash", "crc32c", "content_md5", "md5")

#: Object stores whose conditional create this process has seen refuse a second writer (fs token, bucket).
_WRITE_ONCE_SEEN: set[tuple[str, str]] = set()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


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
        self, root: str | os.PathLike[str], *, fsync: bool = True, storage_options: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        import fsspec
        from fsspec.asyn import AsyncFileSystem
        from fsspec.core import split_protocol

        text = os.fspath(root)
        self.fsync = fsync
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise StorageError(f"root {text!r}: timeout={timeout!r} must be a positive number of seconds")
        self.timeout = float(timeout)
        self.storage_options: dict[str, Any] = dict(storage_options or {})
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
        self.object_store = self.protocol in CONDITIONAL_CREATE
        package = SCHEMES.get(self.protocol if scheme is None else scheme, ("", "fsspec"))[1]
        if self.object_store and self.storage_options.get("use_listings_cache"):
            raise StorageError(
                f"root {text!r}: storage option use_listings_cache=True is refused: falkirk must see the files "
                "other writers add and delete (docs/storage.md, 'No stale reads')")
        try:
            if self.protocol == "hdfs":
                from fsspec.utils import infer_storage_options

                opts = infer_storage_options(text)
                self.fs = fsspec.filesystem("hdfs", **{"host": opts.get("host", "default"), "port": opts.get("port", 0),
                                                       **self.storage_options})
                self.path = opts["path"].rstrip("/") or "/"
            else:
                mapped = f"{self.protocol}://{rest}" if scheme not in (None, "file", self.protocol) else text
                cls = fsspec.get_filesystem_class(self.protocol)
                options = connector_options(self.protocol, cls, mapped if scheme else None, self.storage_options)
                self.fs = fsspec.filesystem(self.protocol, **options)
                if not self.path:
                    self.path = self.fs._strip_protocol(mapped).rstrip("/") or "/"
        except ImportError as exc:
            raise StorageError(
                f"root {text!r}: the driver needs {package} to reach {scheme}:// storage "
                f"(pip install {package.split()[0]}); {_first_line(exc)}"
            ) from None
        except FalkirkError:
            raise
        except TypeError as exc:  # an option the filesystem does not take
            raise self._refused_options(exc) from None
        except store_errors() as exc:
            raise StorageError(f"root {text!r}: cannot reach the filesystem from the driver: {_first_line(exc)}") from None
        self._async = isinstance(self.fs, AsyncFileSystem)
        if self.object_store:
            try:
                self._check_bucket()  # the first request: the connector's client is made now
            except TypeError as exc:
                raise self._refused_options(exc) from None
        else:
            try:
                self._io("create the root directory", "", "makedirs", self.path, exist_ok=True)
            except (FileNotFoundError, FileExistsError, NotADirectoryError) as exc:
                raise self._failure("create the root directory", "", exc) from None

    def _refused_options(self, exc: TypeError) -> StorageError:
        return StorageError(f"root {self.uri}: the {self.protocol} filesystem refuses storage_options "
                            f"{sorted(self.storage_options)}: {_first_line(exc)}")

    def _check_bucket(self) -> None:
        bucket = self.path.split("/", 1)[0]
        what = "container" if self.protocol == "abfs" else "bucket"
        try:
            self._io(f"look up {what} {bucket!r} of", "", "info", bucket)
        except FileNotFoundError:
            raise StorageError(
                f"root {self.uri}: {what} {bucket!r} does not exist (falkirk never creates {what}s: create it, or "
                "fix the name, the endpoint or the account)") from None

    # -- the one way to the filesystem ------------------------------------------------------
    def _failure(self, op: str, rel: str, exc: BaseException) -> StorageError:
        if isinstance(exc, TimeoutError):
            cause = f"no answer within {self.timeout:g} s (the root's timeout)"
        else:
            cause = f"{type(exc).__name__}: {_first_line(exc)}"
        return StorageError(f"root {self.uri}: {op} {self.describe(rel)} failed: {cause}")

    def _io(self, op: str, rel: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``self.fs.<method>(...)``, bounded by ``timeout`` on async filesystems; failures as StorageError.

        ``FileNotFoundError``, ``FileExistsError`` and ``NotADirectoryError``
        are answers, not failures: they pass through.
        """
        if self._async:
            kwargs["timeout"] = self.timeout
        try:
            return getattr(self.fs, method)(*args, **kwargs)
        except (FileNotFoundError, FileExistsError, NotADirectoryError, FalkirkError):
            raise
        except store_errors() as exc:
            raise self._failure(op, rel, exc) from exc

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
        return bool(self._io("check", rel, "exists", self.full(rel)))

    def isdir(self, rel: str) -> bool:
        """Whether ``rel`` is a directory."""
        return bool(self._io("check", rel, "isdir", self.full(rel)))

    def listdir(self, rel: str = "") -> list[str]:
        """The names directly inside directory ``rel`` (``[]`` if it does not exist), sorted; no directory markers."""
        base = self.full(rel)
        try:
            entries = self._io("list", rel, "ls", base, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        itself = self.fs._strip_protocol(base).rstrip("/")
        names = {posixpath.basename(plain) for plain in (self.fs._strip_protocol(str(e)).rstrip("/") for e in entries)
                 if plain and plain != itself}  # an object store's marker ``dir/`` lists as the directory itself
        return sorted(names)

    def walk_files(self, rel: str) -> Iterator[tuple[str, int]]:
        """Every file under ``rel`` as ``(path relative to rel, size)``, sorted by path; no directory markers."""
        base = self.full(rel)
        try:
            found = self._io("list", rel, "find", base, detail=True)
        except FileNotFoundError:
            return
        strip = self.fs._strip_protocol(base).rstrip("/") + "/"
        for name in sorted(found):
            info = found[name]
            if info.get("type", "file") != "file" or str(name).endswith("/"):  # ``dir/`` markers are not files
                continue
            plain = self.fs._strip_protocol(name)
            yield (plain[len(strip):] if plain.startswith(strip) else posixpath.basename(plain)), int(info.get("size") or 0)

    def read_bytes(self, rel: str) -> bytes:
        """The contents of file ``rel`` (``FileNotFoundError`` if absent)."""
        data: bytes = self._io("read", rel, "cat_file", self.full(rel))
        return data

    def info(self, rel: str) -> dict[str, Any]:
        """The filesystem's description of ``rel`` (``FileNotFoundError`` if absent)."""
        return dict(self._io("look up", rel, "info", self.full(rel)))

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
            raise self._failure("checksum", rel, exc) from exc
        return f"sha256:{h.hexdigest()}"

    # -- writing -------------------------------------------------------------------------------
    def makedirs(self, rel: str) -> None:
        """Create directory ``rel`` (and its parents); a no-op on object stores (which never create buckets)."""
        if not self.object_store:
            self._io("create directory", rel, "makedirs", self.full(rel), exist_ok=True)

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
            try:
                os.replace(self._local_temp(rel, data), self.full(rel))
            except OSError as exc:
                raise self._failure("write", rel, exc) from exc
            self.sync_dir(posixpath.dirname(rel))  # the rename is an entry of the directory
            return
        self._io("write", rel, "pipe_file", self.full(rel), data)

    def publish(self, rel: str, data: bytes) -> None:
        """Write ``data`` to ``rel`` once; :class:`~falkirk.spark.errors.AlreadyPublishedError` if ``rel`` exists.

        By the store's own create-if-absent (see the module docstring): two
        writers racing for one name get exactly one success.
        """
        if self.local:
            self._publish_local(rel, data)
            return
        self.check_write_once()
        for attempt in range(3):
            try:
                self._io("publish", rel, "pipe_file", self.full(rel), data, mode="create")
                return
            except (FileExistsError, StorageError) as exc:
                answer = refusal(exc)
                if answer == "exists":
                    raise AlreadyPublishedError(self.describe(rel)) from None
                if answer != "conflict" or attempt == 2:
                    raise

    def _publish_local(self, rel: str, data: bytes) -> None:
        try:
            tmp = self._local_temp(rel, data)
        except OSError as exc:
            raise self._failure("publish", rel, exc) from exc
        try:
            os.link(tmp, self.full(rel))
        except FileExistsError:
            raise AlreadyPublishedError(self.describe(rel)) from None
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EXDEV):
                raise StorageError(
                    f"root {self.uri}: cannot publish {self.describe(rel)} write-once: this filesystem refuses hard "
                    f"links ({_first_line(exc)}), falkirk's atomic create-if-absent; falkirk does not publish "
                    "manifests unsafely (use a filesystem with hard links, or an object store)") from exc
            raise self._failure("publish", rel, exc) from exc
        finally:
            os.unlink(tmp)
        self.sync_dir(posixpath.dirname(rel))  # the new name is an entry of its directory: durable before we return

    def check_write_once(self) -> None:
        """Refuse (:class:`~falkirk.spark.errors.StorageError`) a store on which :meth:`publish` cannot be write-once.

        HDFS through pyarrow has no create-if-absent and its rename replaces;
        an object store is asked once per process and bucket: a probe object
        created twice with the conditional create must be refused the second
        time (some S3-compatible servers ignore ``If-None-Match``).
        """
        if self.protocol == "hdfs":
            raise StorageError(
                f"root {self.uri}: falkirk cannot publish write-once on HDFS from the driver: pyarrow's HDFS client "
                "has no create-if-absent and its rename replaces an existing file, so two drivers could overwrite "
                "each other's manifests; falkirk refuses to run rather than publish unsafely (use an object store "
                "root, or a local mount of the cluster filesystem that supports hard links)")
        if not self.object_store:
            return
        key = (str(getattr(self.fs, "_fs_token", id(self.fs))), self.path.split("/", 1)[0])
        if key in _WRITE_ONCE_SEEN:
            return
        probe = f".falkirk-write-once-probe-{uuid.uuid4().hex}"
        try:
            self._io("probe the conditional create of", probe, "pipe_file", self.full(probe), b"1", mode="create")
            try:
                self._io("probe the conditional create of", probe, "pipe_file", self.full(probe), b"2", mode="create")
            except (FileExistsError, StorageError) as exc:
                if refusal(exc) != "exists":
                    raise
            else:
                raise StorageError(
                    f"root {self.uri}: the store accepted a second conditional create ({CONDITIONAL_CREATE[self.protocol]}) "
                    "of the same object: it does not enforce write-once, so two drivers could overwrite each "
                    "other's manifests; falkirk refuses to run rather than publish unsafely (use a store that "
                    "honours conditional writes)")
        finally:
            try:
                self._io("delete", probe, "rm", self.full(probe))
            except FileNotFoundError:
                pass
        _WRITE_ONCE_SEEN.add(key)

    def delete(self, rel: str, *, recursive: bool = False) -> None:
        """Delete ``rel`` (a directory only with ``recursive``); nothing if it does not exist."""
        try:
            self._io("delete", rel, "rm", self.full(rel), recursive=recursive)
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
            try:
                fd = os.open(self.full(each), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise self._failure("flush", each, exc) from exc
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
