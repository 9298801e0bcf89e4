"""Recovery schemes of the seeds as falkirk policies (SPEC §8), selectable by name.

>>> sorted(SCHEMES)
['dbsp-checkpoint-delta', 'dbsp-input-log', 'dbsp-persistent', 'falkirk', 'flink-unaligned', 'quokka']
"""

from falkirk.sim.schemes.base import FALKIRK, Role, Scheme, falkirk_policy
from falkirk.sim.schemes.dbsp import DBSP_CHECKPOINT_DELTA, DBSP_INPUT_LOG, DBSP_PERSISTENT
from falkirk.sim.schemes.flink import FLINK_UNALIGNED
from falkirk.sim.schemes.quokka import QUOKKA

#: Schemes by name (``python -m falkirk.testing.fuzz --scheme NAME``).
SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (FALKIRK, FLINK_UNALIGNED, QUOKKA, DBSP_INPUT_LOG, DBSP_CHECKPOINT_DELTA, DBSP_PERSISTENT)
}

__all__ = [
    "Role",
    "Scheme",
    "FALKIRK",
    "SCHEMES",
    "falkirk_policy",
    "FLINK_UNALIGNED",
    "QUOKKA",
    "DBSP_INPUT_LOG",
    "DBSP_CHECKPOINT_DELTA",
    "DBSP_PERSISTENT",
]
