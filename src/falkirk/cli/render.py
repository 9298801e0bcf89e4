"""Render a rollback plan as a picture (matplotlib, Agg backend, imported lazily).

This module is public: ``falkirk draw`` uses it, and so do other packages
that draw plans (:mod:`falkirk.spark`'s what-if plans and demo), through
the names of its ``__all__``. Its helpers (:mod:`falkirk.cli._layout`,
:mod:`falkirk.cli._common`) stay private.

Processors are boxes coloured by action (keep / rollback / restore /
restart) showing their name, action and frontier ``f(p)`` (and ``n(p)``
when it differs); failed processors get a thick red outline and processors
that lose work a heavier border. Edges carry their name; logged edges are
dashed and thicker, with the replay the plan asks for.
"""

from __future__ import annotations

import math
import os
import textwrap
from typing import Any

from falkirk.cli._common import CommandError
from falkirk.cli._layout import layout
from falkirk.solver import RollbackPlan, encode_frontier

__all__ = ["ACTION_COLOURS", "frontier_text", "render_plan"]

#: Fill colour of a processor box per action.
ACTION_COLOURS = {"keep": "#d9ead3", "rollback": "#ffe599", "restore": "#9fc5e8", "restart": "#ea9999"}
FAILED = "#c00000"
EDGE = "#555555"
LOGGED = "#1f4e9a"


def frontier_text(f: Any, width: int = 20) -> str:
    """A frontier's canonical encoding as short text: ``⊤``, ``∅``, ``2``, ``a:3 b:⊤``, ``before (1,1)``.

    >>> from falkirk.domains import Frontier, Product
    >>> frontier_text(Frontier.below(Product(2), (1, 1)))
    'before (1,1)'
    """
    enc = encode_frontier(f)
    if isinstance(enc, str):
        return {"top": "⊤", "empty": "∅"}.get(enc, enc)
    if isinstance(enc, dict) and set(enc) == {"before"}:
        text = "before " + " ".join("(" + ",".join(map(str, t)) + ")" for t in enc["before"])
    elif isinstance(enc, dict):
        text = " ".join(f"{e}:{'⊤' if c == 'top' else c}" for e, c in enc.items())
    else:
        text = str(enc)
    return "\n".join(textwrap.wrap(text, width)) or text


def _edge_bends(plan: RollbackPlan) -> dict[str, float]:
    """Arc curvature per edge so that parallel and opposite edges do not overlap."""
    groups: dict[frozenset[str], list[str]] = {}
    for name, e in plan.dataflow.edges.items():
        groups.setdefault(frozenset((e.src, e.dst)), []).append(name)
    bends = {}
    for names in groups.values():
        first = plan.dataflow.edges[names[0]]
        for i, name in enumerate(names):
            bend = 0.0 if len(names) == 1 else 0.3 * (i - (len(names) - 1) / 2)
            e = plan.dataflow.edges[name]
            bends[name] = bend if (e.src, e.dst) == (first.src, first.dst) else -bend
    return bends


def _curve_middle(
    ax: Any, a: tuple[float, float], b: tuple[float, float], rad: float
) -> tuple[Any, tuple[float, float]]:
    """Middle of matplotlib's ``arc3`` curve from ``a`` to ``b`` and the unit normal on its outer side."""
    (x1, y1), (x2, y2) = ax.transData.transform([a, b])
    dx, dy = x2 - x1, y2 - y1
    ctrl = ((x1 + x2) / 2 + rad * dy, (y1 + y2) / 2 - rad * dx)  # as in matplotlib's Arc3
    mid = (0.25 * x1 + 0.5 * ctrl[0] + 0.25 * x2, 0.25 * y1 + 0.5 * ctrl[1] + 0.25 * y2)
    length = math.hypot(dx, dy) or 1.0
    nx_, ny_ = dy / length, -dx / length  # the side arc3 bends to for rad > 0
    if rad < 0 or (rad == 0 and (ny_ < 0 or (ny_ == 0 and nx_ < 0))):
        nx_, ny_ = -nx_, -ny_
    return ax.transData.inverted().transform(mid), (nx_, ny_)


def _self_loop(
    ax: Any, box: Any, centre: tuple[float, float], style: dict[str, Any]
) -> tuple[Any, tuple[float, float]]:
    """Draw a loop over the top of ``box``; return where its label goes and the label's direction."""
    ext = box.get_bbox_patch().get_window_extent()
    width = ext.x1 - ext.x0
    cx = ax.transData.transform([centre])[0][0]
    start, end = (cx + width / 4, ext.y1), (cx - width / 4, ext.y1)
    to_data = ax.transData.inverted()
    ax.annotate(
        "",
        xy=tuple(to_data.transform([end])[0]),
        xytext=tuple(to_data.transform([start])[0]),
        zorder=2,
        arrowprops=dict(style, connectionstyle="arc3,rad=1.2"),
    )
    apex = (cx, ext.y1 + 0.6 * width / 2)  # a quadratic curve reaches half-way to its control point
    return to_data.transform([apex])[0], (0.0, 1.0)


