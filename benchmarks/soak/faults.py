"""Fault injectors done from outside the driver, and what each fault's error must name.

* :func:`damage` — one damaged file, as the corruption fuzz does (``tests/spark/pipeline/run/test_corruption_fuzz.py``),
  through fsspec so that it works on a local root and on an object store; the original bytes are kept so that
  the supervisor can play the human who restores them (:func:`restore`).
* :class:`Disk` — the local root's own filesystem (a tmpfs the supervisor mounted in its private mount
  namespace): filled to the last byte (:meth:`Disk.fill`); a driver started with the root read-only
  (:meth:`Disk.read_only_prefix`).
* :func:`explains` — whether a driver's error names the cause of a fault (the alternative is a silent or an
  unexplained outcome).
"""

from __future__ import annotations

import json
import os
import posixpath
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

from benchmarks.soak.schedule import Fault
from benchmarks.soak.workload import BROKEN_MESSAGE

__all__ = ["damage", "restore", "Disk", "explains", "HARMLESS"]

#: Damage that must never stop a run (caches and advisory records): stopping on it is unexplained.
HARMLESS = ("meta-delete", "meta-garbage", "journal-garbage")


def _ls(fs: Any, path: str) -> list[str]:
    try:
        return sorted(fs.ls(path, detail=False))
    except FileNotFoundError:
        return []


def _find(fs: Any, path: str) -> list[str]:
    try:
        return sorted(fs.find(path))
    except FileNotFoundError:
        return []


def _manifest(fs: Any, path: str) -> dict[str, Any] | None:
    """The manifest at ``path``, or ``None`` if another fault damaged it (regression: the S3 soak at seed 58,
    two damages at once, stopped its own supervisor reading a garbled manifest)."""
    try:
        doc = json.loads(fs.cat_file(path))
        return doc if isinstance(doc, dict) and isinstance(doc.get("files"), list) else None
    except ValueError:
        return None


def _targets(fs: Any, base: str, kind: str) -> list[str]:
    """Candidates (full fsspec paths) for damage ``kind`` under root ``base``."""
    manifests = [p for p in _find(fs, f"{base}/manifests") if p.endswith(".json")]
    if kind.startswith("data-"):
        out = []
        for m in manifests:
            if m.split("/")[-2] in ("checkpoint", "log", "output") and (doc := _manifest(fs, m)) is not None:
                out += [f"{base}/{doc['location']}/{name}" for name, _, _ in doc["files"]]
        return out
    if kind.startswith("manifest-"):
        out = [m for m in manifests if m.split("/")[-2] in ("checkpoint", "log", "complete", "output")]
        return [m for m in out if _manifest(fs, m) is not None] if kind == "manifest-size" else out
    if kind.startswith("meta-"):
        return [f"{base}/meta.sqlite"] if fs.exists(f"{base}/meta.sqlite") else []
    if kind.startswith("segment-"):
        return [p for p in _find(fs, f"{base}/input/events") if "/part-" in p]
    if kind.startswith("cut-"):
        return [p for p in _ls(fs, f"{base}/input/events/cuts") if p.endswith(".json")]
    if kind == "pipeline-json":
        return [f"{base}/pipeline.json"]
    if kind == "database-delete":
        return [f"{base}/alerts.sqlite"] if fs.exists(f"{base}/alerts.sqlite") else []
    if kind == "output-delete":
        return [p for p in _ls(fs, f"{base}/output/report") + _ls(fs, f"{base}/output/ledger") if "epoch=" in p]
    return [p for p in _find(fs, f"{base}/journal") if p.endswith(".json")]


