"""Dictionaries whose values are made on first access: how a :class:`~falkirk.solver.model.Dataflow` shows its
columns.

A dataflow stores its processors, edges and checkpoints as arrays
(:mod:`falkirk.solver.model.table`); its familiar dictionaries
(``processors``, ``edges``, ``inputs``, ``outputs``, ``bound``,
``receives_notifications``…) are :class:`OnDemand` views over them: every
key is there from the start, in declaration order, and a value is made the
first time it is read and kept. A solve that reads a few processors pays
for those few; ``values()`` and ``items()`` make every value.

A read of a value already made is a plain ``dict`` lookup (``O(1)``, no
Python call); the first read of a key costs what making it costs.

>>> d = OnDemand(["a", "b"], str.upper)
>>> len(d), "b" in d, "z" in d, list(d)
(2, True, False, ['a', 'b'])
>>> d["b"], d.get("z", "?"), dict(d)
('B', '?', {'a': 'A', 'b': 'B'})
>>> d == {"a": "A", "b": "B"}
True
"""

from __future__ import annotations

from collections.abc import Callable, Collection, ItemsView, Iterator, KeysView, ValuesView
from typing import Any

__all__ = ["OnDemand"]


class OnDemand(dict):
    """A ``dict`` of every key in ``keys`` (an ordered collection), each value ``make(key)`` made on first
    read.

    ``keys`` should answer ``in`` in ``O(1)`` (a ``dict`` or a ``dict``
    view); it may also be a callable returning such a collection, called
    on first need (so a large key set is built only when asked for; give
    its ``size`` to answer ``len`` without building it). Values given in
    ``made`` are there already. Iteration, ``len``, ``in`` and
    equality follow ``keys``, not what has been made so far.
    """

    def __init__(
        self,
        keys: Collection[str] | Callable[[], Collection[str]],
        make: Callable[[str], Any],
        made: dict[str, Any] | None = None,
        *,
        size: int | None = None,
    ) -> None:
        super().__init__(made or {})
        self._size = size
        self._keys_of = keys if callable(keys) else None
        self._key_set: Collection[str] | None = None if callable(keys) else keys
        self._make = make

    @property
    def _names(self) -> Collection[str]:
        ks = self._key_set
        if ks is None:
            assert self._keys_of is not None
            ks = self._key_set = self._keys_of()
        return ks

    def __missing__(self, key: str) -> Any:
        if key not in self._names:
            raise KeyError(key)
        value = self._make(key)
        dict.__setitem__(self, key, value)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return self._size if self._size is not None else len(self._names)

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._names))

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._names else default

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        return KeysView(self)

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        return ValuesView(self)

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        return ItemsView(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, dict):
            return NotImplemented
        return len(self) == len(other) and all(k in other and other[k] == self[k] for k in self)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def copy(self) -> dict[str, Any]:
        """A plain ``dict`` of every key (every value made)."""
        return {k: self[k] for k in self}

    def __repr__(self) -> str:
        return repr(self.copy())

    def __reduce__(self) -> Any:
        return (dict, (self.copy(),))
