"""Time domains, frontiers and edge projections (SPEC §1, §2, §7).

>>> from falkirk.domains import Epoch, Frontier
>>> Frontier.below(Epoch(), 3)
Frontier(epoch, 2)
"""

from falkirk.domains.base import Domain, Time
from falkirk.domains.epoch import Epoch
from falkirk.domains.frontier import Frontier
from falkirk.domains.lexicographic import Lexicographic
from falkirk.domains.product import Product
from falkirk.domains.projections import (
    PROJECTIONS,
    BoundProjection,
    EpochToLoop,
    EpochToSequence,
    FunctionProjection,
    Identity,
    Projection,
    Recorded,
    SequenceCount,
    SequenceToEpoch,
    projection_from_spec,
)
from falkirk.domains.registry import BUILTIN, REGISTRY, domain_options, make_domain, register_domain
from falkirk.domains.sequence import INPUT_EDGE, Sequence

__all__ = [
    "Domain",
    "Time",
    "Frontier",
    "Epoch",
    "Sequence",
    "INPUT_EDGE",
    "Product",
    "Lexicographic",
    "Projection",
    "BoundProjection",
    "Identity",
    "EpochToLoop",
    "SequenceCount",
    "EpochToSequence",
    "SequenceToEpoch",
    "Recorded",
    "FunctionProjection",
    "PROJECTIONS",
    "projection_from_spec",
    "BUILTIN",
    "REGISTRY",
    "register_domain",
    "make_domain",
    "domain_options",
]
