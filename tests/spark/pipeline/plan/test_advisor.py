"""The regime advisor on synthetic costs (no Spark): known optima, the closure against the planner, never worse
than the current regimes, deterministic, errors naming what is wrong, apply and regimes= under the evolution rules."""

from __future__ import annotations

import itertools
import json
import random
import statistics
from typing import Any

import numpy as np
import pytest
from attrs import evolve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from falkirk.spark import Costs, Eager, Ephemeral, Lazy, NodeCosts, Pipeline, PipelineError
from falkirk.spark.pipeline.declare.regimes import Keyed
from falkirk.spark.pipeline.plan.advising import advise
from falkirk.spark.pipeline.plan.advisor import Model, failure_kinds, regimes_of
from falkirk.spark.pipeline.plan.closure import TOP, Graph, frontiers, reference_frontiers
from falkirk.spark.pipeline.plan.prediction import MODEL_ERROR, show_regime

_ROOTS = itertools.count()


def _pipe(*steps: tuple[str, list[str], Any]) -> Pipeline:
    """A pipeline on a fresh memory root: input ``src`` then ``(name, inputs, regime)`` steps (function-less
    stand-ins with the right parameters)."""
    pipe = Pipeline(f"memory://falkirk-test/advisor-{next(_ROOTS)}")
    pipe.input("src", "a BIGINT")
    for name, inputs, regime in steps:
        state = ", *, state" if regime.takes_state else ""
        ns: dict[str, Any] = {}
        exec(f"def {name}({', '.join(inputs)}{state}, epoch=None): return None", ns)  # noqa: S102
        pipe.step(ns[name], inputs=inputs, regime=regime)
    return pipe


def _drag() -> tuple[Pipeline, Costs]:
    """An expensive unlogged parse feeding three sparsely checkpointed consumers."""
    pipe = _pipe(
        ("parse", ["src"], Ephemeral()),
        ("a", ["parse"], Lazy(every=6)),
        ("b", ["parse"], Lazy(every=6)),
        ("c", ["parse"], Lazy(every=6)),
    )
    costs = Costs(
        {
            "src": NodeCosts(compute=0.05),
            "parse": NodeCosts(compute=5.0, log_write=0.2, log_bytes=1e6, log_read=0.15),
            **{n: NodeCosts(compute=0.1, state_write=1.0, state_bytes=1e7, state_read=0.8) for n in "abc"},
        },
        unit="cpu",
    )
    return pipe, costs


def _chain() -> tuple[Pipeline, Costs]:
    """A chain with one expensive stateful step: src -> p (cheap, stateless) -> x (expensive) -> out."""
    pipe = _pipe(("p", ["src"], Ephemeral()), ("x", ["p"], Lazy(every=1)))
    pipe.output("out", inputs=["x"])
    costs = Costs(
        {
            "src": NodeCosts(compute=0.05),
            "p": NodeCosts(compute=0.1, log_write=0.5),
            "x": NodeCosts(compute=8.0, state_write=0.5, state_read=0.4, log_write=0.3),
            "out": NodeCosts(compute=0.0),
        },
        unit="cpu",
    )
    return pipe, costs


def _brute_force(pipe: Pipeline, costs: Costs, rate: float) -> float:
    """The least predicted total over the whole product of the advisor's choices (by the closure)."""
    model = Model(pipe, costs, failure_kinds(pipe, "each-step"))
    choices = [model.choices(n, rate, accepted_only=False) for n in pipe.steps]
    combos = [dict(zip(pipe.steps, c, strict=True)) for c in itertools.product(*choices)]
    best = np.inf
    for lo in range(0, len(combos), 256):
        ev = model.evaluate(combos[lo : lo + 256])
        best = min(best, float((ev.steady + ev.expected(rate)).min()))
    return best


def test_an_unlogged_step_dragging_three_consumers_back_is_logged() -> None:
    """The expensive parse whose consumers' restores recompute it gets log=True, as the whole product says."""
    pipe, costs = _drag()
    advice = advise(pipe, costs, 0.05)
    assert advice.regimes()["parse"] == Ephemeral(log=True)
    assert advice.advised.total < advice.current.total
    assert advice.advised.total == pytest.approx(_brute_force(pipe, costs, 0.05), rel=1e-9)


