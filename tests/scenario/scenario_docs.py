"""Shared data for the scenario tests: the SPEC §9 document, its answer, the example files."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "scenarios").glob("*.json"))

#: The scenario of SPEC §9, as a decoded document.
SPEC_DOC: dict[str, Any] = {
    "format": "falkirk-scenario/1",
    "processors": {
        "src": {"domain": "epoch", "stateless": True},
        "sum": {
            "domain": "epoch",
            "logs": ["e2"],
            "checkpoints": [{"frontier": 2, "notifications": 2, "delivered": {"e1": 2}}],
        },
        "sink": {
            "domain": "epoch",
            "checkpoints": [{"frontier": 1, "delivered": {"e2": 1}}],
            "live": {"delivered": {"e2": 4}},
        },
    },
    "edges": {
        "e1": {"src": "src", "dst": "sum", "projection": "identity"},
        "e2": {"src": "sum", "dst": "sink", "projection": "identity"},
    },
    "failed": ["sum"],
}

#: The answer SPEC §9 gives for it.
SPEC_ANSWER: dict[str, Any] = {
    "format": "falkirk-plan/1",
    "frontiers": {"src": 2, "sum": 2, "sink": 1},
    "notification_frontiers": {"src": 2, "sum": 2, "sink": 1},
    "actions": {"src": "rollback", "sum": "restore", "sink": "rollback"},
    "replay": {"e2": {"log_frontier": 2, "exclude": 1}},
}


def spec_doc() -> dict[str, Any]:
    """A fresh copy of the SPEC §9 document (tests may mutate it)."""
    return copy.deepcopy(SPEC_DOC)


def example_docs() -> list[Any]:
    """pytest params: each example scenario file, decoded."""
    return [pytest.param(json.loads(p.read_text()), id=p.stem) for p in EXAMPLES]