def damage(fs: Any, base: str, fault: Fault, backup: Path) -> str | None:
    """Apply ``fault``'s damage under root ``base`` (an fsspec path); keep the originals under ``backup``.
    The damaged path relative to the root, or ``None`` when there was nothing of that kind to damage."""
    kind = fault.params["damage"]
    rnd = random.Random(fault.params["pick"])
    targets = _targets(fs, base, kind)
    if not targets:
        return None
    target = rnd.choice(targets)
    rel = posixpath.relpath(target, base)
    if backup.exists():  # a resumed soak damages again: a directory copied into an old backup would nest
        shutil.rmtree(backup)  # (regression: the local soak at seed 58 then restored the wrong epoch's files)
    backup.mkdir(parents=True)
    keep = backup / "files"
    if fs.isdir(target):
        fs.get(target, str(keep), recursive=True)
    else:
        fs.get(target, str(keep))
    (backup / "what.json").write_text(json.dumps({"rel": rel, "dir": fs.isdir(target), "kind": kind}))
    if kind.endswith("-delete"):
        fs.rm(target, recursive=fs.isdir(target))
        for suffix in ("-wal", "-shm"):  # a database deleted with its journal files
            if fs.exists(target + suffix):
                fs.rm(target + suffix)
    elif kind.endswith("-truncate"):
        data = fs.cat_file(target)
        fs.pipe_file(target, data[: len(data) // 2])
    elif kind == "data-flip":
        data = bytearray(fs.cat_file(target))
        for i in range(len(data) // 2, min(len(data), len(data) // 2 + 8)):
            data[i] ^= 0xFF
        fs.pipe_file(target, bytes(data))
    elif kind == "manifest-size":
        doc = json.loads(fs.cat_file(target))
        if doc["files"]:
            doc["files"][0][1] += 1
        else:
            doc["rows"] += 1
        fs.pipe_file(target, json.dumps(doc).encode())
    else:  # -garbage, pipeline-json
        fs.pipe_file(target, bytes(rnd.randrange(256) for _ in range(64)))
    return rel


def restore(fs: Any, base: str, backup: Path) -> str:
    """Put back what :func:`damage` changed (the human's repair: restore the file from a backup)."""
    what = json.loads((backup / "what.json").read_text())
    target = f"{base}/{what['rel']}"
    if what["dir"]:
        if fs.exists(target):
            fs.rm(target, recursive=True)
        fs.put(str(backup / "files"), target, recursive=True)
    else:
        fs.put(str(backup / "files"), target)
    return str(what["rel"])


class Disk:
    """The tmpfs under a local soak's root (mounted by the supervisor in its own mount namespace)."""

    def __init__(self, mount: Path) -> None:
        self.mount = mount
        self.ballast = mount / "ballast"

    @staticmethod
    def mount_tmpfs(mount: Path, size_mb: int) -> Disk:
        mount.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "falkirk-soak", str(mount)],
                       check=True)
        return Disk(mount)

    def free(self) -> int:
        st = os.statvfs(self.mount)
        return st.f_bavail * st.f_frsize

    def fill(self) -> int:
        """Take every free byte (a file outside the root, on its filesystem); the bytes taken.

        Unbuffered: a buffered file that met ENOSPC wrote its buffer again when closed, and that second
        ENOSPC escaped (the local soak at seed 58, epoch 834: the fault "could not be done", its ballast
        stayed, and every later driver met a full disk no fault in force explained)."""
        taken = 0
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while (free := self.free()) > 0:
                try:
                    taken += os.write(fd, bytes(min(1 << 20, free)))
                except OSError:  # full (the driver took the last bytes first)
                    break
        finally:
            os.close(fd)
        return taken

    def unfill(self) -> None:
        self.ballast.unlink(missing_ok=True)

    @staticmethod
    def read_only_prefix(root: str) -> list[str]:
        """A command prefix that runs a process with ``root`` bind-mounted read-only, in a mount namespace of
        its own (as ``tests/spark/pipeline/run/test_stranded.py`` does)."""
        mount = f'mount --bind "{root}" "{root}" && mount -o remount,bind,ro "{root}" && exec "$0" "$@"'
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", mount]

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], check=False)


#: What a driver's error message must contain to name each environment fault's cause.
_CAUSES = {
    "disk-full": ("No space left on device", "Errno 28", "ENOSPC", "disk full", "DiskFull"),
    "read-only": ("Read-only file system", "Errno 30", "EROFS", "read-only"),
    "server-restart": ("connect", "Connection", "timed out", "Timeout", "Endpoint", "unreachable", "503",
                       "ServiceUnavailable", "failed to answer"),
    "read-only-creds": ("AccessDenied", "PermissionError", "Access Denied", "Forbidden", "403"),
    "code-change": (BROKEN_MESSAGE,),
}


def explains(fault: Fault, error: dict[str, Any], damaged: str | None) -> bool:
    """Whether a driver's ``error`` (type, classes, message) names the cause of ``fault``."""
    message, classes = error.get("message", ""), error.get("classes", [])
    if fault.kind in ("kill-timed", "kill-recovery", "ctrl-c"):
        return fault.kind == "ctrl-c" and error.get("type") == "RunInterrupted"
    if fault.kind == "corrupt":
        return (damaged is not None and fault.params["damage"] not in HARMLESS and "FalkirkError" in classes
                and damaged.rstrip("/") in message)
    if fault.kind == "code-change":
        return error.get("type") == "StepError" and any(c in message for c in _CAUSES["code-change"])
    causes = _CAUSES.get(fault.kind, ())
    return bool(causes) and "FalkirkError" in classes and any(c.lower() in message.lower() for c in causes)