def test_a_log_that_is_its_steps_first_job_is_priced_by_the_writes_less_a_count() -> None:
    """With writes measured apart and the same writes less a count (``first_writes``), the model prices the log of
    parse, whose output is a frame of its own (``first_use``: computed by one job whether it logs or not), by the
    second line, and the consumers' logs (not in ``first_use``) by the first. Priced as a whole write (the line through three
    3 CPU-s writes of 1 MB and the consumers' 1 CPU-s checkpoints of 10 MB: 2 CPU-s an epoch) the log costs more
    than any recovery it can save (at most λ × 6 epochs × 5 CPU-s = 1.5 an epoch); priced as what it adds (0.1),
    it is advised."""
    pipe, costs = _drag()
    parse = evolve(costs["parse"], log_write=None, log_read=None)
    whole = evolve(costs, nodes={**costs.nodes, "parse": parse}, writes=[(1e6, 3.0)] * 3)
    first = evolve(whole, first_writes=[(1e6, 0.1)], first_use={"parse"})
    assert {s.name: s.advised for s in advise(pipe, evolve(first, first_use=()), 0.05).steps}[
        "parse"
    ] == Ephemeral()
    assert {s.name: s.advised for s in advise(pipe, whole, 0.05).steps}["parse"] == Ephemeral()
    assert advise(pipe, first, 0.05).regimes()["parse"] == Ephemeral(log=True)
    model = Model(pipe, first, failure_kinds(pipe, "each-step"))
    names = model.graph.names
    assert model.log_write[names.index("parse")] == pytest.approx(0.1)  # one point: the line is its cost
    plain = evolve(first, first_use=()).complete(
        names
    )  # every log by the line of whole writes (and checkpoints)
    assert all(model.log_write[names.index(n)] == pytest.approx(plain[n].log_write) for n in "abc")
    assert plain["parse"].log_write == pytest.approx(2.0)  # (3 × 3.0 + 3 × 1.0) / 6: no slope through them


def test_a_chain_with_one_expensive_step_gets_youngs_spacing_by_hand() -> None:
    """Each step fails while it runs epoch e+1, the steps before it having done e+1. p's failure loses only the cut
    of e+1 it had taken (read again: 0.05). x's restores its last checkpoint (0.4) and redoes (k-1)/2 epochs on
    average of itself, of p (not logged) and of the input's cuts read again (8.15 an epoch), and p's e+1 (0.15).
    out's drags x back to resend e+1, which x did not log: x restores and redoes (k-1)/2 + 1 epochs. So the total
    per epoch is C/k + λ/3·((k-1)·8.15 + 8.15 + 0.95 + 0.05); the advice picks the spacing minimising that, and the
    whole product agrees."""
    pipe, costs = _chain()
    rate = 0.02

    def by_hand(k: int) -> float:
        return 0.5 / k + rate / 3 * ((k - 1) * 8.15 + 8.15 + 0.95 + 0.05)

    best = min((1, 2, 3, 4, 5, 6, 10, 12), key=by_hand)
    advice = advise(pipe, costs, rate)
    advised = {s.name: s.advised for s in advice.steps}
    assert advised == {"p": Ephemeral(), "x": Lazy(every=best), "out": pipe.steps["out"].regime}
    steady = 0.05 + 0.1 + 8.0 + 0.5 / best
    assert advice.advised.total == pytest.approx(steady + by_hand(best) - 0.5 / best, rel=1e-9)
    assert advice.advised.total == pytest.approx(_brute_force(pipe, costs, rate), rel=1e-9)


def test_a_driver_failure_strikes_while_any_step_runs_and_pays_the_cold_start() -> None:
    """Every node fails at a moment uniform in time: while src (0.05 of an epoch's 8.15 compute), p (0.1) or x
    (8.0) runs epoch e+1. x always restores its checkpoint of e (0.4); during p's turn p had taken src's cut of
    e+1, lost with the driver, so it is read again (0.05); during x's, p has done e+1, which it did not log, so p
    redoes it (0.1) and reads src's cut again (0.05). ``Costs.restart`` is added once."""
    pipe, costs = _chain()
    current = regimes_of(pipe)
    by_hand = (0.05 * 0.4 + 0.1 * (0.4 + 0.05) + 8.0 * (0.4 + 0.1 + 0.05)) / 8.15
    model = Model(pipe, costs, failure_kinds(pipe, "driver"), period=1)
    assert [w for _, w in model.strikes[0]] == pytest.approx([0.05 / 8.15, 0.1 / 8.15, 8.0 / 8.15])
    assert model.evaluate([current]).recovery[0, 0] == pytest.approx(by_hand)
    assert model.evaluate([current], exact=True).recovery[0, 0] == pytest.approx(by_hand)
    cold = Model(pipe, evolve(costs, restart=2.5), failure_kinds(pipe, "driver"), period=1)
    assert cold.evaluate([current]).recovery[0, 0] == pytest.approx(by_hand + 2.5)
    # between epochs, (e, None): nothing of e+1 done, only the restore; x's own failure in e+1 pays no cold start
    assert Model(pipe, costs, [("all",)], moments=[(4, None)]).evaluate([current]).recovery[
        0, 0
    ] == pytest.approx(0.4)
    assert Model(pipe, evolve(costs, restart=2.5), [("x",)], moments=[4]).evaluate([current]).recovery[
        0, 0
    ] == pytest.approx(0.4 + 0.1 + 0.05)
    advice = advise(pipe, evolve(costs, restart=2.5), 0.05, failures=["each-step", "driver"])
    assert "a new driver's restart, 2.5 CPU-s" in advice.table() and advice.to_json()["restart"] == 2.5
    assert advice.current.per_failure["driver"] > 2.5 > advice.current.per_failure["x"]


