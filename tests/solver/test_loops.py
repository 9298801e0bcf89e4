"""Loop jobs (epoch + product(2) with prefix checkpoints): columns, deferred resolution and the vectorised engine.

Covers :mod:`falkirk.solver.model.orders`, :mod:`falkirk.solver.model.deferred`,
:mod:`falkirk.solver.model.arrays` and :mod:`falkirk.solver.vectorised.loops`
against the references: Frontier operations, resolving every processor at
once, the object constructors and the literal round robin of SPEC §5.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from falkirk.domains import Epoch, Frontier, FunctionProjection, Lexicographic, Product
from falkirk.errors import FalkirkError, SolverError
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, check_consistent, solve_frontiers
from falkirk.solver.model import dataflow as dataflow_module
from falkirk.solver.model.orders import encode_bounds, lex_bounds, lex_frontier, prefix_code, tuple_chains
from falkirk.solver.vectorised.loops import solve_loops

E, P2, P3, L2 = Epoch(), Product(2), Product(3), Lexicographic(2)


# -- a Naiad loop's projections besides epoch_to_loop ------------------------------------------
def _advance(f: Frontier) -> Frontier:
    """Feedback: an event at ``(e, i)`` sends at ``(e, i + 1)``."""
    return f if f.is_top else Frontier.before(P2, [a if a[1] == 0 else (a[0], a[1] + 1) for a in f.antichain])


def _advance_residual(y: Frontier) -> Frontier:
    return y if y.is_top else Frontier.before(P2, [(b[0], max(b[1] - 1, 0)) for b in y.antichain])


def _leave(f: Frontier) -> Frontier:
    """Exit: the epochs with a time in ``f``."""
    firsts = [a[0] for a in f.antichain if a[1] == 0]
    return Frontier.before(E, [min(firsts)]) if firsts else Frontier.top(E)


def _leave_residual(y: Frontier) -> Frontier:
    return Frontier.top(P2) if y.is_top else Frontier.before(P2, [(y.antichain[0], 0)])


ADVANCE = FunctionProjection(_advance, _advance_residual, P2, P2, "advance")
LEAVE = FunctionProjection(_leave, _leave_residual, P2, E, "leave")
BOUNDS = st.tuples(st.integers(0, 3), st.integers(0, 3))


@st.composite
def loop_jobs(draw: st.DrawFn, *, valid: bool = True) -> tuple[list[Processor], list[Edge], Any]:
    """Small epoch + product(2) jobs; checkpoints mostly prefixes (``valid=False``: also ∅, ⊤, decreasing)."""
    n = draw(st.integers(1, 6))
    inner = [draw(st.booleans()) for _ in range(n)]
    raw = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.booleans()), max_size=2 * n))
    edges, logs = [], [[] for _ in range(n)]
    for k, (a, b, logged) in enumerate(raw):
        kind = (inner[a], inner[b])
        proj: Any = {(False, False): "identity", (False, True): "epoch_to_loop", (True, False): LEAVE}.get(kind)
        if proj is None:
            proj = draw(st.sampled_from(["identity", ADVANCE]))
        edges.append(Edge(f"e{k}", f"p{a}", f"p{b}", proj))
        if logged:
            logs[a].append(f"e{k}")
    procs = []
    for i in range(n):
        if inner[i]:
            bounds = sorted(set(draw(st.lists(BOUNDS, max_size=3))) - {(0, 0)})
            fronts: list[Any] = [lex_frontier(P2, b) for b in bounds]
            if draw(st.integers(0, 4)) == 0:  # now and then a frontier that is no prefix
                fronts.append(Frontier.before(P2, [(0, draw(st.integers(1, 3))), (draw(st.integers(1, 3)), 0)]))
            fronts = [draw(st.sampled_from([f, {"before": [list(t) for t in f.antichain]}])) for f in fronts]
        else:
            fronts = sorted(set(draw(st.lists(st.integers(0, 5), max_size=3))))
        if not valid and draw(st.booleans()):
            again = fronts[0] if fronts else "empty"
            fronts = draw(st.permutations(fronts + [draw(st.sampled_from(["empty", "top", again]))]))
        procs.append(
            Processor(
                f"p{i}",
                P2 if inner[i] else "epoch",
                stateless=draw(st.booleans()),
                logs=logs[i],
                checkpoints=[Checkpoint(f) for f in fronts],
            )
        )
    names = [p.name for p in procs]
    failed = draw(st.one_of(st.just("all"), st.lists(st.sampled_from(names), unique=True)))
    return procs, edges, failed


def _plan(df: Dataflow, failed: Any, strategy: str) -> Any:
    try:
        plan = solve_frontiers(df, failed, strategy=strategy)  # type: ignore[arg-type]
    except SolverError as exc:
        return type(exc), str(exc)
    return plan.to_json()


def _outcome(procs: list[Processor], edges: list[Edge]) -> Any:
    """Every processor's resolved chain and live metadata, or the error's type and message."""
    try:
        df = Dataflow(procs, edges)
        return {p: (df.candidates(p, failed=True), df.live_meta(p)) for p in df.processors}
    except FalkirkError as exc:
        return type(exc), str(exc)


# -- the columns --------------------------------------------------------------------------------
@given(st.sampled_from([P2, P3, L2]), st.lists(st.integers(0, 3), min_size=3, max_size=3))
def test_lex_frontier_is_every_time_lexicographically_before(dom: Any, b: list[int]) -> None:
    """lex_frontier holds exactly the times before the bound in lexicographic order, and lex_bounds finds it."""
    bound = tuple(b[: dom.arity])
    f = lex_frontier(dom, bound)
    assert all((t in f) == (t < bound) for t in itertools.product(range(5), repeat=dom.arity))
    rows = np.array(f.antichain, dtype=np.int64)
    got, lex = lex_bounds(np.array([0, rows.shape[0]]), rows, product=not dom.is_total)
    assert got[0].tolist() == list(bound) and bool(lex[0]) and Frontier.before(dom, f.antichain) == f
    assert prefix_code(f) == int(encode_bounds(np.array([bound]))[0])  # type: ignore[index]


@given(st.lists(st.lists(BOUNDS, max_size=4), max_size=4))
def test_tuple_chains_agree_with_frontier_comparisons(chains: list[list[tuple[int, int]]]) -> None:
    """A chain is accepted (repeats dropped) exactly when its frontiers, as Frontier values, strictly rise."""
    fronts = [[Frontier.before(P2, [b, (b[0] + 1, 0)]) if b[1] else Frontier.before(P2, [b]) for b in c] for c in chains]
    flat = [f.antichain for c in fronts for f in c]
    ptr = np.cumsum([0] + [len(c) for c in chains])
    ac = np.cumsum([0] + [len(a) for a in flat])
    rows = np.array([t for a in flat for t in a], dtype=np.int64).reshape(-1, 2)
    got, ok = tuple_chains(ptr, ac, rows, P2)
    for i, c in enumerate(fronts):
        kept = [f for j, f in enumerate(c) if j == 0 or f != c[j - 1]]
        want = all(not f.is_empty for f in c) and all(a < b for a, b in zip(kept, kept[1:], strict=False))
        assert bool(ok[i]) == want
        if want:
            assert [Frontier(P2, a) for a in got.antichains(i)] == kept


# -- deferred resolution and the array constructor -----------------------------------------------
@given(loop_jobs(valid=False))
def test_deferred_loop_jobs_resolve_as_at_once(job: Any) -> None:
    """Property: loop jobs are accepted, refused (same message) and resolved exactly as when nothing is deferred."""
    procs, edges, _ = job
    got = _outcome(procs, edges)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dataflow_module, "DEFER_PLAIN", False)
        mp.setattr(dataflow_module, "plain_chain", lambda df, name: None)
        want = _outcome(procs, edges)
    assert got == want


def _as_arrays(procs: list[Processor], edges: list[Edge]) -> dict[str, Any]:
    """The job in from_arrays' mixed form (tuple checkpoints as before-rows, epochs in column 0)."""
    names = [p.name for p in procs]
    specs = list(dict.fromkeys(e.projection for e in edges))
    rows: list[list[int]] = []
    sizes: list[int] = []
    for p in procs:
        for c in p.checkpoints:
            f = c.frontier
            if p.domain == "epoch":
                assume(f != "top")  # ⊤ has no epoch row
                got = [[-1 if f == "empty" else f, 0]]
            elif isinstance(f, Frontier):
                got = [list(t) for t in f.antichain]
            elif isinstance(f, dict):
                got = f["before"]
            else:  # "top"/"empty": as the rows of those frontiers
                got = [] if f == "top" else [[0, 0]]
            rows += got
            sizes.append(len(got))
    return dict(
        names=names,
        src=np.array([names.index(e.src) for e in edges], dtype=np.int64),
        dst=np.array([names.index(e.dst) for e in edges], dtype=np.int64),
        edge_names=[e.name for e in edges],
        logged=np.array([e.name in procs[names.index(e.src)].logs for e in edges], dtype=bool),
        stateless=np.array([p.stateless for p in procs], dtype=bool),
        domain=["epoch", P2],
        domain_of=np.array([int(p.domain == P2) for p in procs], dtype=np.int64),
        projection=specs or ["identity"],
        projection_of=np.array([specs.index(e.projection) for e in edges], dtype=np.int64),
        ck_ptr=np.cumsum([0] + [len(p.checkpoints) for p in procs]),
        ck_val=np.array(rows, dtype=np.int64).reshape(-1, 2),
        ck_ac=np.cumsum([0] + sizes),
    )


