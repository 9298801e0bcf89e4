"""Lineage graphs and what_must_rerun on hand-made node graphs (no JVM needed)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.errors import SolverError, UnknownNameError, ValidationError
from falkirk.spark.lineage._jvm import java_context
from falkirk.spark.lineage.graph import DETERMINISTIC, build_lineage
from falkirk.spark.lineage.model import Availability, Dep, LineageError, Node, SparkConnectError
from falkirk.spark.lineage.rerun import resolve_lost, what_must_rerun


def node(key: str, *deps: Dep, boundary: str | None = None, rdd: int | None = None, indeterminate: bool = False) -> Node:
    return Node(key, key, tuple(deps), boundary, rdd, 2, indeterminate)


def shuffle(parent: str, sid: int) -> Dep:
    return Dep("shuffle", parent, sid)


def narrow(parent: str) -> Dep:
    return Dep("narrow", parent)


def diamond_nodes(*, indeterminate_base: bool = False) -> dict[str, Node]:
    """src -(0)-> base; base -(1)-> left; base -(2)-> right; left, right narrow into the result."""
    return {
        "res": node("res", narrow("l"), narrow("r")),
        "l": node("l", shuffle("lm", 1)),
        "r": node("r", shuffle("rm", 2)),
        "lm": node("lm", narrow("base")),
        "rm": node("rm", narrow("base")),
        "base": node("base", shuffle("src", 0)),
        "src": node("src", indeterminate=indeterminate_base),
    }


def everything(shuffles: list[int], cached: dict[int, int] | None = None) -> Availability:
    return Availability({s: 2 for s in shuffles}, {r: frozenset(range(n)) for r, n in (cached or {}).items()}, {})


def test_processors_are_shuffle_stages_result_and_firewalls() -> None:
    """Stages are keyed by shuffle id, narrow nodes stay inside, a cached RDD is its own processor."""
    nodes = {
        "res": node("res", shuffle("m", 7)),
        "m": node("m", narrow("c")),
        "c": node("c", narrow("x"), boundary="cache", rdd=5),
        "x": node("x", shuffle("s", 3)),
        "s": node("s"),
    }
    lin = build_lineage("res", nodes)
    assert set(lin.units) == {"result", "shuffle-7", "cache-rdd5", "shuffle-3"}
    assert lin.units["cache-rdd5"].members == ("c", "x")
    assert lin.units["shuffle-7"].inputs == ("cache-rdd5",)
    assert lin.stage_dag() == {"shuffle-3": frozenset(), "shuffle-7": {"shuffle-3"}, "result": {"shuffle-7"}}
    assert list(lin.units)[-1] == "result"


def test_shared_narrow_nodes_belong_to_every_stage_that_computes_them() -> None:
    """An uncached RDD read by two map stages is computed inside both of them."""
    lin = build_lineage("res", diamond_nodes())
    assert "base" in lin.units["shuffle-1"].members and "base" in lin.units["shuffle-2"].members
    assert set(lin.units["result"].inputs) == {"shuffle-1", "shuffle-2"}


def test_cached_root_and_checkpoint_firewalls() -> None:
    """A cached final RDD feeds the result stage; a checkpoint truncates the lineage and is not restartable."""
    nodes = {"c": node("c", narrow("k"), boundary="cache", rdd=9), "k": node("k", boundary="checkpoint", rdd=4)}
    lin = build_lineage("c", nodes)
    assert lin.units["result"].inputs == ("cache-rdd9",)
    assert lin.units["cache-rdd9"].inputs == ("checkpoint-rdd4",)
    df = lin.to_dataflow()
    assert df.processor("checkpoint-rdd4").restartable is False
    assert lin.stage_dag() == {"result": frozenset()}


def test_unknown_or_cyclic_node_graphs_are_rejected() -> None:
    """A dependency that was not described, or a shuffle cycle, raises LineageError naming it."""
    with pytest.raises(LineageError, match="'gone'"):
        build_lineage("a", {"a": node("a", narrow("gone"))})
    with pytest.raises(LineageError, match="cycle"):
        build_lineage("a", {"a": node("a", shuffle("b", 1)), "b": node("b", shuffle("a", 2))})
    with pytest.raises(LineageError, match="root"):
        build_lineage("zz", {})


def test_available_outputs_are_logged_and_edges_carry_determinism() -> None:
    """Available outputs are logged; edges out of indeterminate stages use the identity projection."""
    lin = build_lineage("res", diamond_nodes(indeterminate_base=True), everything([0, 1]))
    df = lin.to_dataflow()
    assert df.processor("shuffle-0").logs == {"shuffle-0->shuffle-1", "shuffle-0->shuffle-2"}
    assert df.processor("shuffle-2").logs == frozenset()
    assert df.edges["shuffle-1->result"].projection is DETERMINISTIC
    assert df.edges["shuffle-0->shuffle-1"].projection is not DETERMINISTIC


def test_first_run_runs_every_stage() -> None:
    """With nothing available, every stage runs."""
    lin = build_lineage("res", diamond_nodes())
    assert what_must_rerun(lin).stages == {"result", "shuffle-0", "shuffle-1", "shuffle-2"}


def test_executor_policy_loses_every_shuffle_after_a_fetch_failure() -> None:
    """A lost shuffle that a running stage reads makes Spark drop every map output (local mode)."""
    lin = build_lineage("res", diamond_nodes(), everything([0, 1, 2]))
    spark_like = what_must_rerun(lin, ["shuffle_1"])
    precise = what_must_rerun(lin, ["shuffle_1"], fetch_failure="map-output")
    assert spark_like.fetch_failure and spark_like.stages == {"result", "shuffle-0", "shuffle-1", "shuffle-2"}
    assert not precise.fetch_failure and precise.stages == {"result", "shuffle-1"}
    unread = what_must_rerun(lin, ["shuffle_0"])
    assert not unread.fetch_failure and unread.stages == {"result"}


def test_determinate_stages_spare_consumers_that_already_read_them() -> None:
    """A re-run of a determinate stage does not re-run a sibling consumer; an indeterminate one does."""
    lost = ["shuffle_0", "shuffle_1"]
    det = build_lineage("res", diamond_nodes(), everything([0, 1, 2]))
    assert what_must_rerun(det, lost, fetch_failure="map-output").stages == {"result", "shuffle-0", "shuffle-1"}
    indet = build_lineage("res", diamond_nodes(indeterminate_base=True), everything([0, 1, 2]))
    rerun = what_must_rerun(indet, lost, fetch_failure="map-output")
    assert rerun.stages == {"result", "shuffle-0", "shuffle-1", "shuffle-2"}
    assert any("shuffle-0" in line for line in rerun.explain("shuffle-2"))


def test_cache_is_a_firewall_and_a_lost_block_reruns_only_the_cache() -> None:
    """Upstream of an available cache nothing re-runs; a lost block re-runs the cache from its input."""
    nodes = {
        "res": node("res", shuffle("m", 8)),
        "m": node("m", narrow("c")),
        "c": node("c", shuffle("s", 3), boundary="cache", rdd=5),
        "s": node("s"),
    }
    lin = build_lineage("res", nodes, everything([3], {5: 2}))
    assert what_must_rerun(lin, ["shuffle_3"]).processors == {"result", "shuffle-8"}
    lost_block = what_must_rerun(lin, ["rdd_5_1"])
    assert lost_block.processors == {"result", "shuffle-8", "cache-rdd5"} and lost_block.firewalls == {"cache-rdd5"}


def test_lost_checkpoint_that_is_needed_is_unrecoverable() -> None:
    """Needing a lost reliable checkpoint raises SolverError (Spark aborts the job); not needing it is fine."""
    nodes = {"res": node("res", shuffle("m", 1)), "m": node("m", narrow("k")), "k": node("k", boundary="checkpoint", rdd=4)}
    lin = build_lineage("res", nodes, Availability({1: 2}, {}, {4: True}))
    assert what_must_rerun(lin, ["checkpoint_4"]).processors == {"result"}
    with pytest.raises(SolverError, match="checkpoint-rdd4"):
        what_must_rerun(lin, ["checkpoint_4", "shuffle_1"])


def test_lost_names_are_resolved_or_rejected() -> None:
    """Spark block and file names map to processors; unknown ones raise UnknownNameError."""
    lin = build_lineage("res", diamond_nodes())
    assert resolve_lost(lin, ["shuffle_1_12_0.data", "shuffle-2", "shuffle_0"]) == {"shuffle-0", "shuffle-1", "shuffle-2"}
    with pytest.raises(UnknownNameError, match="shuffle_9"):
        resolve_lost(lin, ["shuffle_9"])
    with pytest.raises(ValidationError):
        resolve_lost(lin, [3])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="fetch_failure"):
        what_must_rerun(lin, fetch_failure="task")  # type: ignore[arg-type]


def test_spark_connect_objects_get_a_clear_error() -> None:
    """Objects without py4j handles (Spark Connect) raise SparkConnectError naming the fix."""

    class ConnectLikeSession:
        sparkContext = None

    with pytest.raises(SparkConnectError, match="Spark Connect"):
        java_context(ConnectLikeSession())


@st.composite
def random_lineages(draw: Any) -> tuple[Any, list[str]]:
    """A random DAG of shuffle stages (each reads earlier ones) and a random set of lost outputs."""
    n = draw(st.integers(1, 6))
    nodes: dict[str, Node] = {}
    for i in range(n):
        parents = draw(st.lists(st.integers(0, i - 1), unique=True, max_size=2)) if i else []
        deps = [shuffle(f"m{p}", p) for p in parents]
        nodes[f"m{i}"] = node(f"m{i}", *deps, indeterminate=draw(st.booleans()))
    readers = draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True, max_size=3))
    nodes["res"] = node("res", *[shuffle(f"m{p}", p) for p in readers])
    lin = build_lineage("res", nodes)
    lin.availability = everything(list(lin.shuffles))
    lost = draw(st.lists(st.sampled_from(sorted(lin.shuffles)), unique=True))
    return lin, [f"shuffle_{s}" for s in lost]


@given(random_lineages())
def test_rerun_answers_are_closed_and_ordered(case: tuple[Any, list[str]]) -> None:
    """The result re-runs, every re-running stage's lost inputs re-run, and precise ⊆ executor answers."""
    lin, lost = case
    precise = what_must_rerun(lin, lost, fetch_failure="map-output")
    spark_like = what_must_rerun(lin, lost)
    assert "result" in precise.processors and precise.processors <= spark_like.processors
    for rerun in (precise, spark_like):
        unavailable = set(rerun.lost) | ({n for n in lin.units if n != "result"} if rerun.fetch_failure else set())
        for name in rerun.processors:
            for i in lin.units[name].inputs:
                assert i not in unavailable or i in rerun.processors
    assert what_must_rerun(lin, lost[:1], fetch_failure="map-output").processors <= precise.processors
