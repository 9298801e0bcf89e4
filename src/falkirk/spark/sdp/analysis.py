"""What a query's shape allows: row-wise over one dataset, or an aggregate falkirk can maintain incrementally.

An SDP materialized view is defined as a query over whole tables, and
``spark-pipelines`` recomputes it in full on every update. When the query is

* **row-wise** over exactly one append-only dataset (only projections,
  filters, ``explode``-like generators and aliases between the read and the
  result), its rows for the whole table are its rows for each update's new
  rows, put together: ``q(T ∪ Δ) = q(T) ∪ q(Δ)``;
* a **mergeable aggregate** of such a row-wise query — ``GROUP BY`` plain
  columns, every result column a grouping column or ``sum`` (of an integral
  or decimal type), ``count``, ``min`` or ``max`` without ``DISTINCT`` or
  ``FILTER`` — its result for the whole table is the same aggregate over the
  per-update results: ``count`` and ``sum`` add up, ``min`` and ``max`` stay
  extreme;

falkirk can keep the result up to date from each update's new rows alone
(:func:`merge`). Anything else (joins, windows, ``DISTINCT``, ``avg``, a
``HAVING``, a float ``sum`` — whose value would depend on the order of
additions —, a second table) is recomputed from the whole tables, as SDP does.

The shape is read from the query's **analysed plan** (Spark's own
resolution, as JSON) with each table read marked by an alias
(:func:`marker`); a Spark Connect session exposes no analysed plan to the
client, so there every query counts as "other" (recomputed in full).

>>> Shape("rowwise", "orders").incremental, Shape("aggregate", "orders", ("user",), (("n", "count"),)).incremental
(False, True)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from attrs import frozen

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["Shape", "shape_of", "stateful_nodes", "marker", "merge", "MARK"]

#: Prefix of the alias marking a dataset's read in a query analysed by :func:`shape_of`.
MARK = "__falkirk_read__"

_EXPR = "org.apache.spark.sql.catalyst.expressions."
_ROWWISE = {"Project", "Filter", "SubqueryAlias", "Generate"}
_MERGE = {"Sum": "sum", "Count": "count", "Min": "min", "Max": "max"}
#: Plan nodes that make a streaming query keep state across micro-batches.
_STATEFUL = {
    "Aggregate",
    "Deduplicate",
    "DeduplicateWithinWatermark",
    "Window",
    "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState",
    "TransformWithState",
    "TransformWithStateInPySpark",
    "Distinct",
    "Sort",
    "Limit",
    "GlobalLimit",
    "LocalLimit",
}


def marker(name: str) -> str:
    """The alias that marks a read of dataset ``name``."""
    return MARK + name


@frozen
class Shape:
    """A query's shape: ``kind`` is ``"rowwise"``, ``"aggregate"`` or ``"other"``; ``source``: the one dataset
    it reads (row-wise and aggregate); ``keys``: the grouping columns; ``aggregates``: (column,
    ``sum``/``count``/ ``min``/``max``) of the others; ``why``: for ``"other"``, the reason in words."""

    kind: str
    source: str | None = None
    keys: tuple[str, ...] = ()
    aggregates: tuple[tuple[str, str], ...] = ()
    why: str = ""

    @property
    def incremental(self) -> bool:
        """Whether falkirk can keep the query's result from each update's new rows (a mergeable aggregate)."""
        return self.kind == "aggregate"

    def describe(self) -> str:
        if self.kind == "aggregate":
            aggs = ", ".join(f"{fn}({c})" for c, fn in self.aggregates)
            by = f" by {', '.join(self.keys)}" if self.keys else ""
            return f"aggregate of {self.source}{by}: {aggs}"
        if self.kind == "rowwise":
            return f"row-wise over {self.source}"
        return self.why or "not row-wise or a mergeable aggregate"


def _plan(df: DataFrame) -> list[dict[str, Any]] | None:
    """The analysed plan as Spark's JSON (pre-order nodes), or ``None`` where it is not at hand (Spark
    Connect)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        return list(json.loads(jdf.queryExecution().analyzed().toJSON()))
    except Exception:  # noqa: BLE001 - no analysable plan: the query is treated as "other"
        return None


def _short(cls: str) -> str:
    return cls.rsplit(".", 1)[-1]


def _subtree(nodes: Sequence[dict[str, Any]], i: int) -> int:
    """The index after the subtree rooted at ``nodes[i]`` (pre-order with ``num-children``)."""
    todo = 1
    while todo:
        todo += nodes[i]["num-children"] - 1
        i += 1
    return i


def _children(nodes: Sequence[dict[str, Any]], i: int) -> list[int]:
    out, j = [], i + 1
    for _ in range(nodes[i]["num-children"]):
        out.append(j)
        j = _subtree(nodes, j)
    return out


