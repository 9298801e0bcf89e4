"""An SDP project as ``spark-pipelines`` finds it: the spec file, its settings, its definition files.

The spec is found and read by ``pyspark.pipelines.cli`` itself
(``find_pipeline_spec``: ``spark-pipeline.yml`` or ``.yaml`` in the given
directory or its ancestors; ``load_pipeline_spec``: the same fields and
checks), and the ``libraries`` globs are expanded as ``spark-pipelines`` does
(a file path, or a folder ending in ``/**``; ``__pycache__`` skipped, sorted
as ``pathlib`` globs them). Errors are :class:`~falkirk.spark.errors.PipelineError`
naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from attrs import frozen

from falkirk.spark.errors import PipelineError

__all__ = ["Spec", "find_spec", "load_spec", "REGIME_PREFIX"]

#: A spec ``configuration`` key ``falkirk.regime.<dataset>`` sets that dataset's regime (Spark ignores it).
REGIME_PREFIX = "falkirk.regime."


@frozen
class Spec:
    """A pipeline spec: its file, the SDP fields falkirk uses, and the definition files its globs match."""

    path: Path
    name: str
    storage: str
    catalog: str | None
    database: str | None
    configuration: dict[str, str]
    files: tuple[Path, ...]

    @property
    def directory(self) -> Path:
        """The project directory (the spec's): globs, and definition modules' working directory, are relative
        to it."""
        return self.path.parent

    @property
    def spark_conf(self) -> dict[str, str]:
        """The Spark settings of ``configuration`` (without falkirk's own keys)."""
        return {k: v for k, v in self.configuration.items() if not k.startswith("falkirk.")}

    def regimes(self) -> dict[str, str]:
        """Regimes given in ``configuration`` as ``falkirk.regime.<dataset>: <regime>``, by dataset name."""
        return {
            k[len(REGIME_PREFIX) :]: v for k, v in self.configuration.items() if k.startswith(REGIME_PREFIX)
        }

    def default_root(self) -> str:
        """falkirk's root when none is given: ``<storage>/falkirk``, beside what ``spark-pipelines`` keeps
        there (a relative ``storage`` is relative to the project directory)."""
        storage = self.storage.rstrip("/")
        if "://" not in storage and not os.path.isabs(storage):
            storage = str(self.directory / storage)
        return storage + "/falkirk"


def _cli() -> Any:
    try:
        from pyspark.pipelines import cli
    except ImportError as exc:
        raise PipelineError(
            f"falkirk sdp needs pyspark.pipelines and its spec loader (pip install 'falkirk[sdp]'): {exc}"
        ) from None
    return cli


def find_spec(where: str | os.PathLike[str] | None = None) -> Path:
    """The spec file ``where`` names: the file itself, or the one ``spark-pipelines`` finds from a
    directory."""
    from pyspark.errors import PySparkException

    here = Path(where) if where is not None else Path.cwd()
    if here.is_file():
        return here
    if not here.exists():
        raise PipelineError(f"{here}: no such pipeline spec file or directory")
    try:
        return Path(_cli().find_pipeline_spec(here.resolve()))
    except PySparkException as exc:
        raise PipelineError(f"{here}: {exc}") from None


def load_spec(where: str | os.PathLike[str] | None = None) -> Spec:
    """Read the spec (see :func:`find_spec`) and expand its ``libraries`` globs."""
    from pyspark.errors import PySparkException

    path = find_spec(where).resolve()
    cli = _cli()
    try:
        spec = cli.load_pipeline_spec(path)
    except (PySparkException, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PipelineError(f"pipeline spec {path}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # yaml's errors
        raise PipelineError(f"pipeline spec {path} is not valid YAML: {exc}") from None
    root = path.parent
    files: list[Path] = []
    for lib in spec.libraries:
        for p in root.glob(lib.include):
            if p.is_file() and "__pycache__" not in p.parts and p not in files:
                files.append(p)
    return Spec(
        path, spec.name, spec.storage, spec.catalog, spec.database, dict(spec.configuration), tuple(files)
    )
