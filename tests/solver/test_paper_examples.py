"""Named examples from the spec and the paper, with plans derived by hand from C1–C4.

Each test states its derivation in the docstring; the brute-force reference
(``falkirk.testing.brute_force_solve``) is asked for the same answer.
"""

from __future__ import annotations

from typing import Any

from falkirk.domains import EpochToLoop, Frontier, Product
from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, RollbackPlan, solve_frontiers
from falkirk.testing import brute_force_solve


def _frontiers(plan: RollbackPlan) -> dict[str, Any]:
    return plan.to_json()["frontiers"]


def _only_maximal(df: Dataflow, failed: Any, plan: RollbackPlan) -> bool:
    return brute_force_solve(df, failed, maximal=True) == [plan.frontiers]


# -- SPEC §9 -----------------------------------------------------------------------------
def spec_example() -> Dataflow:
    """The scenario of SPEC §9, built in Python."""
    return Dataflow(
        [
            Processor("src", "epoch", stateless=True),
            Processor("sum", "epoch", logs=["e2"], checkpoints=[Checkpoint(2, notifications=2, delivered={"e1": 2})]),
            Processor(
                "sink", "epoch", checkpoints=[Checkpoint(1, delivered={"e2": 1})], live=Checkpoint("top", delivered={"e2": 4})
            ),
        ],
        [Edge("e1", "src", "sum"), Edge("e2", "sum", "sink")],
    )


def test_spec_section_9_example() -> None:
    """The SPEC §9 scenario gives exactly the plan document printed there.

    ``sum`` failed and has only its checkpoint at 2, so ``f(sum) = 2`` (C1).
    ``src`` is stateless and does not log ``e1``: ``D_e1(f(src)) = f(src) ⊆ 2``
    (C2), so ``f(src) = 2``. ``sink`` delivered epochs up to 4 but
    ``φ_e2(2) = 2`` (C3), so it returns to its checkpoint at 1. ``n`` is
    ``f`` (``N = f`` at every chosen frontier). ``e2`` is logged and
    ``f(sink) ≠ ⊤``: replay ``L_e2(2)`` minus the times in 1.
    """
    df = spec_example()
    plan = solve_frontiers(df, ["sum"])
    assert plan.to_json() == {
        "format": "falkirk-plan/1",
        "frontiers": {"src": 2, "sum": 2, "sink": 1},
        "notification_frontiers": {"src": 2, "sum": 2, "sink": 1},
        "actions": {"src": "rollback", "sum": "restore", "sink": "rollback"},
        "replay": {"e2": {"log_frontier": 2, "exclude": 1}},
    }
    assert _only_maximal(df, ["sum"], plan)


# -- the notification chain (SPEC §4, paper Figure 5) ---------------------------------------
def notification_chain(*, notifications: bool = True) -> Dataflow:
    """``a → b → c`` in epochs; ``c`` was notified that epoch 1 is complete, ``b`` was not.

    Without notifications the same histories carry no notification metadata.
    """

    def notes(k: int) -> int | None:
        return k if notifications else None

    return Dataflow(
        [
            Processor("a", "epoch", checkpoints=[Checkpoint(0, notifications=notes(0))]),
            Processor(
                "b",
                "epoch",
                checkpoints=[Checkpoint(0, notifications=notes(0), delivered={"e1": 0}, discarded={"e2": 0})],
                live=Checkpoint("top", notifications=notes(0), delivered={"e1": 0}, discarded={"e2": 0}),
            ),
            Processor(
                "c",
                "epoch",
                checkpoints=[Checkpoint(0, notifications=notes(0), delivered={"e2": 0})],
                live=Checkpoint("top", notifications=notes(1), delivered={"e2": 0}),
            ),
        ],
        [Edge("e1", "a", "b"), Edge("e2", "b", "c")],
        notifications=notifications,
    )


