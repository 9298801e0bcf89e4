"""Errors raised by falkirk.

Every error derives from :class:`FalkirkError` and also from the built-in
exception a caller would naturally catch (``ValueError`` for bad input,
``LookupError`` for unknown names, ``RuntimeError`` for a failure to solve),
in the style of ``attrs.exceptions.FrozenInstanceError(AttributeError)``.
Messages name the processor, edge or field at fault and, where one exists,
the fix.

>>> from falkirk.errors import FalkirkError, UnknownNameError
>>> issubclass(UnknownNameError, LookupError) and issubclass(UnknownNameError, FalkirkError)
True
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "RescaleError",
    "FalkirkError",
    "DomainError",
    "ProjectionError",
    "ValidationError",
    "UnknownNameError",
    "NotMonotoneError",
    "NotAChainError",
    "ScenarioError",
    "SolverError",
    "MonitorError",
    "did_you_mean",
]


class FalkirkError(Exception):
    """Base class of every error falkirk raises on purpose."""


class DomainError(FalkirkError, ValueError):
    """A time or frontier does not belong to the domain it was used with."""


class ProjectionError(FalkirkError, ValueError):
    """An edge projection does not fit the domains of the edge's endpoints."""


class ValidationError(FalkirkError, ValueError):
    """A dataflow, processor, edge or checkpoint is not well formed."""


class UnknownNameError(ValidationError, LookupError):
    """A processor, edge or domain name that nothing declares."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0]) if self.args else ""


class NotMonotoneError(ValidationError):
    """Checkpoint metadata that shrinks while its frontier grows."""


class NotAChainError(ValidationError):
    """A stateful processor whose checkpoints are not strictly increasing."""


class ScenarioError(ValidationError):
    """A scenario document that does not follow the ``falkirk-scenario/1`` format.

    ``path`` is the JSON location of the problem, e.g. ``processors.sum.checkpoints[0]``.
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class RescaleError(ValidationError):
    """A checkpoint that cannot be restored at the requested parallelism (names the edge or step)."""


class SolverError(FalkirkError, RuntimeError):
    """The solver cannot produce an answer (e.g. a processor lacks the empty checkpoint)."""


class MonitorError(FalkirkError, RuntimeError):
    """The incremental monitor refused a report or a rollback."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` when ``word`` looks like a misspelling of a choice (for error messages).

    >>> did_you_mean("chekpoints", ["checkpoints", "live"]), did_you_mean("zzz", ["live"])
    (" (did you mean 'checkpoints'?)", '')
    """
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