def test_the_input_a_failed_step_had_taken_is_read_again_from_its_senders_log() -> None:
    """x fails while it runs epoch e+1: it had taken p's e+1 from memory, so the recovery reads it from p's log
    (0.3) besides restoring x (0.4); p, kept, redoes nothing. A driver failing during x's turn loses the same;
    during p's turn p had taken src's cut (0.05) and x had not received p's e+1 yet (nothing to read)."""
    pipe = _pipe(("p", ["src"], Ephemeral(log=True)), ("x", ["p"], Lazy(every=1)))
    costs = Costs(
        {
            "src": NodeCosts(compute=0.05),
            "p": NodeCosts(compute=0.1, log_write=0.2, log_read=0.3),
            "x": NodeCosts(compute=8.0, state_write=0.5, state_read=0.4),
        },
        unit="cpu",
    )
    current = regimes_of(pipe)
    for exact in (False, True):
        own = Model(pipe, costs, [("x",)], moments=[4]).evaluate([current], exact=exact)
        assert own.recovery[0, 0] == pytest.approx(0.4 + 0.3)
        assert own.node_recovery[:, 0, 0] == pytest.approx([0.0, 0.0, 0.7])
        driver = Model(pipe, costs, [("all",)], moments=[(4, "x"), (4, "p"), (4, None)]).evaluate(
            [current], exact=exact
        )
        assert driver.recovery[0, 0] == pytest.approx(((0.4 + 0.3) + (0.4 + 0.05) + 0.4) / 3)


def test_a_drag_chain_matches_the_whole_product() -> None:
    """A chain of stateful steps where the cheap ones' rollbacks drag the expensive one back: the search finds the
    optimum of the whole product of choices."""
    pipe = _pipe(
        ("a", ["src"], Lazy(every=4)), ("x", ["a"], Lazy(every=4, log=True)), ("b", ["x"], Lazy(every=4))
    )
    costs = Costs(
        {
            "src": NodeCosts(compute=0.05),
            "a": NodeCosts(compute=0.1, state_write=0.5, log_write=0.3),
            "x": NodeCosts(compute=8.0, state_write=0.5, log_write=0.3),
            "b": NodeCosts(compute=0.1, state_write=0.5, log_write=0.3),
        },
        unit="cpu",
    )
    advice = advise(pipe, costs, 0.02)
    assert advice.advised.total == pytest.approx(_brute_force(pipe, costs, 0.02), rel=1e-9)
    assert advice.advised.total < advice.current.total


def test_no_failures_means_no_checkpoints_worth_writing() -> None:
    """At failure rate 0 the advice persists as little as the choices allow: no logs, the sparsest spacing."""
    pipe, costs = _chain()
    advice = advise(pipe, costs, 0.0)
    assert advice.advised.recovery == 0.0
    assert all(not s.advised.logs for s in advice.steps)
    assert advice.advised.steady <= advice.current.steady


def _random_pipe(rng: random.Random, n: int) -> Pipeline:
    names, steps = ["src"], []
    for i in range(n):
        inputs = rng.sample(names, min(len(names), rng.choice((1, 1, 2))))
        kind = rng.choice("elg")
        log = rng.random() < 0.3
        regime = (
            Ephemeral(log=log)
            if kind == "e"
            else Lazy(every=rng.choice((1, 2, 3)), log=log)
            if kind == "l"
            else Eager(log=log)
        )
        steps.append((f"s{i}", inputs, regime))
        names.append(f"s{i}")
    return _pipe(*steps)