@given(loop_jobs(valid=False))
def test_from_arrays_loop_jobs_equal_the_object_constructors(job: Any) -> None:
    """Property: from_arrays of a loop job gives the plans (or the error) the object constructors give."""
    procs, edges, failed = job
    a = _as_arrays(procs, edges)
    names = a.pop("names")
    try:
        want: Any = _plan(Dataflow(procs, edges), failed, "worklist")
    except FalkirkError as exc:
        want = type(exc)
    try:
        got: Any = _plan(Dataflow.from_arrays(names, a.pop("src"), a.pop("dst"), **a), failed, "worklist")
    except FalkirkError as exc:
        got = type(exc)
    assert got == want


# -- the vectorised engine ------------------------------------------------------------------------
@given(loop_jobs())
def test_vectorised_loop_jobs_agree_with_round_robin(job: Any) -> None:
    """Property: when the loop path takes a job, its f and n are the round robin's and the plan is consistent."""
    procs, edges, failed = job
    try:
        df = Dataflow(procs, edges)
    except FalkirkError:  # the odd frontier that is no prefix broke the chain
        assume(False)
    got = solve_loops(df, frozenset(df.processors) if failed == "all" else frozenset(failed))
    want = solve_frontiers(Dataflow(procs, edges), failed, strategy="round_robin")
    if got is not None:
        f, n, _ = got
        assert dict(f.items()) == want.frontiers and dict(n.items()) == want.notification_frontiers
        plan = solve_frontiers(df, failed, strategy="vectorised")
        assert plan.to_json() == want.to_json()
        assert check_consistent(
            df, plan.frontiers, failed=failed, notification_frontiers=plan.notification_frontiers
        ) == []