def render_plan(
    plan: RollbackPlan,
    output: str | os.PathLike[str],
    *,
    title: str | None = None,
    subtitle: str | None = None,
    dpi: int = 150,
) -> None:
    """Draw ``plan`` into the image file ``output`` (format from its extension, e.g. ``.png``).

    ``subtitle`` defaults to the list of failed processors. Raises
    :class:`~falkirk.cli._common.CommandError` when matplotlib is missing.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError:
        raise CommandError("drawing needs matplotlib; install it with: pip install 'falkirk[draw]'") from None
    df = plan.dataflow
    pos = layout(df)
    xs = [x for x, _ in pos.values()] or [0.0]
    ys = [y for _, y in pos.values()] or [0.0]
    span_x, span_y = max(xs) - min(xs), max(ys) - min(ys)
    loops = any(e.src == e.dst for e in df.edges.values())
    col, row = 3.4, 2.0  # inches between columns and rows
    graph_w, graph_h = span_x * col + 2.8, span_y * row + 1.8 + 0.9 * loops
    top_h, bottom_h = 0.8, 0.6
    fig = Figure(figsize=(max(graph_w, 7.5), graph_h + top_h + bottom_h), dpi=dpi)
    FigureCanvasAgg(fig)
    total_h = graph_h + top_h + bottom_h
    ax = fig.add_axes((0.0, bottom_h / total_h, 1.0, graph_h / total_h))
    ax.set_xlim(min(xs) - 1.4 / col, max(xs) + 1.4 / col)
    ax.set_ylim(min(ys) - 0.9 / row, max(ys) + (0.9 + 0.9 * loops) / row)
    ax.axis("off")

    boxes = {}
    for name in df.processors:
        action, f, n = plan.actions[name], plan.frontiers[name], plan.notification_frontiers[name]
        failed = name in plan.failed
        lines = [f"{name}{'  ✖ failed' if failed else ''}", action, f"f = {frontier_text(f)}"]
        if n != f:
            lines.append(f"n = {frontier_text(n)}")
        boxes[name] = ax.text(
            *pos[name],
            "\n".join(lines),
            ha="center",
            va="center",
            fontsize=10,
            zorder=3,
            linespacing=1.4,
            fontweight="bold" if action != "keep" else "normal",
            bbox={
                "boxstyle": "round,pad=0.6",
                "fc": ACTION_COLOURS.get(action, "white"),
                "ec": FAILED if failed else "#333333",
                "lw": 3.5 if failed else (1.8 if action != "keep" else 1.0),
            },
        )
    fig.canvas.draw()  # lay out the boxes so that arrows can be clipped to them
    bends = _edge_bends(plan)
    for name, e in df.edges.items():
        logged = name in df.processors[e.src].logs
        style = {
            "arrowstyle": "-|>",
            "mutation_scale": 18,
            "color": LOGGED if logged else EDGE,
            "lw": 2.6 if logged else 1.4,
            "linestyle": (0, (5, 3)) if logged else "-",
            "shrinkA": 3,
            "shrinkB": 3,
        }
        lines = [name + ("  (logged)" if logged else "")]
        replay = plan.replay.get(name)
        if replay is not None:
            lines += [
                f"replay L({frontier_text(replay.log_frontier)})",
                f"except {frontier_text(replay.exclude)}",
            ]
        if e.src == e.dst:
            at, normal = _self_loop(ax, boxes[e.src], pos[e.src], style)
        else:
            ax.annotate(
                "",
                xy=pos[e.dst],
                xytext=pos[e.src],
                zorder=2,
                arrowprops=dict(
                    style,
                    patchA=boxes[e.src].get_bbox_patch(),
                    patchB=boxes[e.dst].get_bbox_patch(),
                    connectionstyle=f"arc3,rad={bends[name]}",
                ),
            )
            at, normal = _curve_middle(ax, pos[e.src], pos[e.dst], bends[name])
        nx_, ny_ = normal
        ax.annotate(
            "\n".join(lines),
            xy=at,
            xytext=(7 * nx_, 7 * ny_),
            textcoords="offset points",
            zorder=4,
            ha="left" if nx_ > 0.4 else "right" if nx_ < -0.4 else "center",
            va="bottom" if ny_ > 0.4 else "top" if ny_ < -0.4 else "center",
            fontsize=8.5,
            color=LOGGED if logged else "#222222",
            linespacing=1.3,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
        )

    if subtitle is None:
        subtitle = "failed: " + (", ".join(p for p in df.processors if p in plan.failed) or "none")
    fig.text(
        0.5,
        1 - 0.32 / total_h,
        title or "falkirk rollback plan",
        ha="center",
        va="center",
        fontsize=13,
        fontweight="bold",
    )
    fig.text(0.5, 1 - 0.62 / total_h, subtitle, ha="center", va="center", fontsize=10, color=FAILED)
    handles: list[Any] = [Patch(fc=c, ec="#333333", label=a) for a, c in ACTION_COLOURS.items()]
    handles += [
        Patch(fc="white", ec=FAILED, lw=2.5, label="failed"),
        Line2D([], [], color=EDGE, lw=1.4, label="edge"),
        Line2D([], [], color=LOGGED, lw=2.6, linestyle=(0, (5, 3)), label="logged edge"),
    ]
    fig.legend(
        handles=handles,
        loc="lower center",
        ncol=len(handles),
        frameon=False,
        fontsize=9,
        bbox_to_anchor=(0.5, 0.1 / total_h),
        handlelength=1.8,
        columnspacing=1.2,
    )
    fig.savefig(output, dpi=dpi)