def test_the_closure_agrees_with_the_planner() -> None:
    """The vectorised closure redoes what the planner's own plans redo, for random pipelines and failures."""
    rng = random.Random(33)
    for _ in range(600):
        pipe = _random_pipe(rng, rng.randint(1, 6))
        g = Graph.of(pipe)
        at, everyone = rng.randint(0, 7), rng.random() < 0.2
        failed = (
            ["all"] if everyone else rng.sample(list(pipe.steps), min(len(pipe.steps), rng.choice((1, 1, 2))))
        )
        running = rng.randint(
            0, len(g.names) - 1
        )  # the failure strikes while it runs at + 1: those before did it
        done = {n: at + 1 if i < running else at for i, n in enumerate(g.names)}
        logs = np.array([[pipe.logs(n)] for n in g.names])
        every = np.array(
            [[0 if pipe.stateless(n) else getattr(pipe.steps[n].regime, "every", 1)] for n in g.names]
        )
        lost = np.array([[everyone or n in failed] for n in g.names])
        fast = frontiers(g, logs, every, lost, np.array([[done[n]] for n in g.names]))
        ref = reference_frontiers(pipe, failed, done)
        redo = {n: max(0, done[n] - min(int(fast[i, 0, 0]), done[n])) for i, n in enumerate(g.names)}
        assert redo == {n: max(0, done[n] - min(ref[n], done[n])) for n in g.names}, (
            pipe.describe()["steps"],
            failed,
            done,
        )


def test_exact_and_closure_pricing_agree() -> None:
    """Pricing by the planner's plans and by the closure gives the same figures."""
    rng = random.Random(7)
    for _ in range(4):
        pipe = _random_pipe(rng, 4)
        costs = Costs(
            {n: NodeCosts(compute=rng.uniform(0.1, 2), state_write=0.3, log_write=0.2) for n in pipe.order}
        )
        model = Model(pipe, costs, failure_kinds(pipe, ["each-step", "driver"]), period=6)
        current = regimes_of(pipe)
        other = {n: model.choices(n, 0.1, accepted_only=False)[-1] for n in pipe.steps}
        fast, exact = model.evaluate([current, other]), model.evaluate([current, other], exact=True)
        np.testing.assert_allclose(fast.recovery, exact.recovery)
        np.testing.assert_allclose(fast.steady, exact.steady)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 5),
    rate=st.sampled_from([0.0, 0.001, 0.02, 0.3]),
    failures=st.sampled_from(["each-step", "driver", ["each-step", "driver"]]),
)
def test_the_advice_is_never_predicted_worse_than_the_current_regimes(
    seed: int,
    n: int,
    rate: float,
    failures: Any,
) -> None:
    """Whatever the pipeline, costs and failure rate: the advised total <= the current total (unless the current
    regimes set off a domino, which the advice stops whatever it costs)."""
    rng = random.Random(seed)
    pipe = _random_pipe(rng, n)
    costs = Costs(
        {
            m: NodeCosts(
                compute=rng.uniform(0, 3),
                state_write=rng.uniform(0, 2),
                log_write=rng.uniform(0, 1),
                state_bytes=rng.uniform(0, 1e7),
                log_bytes=rng.uniform(0, 1e6),
            )
            for m in pipe.order
        }
    )
    advice = advise(pipe, costs, rate, failures=failures, allow_domino=True)
    assert advice.advised.total <= advice.current.total + 1e-9
    strict = advise(pipe, costs, rate, failures=failures)
    assert strict.advised.total <= strict.current.total + 1e-9 or strict.dominoes


def test_the_advice_is_deterministic() -> None:
    """Two advices on the same inputs are the same document."""
    pipe, costs = _drag()
    first, second = advise(pipe, costs, 0.05).to_json(), advise(pipe, costs, 0.05).to_json()
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_table_json_and_draw(tmp_path: Any) -> None:
    """The advice prints, serialises and draws."""
    pipe, costs = _drag()
    advice = advise(pipe, costs, 0.05, failures=["each-step", "driver"])
    text = advice.table()
    assert "parse" in text and "Ephemeral(log=True)" in text and "saving" in text
    doc = advice.to_json()
    assert doc["format"] == "falkirk-advice/1" and doc["failures"] == ["parse", "a", "b", "c", "driver"]
    assert doc["advised"]["total"] <= doc["current"]["total"] and doc["frontier"]
    pytest.importorskip("matplotlib")
    advice.draw(str(tmp_path / "advice.png"))
    assert (tmp_path / "advice.png").stat().st_size > 0


def test_a_storage_budget_is_respected() -> None:
    """With a budget of bytes per epoch the advice stays within it."""
    pipe, costs = _drag()
    advice = advise(pipe, costs, 0.05, storage_budget=2e6)
    assert advice.advised.steady_bytes <= 2e6


