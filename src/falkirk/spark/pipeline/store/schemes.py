"""Which root reaches which filesystem: URI schemes, and opening a root's fsspec filesystem.

A root is a plain path (made absolute; Spark sees ``file://`` + the path)
or a URI whose scheme :data:`SCHEMES` maps to an fsspec protocol and the
driver-side package it needs. :func:`open_filesystem` opens it with the
connector's options (:func:`~falkirk.spark.pipeline.store.connectors.connector_options`)
under the user's ``storage_options``; :func:`check_bucket` makes the first
request to an object store. Every way this can fail is a
:class:`~falkirk.spark.errors.StorageError` naming the root: a scheme not
supported, a package missing (named, with its ``pip install``), an option
the filesystem refuses, a filesystem that cannot be reached, a bucket that
does not exist (falkirk never creates buckets).
:class:`~falkirk.spark.pipeline.store.rootfs.Root` is the one user.

>>> opened = open_filesystem("memory://falkirk-doc/schemes/", {})
>>> opened.uri, opened.protocol, opened.path
('memory://falkirk-doc/schemes', 'memory', '/falkirk-doc/schemes')
>>> open_filesystem("ftp://example.org/x", {})
Traceback (most recent call last):
...
falkirk.spark.errors.StorageError: root 'ftp://example.org/x': scheme 'ftp' is not supported (use a path, file://, hdfs://, s3a://, abfss://, gs:// or memory://)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from falkirk.errors import FalkirkError
from falkirk.spark.errors import StorageError
from falkirk.spark.pipeline.store.connectors import CONDITIONAL_CREATE, connector_options, store_errors
from falkirk.spark.pipeline.store.fscalls import FsCalls, first_line

__all__ = ["SCHEMES", "Opened", "open_filesystem", "check_bucket", "refused_options"]

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


class Opened(NamedTuple):
    """A root's filesystem, opened: the URI Spark is given, the fsspec protocol, the root's path in ``fs``."""

    uri: str
    protocol: str
    path: str
    fs: Any


def refused_options(
    uri: str, protocol: str, storage_options: Mapping[str, Any], exc: TypeError
) -> StorageError:
    """The error saying that the filesystem does not take the ``storage_options`` given."""
    return StorageError(
        f"root {uri}: the {protocol} filesystem refuses storage_options "
        f"{sorted(storage_options)}: {first_line(exc)}"
    )


def open_filesystem(text: str, storage_options: Mapping[str, Any]) -> Opened:
    """The fsspec filesystem of the root ``text`` (a path or a URI), opened with ``storage_options``.

    Nothing is requested from an object store yet (:func:`check_bucket`
    does that); a local root's directory is not made.
    """
    import fsspec
    from fsspec.core import split_protocol

    scheme, rest = split_protocol(text)
    if scheme is None or len(scheme) == 1:  # a plain path (or a Windows drive letter)
        absolute = os.path.abspath(text)
        uri = Path(absolute).as_uri()
        protocol = "file"
        path = absolute
    else:
        scheme = scheme.lower()
        if scheme not in SCHEMES:
            raise StorageError(
                f"root {text!r}: scheme {scheme!r} is not supported (use a path, file://, hdfs://, s3a://, "
                "abfss://, gs:// or memory://)"
            )
        protocol, _ = SCHEMES[scheme]
        uri = text.rstrip("/")
        path = ""
    package = SCHEMES.get(protocol if scheme is None else scheme, ("", "fsspec"))[1]
    if protocol in CONDITIONAL_CREATE and storage_options.get("use_listings_cache"):
        raise StorageError(
            f"root {text!r}: storage option use_listings_cache=True is refused: falkirk must see the files "
            "other writers add and delete (docs/storage.md, 'No stale reads')"
        )
    try:
        if protocol == "hdfs":
            from fsspec.utils import infer_storage_options

            opts = infer_storage_options(text)
            fs = fsspec.filesystem(
                "hdfs",
                **{"host": opts.get("host", "default"), "port": opts.get("port", 0), **storage_options},
            )
            path = opts["path"].rstrip("/") or "/"
        else:
            mapped = f"{protocol}://{rest}" if scheme not in (None, "file", protocol) else text
            cls = fsspec.get_filesystem_class(protocol)
            options = connector_options(protocol, cls, mapped if scheme else None, storage_options)
            fs = fsspec.filesystem(protocol, **options)
            if not path:
                path = fs._strip_protocol(mapped).rstrip("/") or "/"
    except ImportError as exc:
        raise StorageError(
            f"root {text!r}: the driver needs {package} to reach {scheme}:// storage "
            f"(pip install {package.split()[0]}); {first_line(exc)}"
        ) from None
    except FalkirkError:
        raise
    except TypeError as exc:  # an option the filesystem does not take
        raise refused_options(uri, protocol, storage_options, exc) from None
    except store_errors() as exc:
        raise StorageError(
            f"root {text!r}: cannot reach the filesystem from the driver: {first_line(exc)}"
        ) from None
    return Opened(uri, protocol, path, fs)


def check_bucket(calls: FsCalls, uri: str, protocol: str, path: str) -> None:
    """Look up the bucket (or container) of an object-store root: the first request; an error if it is
    missing."""
    bucket = path.split("/", 1)[0]
    what = "container" if protocol == "abfs" else "bucket"
    try:
        calls(f"look up {what} {bucket!r} of", "", "info", bucket)
    except FileNotFoundError:
        raise StorageError(
            f"root {uri}: {what} {bucket!r} does not exist (falkirk never creates {what}s: create it, or "
            "fix the name, the endpoint or the account)"
        ) from None
