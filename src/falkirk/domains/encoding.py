"""The canonical JSON encoding of a frontier (SPEC §9), shared by the solver's messages and the plan.

>>> from falkirk.domains import Epoch, Frontier
>>> frontier_text(Frontier.top(Epoch()))
'top'
"""

from __future__ import annotations

import json
from typing import Any

from falkirk.domains.frontier import Frontier

__all__ = ["encode_frontier", "frontier_text"]


def frontier_text(f: Frontier) -> str:
    """``f``'s canonical encoding as compact text (``2``, ``{"e1": 3}``, ``top``)."""
    enc = encode_frontier(f)
    return enc if isinstance(enc, str) else json.dumps(enc, separators=(", ", ": "))


def encode_frontier(f: Frontier) -> Any:
    """The canonical JSON encoding of ``f`` (SPEC §9), using the domain's ``encode``."""
    enc = getattr(f.domain, "encode", None)
    if enc is not None:
        return enc(f)
    if f.is_top:
        return "top"
    if f.is_empty:
        return "empty"
    return {"before": [list(t) if isinstance(t, tuple) else t for t in f.antichain]}