def test_a_saving_inside_min_saving_keeps_the_current_regimes() -> None:
    """The drag case's advice saves a known fraction; with min_saving above it the current regimes are kept and the
    advice says why; just below it, the same advice as with no threshold."""
    pipe, costs = _drag()
    free = advise(pipe, costs, 0.05, min_saving=0.0)
    saving = 1 - free.advised.total / free.current.total
    assert saving > 0.01 and free.regimes()["parse"] == Ephemeral(log=True)
    assert free.verdict == f"change: the saving {100 * saving:.1f} % exceeds min_saving 0.0 %"
    kept = advise(pipe, costs, 0.05, min_saving=saving * 1.01)
    assert kept.regimes() == {} and all(not s.changed for s in kept.steps)
    assert kept.advised.total == pytest.approx(kept.current.total) == pytest.approx(free.current.total)
    assert f"saves {100 * saving:.1f} %" in kept.search and "current regimes are kept" in kept.search
    assert kept.verdict.startswith(f"keep: the saving {100 * saving:.1f} % is within min_saving")
    assert advise(pipe, costs, 0.05, min_saving=saving * 0.99).regimes() == free.regimes()
    assert Costs.from_json(evolve(costs, spread=0.03).to_json()).spread == 0.03


def _scaled(costs: Costs, factor: float, **fields: float) -> Costs:
    """``costs`` with every figure × ``factor`` (a slower or faster driver process), and ``fields`` of ``parse``
    set as given."""
    nodes = {}
    for name, c in costs.nodes.items():
        figures = {
            f: (v * factor if v is not None and not f.endswith("bytes") else v)
            for f in (
                "compute",
                "log_write",
                "log_bytes",
                "log_read",
                "state_write",
                "state_bytes",
                "state_read",
            )
            for v in [getattr(c, f)]
        }
        figures.update(fields if name == "parse" else {})
        nodes[name] = NodeCosts(**{f: v for f, v in figures.items() if v is not None})
    return evolve(costs, nodes=nodes)


def test_the_saving_must_exceed_its_uncertainty() -> None:
    """Every prediction carries the standard error its costs' draws give (profiles: their spread ÷ √n). Draws that
    scale every figure alike move each total a lot but the saving's share not at all (each draw prices both
    assignments), so a large saving is advised; draws that disagree on the log's price make the same point
    estimate a saving within the uncertainty, and the advice keeps the current regimes and says so."""
    pipe, costs = _drag()
    alike = Costs.median([_scaled(costs, f) for f in (0.8, 1.0, 1.25)])
    advice = advise(pipe, alike, 0.05)
    assert advice.draws == "profiles" and advice.replicates == 3
    steadies = [advise(pipe, _scaled(costs, f), 0.05, min_saving=0).current.steady for f in (0.8, 1.0, 1.25)]
    assert advice.current.se["steady"] == pytest.approx(statistics.stdev(steadies) / 3**0.5)
    assert (
        advice.current.estimate("steady").high > advice.current.steady > advice.current.estimate("steady").low
    )
    assert advice.regimes()["parse"] == Ephemeral(log=True) and advice.verdict.startswith(
        "change: the saving"
    )
    assert advice.saving_se["measurement"] < 0.2 * advice.current.se["total"]  # what moves both alike cancels
    assert advice.current.se["a"] > 0 and "one failure of a: " in advice.table()
    # the log priced at 0.2, 0.5 and 3.0 CPU-s by three profiles: still a saving, no longer a certain one
    split = Costs.median([_scaled(costs, 1.0, log_write=w) for w in (0.2, 0.5, 3.0)])
    doubt = advise(pipe, split, 0.05)
    assert doubt.regimes() == {} and doubt.verdict.startswith("keep: the saving ")
    assert "uncertainty (measurement ±" in doubt.verdict and "current regimes are kept" in doubt.search
    assert advise(pipe, split, 0.05, min_saving=0).regimes()  # with no threshold it would change
    doc = doubt.to_json()
    assert doc["draws"] == "profiles" and doc["saving"]["se"] > 0 and "total" in doc["current"]["se"]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"failure_rate": -1.0}, "failure_rate=-1.0"),
        ({"failure_rate": float("nan")}, "failure_rate=nan"),
        ({"failures": ["nope"]}, "'nope'"),
        ({"failures": []}, "failures"),
        ({"objective": "money"}, "objective='money'"),
        ({"storage_budget": -5}, "storage_budget=-5"),
        ({"min_saving": 1.5}, "min_saving=1.5"),
        ({"min_saving": -0.1}, "min_saving=-0.1"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], named: str) -> None:
    """Each bad argument raises a PipelineError naming it."""
    pipe, costs = _drag()
    args = {"failure_rate": 0.01, **kwargs}
    with pytest.raises(PipelineError, match=named.replace("(", r"\(").replace("[", r"\[")):
        advise(pipe, costs, args.pop("failure_rate"), **args)


