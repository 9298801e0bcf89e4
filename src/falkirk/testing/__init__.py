"""Testing toolkit: domain law checks, hypothesis strategies, a brute-force reference.

This subpackage imports hypothesis (the ``testing`` extra); ``import falkirk``
never does.

* :func:`check_domain_laws` — does a time domain (yours or a built-in) obey
  the laws frontiers rely on? Raises :class:`DomainLawError` naming the law.
* :mod:`falkirk.testing.strategies` — :func:`times`, :func:`frontiers`,
  :func:`dataflows`, :func:`failure_sets`, :func:`failure_schedules`.
* :func:`brute_force_solve` — every consistent assignment of a small
  dataflow, by enumeration, with an independent check of SPEC §4's C1–C4.
* :func:`assert_recovers`, :func:`sim_cases`, :func:`sim_graphs`,
  :func:`sim_failure_schedules` — property-test a rollback policy in the
  deterministic simulator (:mod:`falkirk.sim`): the committed output of a run
  with failures must equal the failure-free run's. ``python -m
  falkirk.testing.fuzz --cases N --seed S`` runs the same check from the shell.

>>> from falkirk.domains import Epoch
>>> check_domain_laws(Epoch(), max_examples=20)
"""

from falkirk.testing.brute_force import brute_force_solve, candidate_frontiers, is_consistent
from falkirk.testing.laws import DomainLawError, check_domain_laws
from falkirk.testing.sim_strategies import assert_recovers, sim_cases, sim_graphs
from falkirk.testing.sim_strategies import failure_schedules as sim_failure_schedules
from falkirk.testing.strategies import (
    dataflows,
    failure_schedules,
    failure_sets,
    frontiers,
    register_time_strategy,
    times,
)

__all__ = [
    "check_domain_laws",
    "DomainLawError",
    "times",
    "frontiers",
    "register_time_strategy",
    "dataflows",
    "failure_sets",
    "failure_schedules",
    "brute_force_solve",
    "candidate_frontiers",
    "is_consistent",
    "assert_recovers",
    "sim_cases",
    "sim_graphs",
    "sim_failure_schedules",
]
