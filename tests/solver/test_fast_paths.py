"""The fast solvers agree with the literal round-robin reference (issue 9).

* the worklist driver (:mod:`falkirk.solver.worklist`) on every domain;
* the vectorised solver (:mod:`falkirk.solver.vectorised.problem`) on totally ordered domains;
* compressed stage graphs (:mod:`falkirk.solver.vectorised.stages`) against their expansion.

Cases come from small generators below (random domains, projections,
metadata, cycles, stateless processors, failures), driven by a
:class:`random.Random`: the fixed seed ranges give 1,000+ cases per fast path
in every run; the hypothesis properties draw the generator's randomness from
``st.randoms()`` (so failures shrink) and discard invalid draws with
``assume()`` (so no example passes without a check).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from falkirk.domains import (
    Epoch,
    Frontier,
    FunctionProjection,
    Lexicographic,
    Product,
    Sequence,
    SequenceToEpoch,
)
from falkirk.errors import FalkirkError, SolverError
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, check_consistent, dispatch, solve_frontiers
from falkirk.solver.model.access import View
from falkirk.solver.vectorised import engine
from falkirk.solver.vectorised.build import NotApplicable, solve_view
from falkirk.solver.vectorised.engine import Engine, solve_total
from falkirk.solver.vectorised.problem import TotalProblem
from falkirk.solver.vectorised.stages import EMPTY, TOP, Stage, StageEdge, StageGraph

E, L2, P2 = Epoch(), Lexicographic(2), Product(2)


def _lag(f: Frontier) -> Frontier:
    k = E.last(f)
    return f if k is None else E.frontier(max(k - 1, -1))


def _lag_residual(y: Frontier) -> Frontier:
    k = E.last(y)
    return y if k is None else E.frontier(k + 1)


def _exit(f: Frontier) -> Frontier:
    return Frontier.top(E) if f.is_top else E.frontier(f.antichain[0][0] - 1)


LAG = FunctionProjection(_lag, _lag_residual, E, E, "lag")  # output of epoch e is sent at e + 1
EXIT = FunctionProjection(_exit, None, L2, E, "loop_exit")  # leaves a loop once an epoch is done


def _frontier(rng: random.Random, dom: Any) -> Frontier:
    if isinstance(dom, Epoch):
        return dom.frontier(rng.randint(-1, 6))
    if isinstance(dom, Sequence):
        return dom.frontier({e: rng.randint(0, 6) for e in dom.edges})
    if isinstance(dom, Product):
        return Frontier.before(
            dom, [(rng.randint(0, 3), rng.randint(0, 3)) for _ in range(rng.randint(1, 2))]
        )
    return Frontier.below(dom, (rng.randint(0, 3), rng.randint(0, 3)))


def _grow(rng: random.Random, dom: Any, n: int) -> list[Frontier]:
    """``n`` frontiers, each containing the previous one."""
    out, cur = [], Frontier.empty(dom)
    for _ in range(n):
        cur = cur | _frontier(rng, dom)
        out.append(cur)
    return out


def _projection(rng: random.Random, src: str, dst: str) -> Any:
    options = {
        ("epoch", "epoch"): ["identity", "identity", "recorded", LAG],
        ("epoch", "lex"): ["epoch_to_loop"],
        ("epoch", "product"): ["epoch_to_loop"],
        ("lex", "lex"): ["identity"],
        ("product", "product"): ["identity"],
        ("lex", "epoch"): [EXIT, "recorded"],
        ("seq", "epoch"): ["recorded", "windows"],  # windows: sequence_to_epoch, cut below
        ("seq", "seq"): ["sequence"],
        ("epoch", "seq"): ["epoch_to_sequence"],
    }.get((src, dst), ["recorded"])
    return rng.choice(options)


def _chain(rng: random.Random, dom: Any, k: int) -> list[Frontier]:
    """Up to ``k`` strictly increasing frontiers, none of them ``∅`` or ``⊤``."""
    out, cur = [], Frontier.empty(dom)
    for _ in range(k):
        nxt = cur | _frontier(rng, dom)
        if nxt != cur and not nxt.is_top:
            out.append(nxt)
            cur = nxt
    return out


def _given(rng: random.Random, dom: Any, n: int, p: float) -> list[Frontier] | None:
    """With probability ``p``, ``n`` growing values of an explicitly given metadata field."""
    return _grow(rng, dom, n) if rng.random() < p else None


def random_case(seed: int | random.Random, *, total: bool = False) -> tuple[Dataflow, Any] | None:
    """A small random dataflow and failed set; ``None`` when the draw is not a valid dataflow.

    ``seed`` is a seed or the generator itself (e.g. hypothesis' ``st.randoms()``).
    With ``total``, every domain is totally ordered (epoch, lexicographic, one-edge sequence).
    """
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    n = rng.randint(1, 6)
    kinds = [
        rng.choice(["epoch", "epoch", "lex", "seq"] + ([] if total else ["product", "seq"])) for _ in range(n)
    ]
    edges: list[tuple[str, int, int, Any]] = []
    for _ in range(rng.randint(0, 2 * n)):
        a, b = rng.randrange(n), rng.randrange(n)
        if total and kinds[b] == "seq" and any(x[2] == b for x in edges):
            continue  # a sequence domain with one input edge is totally ordered
        edges.append((f"e{len(edges)}", a, b, _projection(rng, kinds[a], kinds[b])))
    ins = {i: [e for e, _, b, _ in edges if b == i] for i in range(n)}
    for k, (e, a, b, p) in enumerate(edges):
        if p == "windows":  # epoch j is complete once every input edge of a has reached its cut j
            counts = dict.fromkeys(ins[a] or ["@input"], 0)
            cuts = []
            for _ in range(rng.randint(1, 4)):
                counts = {x: c + rng.randint(0, 3) for x, c in counts.items()}
                cuts.append(dict(counts))
            edges[k] = (e, a, b, SequenceToEpoch(cuts))
    doms = [
        {"epoch": E, "lex": L2, "product": P2}.get(kinds[i]) or Sequence(tuple(ins[i] or ["@input"]))
        for i in range(n)
    ]
    recorded = ("recorded", "sequence", "epoch_to_sequence")
    procs = []
    for i in range(n):
        dom, stateless = doms[i], rng.random() < 0.3
        chain = _chain(rng, dom, rng.randint(0, 3))
        k = len(chain)
        outs = [(e, b, p) for e, a, b, p in edges if a == i]
        # EXIT has no residual; LAG's residual grows frontiers, so the vectorised solver does not
        # apply to it (see test_vectorised_falls_back_on_unbounded_residuals)
        logs = [
            e
            for e, _, p in outs
            if rng.random() < 0.35 or (stateless and (p is EXIT or (total and p is LAG)))
        ]
        fields: list[dict[str, dict[str, Frontier]]] = [
            {"delivered": {}, "discarded": {}, "projection": {}} for _ in range(k + 1)
        ]
        notes = None if stateless or kinds[i] == "seq" else _given(rng, dom, k + 1, 0.3)
        for e, b, p in outs:
            # only recorded projections are given per checkpoint (SPEC §9)
            proj = _given(rng, doms[b], k, 1.0) if p in recorded else None
            disc = None if stateless else _given(rng, doms[b], k + 1, 0.25)
            for j in range(k + 1):
                if proj is not None and j < k and (not stateless or rng.random() < 0.7):
                    fields[j]["projection"][e] = proj[j]
                if disc is not None:
                    fields[j]["discarded"][e] = disc[j]
        for e in ins[i] if not stateless else []:
            got = _given(rng, dom, k + 1, 0.4)
            for j in range(k + 1):
                if got is not None:
                    fields[j]["delivered"][e] = got[j]
        cks = [
            Checkpoint(chain[j], notifications=None if notes is None else notes[j], **fields[j])
            for j in range(k)
        ]
        live = None
        if not stateless and rng.random() < 0.6:
            live = Checkpoint(
                "top",
                notifications=None if notes is None else notes[k],
                delivered=fields[k]["delivered"],
                discarded=fields[k]["discarded"],
            )
        restartable = stateless or not chain or rng.random() > 0.1
        procs.append(
            Processor(
                f"p{i}",
                dom,
                stateless=stateless,
                logs=logs,
                checkpoints=cks,
                live=live,
                restartable=restartable,
            )
        )
    failed: Any = "all" if rng.random() < 0.1 else [f"p{i}" for i in range(n) if rng.random() < 0.35]
    try:
        df = Dataflow(
            procs, [Edge(e, f"p{a}", f"p{b}", p) for e, a, b, p in edges], notifications=rng.random() < 0.8
        )
    except FalkirkError:
        return None
    return df, failed


def _outcome(df: Dataflow, failed: Any, **options: Any) -> Any:
    """``(f, n)`` of the plan, or ``"error"`` when the solver rightly refuses (SolverError)."""
    try:
        plan = solve_frontiers(df, failed, **options)
    except NotApplicable:
        raise
    except SolverError:
        return "error"
    return plan.frontiers, plan.notification_frontiers


def _cases(start: int, count: int, *, total: bool = False) -> list[tuple[Dataflow, Any]]:
    """The first ``count`` valid cases from seed ``start`` on."""
    out, seed = [], start
    while len(out) < count:
        case = random_case(seed, total=total)
        seed += 1
        if case is not None:
            out.append(case)
    return out


# -- the worklist ------------------------------------------------------------------------
def _check_worklist(df: Dataflow, failed: Any) -> None:
    ref = _outcome(df, failed, strategy="round_robin")
    plan = None
    try:
        plan = solve_frontiers(df, failed, strategy="worklist")
    except SolverError:
        assert ref == "error"
        return
    assert (plan.frontiers, plan.notification_frontiers) == ref
    assert (
        check_consistent(
            df, plan.frontiers, failed=failed, notification_frontiers=plan.notification_frontiers
        )
        == []
    )
    for p, steps in plan.reasons.items():  # the reasons of a processor lead from max F(p) to f(p)
        for before, after in zip(steps, steps[1:], strict=False):
            assert after.before == before.after
        if steps:
            assert steps[-1].after == plan.frontiers[p]


@pytest.mark.parametrize("block", range(5))
def test_worklist_agrees_with_round_robin(block: int) -> None:
    """The worklist driver returns the round-robin fixed point, consistent, with chained reasons (200 cases a block)."""
    for df, failed in _cases(10_000 * block, 200):
        _check_worklist(df, failed)


@given(st.randoms(use_true_random=False))
def test_worklist_agrees_with_round_robin_property(rng: random.Random) -> None:
    """Property: worklist and round robin agree on any generated case."""
    case = random_case(rng)
    assume(case is not None)
    _check_worklist(*case)


# -- the vectorised solver ------------------------------------------------------------------
def _check_vectorised(df: Dataflow, failed: Any) -> None:
    assert _outcome(df, failed, strategy="vectorised") == _outcome(df, failed, strategy="round_robin")


#: Engine thresholds (SCALAR_BELOW, SCALAR_UNTIL, DENSE_UP_TO): array rounds only (chains as a
#: padded table, or searched in the pool), scalar worklist only, switching often.
MODES = {
    "arrays": (-1, 0, engine.DENSE_UP_TO),
    "arrays-search": (-1, 0, -1),
    "scalar": (10**9, 10**9, engine.DENSE_UP_TO),
    "mixed": (2, 4, engine.DENSE_UP_TO),
}


@pytest.fixture(params=sorted(MODES))
def engine_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the engine in one of :data:`MODES` (small graphs would otherwise stay scalar)."""
    below, until, dense = MODES[request.param]
    monkeypatch.setattr(Engine, "SCALAR_BELOW", below)
    monkeypatch.setattr(Engine, "SCALAR_UNTIL", until)
    monkeypatch.setattr(engine, "DENSE_UP_TO", dense)
    return str(request.param)


@pytest.mark.parametrize("block", range(10))
def test_vectorised_agrees_with_round_robin(block: int, engine_mode: str) -> None:
    """The vectorised solver returns the reference frontiers and notification frontiers (100 cases a block)."""
    for df, failed in _cases(1_000_000 + 10_000 * block, 100, total=True):
        _check_vectorised(df, failed)


def test_dense_chains_find_the_same_place_as_a_search() -> None:
    """The padded chain table gives, for every bound, the largest entry at or below it, as a search does."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        lens = rng.integers(0, 6, size=rng.integers(1, 12))
        segs = [np.sort(rng.choice(40, size=k, replace=False)) for k in lens.tolist()]
        pool = np.concatenate(segs + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        start = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        table = engine._dense(pool, start, lens, 41)
        assert table is not None and table.shape == (int(lens.max()), lens.shape[0])
        which = rng.integers(0, lens.shape[0], size=50)
        x = rng.integers(0, 41, size=50)
        got = np.full(50, -1, dtype=np.int64)
        for column in table:
            got += column[which] <= x
        want = [int(np.searchsorted(segs[s], v, side="right")) - 1 for s, v in zip(which, x, strict=True)]
        assert got.tolist() == want
    assert engine._dense(np.arange(20), np.array([0]), np.array([20]), 21) is None  # too long: searched


def test_vectorised_falls_back_on_unbounded_residuals(monkeypatch: pytest.MonkeyPatch) -> None:
    """A residual that grows frontiers (lag) leaves no finite universe: the general conversion says so; automatic, it falls back.

    (Forced, the loop-job path solves it: it rounds the images up into a
    bounded universe and checks the answer against the exact images.)
    """
    df = Dataflow(
        [Processor("a", "epoch", stateless=True), Processor("b", "epoch", checkpoints=[Checkpoint(2)])],
        [Edge("ab", "a", "b", LAG), Edge("ba", "b", "a")],
    )
    with pytest.raises(NotApplicable, match="universe"):
        solve_view(View(df, frozenset({"b"})))
    reference = solve_frontiers(df, ["b"], strategy="round_robin")
    assert solve_frontiers(df, ["b"], strategy="vectorised").frontiers == reference.frontiers
    monkeypatch.setattr(dispatch, "VECTORISE_FROM", 1)
    monkeypatch.setattr(dispatch, "DENSE_FROM", 0)
    assert dispatch.choose(df) == "vectorised"
    got = dispatch.solve(View(df, frozenset({"b"})), strategy="worklist", fast=True)
    assert got.frontiers == solve_frontiers(df, ["b"], strategy="round_robin").frontiers


@given(st.randoms(use_true_random=False))
def test_vectorised_agrees_with_round_robin_property(rng: random.Random) -> None:
    """Property: the vectorised solver agrees with round robin on totally ordered cases."""
    case = random_case(rng, total=True)
    assume(case is not None)
    _check_vectorised(*case)


def test_vectorised_refuses_partial_orders() -> None:
    """Forcing the vectorised solver on a product checkpoint that is no prefix names the processor and the reason."""
    df = Dataflow([Processor("p", "product", arity=2, checkpoints=[Checkpoint({"before": [[0, 3], [2, 0]]})])], [])
    with pytest.raises(NotApplicable, match="'p'.*not totally ordered"):
        solve_frontiers(df, ["p"], strategy="vectorised")


def test_dispatch_picks_vectorised_above_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fast=True`` switches to the vectorised solver on large total dataflows; explain() still works."""
    df, failed = next(c for c in _cases(7, 50, total=True) if len(c[0].processors) >= 3)
    monkeypatch.setattr(dispatch, "VECTORISE_FROM", 3)
    monkeypatch.setattr(dispatch, "DENSE_FROM", 0)
    monkeypatch.setattr(dispatch, "REGION_FROM", 0)  # whatever the failed processors can reach
    assert dispatch.choose(df) == "vectorised"
    assert dispatch.choose(df, fast=False) == "worklist"
    fast, ref = solve_frontiers(df, failed), solve_frontiers(df, failed, strategy="worklist")
    assert isinstance(fast.reasons, dispatch.LazyReasons)
    assert fast.frontiers == ref.frontiers
    assert [fast.explain(p) for p in df.processors] == [ref.explain(p) for p in df.processors]


def test_total_problem_from_epochs_matches_dataflow() -> None:
    """``TotalProblem.from_epochs`` builds the same problem as the equivalent Dataflow."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(2, 8))
        src = rng.integers(0, n, size=2 * n)
        dst = rng.integers(0, n, size=2 * n)
        logged, stateless, failed = rng.random(2 * n) < 0.3, rng.random(n) < 0.3, rng.random(n) < 0.4
        cks = [sorted(set(rng.integers(0, 9, size=int(rng.integers(0, 4))).tolist())) for _ in range(n)]
        ptr = np.cumsum([0] + [len(c) for c in cks])
        prob = TotalProblem.from_epochs(
            src=src,
            dst=dst,
            logged=logged,
            stateless=stateless,
            failed=failed,
            ck_ptr=ptr,
            ck_val=np.array(sum(cks, []), dtype=np.int64),
        )
        sol = solve_total(prob)
        df = Dataflow(
            [
                Processor(
                    f"p{i}",
                    "epoch",
                    stateless=bool(stateless[i]),
                    logs=[f"e{k}" for k in range(2 * n) if src[k] == i and logged[k]],
                    checkpoints=[Checkpoint(c) for c in cks[i]],
                )
                for i in range(n)
            ],
            [Edge(f"e{k}", f"p{src[k]}", f"p{dst[k]}") for k in range(2 * n)],
        )
        plan = solve_frontiers(df, [f"p{i}" for i in range(n) if failed[i]], strategy="round_robin").to_json()
        want = [plan["frontiers"][f"p{i}"] for i in range(n)]
        assert [("empty" if x == -1 else x) for x in prob.epochs(sol.f)] == want


# -- compressed stage graphs ------------------------------------------------------------------
def random_stage_graph(seed: int | random.Random) -> StageGraph:
    """A small random stage graph (any stage pairs, self loops, metadata, failures)."""
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    stages = []
    for k in range(rng.randint(1, 4)):
        w, stateless = rng.randint(1, 3), rng.random() < 0.3
        cks = [sorted(rng.sample(range(9), rng.randint(0, 3))) for _ in range(w)]
        delivered = live = None
        if not stateless and rng.random() < 0.5:
            delivered = [
                [max(rng.randint(-1, 9) for _ in range(j + 1)) for j in range(len(row))] for row in cks
            ]
            delivered = [[max(r[: j + 1]) for j in range(len(r))] for r in delivered]
            live = [rng.choice([TOP, max(r, default=EMPTY) + rng.randint(0, 3)]) for r in delivered]
        failed = [i for i in range(w) if rng.random() < 0.3]
        stages.append(
            Stage(
                f"s{k}",
                w,
                checkpoints=cks,
                stateless=stateless,
                failed=failed,
                delivered=delivered,
                live_delivered=live,
                notifications=rng.random() < 0.7,
            )
        )
    edges = [
        StageEdge(
            f"s{rng.randrange(len(stages))}",
            f"s{rng.randrange(len(stages))}",
            logged=rng.random() < 0.4,
            name=f"x{j}",
        )
        for j in range(rng.randint(0, 2 * len(stages)))
    ]
    return StageGraph(stages, edges)


def _check_stages(g: StageGraph) -> None:
    df, failed = g.expand()
    ref = solve_frontiers(df, failed, strategy="round_robin").to_json()
    got = g.solve().encoded()
    assert got["frontiers"] == ref["frontiers"]
    assert got["notification_frontiers"] == ref["notification_frontiers"]


@pytest.mark.parametrize("block", range(10))
def test_stage_graph_agrees_with_expansion(block: int, engine_mode: str) -> None:
    """A compressed stage graph solves like its expansion into explicit edges (100 cases a block)."""
    for seed in range(100 * block, 100 * block + 100):
        _check_stages(random_stage_graph(seed))


@given(st.randoms(use_true_random=False))
def test_stage_graph_agrees_with_expansion_property(rng: random.Random) -> None:
    """Property: compressed and expanded stage graphs agree."""
    _check_stages(random_stage_graph(rng))


def test_stage_graph_rejects_bad_input() -> None:
    """Stage graphs name the stage at fault: unknown stage, shrinking checkpoints, bad task index."""
    with pytest.raises(FalkirkError, match="'nope'"):
        StageGraph([Stage("a", 1)], [StageEdge("a", "nope")])
    with pytest.raises(FalkirkError, match="stage 'a'.*increase"):
        StageGraph([Stage("a", 1, checkpoints=[[3, 2]])], [])
    with pytest.raises(FalkirkError, match="stage 'a'.*0..1"):
        StageGraph([Stage("a", 2, failed=[2])], [])