def test_bad_costs_are_named() -> None:
    """A negative or non-numeric figure names the field; a wrong costs object names costs."""
    with pytest.raises(PipelineError, match="compute=-1"):
        NodeCosts(compute=-1)
    with pytest.raises(PipelineError, match="state_write='x'"):
        NodeCosts(state_write="x")  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="unit='gpu'"):
        Costs({}, unit="gpu")
    pipe, _ = _drag()
    with pytest.raises(PipelineError, match="costs="):
        advise(pipe, {"parse": 1.0}, 0.01)  # type: ignore[arg-type]


def test_apply_and_regimes_at_construction() -> None:
    """pipe.apply(advice) changes the regimes; Pipeline(regimes=...) declares them; both are checked."""
    pipe, costs = _drag()
    advice = advise(pipe, costs, 0.05)
    assert pipe.apply(advice) is pipe
    assert pipe.steps["parse"].regime == Ephemeral(log=True)
    again = Pipeline(f"memory://falkirk-test/advisor-{next(_ROOTS)}", regimes=advice.regimes())
    again.input("src", "a BIGINT")
    again.step(lambda src, epoch=None: src, name="parse", regime=Ephemeral())
    assert again.steps["parse"].regime == Ephemeral(log=True)
    stray = Pipeline(f"memory://falkirk-test/advisor-{next(_ROOTS)}", regimes={"nope": Ephemeral()})
    stray.input("src", "a BIGINT")
    with pytest.raises(PipelineError, match="regimes= names 'nope'"):
        stray.check_root(write=False)
    with pytest.raises(PipelineError, match="'zzz' is not a step"):
        pipe.apply({"zzz": Ephemeral()})
    with pytest.raises(PipelineError, match="step 'parse': regime lazy passes"):
        pipe.apply({"parse": Lazy(every=2)})


def test_apply_refuses_what_the_root_would_refuse() -> None:
    """On a root that records the pipeline, a new log=True is refused with the evolution rule's reason, and
    accepted_only=True advises only accepted changes."""
    pipe, costs = _drag()
    pipe.write_root()
    advice = advise(pipe, costs, 0.05)
    assert "parse" in advice.refused and "log False → True" in advice.refused["parse"]
    with pytest.raises(PipelineError, match="step 'parse'.*log False → True"):
        pipe.apply(advice)
    assert pipe.steps["parse"].regime == Ephemeral()
    safe = advise(pipe, costs, 0.05, accepted_only=True)
    assert not safe.refused and safe.advised.total <= safe.current.total
    pipe.apply(safe)


def test_profiles_pool_by_the_median_of_what_each_measured() -> None:
    """Costs.median: per node and field the median of the profiles that measured it; an estimate only where none
    did; the write points of all; one unit only, at least one profile."""
    a = Costs(
        {"x": NodeCosts(compute=1.0, log_write=0.3), "y": NodeCosts(compute=0.1)},
        unit="cpu",
        restart=1.0,
        writes=[(1e6, 0.2)],
        spread=0.1,
        source="a",
    )
    b = Costs(
        {"x": NodeCosts(compute=3.0, log_write=0.9, estimated={"log_write"})},
        unit="cpu",
        restart=5.0,
        writes=[(2e6, 0.3)],
        spread=0.3,
        source="b",
    )
    c = Costs(
        {"x": NodeCosts(compute=2.0, state_read=0.4, estimated={"state_read"})},
        unit="cpu",
        restart=2.0,
        spread=0.2,
        source="c",
    )
    m = Costs.median([a, b, c])
    assert m["x"].compute == 2.0 and m["x"].log_write == 0.3 and m["x"].state_read == 0.4
    assert m["x"].estimated == frozenset({"state_read"}) and m["y"].compute == 0.1
    assert (m.restart, m.spread, m.unit) == (2.0, 0.2, "cpu") and sorted(m.writes) == [(1e6, 0.2), (2e6, 0.3)]
    assert m.source.startswith("median of 3 profiles")
    assert Costs.from_json(m.to_json()) == m
    with pytest.raises(PipelineError, match="different units"):
        Costs.median([a, Costs({"x": NodeCosts(compute=1.0)}, unit="wall")])
    with pytest.raises(PipelineError, match="no profiles"):
        Costs.median([])


