"""What a step's result depends on in the user's own code, and fingerprints that tell when it changed.

A step's function rarely stands alone: it calls helpers, reads module-level
thresholds and lookup tables, closes over a factory's arguments. A change to
any of these changes what the step computes, so a root written by the old
code must not silently continue with the new one
(:mod:`~falkirk.spark.pipeline.declare.evolution`).
:func:`dependencies` walks that graph — the way ``cloudpickle`` finds what
to ship with a function, but to fingerprint it rather than pickle it — and
returns one fingerprint per thing it reached, named so that a refusal can say
what changed:

* **followed**: the step's function; every function, lambda, method,
  ``functools.partial`` and class of the *user's* code it references,
  transitively (by global name, through a module attribute such as
  ``helpers.clean``, from its closure, its default arguments, a class's
  methods, an instance's attributes); the plain values they read — numbers,
  strings, bytes, ``None``, and tuples, lists, sets, frozensets and dicts of
  them (a threshold, a column list, a lookup table), by content;
* **not followed**: library code — anything installed under the Python
  installation or a ``site-packages`` directory (pyspark, numpy, pandas, the
  standard library, falkirk itself): its version is not part of the
  fingerprint; objects that are not plain values (a DataFrame, a
  SparkSession, a file handle…) beyond their class; data read at run time
  (files, tables, environment variables).

What counts is what the code *computes*: bytecode, names and constants —
not line numbers, comments, file paths or the module a function was loaded
as, so moving a helper within a file, editing a comment, re-importing an
unchanged module or running the same file as ``__main__`` changes nothing.

A module-level container the step *fills* while it runs (a memo dict) is
fingerprinted by content like a lookup table: keep such caches out of module
scope (or inside a class instance of a library), or they read as a change.

Cost: O(size of the user code reached + size of the plain values read).

>>> LIMIT = 3
>>> def positive(df): return df.where(df.amount > LIMIT)
>>> def step(events): return positive(events)
>>> sorted(dependencies(step))
['constant LIMIT', 'function positive', "the step's function"]
"""

from __future__ import annotations

import functools
import hashlib
import os
import site
import sys
import sysconfig
import types
from collections.abc import Mapping
from typing import Any

__all__ = ["fingerprint", "dependencies", "describe_differences"]

#: Packages that are never the user's code, wherever they are installed (falkirk may be an editable install).
LIBRARIES = frozenset({"falkirk", "pyspark", "py4j", "numpy", "pandas", "pyarrow"})

#: The name :func:`dependencies` gives the step's function itself.
STEP = "the step's function"

#: Scalars fingerprinted by value.
_SIMPLE = (bool, int, float, complex, str, bytes, type(None))


def _const(value: Any) -> Any:
    """A constant in a form whose ``repr`` is the same in every process (set order follows string hashes)."""
    if isinstance(value, types.CodeType):
        return _code_parts(value)
    if isinstance(value, (frozenset, set)):
        return ["set", sorted(repr(_const(v)) for v in value)]
    if isinstance(value, tuple):
        return ["tuple", [_const(v) for v in value]]
    if isinstance(value, list):
        return ["list", [_const(v) for v in value]]
    if isinstance(value, dict):
        return ["dict", sorted((repr(_const(k)), repr(_const(v))) for k, v in value.items())]
    return repr(value)


def _code_parts(code: types.CodeType) -> list[Any]:
    return [
        code.co_code,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        [_const(c) for c in code.co_consts],
    ]


