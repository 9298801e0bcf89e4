"""``Place``: a test's root (URI and storage options) and another client on the same storage (``conftest.place``)."""

from __future__ import annotations

import posixpath
from typing import Any

from falkirk.spark.pipeline.store.rootfs import Root
from falkirk.spark.pipeline.store.storage import Storage


class Place:
    """A root for one test: ``uri`` and ``options`` (what a user gives falkirk), and another client on it."""

    def __init__(self, kind: str, uri: str, options: dict[str, Any] | None, arrow: Any, base: str) -> None:
        self.kind, self.uri, self.options = kind, uri, options
        #: pyarrow's filesystem on the same storage, and the root's path in it
        self.arrow, self.base = arrow, base

    def root(self, **kwargs: Any) -> Root:
        """A new :class:`Root` on the place (as a second driver would open it)."""
        return Root(self.uri, fsync=False, storage_options=self.options, **kwargs)

    def storage(self, **kwargs: Any) -> Storage:
        return Storage(self.uri, fsync=False, storage_options=self.options, **kwargs)

    def arrow_path(self, rel: str) -> str:
        """``rel`` (relative to the root) in the other client's filesystem."""
        return posixpath.join(self.base, rel)

    def write(self, rel: str, data: bytes) -> None:
        """Another client writes ``data`` to ``rel`` (creating its directory, as Spark's committers do)."""
        self.arrow.create_dir(posixpath.dirname(self.arrow_path(rel)), recursive=True)
        with self.arrow.open_output_stream(self.arrow_path(rel)) as out:
            out.write(data)

    def __repr__(self) -> str:
        return f"Place({self.kind}: {self.uri})"