def test_notification_delivered_downstream_forces_rollback_by_c4() -> None:
    """``c`` rolls back because of C4 when ``a``, two hops upstream, restarts.

    ``a`` fails and restores its checkpoint at 0 (C1). Pairwise, nothing
    else moves: ``b`` delivered and discarded only epoch 0, so C2/C3 hold
    with ``b`` at ``⊤``; ``c`` delivered only epoch 0 from ``b`` at ``⊤``.
    But re-executing epoch 1, ``a`` may now send an epoch-1 message that
    ``b`` forwards to ``c``, which was already told epoch 1 is complete.
    C4: ``n(a) ⊆ f(a) = 0``, ``n(b) ⊆ φ(n(a)) = 0``, ``n(c) ⊆ φ(n(b)) = 0``
    and ``N_c(f(c)) ⊆ n(c)``: ``N_c(⊤) = 1`` does not fit, ``c``'s
    checkpoint at 0 does. ``b`` keeps ``⊤`` (``N_b(⊤) = 0 ⊆ n(b)``).
    Without notifications nobody but ``a`` moves.
    """
    df = notification_chain()
    plan = solve_frontiers(df, ["a"])
    assert _frontiers(plan) == {"a": 0, "b": "top", "c": 0}
    assert plan.to_json()["notification_frontiers"] == {"a": 0, "b": 0, "c": 0}
    assert plan.actions == {"a": "restore", "b": "keep", "c": "rollback"}
    assert [r.constraint for r in plan.reasons["c"]] == ["C4"]
    assert "by C4" in plan.explain("c")[-1]
    assert _only_maximal(df, ["a"], plan)

    quiet = notification_chain(notifications=False)
    assert _frontiers(solve_frontiers(quiet, ["a"])) == {"a": 0, "b": "top", "c": "top"}


# -- Chandy-Lamport with sequence numbers (paper §2.1) ------------------------------------
def chandy_lamport(*, coordinated: bool) -> Dataflow:
    """``p`` and ``q`` in a cycle (``pq: p → q``, ``qp: q → p``), sequence numbers.

    Uncoordinated: each checkpoints on its own (``p`` at 1 and 3 messages of
    ``qp``, having sent 2 and 4 on ``pq``; ``q`` at 1 and 3 of ``pq``, having
    sent 2 and 4 on ``qp``) and discards what it sent. Coordinated: the same
    cuts form Chandy-Lamport snapshots whose channel state (message 2, then
    4, of each channel: sent before the sender's snapshot, received after
    the receiver's) is logged, so only messages 1 and 3 are discarded.
    """

    def proc(name: str, inp: str, out: str, live_in: int) -> Processor:
        cks = []
        for received, sent in ((1, 2), (3, 4)):
            extra = {"discarded": {out: received}} if coordinated else {}
            cks.append(Checkpoint({inp: received}, projection={out: sent}, **extra))
        live = Checkpoint("top", delivered={inp: live_in}, discarded={out: "top"})
        return Processor(name, "sequence", logs=[out] if coordinated else [], checkpoints=cks, live=live)

    return Dataflow(
        [proc("p", "qp", "pq", 5), proc("q", "pq", "qp", 5)],
        [Edge("pq", "p", "q", "sequence"), Edge("qp", "q", "p", "sequence")],
    )


def test_chandy_lamport_uncoordinated_checkpoints_domino_to_empty() -> None:
    """Uncoordinated checkpoints on a cycle: ``q`` fails and both processors fall back to ``∅``.

    ``q`` restores ``{pq: 3}``, where it had sent 4 on ``qp``. ``p`` delivered
    5 on ``qp`` > 4 (C3): down to ``{qp: 3}``; there it had discarded 4 on
    ``pq`` but ``q`` keeps only 3 (C2): down to ``{qp: 1}`` (discarded 2 ≤ 3).
    Then ``q`` at ``{pq: 3}`` delivered 3 > ``φ_pq = 2`` (C3): down to
    ``{pq: 1}``, where it discarded 2 on ``qp`` but ``p`` keeps 1 (C2): down
    to ``∅``. Then ``p``'s 1 delivered > 0 (C3): ``∅``. The domino effect.
    """
    df = chandy_lamport(coordinated=False)
    plan = solve_frontiers(df, ["q"])
    assert _frontiers(plan) == {"p": "empty", "q": "empty"}
    assert plan.actions == {"p": "rollback", "q": "restart"}
    assert plan.replay == {}
    assert _only_maximal(df, ["q"], plan)


