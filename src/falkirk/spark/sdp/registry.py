"""falkirk's ``GraphElementRegistry``: what an SDP project's definition files declare, collected as they run.

``pyspark.pipelines``' decorators (``@dp.table``, ``@dp.materialized_view``,
``@dp.temporary_view``, ``@dp.append_flow``, ``dp.create_streaming_table``,
``dp.create_sink``) hand each dataset (an ``Output``) and each flow to the
registry active while the files are imported. ``spark-pipelines`` registers
them with a Spark Connect server; :class:`Registry` keeps them, with their
query functions *not yet called*: falkirk calls them later, once to discover
what each reads (:mod:`~falkirk.spark.sdp.graph`) and then once per epoch.

Definition files are imported as ``spark-pipelines`` imports them: each
``.py`` file as a module named after the file, with ``spark`` in its
namespace (here a :class:`~falkirk.spark.sdp.session.PipelineSession`),
with the project directory as working directory and the session mutations
SDP blocks still blocked. **SQL definition files are refused**, naming the
file: their ``CREATE MATERIALIZED VIEW … AS SELECT`` queries name tables that
only a catalog resolves, and falkirk resolves a query's reads per epoch
through the Python API.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.pipelines.graph_element_registry import GraphElementRegistry, graph_element_registration_context

from falkirk.spark.errors import PipelineError

if TYPE_CHECKING:
    from falkirk.spark.sdp.session import PipelineSession
    from falkirk.spark.sdp.spec import Spec

__all__ = ["Registry", "load_definitions", "where"]


def where(element: Any) -> str:
    """``file:line`` of the decorator that declared ``element`` (a dataset or a flow)."""
    loc = getattr(element, "source_code_location", None)
    if loc is None:
        return "?"
    return f"{loc.filename}:{loc.line_number}" if loc.line_number else str(loc.filename)


class Registry(GraphElementRegistry):
    """Datasets and flows, in the order the definition files declared them (by lower-case name)."""

    def __init__(self) -> None:
        self.outputs: dict[str, Any] = {}
        self.flows: dict[str, Any] = {}

    def register_output(self, output: Any) -> None:
        key = output.name.lower()
        if key in self.outputs:
            raise PipelineError(
                f"dataset {output.name!r} is defined twice: at {where(self.outputs[key])} and "
                f"at {where(output)}"
            )
        self.outputs[key] = output

    def register_flow(self, flow: Any) -> None:
        key = flow.name.lower()
        if key in self.flows:
            raise PipelineError(
                f"flow {flow.name!r} is defined twice: at {where(self.flows[key])} and at {where(flow)}"
            )
        self.flows[key] = flow

    def register_auto_cdc_flow(self, flow: Any) -> None:
        raise PipelineError(
            f"flow {flow.name!r} into {flow.target!r} ({where(flow)}) is an Auto CDC flow "
            "(dp.create_auto_cdc_flow): not supported by falkirk sdp"
        )

    def register_sql(self, sql_text: str, file_path: Path) -> None:
        raise PipelineError(
            f"SQL definition file {file_path}: falkirk sdp runs Python definition files only (a SQL file's "
            "queries name tables only a catalog resolves; falkirk resolves each read per epoch through "
            "spark.read.table); write it as a Python file with @dp.materialized_view / @dp.table, or leave it "
            "out of the spec's libraries"
        )


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def load_definitions(spec: Spec, session: PipelineSession) -> Any:
    """Import the spec's definition files with ``session`` as their ``spark``; the filled registry.

    A file that fails to import is a :class:`PipelineError` naming the
    file and the error; so is a file that is neither ``.py`` nor ``.sql``,
    and a ``.sql`` file (see the module docstring).
    """
    try:
        from pyspark.pipelines.block_session_mutations import block_session_mutations
    except ImportError:  # the Connect client is missing: nothing of it to block
        block_session_mutations = contextlib.nullcontext  # type: ignore[assignment]
    registry = Registry()
    with _cwd(spec.directory), graph_element_registration_context(registry):
        for file in spec.files:
            rel = file.relative_to(spec.directory)
            if file.suffix == ".sql":
                registry.register_sql(file.read_text(encoding="utf-8"), rel)
            elif file.suffix != ".py":
                raise PipelineError(
                    f"definition file {rel}: neither Python (.py) nor SQL (.sql); the spec's "
                    "libraries globs must match definition files only"
                )
            module_spec = importlib.util.spec_from_file_location(file.stem, str(file))
            if module_spec is None or module_spec.loader is None:
                raise PipelineError(f"definition file {rel}: cannot be imported")
            module = importlib.util.module_from_spec(module_spec)
            module.__dict__["spark"] = session
            try:
                with block_session_mutations():
                    module_spec.loader.exec_module(module)
            except PipelineError as exc:
                raise PipelineError(f"definition file {rel}: {exc}") from None
            except Exception as exc:
                raise PipelineError(
                    f"definition file {rel} failed to import: {type(exc).__name__}: {exc}"
                ) from exc
    if not registry.outputs:
        raise PipelineError(
            f"pipeline spec {spec.path}: its libraries define no dataset "
            f"({len(spec.files)} definition file(s) found)"
        )
    return registry
