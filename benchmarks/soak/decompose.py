"""Where a soak's growing restart time and JVM RSS come from (issue 58), from its work directory alone.

``python -m benchmarks.soak.decompose WORK [--out FILE]``

The report (:mod:`benchmarks.soak.report`) fits one slope per series. When it
flags the restart time or the JVM's RSS as growing, this splits them:

* **Restart phases**, per restarting driver (from ``WORK/drivers/N.log``):
  ``session`` (process start to a Spark session: nothing of the root is read
  yet, so it cannot depend on the history), ``build`` (the session to the
  start of the restart's recovery: the pipeline and its planner built from the
  root), ``check`` (the recovery's check of committed outputs, to its
  ``outputs-checked`` event), ``first`` (the rest of the recovery and the first
  epoch) and the ``total``; ``sweep``, inside ``first``, is the start-up sweep
  of orphaned data (its ``swept`` event's own time; 0 in logs before it was
  reported). Each phase's slope over the epoch the driver
  resumed at, per 1,000 epochs: plain; with the load and the run's segment
  held fixed (a segment is the part of the run between two ``resume`` events:
  another session, maybe another machine state); and with the driver's own
  ``session`` time held fixed too, as a measure of how fast the machine was
  when that driver started.
* **JVM RSS at a given driver age**: the slope over the epoch number with one
  level per driver age (1..40, older drivers pooled) and per segment, and the
  slope of drivers in their first epoch alone. Inside a driver the JVM grows
  with its age (G1 commits heap up to its maximum); the question is whether a
  driver of the same age is bigger later in the run.

Slopes come with 95 % intervals (:func:`benchmarks.soak.checks.slope`). It
reads only; nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.soak.checks import slope
from benchmarks.soak.log import EventLog

__all__ = ["restart_phases", "decompose", "main"]

PHASES = ("session", "build", "check", "first", "sweep", "total")
#: drivers older than this are pooled in one age level
MAX_AGE = 40


def restart_phases(log: Path) -> dict[str, float] | None:
    """The phases of one driver's start (seconds), the epoch of its first epoch and its CPU by then; ``None``
    when the driver did not reach an epoch after a recovery."""
    first: dict[str, dict[str, Any]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("SOAK "):
            try:
                ev = json.loads(line[5:])
            except json.JSONDecodeError:  # a line cut by a kill
                continue
            first.setdefault(ev.get("event", ""), ev)
    if not {"start", "session", "recovery", "epoch"} <= set(first):
        return None
    start, session, recovery, epoch = (first[k]["t"] for k in ("start", "session", "recovery", "epoch"))
    checked = first.get("outputs-checked", first["recovery"])["t"]
    return {"at": first["epoch"]["epoch"], "session": session - start, "build": recovery - session,
            "check": checked - recovery, "first": epoch - checked, "total": epoch - start,
            "sweep": float(first.get("swept", {}).get("seconds", 0.0)),
            "cpu": first["epoch"].get("cpu", float("nan"))}


def _levels(values: list[Any]) -> list[list[float]]:
    """Indicator columns for every level of ``values`` but the first (the intercept is the first's)."""
    kinds = sorted(set(values))
    return [[1.0 if v == k else 0.0 for v in values] for k in kinds[1:]]


def _per_1000(fit: dict[str, Any]) -> dict[str, Any]:
    out = {k: (None if fit[k] is None else round(fit[k] * 1000, 4)) for k in ("slope", "lo", "hi")}
    return {**out, "mean": None if fit["mean"] is None else round(fit["mean"], 4), "n": fit["n"]}


def decompose(work: Path) -> dict[str, Any]:
    """The split described in the module docstring, for the soak in ``work``."""
    events = EventLog(work / "events.jsonl").events()  # as the report counts them: a resumed slice once
    resumes = np.array([e["t"] for e in events if e["event"] == "resume"])
    epochs = [e for e in events if e["event"] == "epoch"]
    first_epoch: dict[int, dict[str, Any]] = {}
    for e in epochs:
        first_epoch.setdefault(e["driver"], e)
    rows = []
    for log in sorted((work / "drivers").glob("*.log"), key=lambda p: int(p.stem)):
        ph = restart_phases(log)
        ev = first_epoch.get(int(log.stem))
        if ph is not None and ev is not None:
            rows.append({**ph, "load": ev.get("load") or 0.0, "segment": int(np.searchsorted(resumes, ev["t"]))})
    at = [r["at"] for r in rows]
    segments = _levels([r["segment"] for r in rows])
    loads = [r["load"] for r in rows]
    restart: dict[str, Any] = {}
    for k in (*PHASES, "cpu"):
        ys = [r[k] for r in rows]
        restart[k] = {
            "plain": _per_1000(slope(at, ys)),
            "load_and_segment": _per_1000(slope(at, ys, controls=[loads, *segments])),
            "load_segment_and_session": _per_1000(
                slope(at, ys, controls=[loads, *segments, [r["session"] for r in rows]])
            ),
        }
    rest = [r["total"] - r["check"] for r in rows]
    restart["total_but_check"] = {
        "load_and_segment": _per_1000(slope(at, rest, controls=[loads, *segments])),
        "load_segment_and_session": _per_1000(slope(at, rest, controls=[loads, *segments, [r["session"] for r in rows]])),
    }
    seg_of = [int(np.searchsorted(resumes, e["t"])) for e in epochs]
    ages = [min(int(e.get("age") or 1), MAX_AGE) for e in epochs]
    mb = [e["rss_jvm"] / 1e6 for e in epochs if "rss_jvm" in e]
    if len(mb) == len(epochs) and epochs:
        xs = [e["epoch"] for e in epochs]
        fresh = [i for i, a in enumerate(ages) if a == 1]
        rss = {
            "plain": _per_1000(slope(xs, mb)),
            "given_age": _per_1000(slope(xs, mb, controls=_levels(ages))),
            "given_age_and_segment": _per_1000(slope(xs, mb, controls=[*_levels(ages), *_levels(seg_of)])),
            "first_epoch_of_a_driver": _per_1000(
                slope([xs[i] for i in fresh], [mb[i] for i in fresh], controls=_levels([seg_of[i] for i in fresh]))
            ),
            "mean_by_age": {a: round(float(np.mean([m for m, g in zip(mb, ages, strict=True) if g == a])), 1)
                            for a in (1, 2, 3, 5, 10, 20, MAX_AGE) if a in ages},
        }
    else:
        rss = {}
    return {"work": str(work), "restarts": len(rows), "segments": len(resumes) + 1,
            "units": "slopes per 1,000 epochs: seconds (restart phases), CPU-s (cpu), MB (rss_jvm)",
            "restart": restart, "rss_jvm": rss}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work", type=Path, help="the soak's --work directory")
    ap.add_argument("--out", type=Path, default=None, help="also write the result here (JSON)")
    args = ap.parse_args(argv)
    if not (args.work / "events.jsonl").exists():
        ap.error(f"{args.work}: no events.jsonl (not a soak's work directory)")
    result = decompose(args.work)
    print(f"{result['restarts']} restarts, {result['segments']} segment(s); {result['units']}")
    for k, fits in result["restart"].items():
        print(f"  {k:16s} " + "  ".join(
            f"{name} {f['slope']:+.2f} ({f['lo']:+.2f}..{f['hi']:+.2f})" for name, f in fits.items()
            if f["slope"] is not None))
    for name, f in result["rss_jvm"].items():
        print(f"  rss_jvm {name}: {f}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
