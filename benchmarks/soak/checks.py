"""What the soak checks, continuously and at the end.

* :class:`Reader` — a thread watching the committed outputs, as a consumer polling the manifests would
  (``tests/spark/pipeline/run/test_final_outputs.py``): each newly committed epoch is read (pyarrow, no Spark)
  and compared, as a multiset, with the pure-Python reference; its files' names, sizes and checksums are
  remembered, and any later change of a committed epoch is a finding (unless the supervisor damaged that
  epoch itself: then it must come back equal to the reference).
* :func:`census` — the root's bytes and files by category; the first-seen size of every manifest and execution
  record by epoch (per-epoch metadata bytes); ``meta.sqlite``'s size.
* :func:`slope` — least-squares slope with its standard error and 95 % interval; :func:`within_slope` the same
  with one intercept per driver (the trend *inside* long-lived drivers: a leak).
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from benchmarks.soak.workload import OUTPUTS, Reference

__all__ = ["Reader", "census", "slope", "within_slope", "category"]


def _signature(fs: Any, base: str, doc: dict[str, Any], local: bool) -> dict[str, str]:
    """Each file of an output epoch (its manifest's list) → its size and content hash (local) or ETag (S3)."""
    out = {}
    for name, _, _ in doc["files"]:
        path = f"{base}/{doc['location']}/{name}"
        if local:
            with open(path, "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
        else:
            info = fs.info(path)
            out[name] = f"{info.get('size')}:{info.get('ETag') or info.get('etag')}"
    return out


def _rows(fs: Any, base: str, doc: dict[str, Any], columns: Iterable[str]) -> Counter[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    rows: Counter[tuple[Any, ...]] = Counter()
    for name, _, _ in doc["files"]:
        table = pq.read_table(io.BytesIO(fs.cat_file(f"{base}/{doc['location']}/{name}")), columns=list(columns))
        rows.update(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
    return rows


class Reader(threading.Thread):
    """Polls ``manifests/<output>/output/`` of every output (see the module docstring); ``log(event)`` records
    each committed epoch seen (``committed``) and each finding (``finding``)."""

    def __init__(self, fs: Any, base: str, reference: Reference, log: Callable[[dict[str, Any]], None], *,
                 local: bool, first: dict[tuple[str, int], dict[str, str]] | None = None, period: float = 0.25) -> None:
        super().__init__(daemon=True, name="soak-reader")
        self.fs, self.base, self.reference, self.log, self.local = fs, base, reference, log, local
        self.first: dict[tuple[str, int], dict[str, str]] = dict(first or {})
        #: (output, epoch) the supervisor damaged: not looked at until the damage is resolved
        self.damaged: set[tuple[str, int]] = set()
        #: damaged epochs whose damage was resolved: a rewrite is expected, and must equal the reference again
        self.recheck: set[tuple[str, int]] = set()
        self.findings: list[str] = []
        self.looks = 0
        self.period = period
        self.stop = threading.Event()
        self.lock = threading.Lock()
        #: held by every look, and by the supervisor while it damages or restores a file (re-entrant: the
        #: supervisor looks from its own thread too)
        self.looking = threading.RLock()
        self.errors = 0

    @staticmethod
    def _key(rel: str) -> tuple[str, int] | None:
        for output in OUTPUTS:
            for part in (f"output/{output}/epoch=", f"manifests/{output}/output/"):
                if rel.startswith(part):
                    tail = rel[len(part):].split("/")[0].split(".")[0]
                    if tail.isdigit():
                        return output, int(tail)
        return None

    def damage(self, rel: str) -> None:
        """The supervisor damaged ``rel`` (an output's file or manifest: its epoch is left alone)."""
        key = self._key(rel)
        if key is not None:
            with self.lock:
                self.damaged.add(key)

    def resolve(self, rel: str | None) -> None:
        """The damage of ``rel`` was repaired (by a driver, or restored): its epoch must equal the reference."""
        key = self._key(rel or "")
        if key is not None:
            with self.lock:
                self.damaged.discard(key)
                self.recheck.add(key)

    def committed(self, output: str) -> list[int]:
        try:
            names = self.fs.ls(f"{self.base}/manifests/{output}/output", detail=False)
        except FileNotFoundError:
            return []
        return sorted(int(posixpath.basename(n)[:-5]) for n in names if n.endswith(".json"))

    def _check(self, output: str, epoch: int) -> None:
        key = (output, epoch)
        with self.lock:
            if key in self.damaged:  # the supervisor's damage, not resolved yet: not read at all
                return
        path = f"{self.base}/manifests/{output}/output/{epoch:08d}.json"
        try:
            raw = self.fs.cat_file(path)
        except FileNotFoundError:
            return  # a rollback removed it (only an epoch the supervisor damaged: checked when it returns)
        except Exception:  # noqa: BLE001 - the store is down (s3fs/botocore errors vary): look again later
            self.errors += 1
            return
        try:
            doc = json.loads(raw)
            sig = _signature(self.fs, self.base, doc, self.local)
            got = _rows(self.fs, self.base, doc, OUTPUTS[output])
        except Exception as exc:  # noqa: BLE001 - a committed epoch that cannot be read: a finding
            self.errors += 1
            down = isinstance(exc, ConnectionError) or any(
                w in type(exc).__name__ for w in ("Connect", "Endpoint", "Timeout", "ClientError"))
            if not down:  # a missing data file behind a manifest that exists is a finding too
                self._finding(f"{output}@{epoch}: committed epoch unreadable ({type(exc).__name__}: {exc})",
                              output, epoch, kind="unreadable", quiet=True)
            return
        seen = self.first.get(key)
        if seen == sig:
            self.recheck.discard(key)
            return
        if seen is not None and key not in self.recheck:
            self._finding(f"{output}@{epoch}: a committed epoch changed: {sorted(seen)} -> {sorted(sig)}",
                          output, epoch, kind="changed")
        want = self.reference.output(output, epoch)
        ok = got == want
        if not ok:
            missing, extra = want - got, got - want
            self._finding(f"{output}@{epoch}: differs from the failure-free reference: missing "
                          f"{sorted(missing.elements(), key=repr)[:5]} extra {sorted(extra.elements(), key=repr)[:5]}",
                          output, epoch, kind="silent")
        with self.lock:
            self.first[key] = sig
            self.recheck.discard(key)
        self.log({"event": "committed", "output": output, "epoch": epoch, "sig": sig, "ok": ok,
                  "rows": sum(got.values()), "rewritten": seen is not None})

    def _finding(self, text: str, output: str, epoch: int, *, kind: str, quiet: bool = False) -> None:
        if quiet and any(text.split(":")[0] in f for f in self.findings):
            return
        self.findings.append(text)
        self.log({"event": "finding", "kind": kind, "output": output, "epoch": epoch, "text": text})

    def look(self, *, everything: bool = False, recent: int = 6) -> None:
        """Check new committed epochs, the ``recent`` latest again, and (``everything``) all of them again."""
        with self.looking:
            for output in OUTPUTS:
                epochs = self.committed(output)
                with self.lock:
                    known = {e for (o, e) in self.first if o == output}
                    rechecks = {e for (o, e) in self.recheck if o == output}
                again = epochs if everything else epochs[-recent:]
                for e in sorted(set(again) | (set(epochs) - known) | rechecks):
                    self._check(output, e)
            self.looks += 1

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.look()
            except Exception as exc:  # noqa: BLE001 - the store may be down (a fault): look again later
                self.errors += 1
                if self.errors % 100 == 1:
                    self.log({"event": "reader-error", "error": f"{type(exc).__name__}: {exc}"[:300]})
            time.sleep(self.period)


def category(rel: str) -> str:
    """The census category of a path under the root."""
    parts = rel.split("/")
    if parts[0] in ("data", "manifests") and len(parts) > 2:
        return f"{parts[0]}/{parts[1]}/{parts[2]}"
    if parts[0] == "input" and len(parts) > 2:
        return f"input/{parts[2] if parts[2] in ('cuts', 'spark', 'dead-letter') else 'segments'}"
    if parts[0] == "output":
        return "output"
    if parts[0] == "journal":
        return "journal"
    if parts[0].startswith("meta.sqlite"):
        return "meta"
    if len(parts) == 1 and ".sqlite" in parts[0]:
        return "eager"  # an Eager step's database (and its -wal/-shm): the user's table
    return parts[0] if len(parts) > 1 else "top"


def census(fs: Any, base: str, sizes: dict[str, int]) -> dict[str, Any]:
    """The root's bytes and files by :func:`category`, plus each manifest's and execution record's size the
    first time it is seen (added to ``sizes``: ``rel -> bytes``). Outputs are counted apart: their data is the
    user's and their manifests are never collected (``docs/storage.md``); so is an Eager step's database (the
    user's table, which holds every committed epoch's rows)."""
    by: dict[str, list[int]] = {}
    new: dict[str, int] = {}
    for path, info in fs.find(base, detail=True).items():
        rel = posixpath.relpath(path, base)
        if rel.startswith("ballast") or path.endswith("/"):
            continue
        size = int(info.get("size") or 0)
        c = category(rel)
        b = by.setdefault(c, [0, 0])
        b[0] += size
        b[1] += 1
        if (rel.startswith("manifests/") or rel.startswith("journal/")) and rel.endswith(".json") and rel not in sizes:
            sizes[rel] = new[rel] = size
    outputs = [c for c in by if c in ("output", "eager") or (c.startswith("manifests/") and c.endswith("/output"))]
    kept = {c: v for c, v in by.items() if c not in outputs}
    return {"bytes": sum(v[0] for v in kept.values()), "files": sum(v[1] for v in kept.values()),
            "output_bytes": sum(by[c][0] for c in outputs), "output_files": sum(by[c][1] for c in outputs),
            "meta_bytes": by.get("meta", [0, 0])[0], "by": by, "new": new}


def slope(
    x: Iterable[float], y: Iterable[float], *, fitted: int = 2, controls: Iterable[Iterable[float]] = ()
) -> dict[str, float | int | None]:
    """Least-squares ``y = a + b x (+ c·z for each control z)``: ``b``, its standard error and 95 % interval,
    the mean of ``y``, ``n``. ``fitted``: the parameters fitted besides the controls' coefficients, whose
    number the residual variance's degrees of freedom lose (``a`` and ``b``; :func:`within_slope` adds one
    intercept per group). ``controls``: covariates held fixed (e.g. the machine's load when a point was
    measured), one value per point each."""
    xs, ys = np.asarray(list(x), float), np.asarray(list(y), float)
    zs = [np.asarray(list(z), float) for z in controls]
    n = len(xs)
    fitted += len(zs)
    if n <= fitted or np.ptp(xs) == 0:
        return {"slope": None, "se": None, "lo": None, "hi": None, "mean": float(ys.mean()) if n else None, "n": n}
    a = np.vstack([np.ones(n), xs, *zs]).T
    coef, *_ = np.linalg.lstsq(a, ys, rcond=None)
    resid = ys - a @ coef
    s2 = float(resid @ resid) / (n - fitted)
    se = float(np.sqrt(s2 * np.linalg.pinv(a.T @ a)[1, 1]))  # without controls: s2 / Σ(x - x̄)²
    b = float(coef[1])
    return {"slope": b, "se": se, "lo": b - 1.96 * se, "hi": b + 1.96 * se, "mean": float(ys.mean()), "n": n}


def within_slope(groups: Iterable[tuple[Any, float, float]]) -> dict[str, float | int | None]:
    """:func:`slope` of ``(group, x, y)`` points with one intercept per group (x and y centred per group)."""
    by: dict[Any, list[tuple[float, float]]] = {}
    for g, x, y in groups:
        by.setdefault(g, []).append((x, y))
    xs, ys, means = [], [], []
    used = 0
    for pts in by.values():
        if len(pts) < 2:
            continue
        used += 1
        mx = sum(p[0] for p in pts) / len(pts)
        my = sum(p[1] for p in pts) / len(pts)
        xs += [p[0] - mx for p in pts]
        ys += [p[1] - my for p in pts]
        means += [p[1] for p in pts]
    out = slope(xs, ys, fitted=used + 1)  # centring per group fitted one intercept each
    out["mean"] = float(np.mean(means)) if means else None
    out["groups"] = len(by)
    return out
