"""Write one update's input of the example SDP project: a JSON-lines file of orders under data/orders/.

    python examples/sdp_orders/generate.py PROJECT_DIR --update 0 --rows 1000

Update ``K``'s orders are the same for the same ``--seed``; about 3 % have a
non-positive amount, 1 % no user, items in mixed case with stray spaces (what
``clean_orders`` cleans). ``PROJECT_DIR`` defaults to this directory.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

ITEMS = ["Book", " pen", "LAMP ", "mug", "Desk", "chair"]


def write_update(project: str | Path, update: int, rows: int, *, users: int = 200, seed: int = 57) -> Path:
    """Write update ``update``'s orders (``rows`` of them) and return the file."""
    rng = random.Random(seed * 1_000_003 + update)
    out = Path(project) / "data" / "orders" / f"update-{update:05d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name("." + out.name)  # hidden until complete: a file stream never reads half a file
    with tmp.open("w") as fh:
        for i in range(rows):
            oid = update * 10_000_000 + i
            amount = round(rng.lognormvariate(4, 1), 2) if rng.random() > 0.03 else -round(rng.uniform(0, 50), 2)
            user = rng.randrange(users) if rng.random() > 0.01 else None
            fh.write(json.dumps({"order_id": oid, "user": user, "item": rng.choice(ITEMS),
                                 "amount": amount, "ts": 1_700_000_000 + oid}) + "\n")
    tmp.rename(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("project", nargs="?", default=str(Path(__file__).parent))
    parser.add_argument("--update", type=int, required=True)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--seed", type=int, default=57)
    args = parser.parse_args()
    print(write_update(args.project, args.update, args.rows, users=args.users, seed=args.seed))


if __name__ == "__main__":
    main()
