"""Child process of the crash-safety test: records checkpoints into a monitor database until killed.

``python _monitor_child.py DB SEED`` opens the monitor stored in ``DB`` (or
creates it with :func:`graph`), prints ``ready N`` (N = checkpoints stored),
then forever: picks a report, prints ``rec {json}``, records it, prints
``ack``. Every line is flushed, so the parent knows which reports were
acknowledged (``ack`` printed after the commit) and which one may be in
flight (``rec`` without ``ack``).
"""

from __future__ import annotations

import json
import random
import sys

from falkirk.errors import MonitorError
from falkirk.solver import Dataflow, Edge, Processor
from falkirk.solver.monitor import Monitor
from falkirk.solver.monitor.codec import checkpoint_from_json

NAMES = ["src", "a", "c", "b", "out"]
OUTPUTS = ["out"]


def graph() -> Dataflow:
    """src (stateless) → a → b → out, a → c → b; a logs its edges, out is an external output."""
    return Dataflow(
        [
            Processor("src", "epoch", stateless=True),
            Processor("a", "epoch", logs=["ab", "ac"]),
            Processor("c", "epoch"),
            Processor("b", "epoch", logs=["bo"]),
            Processor("out", "epoch"),
        ],
        [
            Edge("sa", "src", "a"),
            Edge("ab", "a", "b"),
            Edge("ac", "a", "c"),
            Edge("cb", "c", "b"),
            Edge("bo", "b", "out"),
        ],
    )


def next_report(rng: random.Random, m: Monitor) -> tuple[str, dict]:
    """A random valid report: a processor and its next checkpoint (JSON form)."""
    p = rng.choice(NAMES)
    cks = m.checkpoints(p)
    last = cks[-1].frontier if cks else -1
    k = last + rng.randint(1, 2)
    doc: dict = {"frontier": k}
    if p in ("b", "c") and rng.random() < 0.5:
        doc["notifications"] = k - 1 if k >= 1 else "empty"  # inside the previous frontier: monotone
    return p, doc


def apply(m: Monitor, p: str, doc: dict) -> None:
    """Report ``doc`` for ``p`` to ``m``."""
    ck = checkpoint_from_json(doc)
    if p in OUTPUTS:
        m.acknowledge_output(p, ck.frontier)
    else:
        m.record(p, ck)


def say(line: str) -> None:
    """Write one whole line at once (a pipe write this small is atomic) and flush it."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    try:
        m = Monitor.open(path)
    except MonitorError:
        m = Monitor.create(graph(), path, outputs=OUTPUTS)
    say(f"ready {sum(len(m.checkpoints(p)) for p in NAMES)}")
    rng = random.Random(seed)
    while True:
        p, doc = next_report(rng, m)
        say("rec " + json.dumps({"p": p, "ck": doc}))
        apply(m, p, doc)
        say("ack")


if __name__ == "__main__":
    main()
