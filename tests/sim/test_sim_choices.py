"""The decisions simulator cases are drawn from: the chooser and the policy an operator allows."""

from __future__ import annotations

from falkirk.sim import cases, choices
from falkirk.sim.choices import Chooser, RandomChooser, policy_for
from falkirk.sim.operators import Map, Sum
from falkirk.sim.policies import Batch, Ephemeral, WrongLog


def test_a_random_chooser_repeats_its_decisions_for_a_seed() -> None:
    """Two choosers with one seed make the same decisions (integers, choices, booleans)."""

    def decisions(c: Chooser) -> list[object]:
        return [c.integer(0, 9), c.choice("abc"), c.boolean(), c.integer(5, 5)]

    assert decisions(RandomChooser(11)) == decisions(RandomChooser(11))
    assert RandomChooser(3).integer(5, 5) == 5


def test_stateful_operators_never_get_a_stateless_policy() -> None:
    """``policy_for`` gives a stateful operator neither Ephemeral, Batch nor WrongLog, even with ``broken``."""
    for seed in range(200):
        policy = policy_for(RandomChooser(seed), Sum(), ["e1", "e2"], broken=True)
        assert not isinstance(policy, Ephemeral | Batch | WrongLog), policy


def test_stateless_operators_get_stateless_policies_only_where_allowed() -> None:
    """A stateless operator may get a stateless policy, unless ``stateless_ok`` is false; WrongLog only when ``broken``."""
    kinds = {type(policy_for(RandomChooser(s), Map(), ["e1"])) for s in range(300)}
    assert {Ephemeral, Batch} <= kinds and WrongLog not in kinds
    assert WrongLog in {type(policy_for(RandomChooser(s), Map(), ["e1"], broken=True)) for s in range(300)}
    for seed in range(200):
        policy = policy_for(RandomChooser(seed), Map(), ["e1"], stateless_ok=False, broken=True)
        assert not isinstance(policy, Ephemeral | Batch | WrongLog), policy


def test_the_case_generator_offers_the_same_names() -> None:
    """``falkirk.sim.cases`` still offers ``Chooser``, ``RandomChooser`` and ``policy_for``, the very objects of ``choices``."""
    assert (cases.Chooser, cases.RandomChooser, cases.policy_for) == (
        choices.Chooser,
        choices.RandomChooser,
        choices.policy_for,
    )