def _rowwise(nodes: Sequence[dict[str, Any]], i: int) -> tuple[str | None, str]:
    """The one marked dataset under ``nodes[i]`` through row-wise nodes only, or ``(None, why not)``."""
    while True:
        node = nodes[i]
        kind = _short(node["class"])
        if kind == "SubqueryAlias":
            name = (node.get("identifier") or {}).get("name", "")
            if name.startswith(MARK):
                return name[len(MARK) :], ""
        if kind not in _ROWWISE:
            return None, f"its query has a {kind}"
        kids = _children(nodes, i)
        if len(kids) != 1:
            return None, f"its query has a {kind} with {len(kids)} inputs"
        i = kids[0]


def _attribute(expr: Sequence[dict[str, Any]]) -> str | None:
    if len(expr) == 1 and _short(expr[0]["class"]) == "AttributeReference":
        return str(expr[0]["name"])
    return None


def stateful_nodes(df: DataFrame) -> list[str]:
    """The nodes of ``df``'s analysed plan that would keep state in a streaming query (aggregations,
    deduplication, windows, ``…WithState``, sorts and limits): ``[]`` when none, or when the plan is not at
    hand."""
    nodes = _plan(df) or []
    return sorted({_short(n["class"]) for n in nodes} & _STATEFUL)


def shape_of(df: DataFrame, types: dict[str, str] | None = None) -> Shape:
    """The :class:`Shape` of ``df``, whose dataset reads are marked with :func:`marker` aliases.

    ``types``: the result's column types (``df.schema``'s simple strings), to
    refuse float sums; taken from ``df`` when not given.
    """
    nodes = _plan(df)
    if nodes is None:
        return Shape("other", why="its analysed plan is not at hand (a Spark Connect session)")
    top = nodes[0]
    if _short(top["class"]) != "Aggregate":
        source, why = _rowwise(nodes, 0)
        return Shape("rowwise", source) if source else Shape("other", why=why)
    source, why = _rowwise(nodes, _children(nodes, 0)[0])
    if source is None:
        return Shape("other", why=f"aggregate over a query that is not row-wise ({why})")
    grouping = [_attribute(e) for e in top.get("groupingExpressions", [])]
    if any(g is None for g in grouping):
        return Shape("other", why="it groups by an expression, not by columns")
    types = types if types is not None else {f.name: f.dataType.simpleString() for f in df.schema.fields}
    keys: list[str] = []
    aggs: list[tuple[str, str]] = []
    for expr in top.get("aggregateExpressions", []):
        attr = _attribute(expr)
        if attr is not None:
            if attr not in grouping:
                return Shape("other", why=f"column {attr} is neither grouped by nor aggregated")
            keys.append(attr)
            continue
        kinds = [_short(n["class"]) for n in expr]
        if len(kinds) < 3 or kinds[0] != "Alias" or kinds[1] != "AggregateExpression":
            return Shape("other", why=f"column {expr[0].get('name', '?')} is an expression over aggregates")
        name = str(expr[0]["name"])
        agg = expr[1]
        fn = _MERGE.get(kinds[2])
        if fn is None:
            return Shape("other", why=f"column {name} is a {kinds[2].lower()}, which does not merge")
        if agg.get("isDistinct") or agg.get("filter") not in (None, []):
            return Shape("other", why=f"column {name} aggregates DISTINCT or with a FILTER")
        if fn == "sum" and types.get(name, "").split("(")[0] in ("float", "double"):
            return Shape(
                "other",
                why=f"column {name} sums floating-point numbers (its value depends on the order "
                "of additions: recomputed in full, as SDP does)",
            )
        aggs.append((name, fn))
    if sorted(set(keys)) != sorted(set(g for g in grouping if g is not None)):
        return Shape("other", why="a grouping column is not in its result")
    return Shape("aggregate", source, tuple(keys), tuple(aggs))


def merge(state: DataFrame | None, delta: DataFrame, shape: Shape) -> DataFrame:
    """``shape``'s aggregate of everything so far: ``state`` (the previous result) merged with ``delta`` (the
    aggregate of this update's new rows); columns and types as ``delta``'s."""
    from pyspark.sql import functions as F

    if state is None:
        return delta
    ops = dict(shape.aggregates)
    both = state.unionByName(delta)
    merged: Iterable[Any] = [
        (F.sum(c) if ops[c] in ("sum", "count") else F.min(c) if ops[c] == "min" else F.max(c)).alias(c)
        for c in ops
    ]
    grouped = both.groupBy(*shape.keys).agg(*merged) if shape.keys else both.agg(*merged)
    return grouped.select(*(F.col(f.name).cast(f.dataType).alias(f.name) for f in delta.schema.fields))
