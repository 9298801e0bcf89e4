"""Errors of the Spark integration (all rooted in :class:`falkirk.errors.FalkirkError`).

>>> from falkirk.errors import FalkirkError
>>> issubclass(CorruptDataError, StorageError) and issubclass(StorageError, FalkirkError)
True
>>> str(StepFailure("cc", 7, "injected failure (mid-step)"))
'step cc failed at epoch 7: injected failure (mid-step)'
"""

from __future__ import annotations

from falkirk.errors import FalkirkError, ValidationError

__all__ = [
    "PipelineError",
    "SchemaError",
    "EagerWriteError",
    "RecordError",
    "StorageError",
    "AlreadyPublishedError",
    "CorruptDataError",
    "StepFailure",
    "RecoveryError",
    "StepError",
    "SessionError",
    "RunInterrupted",
]


class PipelineError(ValidationError):
    """A pipeline definition that cannot work (unknown input, cycle, bad regime…), naming the step."""


class SchemaError(PipelineError):
    """An input's Spark DDL schema that falkirk cannot check records against (names the field and the
    type)."""


class EagerWriteError(PipelineError):
    """An eager database step wrote what falkirk cannot undo per epoch (``step``, ``table``; the message says
    the fix)."""

    def __init__(self, step: str, table: str, message: str) -> None:
        super().__init__(message)
        self.step = step
        self.table = table


class RecordError(FalkirkError, ValueError):
    """A record that does not fit its input's declared schema; nothing of its batch was appended.

    ``input``, ``partition`` and ``offset`` say where the record would have
    gone, ``index`` its position in the appended batch, ``field`` the culprit.
    """

    def __init__(self, input: str, partition: int, offset: int, index: int, field: str, problem: str) -> None:
        super().__init__(
            f"input {input!r}, partition {partition}, offset {offset} (record {index} of the batch): {problem}; "
            "nothing of the batch was appended (fix the record, or declare the input with dead_letter=True "
            "to divert bad records)"
        )
        self.input = input
        self.partition = partition
        self.offset = offset
        self.index = index
        self.field = field


class SessionError(FalkirkError, RuntimeError):
    """The ``SparkSession`` a pipeline was given cannot run anything (stopped, or not a session)."""


class StorageError(FalkirkError, OSError):
    """Durable storage under the pipeline's root is missing something or cannot be written."""


class AlreadyPublishedError(StorageError, FileExistsError):
    """A write-once file (manifest, input segment, cut) that another writer published first; ``path`` names
    it.

    Whatever the store answered — ``FileExistsError``, S3's ``412 Precondition
    Failed`` (with or without its ``Condition`` element), GCS's ``412``, Azure's
    ``BlobAlreadyExists`` — it is this one error, a ``FileExistsError``.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is already published")
        self.path = path


class CorruptDataError(StorageError):
    """Durable data a recovery needs is missing or differs from what was written.

    ``step``, ``kind`` and ``epoch`` say which checkpoint, log, output or
    input epoch; ``path`` (relative to the root, when one file is to blame)
    names the damaged file, and the message starts with it. The planner
    treats the item as unavailable.

    >>> str(CorruptDataError("cc", "checkpoint", 3, "is missing", path="data/cc/checkpoint/3/part-0.parquet"))
    'data/cc/checkpoint/3/part-0.parquet is missing (step cc: checkpoint at epoch 3 is unusable)'
    >>> str(CorruptDataError("cc", "checkpoint", 3, "no manifest"))
    'step cc: checkpoint at epoch 3 is unusable: no manifest'
    """

    def __init__(self, step: str, kind: str, epoch: int, detail: str, *, path: str | None = None) -> None:
        if path is None:
            super().__init__(f"step {step}: {kind} at epoch {epoch} is unusable: {detail}")
        else:
            super().__init__(f"{path} {detail} (step {step}: {kind} at epoch {epoch} is unusable)")
        self.step = step
        self.kind = kind
        self.epoch = epoch
        self.path = path
        self.detail = detail


class StepFailure(FalkirkError, RuntimeError):
    """Step ``step`` failed while working on ``epoch`` (a raised error, a failed Spark job, an injection)."""

    def __init__(
        self,
        step: str,
        epoch: int,
        cause: str,
        *,
        injected: bool = False,
        deterministic: bool = False,
        unreadable: CorruptDataError | None = None,
        lost: bool = False,
    ) -> None:
        super().__init__(f"step {step} failed at epoch {epoch}: {cause}")
        self.step = step
        self.epoch = epoch
        self.cause = cause
        self.injected = injected
        #: an error in the step's own code or query that will recur on the same data (retried at most once)
        self.deterministic = deterministic
        #: the stored item (another step's log, checkpoint…) whose data file could not be read, when that was
        #: the failure: the item is taken as lost, and recomputed, if the same read fails again
        self.unreadable = unreadable
        #: the step's state in executor memory was lost with an executor (never retried in place)
        self.lost = lost


class RecoveryError(FalkirkError, RuntimeError):
    """No consistent rollback can be executed (e.g. the data it needs was deleted or is corrupt)."""


class StepError(RecoveryError):
    """A step failed again, the same deterministic way, after one recovery: falkirk stops retrying.

    ``step``, ``epoch`` and ``cause`` (the root cause: the user's error and where it was raised).
    """

    def __init__(self, failure: StepFailure, attempts: int) -> None:
        super().__init__(
            f"step {failure.step} failed at epoch {failure.epoch} with an error in its own code or query that "
            f"recurs: {failure.cause}; stopped after {attempts} attempts (a recovery did not clear it)"
        )
        self.step = failure.step
        self.epoch = failure.epoch
        self.cause = failure.cause


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C (``SIGINT``); the message says where, that the root is consistent and how to
    resume.

    Deliberately *not* a :class:`~falkirk.errors.FalkirkError`: an interrupt
    must pass through ``except Exception`` like the ``KeyboardInterrupt`` it
    replaces (whose py4j traceback it hides). ``root`` is the root's URI.
    """

    def __init__(self, message: str, root: str) -> None:
        super().__init__(message)
        self.root = root

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
