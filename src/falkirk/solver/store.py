"""Moved to :mod:`falkirk.solver.monitor.store`; this path is kept for existing imports."""

from falkirk.solver.monitor.store import (
    MemoryStore,
    MetadataStore,
    SQLiteStore,
    StoredState,
    with_checkpoints,
)

__all__ = ["StoredState", "MetadataStore", "MemoryStore", "SQLiteStore", "with_checkpoints"]
