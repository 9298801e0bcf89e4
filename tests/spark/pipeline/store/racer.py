"""A publisher process for the race tests: ``python racer.py URI OPTIONS_JSON WRITER``.

It opens the root once, then for each line on standard input —
``publish REL`` (:meth:`Root.publish`) or ``put EPOCH`` (:meth:`Storage.put`
of a manifest naming the writer) — writes its own document and answers one
JSON line: ``{"won": true}`` or ``{"won": false, "error": TYPE, "message": …}``.
The test writes the same line to two racers at once, so their requests meet
at the store.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    from falkirk.spark.pipeline.store.manifest import Manifest
    from falkirk.spark.pipeline.store.rootfs import Root
    from falkirk.spark.pipeline.store.storage import Storage

    uri, options, writer = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    root = Root(uri, fsync=False, storage_options=options or None)
    storage = Storage(root, fsync=False)
    print(json.dumps({"ready": writer}), flush=True)
    for line in sys.stdin:
        verb, arg = line.split()
        try:
            if verb == "publish":
                root.publish(arg, json.dumps({"writer": writer, "name": arg}).encode())
            else:
                storage.put(Manifest("race", "checkpoint", int(arg), extra={"writer": writer}))
        except Exception as exc:  # the loser is told: report how
            print(json.dumps({"won": False, "error": type(exc).__name__, "message": str(exc)}), flush=True)
        else:
            print(json.dumps({"won": True}), flush=True)


if __name__ == "__main__":
    main()