def _hash(value: Any) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def fingerprint(fn: Any) -> str | None:
    """A fingerprint of ``fn``'s own code: bytecode, names, constants, and the plain values (numbers,
    strings, tuples of them) it reads from its closure or module — not line numbers, not the file.

    This is the fingerprint roots record as a step's ``code`` since their
    first format; :func:`dependencies` adds what ``fn`` calls. Cost: O(size
    of the code).

    >>> def f(x): return x + 1
    >>> def g(x): return x + 2
    >>> fingerprint(f) == fingerprint(f), fingerprint(f) == fingerprint(g), fingerprint(None)
    (True, False, None)
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return None if fn is None else f"{type(fn).__module__}.{type(fn).__qualname__}"
    return _hash([_code_parts(code), _values(fn, code)])


def _simple(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_simple(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, bytes))


def _plain(value: Any, depth: int = 0) -> bool:
    """A plain value (fingerprinted by content): scalars and containers of them, nested a few levels."""
    if isinstance(value, _SIMPLE):
        return True
    if depth > 8:
        return False
    if isinstance(value, (tuple, list, set, frozenset)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _values(fn: Any, code: types.CodeType) -> list[Any]:
    """Plain values the code reads from its closure or its module (a threshold, a column name…)."""
    cells = [
        (n, c.cell_contents)
        for n, c in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False)
        if _cell_is_set(c)
    ]
    module = getattr(fn, "__globals__", {})
    found = cells + [(n, module[n]) for n in sorted(_names(code)) if n in module]
    return [(n, _const(v)) for n, v in found if _simple(v)]


def _cell_is_set(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Directories whose code is a library's: the Python installation's, every site-packages, and the packages
    of :data:`LIBRARIES` wherever they are (an editable install lives in a source tree)."""
    dirs = {p for k in ("stdlib", "platstdlib", "purelib", "platlib") if (p := sysconfig.get_paths().get(k))}
    dirs |= set(site.getsitepackages()) | {site.getusersitepackages(), sys.base_prefix, sys.prefix}
    for name in LIBRARIES:
        module = sys.modules.get(name)
        dirs |= set(getattr(module, "__path__", None) or ())
    return tuple(sorted({os.path.realpath(d) + os.sep for d in dirs if d}))


@functools.lru_cache(maxsize=4096)
def _library_file(path: str) -> bool:
    if not path or path.startswith("<"):  # exec'd, interactive, doctest: the user's
        return False
    real = os.path.realpath(path)
    return any(real.startswith(d) for d in _library_dirs())


def _library_module(name: str | None) -> bool:
    """Whether module ``name`` is a library's (``__main__`` and modules made at run time are the user's)."""
    if name is None or name == "__main__":
        return False
    top = name.partition(".")[0]
    if top in LIBRARIES or top in sys.stdlib_module_names:
        return True
    module = sys.modules.get(name)
    if module is None:
        return False
    file = getattr(module, "__file__", None)
    return name in sys.builtin_module_names if file is None else _library_file(file)


def _user_function(fn: Any) -> bool:
    """Whether ``fn`` is the user's code: where its code was compiled from, not the module it names."""
    code = getattr(fn, "__code__", None)
    return code is not None and not _library_file(code.co_filename)