def _branches(every_a: int, every_b: int, b: Any = None) -> tuple[Pipeline, Costs]:
    """An unlogged ``parse`` feeding two stateful branches (``b``: the second branch's regime, default
    ``Lazy(every=every_b)``), cheap to checkpoint and to log."""
    pipe = _pipe(
        ("parse", ["src"], Ephemeral()),
        ("a", ["parse"], Lazy(every=every_a)),
        ("b", ["parse"], b if b is not None else Lazy(every=every_b)),
    )
    costs = Costs(
        {
            "src": NodeCosts(compute=0.05),
            "parse": NodeCosts(compute=0.5, log_write=0.4, log_read=0.1),
            **{n: NodeCosts(compute=0.2, state_write=0.3, state_read=0.2) for n in "ab"},
        },
        unit="cpu",
    )
    return pipe, costs


def test_a_domino_through_a_shared_unlogged_step_is_marked_and_stopped() -> None:
    """Branches checkpointing every 5 and 7 epochs behind an unlogged parse: a failure of either rolls the other
    back past its latest checkpoint, below the failed one's restore point (a domino, down to a checkpoint they
    share). The advice stops it even at a failure rate where nothing else would change, and names it;
    allow_domino=True leaves it to the price. The same spacings (a branch dragged back to the failed one's
    restore point) and an Eager branch are priced, but no domino."""
    pipe, costs = _branches(5, 7)
    model = Model(pipe, costs, failure_kinds(pipe, "each-step"))
    current = regimes_of(pipe)
    ev = model.evaluate([current, {**current, "parse": Ephemeral(log=True)}])
    names = model.graph.names
    assert ev.dominoes.tolist() == [True, False]
    assert ev.domino[names.index("b"), 0, 1] and ev.domino[names.index("a"), 0, 2]  # kinds: parse, a, b
    assert not ev.domino[names.index("a"), 0, 1]  # the failed step itself is not "another branch"
    advice = advise(pipe, costs, 1e-4)
    assert (
        advice.dominoes
        and "a failure of a rolls b, on another branch, back past its latest checkpoint" in advice.dominoes[0]
    )
    assert "domino: a failure of a rolls b" in advice.table() and advice.to_json()["dominoes"] == list(
        advice.dominoes
    )
    assert advice.regimes() and "set off a domino" in advice.search
    fixed = Model(pipe, costs, failure_kinds(pipe, "each-step")).evaluate([{**current, **advice.regimes()}])
    assert not fixed.dominoes[0]
    assert advise(pipe, costs, 0.5).regimes()["parse"] == Ephemeral(log=True)  # failures often: the log
    assert advise(pipe, costs, 1e-4, allow_domino=True, min_saving=0.5).regimes() == {}
    for same in (_branches(6, 6)[0], _branches(5, 0, Eager())[0]):
        ev = Model(same, costs, failure_kinds(same, "each-step")).evaluate([regimes_of(same)])
        assert not ev.dominoes[0] and ev.recovery[0].max() > 0


def test_a_muted_branch_is_as_if_the_pipeline_had_none() -> None:
    """frontiers(..., mute=...) leaves the muted nodes at ⊤ and the others where the planner puts them on the
    pipeline without those nodes (the closure the domino test compares with)."""
    pipe, _ = _branches(5, 7)
    alone = _pipe(("parse", ["src"], Ephemeral()), ("a", ["parse"], Lazy(every=5)))
    g = Graph.of(pipe)
    b = g.names.index("b")
    logs = np.array([[pipe.logs(n)] for n in g.names])
    every = np.array([[0 if pipe.stateless(n) else pipe.steps[n].regime.every] for n in g.names])
    for at in range(60, 80):
        done = {"src": at + 1, "parse": at + 1, "a": at, "b": at}  # a fails while it runs at + 1
        failed = np.array([[n == "a"] for n in g.names])
        mute = np.array([[i == b] for i in range(len(g.names))])
        f = frontiers(g, logs, every, failed, np.array([[done[n]] for n in g.names]), mute=mute)
        ref = reference_frontiers(alone, ["a"], {n: done[n] for n in alone.order})
        assert {n: int(f[i, 0, 0]) for i, n in enumerate(g.names) if n != "b"} == ref
        assert f[b, 0, 0] == TOP