def test_loop_path_takes_prefix_jobs_and_declines_others() -> None:
    """A job of prefix checkpoints is a loop job; one checkpoint that is no prefix sends it to the general paths."""
    procs = [
        Processor("a", "epoch", logs=["ab"], checkpoints=[Checkpoint(2)]),
        Processor("b", P2, checkpoints=[Checkpoint(lex_frontier(P2, (1, 2)))]),
    ]
    edges = [Edge("ab", "a", "b", "epoch_to_loop"), Edge("bb", "b", "b", ADVANCE)]
    df = Dataflow(procs, edges)
    assert df.table.lex_plain and solve_loops(df, frozenset({"a"})) is not None
    other = [procs[0], Processor("b", P2, checkpoints=[Checkpoint({"before": [[0, 3], [2, 0]]})])]
    assert not Dataflow(other, edges).table.lex_plain and solve_loops(Dataflow(other, edges), frozenset()) is None


def _digraph(procs: list[Processor], edges: list[Edge]) -> Any:
    """The job as a networkx DiGraph: node attributes domain/stateless/checkpoints, edge attributes name/logged/projection."""
    import networkx as nx

    G = nx.DiGraph()
    logs = {p.name: p.logs for p in procs}
    for p in procs:
        G.add_node(p.name, domain=p.domain, stateless=p.stateless, checkpoints=[c.frontier for c in p.checkpoints])
    for e in edges:
        G.add_edge(e.src, e.dst, name=e.name, projection=e.projection, logged=e.name in logs[e.src])
    return G


@given(loop_jobs(valid=False))
def test_from_networkx_loop_jobs_equal_the_object_constructors(job: Any) -> None:
    """Property: from_networkx of a loop job (one edge per pair) gives the object constructors' plans or error type."""
    procs, edges, failed = job
    edges = list({(e.src, e.dst): e for e in edges}.values())  # a DiGraph keeps one edge per pair
    kept = {e.name for e in edges}
    procs = [attrs.evolve(p, logs=[x for x in p.logs if x in kept]) for p in procs]
    try:
        want: Any = _plan(Dataflow(procs, edges), failed, "worklist")
    except FalkirkError as exc:
        want = type(exc)
    try:
        got: Any = _plan(Dataflow.from_networkx(_digraph(procs, edges)), failed, "worklist")
    except FalkirkError as exc:
        got = type(exc)
    assert got == want


def test_from_networkx_reads_a_loop_job_into_columns() -> None:
    """A loop job of bare checkpoints goes into columns: nothing is resolved until a solve reads it."""
    procs = [
        Processor("a", "epoch", checkpoints=[Checkpoint(2), Checkpoint(4)]),
        Processor("b", P2, checkpoints=[Checkpoint({"before": [[1, 2], [2, 0]]}), Checkpoint(lex_frontier(P2, (3, 0)))]),
    ]
    edges = [Edge("ab", "a", "b", "epoch_to_loop"), Edge("ba", "b", "a", LEAVE)]
    df = Dataflow.from_networkx(_digraph(procs, edges))
    assert df.table.lex_plain and not df._resolved
    assert _plan(df, ["a"], "worklist") == _plan(Dataflow(procs, edges), ["a"], "worklist")