class _Walk:
    """One walk of :func:`dependencies`: the parts found, by name, and the objects already visited."""

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}
        self.owners: dict[str, int] = {}  # part name -> id of the object it names (to tell namesakes apart)
        self.seen: set[int] = set()
        self.keep: list[Any] = []  # visited objects stay alive during the walk, so their ids stay unique

    def add(self, kind: str, name: str, obj: Any, digest: str) -> None:
        key = f"{kind} {name}"
        if key in self.owners and self.owners[key] != id(obj):
            module = getattr(obj, "__module__", None) or "?"
            key = f"{kind} {name} ({module})"
            n = 2
            while key in self.owners and self.owners[key] != id(obj):
                key, n = f"{kind} {name} ({module}, {n})", n + 1
        self.owners[key] = id(obj)
        self.parts[key] = digest

    def visit(self, obj: Any) -> bool:
        if id(obj) in self.seen:
            return False
        self.seen.add(id(obj))
        self.keep.append(obj)
        return True

    # -- callables ---------------------------------------------------------------------------------
    def function(self, fn: Any, *, root: bool = False) -> None:
        if isinstance(fn, functools.partial):
            if self.visit(fn):
                self.function(fn.func)
                for i, a in enumerate(fn.args):
                    self.value(a, f"{_qualname(fn.func)} partial argument {i}")
                for k, v in sorted(fn.keywords.items()):
                    self.value(v, f"{_qualname(fn.func)} partial argument {k}")
            return
        if isinstance(fn, types.MethodType):
            self.function(fn.__func__)
            self.value(fn.__self__, f"{_qualname(fn.__func__)} bound to")
            return
        code = getattr(fn, "__code__", None)
        if code is None:
            if not isinstance(fn, type) and not _library_module(type(fn).__module__):
                self.cls(type(fn))  # a callable instance of the user's class
                self.attributes(fn, _qualname(type(fn)))
            return
        if not root and not _user_function(fn):
            return
        if not self.visit(fn):
            return
        name = _qualname(fn)
        defaults = [_const(v) if _plain(v) else _kind(v) for v in (fn.__defaults__ or ())]
        kwdefaults = sorted(
            (k, repr(_const(v) if _plain(v) else _kind(v))) for k, v in (fn.__kwdefaults__ or {}).items()
        )
        digest = _hash([_code_parts(code), defaults, kwdefaults])
        if root:
            self.parts[STEP], self.owners[STEP] = digest, id(fn)
        else:
            self.add("function", name, fn, digest)
        for v in [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]:
            if not _plain(v):
                self.value(v, f"{name} default")
        names = _names(code)
        for var, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
            if _cell_is_set(cell):
                self.value(cell.cell_contents, f"{var} of {name}", names, kind="closure variable")
        module = getattr(fn, "__globals__", {})
        for n in sorted(names):
            if n in module:
                self.value(module[n], n, names, kind="constant")

    def cls(self, klass: type) -> None:
        if _library_module(klass.__module__) or not self.visit(klass):
            return
        plain = sorted(
            (k, repr(_const(v))) for k, v in vars(klass).items() if not k.startswith("__") and _plain(v)
        )
        bases = [_qualname(b) for b in klass.__bases__]
        self.add("class", _qualname(klass), klass, _hash([bases, plain]))
        for attr in sorted(vars(klass)):
            v = vars(klass)[attr]
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            elif isinstance(v, property):
                for f in (v.fget, v.fset, v.fdel):
                    if f is not None:
                        self.function(f)
                continue
            if callable(v) and hasattr(v, "__code__"):
                self.function(v)
        for b in klass.__bases__:
            self.cls(b)

    def attributes(self, obj: Any, label: str) -> None:
        fields = getattr(obj, "__dict__", {})
        for k in sorted(fields):
            self.value(fields[k], f"{label}.{k}", kind="attribute")

    # -- values --------------------------------------------------------------------------------------
    def value(self, v: Any, label: str, attrs: set[str] | None = None, *, kind: str = "constant") -> None:
        if _plain(v):
            self.add(kind, label, v, _hash(_const(v)))
        elif isinstance(v, types.ModuleType):
            if _library_module(v.__name__) or not self.visit(v):
                return
            for a in sorted(attrs or ()):
                if a in vars(v):
                    self.value(vars(v)[a], f"{a}", attrs, kind="constant")
        elif isinstance(v, type):
            self.cls(v)
        elif callable(v) and (hasattr(v, "__code__") or isinstance(v, (functools.partial, types.MethodType))):
            self.function(v)
        elif isinstance(v, (tuple, list, set, frozenset)):
            if self.visit(v):
                for i, item in enumerate(v if not isinstance(v, (set, frozenset)) else sorted(v, key=repr)):
                    self.value(item, f"{label}[{i}]", attrs, kind=kind)
        elif isinstance(v, dict):
            if self.visit(v):
                for k in sorted(v, key=repr):
                    self.value(v[k], f"{label}[{k!r}]", attrs, kind=kind)
        elif not _library_module(type(v).__module__) and self.visit(v):  # an instance of the user's class
            self.cls(type(v))
            self.attributes(v, label)


def _qualname(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__


def _kind(v: Any) -> str:
    return f"<{type(v).__module__}.{type(v).__qualname__}>"


def dependencies(fn: Any) -> dict[str, str]:
    """A fingerprint of each thing ``fn``'s result depends on in the user's code, by ``"<kind> <name>"``.

    ``fn`` itself is ``"the step's function"``; the other kinds: ``function``, ``class``, ``constant`` (a
    plain value read by global name or module attribute), ``closure variable``, ``attribute`` (of an instance
    of the user's class). Names are qualified names, not module paths (a module is named only to tell two
    namesakes apart). ``{}`` for ``None``. See the module docstring for what is followed.

    >>> def make(limit):
    ...     return lambda df: df.where(df.amount > limit)
    >>> a, b = dependencies(make(3)), dependencies(make(4))
    >>> a == dependencies(make(3)), describe_differences(a, b)
    (True, ['closure variable limit of make.<locals>.<lambda> changed'])
    >>> describe_differences(a, dependencies(lambda df: df))
    ['closure variable limit of make.<locals>.<lambda> is gone', "the step's function changed"]
    """
    if fn is None:
        return {}
    walk = _Walk()
    walk.function(fn, root=True)
    return dict(sorted(walk.parts.items()))


def describe_differences(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """What changed between two :func:`dependencies` records, one phrase each, in name order.

    >>> describe_differences({"function f": "1", "constant LIMIT": "2"}, {"function f": "1", "constant LIMIT": "3",
    ...                      "function g": "4"})
    ['constant LIMIT changed', 'function g is new']
    """
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            out.append(f"{key} is gone")
        elif key not in old:
            out.append(f"{key} is new")
        elif old[key] != new[key]:
            out.append(f"{key} changed")
    return out
