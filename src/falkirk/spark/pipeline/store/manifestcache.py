"""Manifests read from an object store, kept on the driver's disk by the MD5 of their content.

A manifest is write-once (:meth:`Root.publish
<falkirk.spark.pipeline.store.rootfs.Root.publish>`), and an output's are
kept for ever, so a restart that checks the committed outputs
(:meth:`Storage.verify_all
<falkirk.spark.pipeline.store.storage.Storage.verify_all>`) would read more
of them the longer a pipeline ran: on the S3 soak, ~4 ms of the client's
CPU per manifest, +13 s of restart per 1,000 epochs of two outputs. One
listing of their directory gives each object's checksum (S3's ETag, GCS's
``md5Hash``, Azure's ``content_md5``); a manifest whose listed MD5 is in
this cache is taken from it, and only the others are read. What is kept is
checked against that MD5 when it is read from the store and again when it
is taken from the cache, so a hit is the object's content whatever
happened to the name in between (a damaged manifest has another MD5; one
restored from a backup the MD5 it had, still kept). Only an MD5 is
trusted: a multipart ETag (``…-N``), a CRC or a local root is read as
before, and so is an ETag that is not the content's MD5 (S3 with SSE-KMS:
nothing it reads matches, so nothing is kept; logged once).

It is a cache: a SQLite file beside the monitor's
(:func:`~falkirk.spark.pipeline.store.rootfs.metadata_cache`), which may be
deleted at any time; one that is not a database is made again, and one
that cannot be made, opened or written is left aside (logged), never an
error. Entries of manifests no longer listed are dropped when their
directory is read.

>>> import base64, hashlib
>>> raw = b'{"epoch": 1}'
>>> content_md5({"ETag": '"' + hashlib.md5(raw).hexdigest() + '"'}) == hashlib.md5(raw).hexdigest()
True
>>> gcs = {"etag": "CKih16GjycgCEAE=", "md5Hash": base64.b64encode(hashlib.md5(raw).digest()).decode()}
>>> content_md5(gcs) == hashlib.md5(raw).hexdigest()
True
>>> content_md5({"content_md5": bytearray(hashlib.md5(raw).digest())}) == hashlib.md5(raw).hexdigest()
True
>>> content_md5({"ETag": '"0123-2"'}), content_md5({"etag": "0x8DB4C2A5"}), content_md5({"size": 3})
(None, None, None)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["ManifestCache", "content_md5"]

log = logging.getLogger(__name__)

_HEX_MD5 = re.compile(r"[0-9a-f]{32}")


def content_md5(info: Mapping[str, Any]) -> str | None:
    """The MD5 (hex) of an object's content from its listing, where the store gives one: a GCS ``md5Hash``
    (base64), an Azure ``content_md5`` (bytes or base64), an S3 ETag of 32 hex digits (a single-part
    upload; :meth:`ManifestCache.keep` checks it is the content's); else ``None``."""
    for key in ("md5Hash", "content_md5"):
        md5 = info.get(key)
        if isinstance(md5, (bytes, bytearray)):
            return bytes(md5).hex() if len(md5) == 16 else None
        if md5:
            try:
                raw = base64.b64decode(str(md5), validate=True)
            except (binascii.Error, ValueError):
                return None
            return raw.hex() if len(raw) == 16 else None
    etag = info.get("ETag") or info.get("etag")
    if etag:
        value = str(etag).strip('"').lower()
        return value if _HEX_MD5.fullmatch(value) else None
    return None


def _md5(raw: bytes) -> str:
    return hashlib.md5(raw, usedforsecurity=False).hexdigest()


class ManifestCache:
    """Manifests' bytes by (path relative to the root, MD5 of the content), in the SQLite file ``where()``
    gives (called on first use: making its directory may fail, which leaves the cache aside)."""

    def __init__(self, where: Callable[[], Path]) -> None:
        self.where = where
        self.path: Path | None = None
        self._db: sqlite3.Connection | None = None
        self._broken = False
        self._unmatched = False

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path, timeout=10, check_same_thread=False)
        try:
            db.execute(
                "CREATE TABLE IF NOT EXISTS manifest (rel TEXT, md5 TEXT, raw BLOB, PRIMARY KEY (rel, md5))"
            )
            db.commit()
        except sqlite3.Error:
            db.close()
            raise
        return db

    def _open(self) -> sqlite3.Connection | None:
        if self._db is None and not self._broken:
            try:
                self.path = self.where()
                try:
                    self._db = self._connect(self.path)
                except sqlite3.DatabaseError as exc:  # not a database (any more): made again, once
                    log.warning("manifest cache %s is unusable (%s): made again", self.path, exc)
                    self.path.unlink(missing_ok=True)
                    self._db = self._connect(self.path)
            except (OSError, sqlite3.Error) as exc:
                self._aside(exc)
        return self._db

    def _aside(self, exc: Exception) -> None:
        log.warning("manifest cache %s left aside: %s (manifests are read from the root)", self.path, exc)
        self._broken = True
        if self._db is not None:
            self._db.close()
            self._db = None

    def get(self, wanted: Mapping[str, str]) -> dict[str, bytes]:
        """The bytes kept of each ``rel`` with the MD5 ``wanted`` gives it (checked again: a cache file
        damaged on the driver's disk is a miss, never a damaged manifest)."""
        db = self._open() if wanted else None
        if db is None:
            return {}
        out: dict[str, bytes] = {}
        try:
            rels = list(wanted)
            for i in range(0, len(rels), 500):
                chunk = rels[i : i + 500]
                query = f"SELECT rel, md5, raw FROM manifest WHERE rel IN ({','.join('?' * len(chunk))})"
                for rel, md5, raw in db.execute(query, chunk):
                    if wanted.get(rel) == md5 and _md5(bytes(raw)) == md5:
                        out[rel] = bytes(raw)
        except sqlite3.Error as exc:
            self._aside(exc)
            return {}
        return out

    def keep(self, read: Mapping[str, bytes], md5s: Mapping[str, str]) -> None:
        """Keep what was read, each only if its content has the MD5 its listing gave (else it changed since,
        or the store's checksum is not an MD5 of the content)."""
        rows = [(rel, md5s[rel], raw) for rel, raw in read.items() if rel in md5s and _md5(raw) == md5s[rel]]
        if read and not rows and not self._unmatched:
            self._unmatched = True
            log.info(
                "manifest cache: no manifest read matched its listed checksum (not the content's MD5, as with "
                "S3 server-side encryption by KMS?): nothing is kept"
            )
        db = self._open() if rows else None
        if db is None:
            return
        try:
            db.executemany("INSERT OR REPLACE INTO manifest (rel, md5, raw) VALUES (?, ?, ?)", rows)
            db.commit()
        except sqlite3.Error as exc:
            self._aside(exc)

    def forget_others(self, directory: str, listed: Iterable[str]) -> None:
        """Drop the entries under ``directory`` (relative to the root) whose name is not ``listed`` any more
        (a listed name's other contents are kept: a manifest restored from a backup is a hit again)."""
        db = self._open()
        if db is None:
            return
        keep = set(listed)
        prefix = directory.rstrip("/") + "/"
        try:
            rels = db.execute(
                "SELECT DISTINCT rel FROM manifest WHERE substr(rel, 1, ?) = ?", (len(prefix), prefix)
            )
            stale = [(rel,) for (rel,) in rels if rel not in keep]
            if stale:
                db.executemany("DELETE FROM manifest WHERE rel = ?", stale)
                db.commit()
        except sqlite3.Error as exc:
            self._aside(exc)

    def close(self) -> None:
        """Close the database (opened again on next use)."""
        if self._db is not None:
            self._db.close()
            self._db = None
