"""Solve the example of SPEC §9 with the Python API and explain the plan.

Three processors in a line, ``src -> sum -> sink``, all counting time in
epochs. ``sum`` failed; it has one checkpoint (after epoch 2) and logs what
it sends to ``sink``. ``sink`` has a checkpoint after epoch 1 and had already
received epochs up to 4. falkirk chooses, for every processor, how far to
roll back so that the system is consistent again (SPEC §4–§5).

Run it with ``.venv/bin/python examples/solve_spec_example.py`` (``--json``
prints only the plan document; ``bash scripts/run.sh`` is the Spark demo, not
this example). The plan is also checked against the scenario file
``examples/scenarios/spec_example.json`` solved by the command-line path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, RollbackPlan, solve_frontiers

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "scenarios" / "spec_example.json"

#: The answer SPEC §9 gives for this scenario.
SPEC_ANSWER = {
    "format": "falkirk-plan/1",
    "frontiers": {"src": 2, "sum": 2, "sink": 1},
    "notification_frontiers": {"src": 2, "sum": 2, "sink": 1},
    "actions": {"src": "rollback", "sum": "restore", "sink": "rollback"},
    "replay": {"e2": {"log_frontier": 2, "exclude": 1}},
}


#: What each action means (SPEC §9), for the printout.
ACTIONS = {
    "keep": "keeps all its work (f = top)",
    "rollback": "did not fail; drops its work at times outside f = {f} and redoes it",
    "restore": "failed; reloads its checkpoint at f = {f} and redoes the rest",
    "restart": "failed; starts again from its initial state",
}


def build() -> Dataflow:
    """The SPEC §9 dataflow, built in Python."""
    return Dataflow(
        [
            # A stateless source: it can re-read any epoch from its input.
            Processor("src", "epoch", stateless=True),
            # sum checkpointed after epoch 2 (having delivered epochs 0-2 on e1) and logs e2.
            Processor(
                "sum",
                "epoch",
                logs=["e2"],
                checkpoints=[Checkpoint(2, notifications=2, delivered={"e1": 2})],
            ),
            # sink checkpointed after epoch 1, and has received epochs up to 4 since.
            Processor(
                "sink",
                "epoch",
                checkpoints=[Checkpoint(1, delivered={"e2": 1})],
                live=Checkpoint("top", delivered={"e2": 4}),
            ),
        ],
        [Edge("e1", "src", "sum", "identity"), Edge("e2", "sum", "sink", "identity")],
    )


def report(plan: RollbackPlan) -> None:
    """Print the plan as a table and the reasons behind sink's rollback."""
    print("Dataflow: src -> sum -> sink (epochs); sum failed.\n")
    print(plan.table())
    frontiers = plan.to_json()["frontiers"]
    print("\nWhat each processor does:")
    for name, action in plan.actions.items():
        print(f"  {name}: {ACTIONS[action].format(f=frontiers[name])}")
    print(f"\nWhy does sink roll back to {frontiers['sink']}?")
    for line in plan.explain("sink"):
        print("  -", line)


def check(plan: RollbackPlan) -> bool:
    """Compare with SPEC §9's answer and with the scenario file's plan."""
    from falkirk.scenario import load

    ok = plan.to_json() == SPEC_ANSWER
    print("\nmatches the answer given in SPEC §9:", "yes" if ok else "NO")
    same = load(SCENARIO).solve().to_json() == plan.to_json()
    print(f"matches `falkirk solve {SCENARIO.name} --json`:", "yes" if same else "NO")
    return ok and same


def main(argv: list[str]) -> int:
    plan = solve_frontiers(build(), failed=["sum"])
    if "--json" in argv:
        print(json.dumps(plan.to_json(), indent=2))
        return 0
    report(plan)
    return 0 if check(plan) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