def test_per_failure_predictions_are_public() -> None:
    """pipe.predict(failure, at=...) is the model's price of one failure — after an epoch, while a step runs, or the
    mean over a cycle's moments — with the restart of a driver and the errors of the costs' draws;
    Advice.predict prices the advised (or current) regimes."""
    pipe, costs = _chain()
    current = regimes_of(pipe)
    own = pipe.predict("x", at=4, costs=costs)
    assert own.recovery.value == pytest.approx(
        float(Model(pipe, costs, [("x",)], moments=[(4, None)]).evaluate([current]).recovery[0, 0])
    )
    assert own.at == "after epoch 4" and own.failure == "x" and own.recovery.se == 0.0
    assert own.by_step["x"] == pytest.approx(own.recovery.value) and own.steady.value > 8
    mid = pipe.predict("x", at=(4, "x"), costs=costs)
    assert mid.at == "while x runs epoch 5" and mid.recovery.value == pytest.approx(0.4 + 0.1 + 0.05)
    cold = evolve(costs, restart=2.5)
    driver = pipe.predict("driver", costs=cold)
    assert driver.restart == 2.5 and driver.recovery.value == pytest.approx(
        advise(pipe, cold, 0.05, failures="driver").current.per_failure["driver"]
    )
    assert "a new driver's restart 2.5" in str(driver)
    drawn = Costs.median([_scaled_chain(costs, f) for f in (0.9, 1.0, 1.1)])
    spread = pipe.predict("x", at=4, costs=drawn)
    assert spread.recovery.se > 0 and spread.recovery.low < spread.recovery.value < spread.recovery.high
    assert spread.to_json()["recovery"]["se"] == spread.recovery.se
    # where a run is expected: ± 2 s.e. widened by the model's own error, wider than the draws' interval alone
    low, high = spread.range()
    v, se = spread.recovery.value, spread.recovery.se
    assert (low, high) == pytest.approx((v - 2 * se - MODEL_ERROR * v, v + 2 * se + MODEL_ERROR * v))
    assert low < spread.recovery.low and high > spread.recovery.high
    assert spread.to_json()["range"]["recovery"] == [low, high] and f"{high:.3g}" in str(spread)
    with pytest.raises(PipelineError, match="'total'"):
        spread.range("total")
    advice = advise(pipe, costs, 0.02, min_saving=0)
    assert advice.regimes()
    assert advice.predict("x", at=4).regimes["x"] == show_regime(advice.regimes()["x"])
    assert advice.predict("x", at=4, which="current").recovery.value == pytest.approx(own.recovery.value)
    for bad, named in (
        ({"failure": "each-step"}, "must name one failure"),
        ({"failure": "x", "at": -1}, "at=-1"),
        ({"failure": "nope"}, "'nope'"),
        ({"failure": "x", "regimes": {"zz": Ephemeral()}}, "'zz'"),
    ):
        with pytest.raises(PipelineError, match=named):
            pipe.predict(costs=costs, **bad)


def _scaled_chain(costs: Costs, factor: float) -> Costs:
    return evolve(
        costs,
        nodes={
            n: evolve(
                c,
                compute=c.compute * factor,
                state_read=None if c.state_read is None else c.state_read * factor,
            )
            for n, c in costs.nodes.items()
        },
    )


def test_every_regime_considered_for_a_changes_step_keeps_changes() -> None:
    """A ``changes=True`` step's function returns only the keys it changed: every regime the advisor weighs for it
    (Lazy at every spacing, logged or not, incremental or not, from a Lazy or an Eager step) keeps
    ``changes=True``, so no advice could make falkirk read those changes as a whole state. A declared
    ``differential=True`` is kept by the incremental choices and dropped by the others (it needs incremental
    deltas), and the advice for such a pipeline is made."""
    for declared in (Lazy(every=3, key="k", changes=True), Eager(key="k", incremental=True, changes=True),
                     Lazy(every=3, key="k", incremental=True, changes=True, differential=True),
                     Eager(key="k", incremental=True, changes=True, differential=True)):
        pipe = _pipe(("x", ["src"], declared))
        costs = Costs(
            {"src": NodeCosts(compute=0.05),
             "x": NodeCosts(compute=1.0, state_write=0.5, state_read=0.4, log_write=0.3, delta_write=0.1)},
            unit="cpu",
        )
        model = Model(pipe, costs, failure_kinds(pipe, "each-step"))
        choices = model.choices("x", 0.1, accepted_only=False)
        assert len(choices) > 3 and all(isinstance(c, Keyed) and c.changes for c in choices), choices
        assert all(c.differential == (declared.differential and c.incremental) for c in choices), choices
        assert any(c.incremental and not c.log for c in choices) and any(not c.incremental for c in choices)
        advised = {s.name: s.advised for s in advise(pipe, costs, 0.1).steps}["x"]
        assert isinstance(advised, Keyed) and advised.changes