def test_chandy_lamport_coordinated_snapshot_stops_the_domino() -> None:
    """With snapshots (channel state logged) both roll back to the latest snapshot only.

    ``q`` restores ``{pq: 3}`` (sent 4 on ``qp``). ``p``: 5 delivered > 4 (C3),
    so ``{qp: 3}``: 3 ≤ 4, and it discarded only 3 on ``pq`` ≤ 3 kept by ``q``
    (C2). ``q``: 3 delivered ≤ ``φ_pq = 4`` (C3), discarded 3 ≤ 3 (C2). Both
    edges are logged and neither receiver is at ``⊤``: replay the channel
    state, ``L_e(f(sender))`` minus the receiver's first 3 messages.
    """
    df = chandy_lamport(coordinated=True)
    plan = solve_frontiers(df, ["q"])
    assert _frontiers(plan) == {"p": {"qp": 3}, "q": {"pq": 3}}
    assert plan.actions == {"p": "rollback", "q": "restore"}
    assert plan.to_json()["replay"] == {
        "pq": {"log_frontier": {"qp": 3}, "exclude": {"pq": 3}},
        "qp": {"log_frontier": {"pq": 3}, "exclude": {"qp": 3}},
    }
    assert _only_maximal(df, ["q"], plan)


# -- selective rollback with product times (paper §2.3) -------------------------------------
LOOP = Product(2)
#: The order in which ``sum`` processed its (epoch, iteration) times: interleaved epochs.
SUM_HISTORY = [(0, 0), (1, 0), (0, 1), (0, 2), (1, 1), (0, 3), (1, 2), (0, 4), (0, 5)]


def selective_loop() -> Dataflow:
    """``input`` (epochs) → ``body`` → ``select`` → ``sum`` → ``body`` (feedback), a Naiad-style loop.

    ``input`` logs what it feeds the loop; ``body`` checkpoints selectively at
    ``↓{(0,1)}`` and ``↓{(0,3),(1,0)}``; ``select`` is stateless; ``sum`` has
    processed :data:`SUM_HISTORY` and checkpointed at ``↓{(0,3)}`` and
    ``↓{(0,3),(1,0)}``, and logs the feedback edge.
    """
    up = lambda *ts: Frontier.upto(LOOP, ts)  # noqa: E731
    return Dataflow(
        [
            Processor("input", "epoch", stateless=True, logs=["in"]),
            Processor("body", LOOP, checkpoints=[Checkpoint(up((0, 1))), Checkpoint(up((0, 3), (1, 0)))]),
            Processor("select", LOOP, stateless=True),
            Processor(
                "sum",
                LOOP,
                logs=["fb"],
                checkpoints=[Checkpoint(up((0, 3))), Checkpoint(up((0, 3), (1, 0)))],
                live=Checkpoint("top", delivered={"ss": up(*SUM_HISTORY)}),
            ),
        ],
        [
            Edge("in", "input", "body", EpochToLoop()),
            Edge("bs", "body", "select"),
            Edge("ss", "select", "sum"),
            Edge("fb", "sum", "body"),
        ],
        notifications=False,
    )


def test_selective_rollback_keeps_a_frontier_that_is_not_a_prefix() -> None:
    """``body`` fails; ``select`` and ``sum`` keep ``{(0, ≤3), (1, 0)}``, not a prefix of their history.

    ``body`` restores ``K = ↓{(0,3),(1,0)}`` (C1). ``select`` (stateless, at
    ``⊤``): ``f(select) ⊆ φ_bs(K) = K`` (C3) and ``D_ss = f(select) ⊆ f(sum)``
    (C2), so ``f(select) = K ∩ f(sum)``. ``sum`` delivered ``↓{(0,5),(1,2)}``
    ``⊄ K`` (C3 through ``select``): its checkpoint ``K`` fits. ``body``'s
    own constraints then hold (``fb`` is logged, ``M_fb(K) = K ⊆ f(sum)``,
    ``input`` logs ``in`` and keeps ``⊤``). ``sum`` keeps (1, 0) although it
    processed it before (0, 4) and (1, 1), which it drops.
    """
    df = selective_loop()
    plan = solve_frontiers(df, ["body"])
    kept = Frontier.before(LOOP, [(0, 4), (1, 1), (2, 0)])
    assert plan.frontiers == {"input": Frontier.top(plan.frontiers["input"].domain), "body": kept, "select": kept, "sum": kept}
    assert plan.actions == {"input": "keep", "body": "restore", "select": "rollback", "sum": "rollback"}
    assert set(plan.replay) == {"in", "fb"}
    history_kept = [t in kept for t in SUM_HISTORY]
    assert history_kept == [True, True, True, True, False, True, False, False, False]
    assert history_kept != sorted(history_kept, reverse=True)  # not a prefix of the history
    assert _only_maximal(df, ["body"], plan)
