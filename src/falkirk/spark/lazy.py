"""Package namespaces whose public names are imported on first use (PEP 562).

``from falkirk.spark import Pipeline`` and ``falkirk.spark.Pipeline`` work as if the package had
imported every public name eagerly, but importing one module under it —
``falkirk.spark.pipeline.run.session`` for its Spark settings, ``falkirk.spark.lineage`` alone — no longer
imports the whole library (about 0.36–0.40 CPU-s of imports at every driver start by ``time.process_time``, the solver
and numpy among them): each public name's module is imported when the name is first asked for.

>>> import sys
>>> lazy = sys.modules["falkirk.spark"]
>>> "Lazy" in dir(lazy) and "Lazy" in lazy.__all__
True
>>> lazy.Lazy(every=3).checkpoints_at(2)
True
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping
from typing import Any


class LazyPackage(types.ModuleType):
    """A package whose public names (``_exports`` in its ``__dict__``: name → the module defining it) import on
    first use. (No class-level annotation: it would stand in for the module's own ``__annotations__``.)"""

    def __getattr__(self, name: str) -> Any:
        home = self.__dict__["_exports"].get(name)
        if home is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(home), name)
        except AttributeError as exc:
            # raised while ``home`` was imported (or ``home`` lacks the name): as an AttributeError it would read
            # as "no such attribute" (``hasattr`` False, a bare ImportError from ``from ... import``)
            raise ImportError(f"{self.__name__}.{name}: importing {home} failed: {exc}", name=home) from exc
        types.ModuleType.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        # The import system binds a subpackage to its parent the first time it is imported. Where a public
        # name is spelt as a subpackage (``falkirk.spark.lineage``, the function, and the package), the
        # public name wins, as it did when the package imported it eagerly after its subpackages.
        if (
            isinstance(value, types.ModuleType)
            and name in self.__dict__["_exports"]
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            return
        types.ModuleType.__setattr__(self, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.__dict__["_exports"]))


def lazy_exports(package: str, exports: Mapping[str, tuple[str, ...]]) -> None:
    """Make ``package`` (an imported package's ``__name__``) import its public names on first use:
    ``exports`` maps a defining module to the names the package re-exports from it."""
    module = sys.modules[package]
    module.__dict__["_exports"] = {name: home for home, names in exports.items() for name in names}
    module.__class__ = LazyPackage
