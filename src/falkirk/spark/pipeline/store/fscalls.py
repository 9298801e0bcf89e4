"""Timeouts and errors: every call a :class:`~falkirk.spark.pipeline.store.rootfs.Root` makes to its
filesystem.

A :class:`FsCalls` is the one way from a root to its fsspec filesystem.
Each call is bounded by the root's ``timeout`` on asynchronous filesystems
(the object stores); a failure is one :class:`~falkirk.spark.errors.StorageError`
naming the root, the operation, the file and the cause ("no answer within
60 s" for a timeout). ``FileNotFoundError``, ``FileExistsError`` and
``NotADirectoryError`` are answers, not failures: they pass through, as do
falkirk's own errors.

The root's modules (:mod:`~falkirk.spark.pipeline.store.rootfs`,
:mod:`~falkirk.spark.pipeline.store.writeonce`,
:mod:`~falkirk.spark.pipeline.store.localdisk`) are handed the root's
:class:`FsCalls`; nothing else makes one.

>>> import fsspec
>>> calls = FsCalls(fsspec.filesystem("memory"), lambda rel: f"memory://doc/{rel}".rstrip("/"), DEFAULT_TIMEOUT)
>>> calls("check", "x", "exists", "/doc/x")
False
>>> print(calls.failure("write", "x", TimeoutError()))
root memory://doc: write memory://doc/x failed: no answer within 60 s (the root's timeout)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from falkirk.errors import FalkirkError
from falkirk.spark.errors import StorageError
from falkirk.spark.pipeline.store.connectors import store_errors

__all__ = ["DEFAULT_TIMEOUT", "FsCalls", "first_line"]

#: Seconds one storage operation may take on an object store before it is a StorageError.
DEFAULT_TIMEOUT = 60.0


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name when it has none)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class FsCalls:
    """Calls to ``fs`` for the root that ``describe`` names files of (see the module docstring).

    ``describe(rel)`` is ``rel`` as a user would name it; ``describe("")``
    the root itself. ``timeout``: seconds one call may take on an
    asynchronous filesystem.
    """

    def __init__(self, fs: Any, describe: Callable[[str], str], timeout: float) -> None:
        from fsspec.asyn import AsyncFileSystem

        self.fs = fs
        self.describe = describe
        self.timeout = timeout
        self.asynchronous = isinstance(fs, AsyncFileSystem)

    def failure(self, op: str, rel: str, exc: BaseException) -> StorageError:
        """The error saying that ``op`` on ``rel`` failed with ``exc``."""
        if isinstance(exc, TimeoutError):
            cause = f"no answer within {self.timeout:g} s (the root's timeout)"
        else:
            cause = f"{type(exc).__name__}: {first_line(exc)}"
        return StorageError(f"root {self.describe('')}: {op} {self.describe(rel)} failed: {cause}")

    def __call__(self, op: str, rel: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``fs.<method>(...)``, bounded by ``timeout`` on async filesystems; failures as StorageError.

        ``FileNotFoundError``, ``FileExistsError`` and ``NotADirectoryError``
        are answers, not failures: they pass through.
        """
        if self.asynchronous:
            kwargs["timeout"] = self.timeout
        try:
            return getattr(self.fs, method)(*args, **kwargs)
        except (FileNotFoundError, FileExistsError, NotADirectoryError, FalkirkError):
            raise
        except store_errors() as exc:
            raise self.failure(op, rel, exc) from exc
