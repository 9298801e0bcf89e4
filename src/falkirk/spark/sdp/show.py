"""``falkirk sdp run --dry-run``: the graph falkirk made of an SDP project, and what a run would do — nothing
run.

The graph: each dataset and flow, its kind, its step's regime, what its step
outputs each update (new rows or the whole table), what it reads and, for a
materialized view, why its query is kept incrementally or recomputed. The
run: a new update (the epoch, the file streams' new files), or for
``--refresh``/``--full-refresh`` the plan falkirk's solver makes for the
restart that redoes them — every step's action and the constraint behind it,
computed from the manifests under the root as
:func:`~falkirk.spark.pipeline.plan.whatif.from_root` does, with the refreshed
steps held back as ``code_changes`` holds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from attrs import frozen

from falkirk.spark.pipeline.plan.explain import plan_table, replayed_line, show_epoch, why
from falkirk.spark.pipeline.plan.live import frontier_kind
from falkirk.spark.pipeline.plan.planner import Planner
from falkirk.spark.pipeline.plan.whatif import WhatIf, what_if
from falkirk.spark.pipeline.store.storage import Storage
from falkirk.spark.sdp.build import FileFeed, Rebuilds
from falkirk.spark.sdp.regimes import text

if TYPE_CHECKING:
    from falkirk.spark.pipeline.api import Pipeline
    from falkirk.spark.sdp.project import Project

__all__ = ["RunPlan", "run_plan", "graph_table", "solver_plan"]


@frozen
class RunPlan:
    """What a run would do: the epoch it ends at, whether it is a new update, the refresh plan (if any)."""

    text: str
    epoch: int
    new: bool
    #: the solver's plan of a refresh (``None`` for a plain update)
    plan: WhatIf | None = None

    @property
    def redo(self) -> dict[str, tuple[int, int]]:
        """The epochs each step would execute again (a refresh)."""
        return dict(self.plan.redo) if self.plan is not None else {}

    def __str__(self) -> str:
        return self.text


def graph_table(project: Project) -> list[str]:
    """One line per dataset and flow (see the module docstring)."""
    g = project.graph
    rows = [("step", "kind", "regime", "outputs", "reads")]
    for n in g.order:
        d = g.datasets.get(n)
        flow = g.flows.get(n)
        kind = d.kind if d is not None else f"flow into {g.datasets[flow.target].name}" if flow else "?"
        regime = project.regimes[n]
        shown = text(regime)
        outputs = "new rows" if (d is None or d.mode == "append") else "table"
        src = g.inputs_of(n)
        reads = ", ".join(
            [
                f"{s} ({flow.sources[s].describe()})" if flow is not None and s in flow.sources else s
                for s in src
            ]
            or ["-"]
        )
        if d is not None and d.shape is not None and d.kind == "materialized view":
            how = "kept incrementally" if not regime.stateless else "recomputed in full"
            reads += f"; {how}: {d.shape.describe()}"
        rows.append((n, kind, shown, outputs, reads))
    return plan_table(rows)


def solver_plan(pipe: Pipeline, limits: Mapping[str, int], at: int) -> WhatIf:
    """The plan of the restart that holds each step of ``limits`` to its epoch, everyone having completed
    ``at``."""
    storage = Storage(pipe.location, fsync=False, checksums=False)
    available: dict[str, list[int]] = {}
    for n in pipe.order:
        if n in pipe.inputs:
            available[n] = pipe.inputs[n].log.cut_epochs()[-1:]
        else:
            available[n] = storage.epochs(n, frontier_kind(pipe, n))
    known = {
        n: (
            [at]
            if (n in pipe.inputs or pipe.stateless(n)) and max(es, default=-1) >= at
            else [e for e in es if e <= at]
        )
        for n, es in available.items()
    }
    planner = Planner(pipe.dataflow(), outputs=pipe.external_outputs, known=known, monitor=False)
    for n, e in limits.items():
        planner.truncate(n, e)
    return what_if(pipe, planner, pipe.order, {n: at for n in pipe.order}, storage=storage)


def run_plan(
    project: Project,
    limits: Mapping[str, int],
    rebuilds: Rebuilds,
    code_changes: Mapping[str, str],
    epochs: int,
) -> RunPlan:
    """The dry run's text (see the module docstring)."""
    n = project.updates()
    pipe = project.pipeline(code_changes=code_changes, refresh=limits, rebuilds=rebuilds)
    out = [
        f"pipeline {project.spec.name!r} ({project.spec.path}); falkirk root {project.location.uri}; "
        f"{n} update(s) completed",
        *graph_table(project),
    ]
    out += [f"note: {x}" for x in project.ignored_conf]
    if code_changes:
        out.append(
            f"changed since the last run: {', '.join(code_changes)} (the new code applies from this run)"
        )
    pending = {k: [e for e in es if e >= epochs - 1] for k, es in rebuilds.epochs.items()}
    for k, es in pending.items():
        if es:
            out.append(f"{k} is recomputed from whole tables at epoch {es[0]} (its state set aside)")
    if not limits:
        feeds = {name: i.source for name, i in pipe.inputs.items() if isinstance(i.source, FileFeed)}
        out.append(f"this run: update {n + 1} (epoch {n}): every step runs once over the new input")
        for name, feed in feeds.items():
            cut = n in pipe.inputs[name].log.cut_epochs()
            out.append(
                f"  {name}: "
                + (
                    f"its slice of epoch {n} is already cut (the update resumes)"
                    if cut
                    else f"the new files of {feed.source.describe()}"
                )
            )
        return RunPlan("\n".join(out), n, True)
    what = solver_plan(pipe, limits, n - 1)
    out.append(
        f"this run: {', '.join(f'{k} from epoch {e + 1}' for k, e in limits.items())} redone; no new update. "
        "falkirk's solver plans:"
    )
    rows = [("step", "action", "frontier", "redo", "why")]
    for s, f in what.plan.frontiers.items():
        lo_hi = what.redo.get(s)
        redo = "-" if lo_hi is None else f"{lo_hi[0]}" if lo_hi[0] == lo_hi[1] else f"{lo_hi[0]}–{lo_hi[1]}"
        reason = (
            (f"refreshed: held to epoch {limits[s]}" if s in limits else why(what.plan, s))
            if lo_hi
            else "kept"
        )
        rows.append((s, what.plan.actions[s], show_epoch(f), redo, reason))
    out += plan_table(rows)
    if what.replay:
        out.append(replayed_line(what.replay))
    if what.blocked:
        out.append(f"  NOT EXECUTABLE: {what.blocked}")
    return RunPlan("\n".join(out), n - 1, False, what)
